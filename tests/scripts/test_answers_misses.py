"""``scripts/answers.py``'s account of a missed answer: from a results file and the page, which
of the four ways it missed (the right page not listed, listed without lines, its answer line
cut, other lines of it shown) and how far the nearest shown line is from the answer line."""

from __future__ import annotations

import sys

from tests.helpers import REPO

sys.path.insert(0, str(REPO / "scripts"))

from answers import MISSES, Outcome, Question, why_missed

PAGE = "\n".join(
    [
        "# Workers",  # 1
        "",
        "Each worker process loads its own copy of the model.",  # 3
        "",
        "```sh",  # 5
        "fastapi run --workers 4",  # 6
        "```",  # 7
        "",
        "So memory grows with the number of workers.",  # 9
        "",
    ]
)
ANSWER = "memory grows with the number of workers"
RESULTS = """# Search: workers memory
hybrid · k 3 · in all · 2 documents

Answer: 1. deploy/workers.md lines 3-{last} [Workers]
3: Each worker process loads its own copy of the model.
{more}
1. deploy/workers.md (0.90 strong)
2. other/page.md (0.10 weak)

## 2. other/page.md
[Elsewhere]
9: So memory grows with the number of hosts.
"""


def outcome(results: str, ranked: list[str], answer: str = ANSWER) -> Outcome:
    q = Question("workers memory", "deploy/workers.md", (), "deep", answer)
    return Outcome(q, ranked, results, 1.0)


def test_each_way_a_results_file_misses_the_answer_line() -> None:
    both = ["deploy/workers.md", "other/page.md"]
    # The page's line 3 is shown, the answer's (9) not: other lines of the page, the nearest
    # 6 lines above it.
    # Line 9 of *another* page (shown) does not count for this one.
    got = why_missed(outcome(RESULTS.format(last=3, more=""), both), PAGE)
    assert got == {"why": MISSES[3], "line": 9, "line_kind": "prose", "nearest_shown": -6}
    # Line 9 shown, cut to a shorter sentence: the answer line cut.
    cut = RESULTS.format(last=9, more="9: So memory grows…\n")
    assert why_missed(outcome(cut, both), PAGE)["why"] == MISSES[2]  # type: ignore[index]
    # Listed, but only the other page's lines are shown.
    alone = RESULTS.replace("Answer: 1. deploy/workers.md", "Answer: 2. other/page.md")
    assert why_missed(outcome(alone.format(last=3, more=""), both), PAGE)["why"] == MISSES[1]  # type: ignore[index]
    # Not among the links at all.
    lost = why_missed(outcome(RESULTS.format(last=3, more=""), ["other/page.md"]), PAGE)
    assert lost is not None and lost["why"] == MISSES[0]
    # A command in a fence is code; an answer found whole is no miss.
    code = why_missed(outcome(RESULTS.format(last=3, more=""), both, "--workers 4"), PAGE)
    assert code is not None and code["line_kind"] == "code"
    assert why_missed(outcome(cut.replace("…", " with the number of workers."), both), PAGE) is None


def test_whether_the_answer_line_is_in_a_chunk_the_file_shows() -> None:
    # Line 3 is shown, the answer is line 9: in the same chunk when one chunk holds the page,
    # in another when the page is cut after line 4 (a passage search inside the page would
    # find it, a better line choice within the shown chunk would not).
    got = outcome(RESULTS.format(last=3, more=""), ["deploy/workers.md", "other/page.md"])
    assert why_missed(got, PAGE, [(1, 10)])["answer_chunk"] == "shown"  # type: ignore[index]
    assert why_missed(got, PAGE, [(1, 4), (5, 10)])["answer_chunk"] == "other"  # type: ignore[index]
    assert "answer_chunk" not in why_missed(got, PAGE)  # type: ignore[operator]
