"""A code file's outline and chunks cost time in proportion to its size (issue 46, attack 3):
JSON nested 20,000 deep took 45 s, a one-line 2.7 MB .ts file 12.3 s, quadratic; and a YAML
file nested 300 deep crashed the process (tree-sitter-yaml's scanner)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from semfs.ingest import chunking, syntax
from semfs.ingest.embedding.embedder import load_embedder


def _nested_json(n: int) -> str:
    return '{"a":' * n + "1" + "}" * n


def _one_line_ts(n: int) -> str:
    return "".join(f"function f{i}(a) {{ return a + {i}; }} " for i in range(n))


def _cpu(make: Callable[[int], str], path: str, n: int) -> float:
    """The least of three runs' CPU time (this thread's: the machine's load does not count)
    to chunk ``make(n)`` as the file ``path``."""
    count = load_embedder("hash").count_tokens
    text = make(n)
    best = float("inf")
    for _ in range(3):
        start = time.thread_time()
        chunking.chunk_text(text, path, count, 256)
        best = min(best, time.thread_time() - start)
    return best


@pytest.mark.parametrize(
    ("make", "path", "n"),
    [(_nested_json, "deep.json", 4000), (_one_line_ts, "bundle.ts", 4000)],
    ids=["json-nested", "one-line-ts"],
)
def test_four_times_the_input_costs_about_four_times_as_much(
    make: Callable[[int], str], path: str, n: int
) -> None:
    """A ratio of CPU times, not a time: 4x the input costs ~4x when linear, ~16x when
    quadratic (before: 17x for the JSON at 2,500 and 10,000 deep); 10x is the line."""
    small = _cpu(make, path, n)
    large = _cpu(make, path, 4 * n)
    assert large < 10 * max(small, 0.005), (small, large)


def test_a_one_line_files_chunk_carries_its_own_definitions() -> None:
    """Each chunk of a one-line file listed every definition of the line: 70,000 outline
    entries in each of 700 chunks for a 2.7 MB bundle. Now the ones it holds."""
    count = load_embedder("hash").count_tokens
    text = _one_line_ts(3000)
    chunks = chunking.chunk_text(text, "bundle.ts", count, 256)
    assert len(chunks) > 50
    for c in chunks:
        assert 0 < len(c.outline) < 40, (c.index, len(c.outline))
        for name in c.symbols:
            assert f"{name}(a)" in c.text
    assert chunks[10].heading.startswith("function f") and chunks[10].heading != "function f0"


DEEP_YAML = [
    "".join("  " * i + f"k{i}:\n" for i in range(400)) + "  " * 400 + "v\n",
    "- " * 400 + "x\n",
    "? " * 400 + "x\n",
]


@pytest.mark.parametrize("text", DEEP_YAML, ids=["keys", "dashes", "questions"])
def test_yaml_nested_past_the_scanners_stack_is_chunked_as_plain_text(text: str) -> None:
    """In a child process: before, the parser's scanner crashed it (SIGSEGV)."""
    code = (
        "import sys; from semfs.ingest import syntax; "
        "print(syntax.outline(sys.stdin.read(), 'deep.yaml') is None)"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], input=text, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0 and run.stdout.strip() == "True", (run.returncode, run.stderr)


def test_ordinary_yaml_keeps_its_outline() -> None:
    text = "services:\n  web:\n    image: nginx\n    ports:\n      - 80\n  db:\n    image: pg\n"
    found = syntax.outline(text, "compose.yaml")
    assert found is not None and [d.label for d in found.definitions][:2] == ["services", "web"]


def test_an_outline_past_its_cpu_budget_gives_way_to_plain_chunks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The budget holds for a shape no one foresaw: a file that has used it up is chunked
    as plain code (and stays whole)."""
    text = _one_line_ts(2000)
    assert syntax.outline(text, "bundle.ts") is not None
    monkeypatch.setattr(syntax, "OUTLINE_CPU_S", -1.0)
    monkeypatch.setattr(syntax, "OUTLINE_CPU_S_PER_MB", 0.0)
    assert syntax.outline(text, "bundle.ts") is None
    count = load_embedder("hash").count_tokens
    chunks = chunking.chunk_text(text, "bundle.ts", count, 256)
    assert "".join(c.text for c in chunks) == text and not chunks[0].outline
