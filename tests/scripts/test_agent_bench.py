"""The agent benchmark's harness end to end: ``scripts/agent_bench.py setup``, a scripted
fake agent (a fixed list of commands through each session's logging wrapper), ``score``.

On the sample corpus with the hash stand-in embedder, all three arms (a real mount, the plain
folder, ``semfs mcp`` through ``mcpcall``): the log must hold every command with its exit
status and the bytes the agent was shown (compared with what the wrapper printed), and the
score must count the commands, bytes and right pages of each arm, tuned and held-out apart.
The mount and every process the run started are gone at the end, also when the test fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO, SAMPLE_CORPUS, SEMFS
from tests.helpers.mounting import force_unmount

SCRIPT = REPO / "scripts" / "agent_bench.py"
TIMEOUT = 300.0
CLOUDFLARE = "deploy/cloudflare.mdx"
CLOUDFLARE_LINE = (
    "To host your documentation at a subpath such as `yoursite.com/docs` using Cloudflare, "
    "you must create and configure a Cloudflare Worker."
)
QUESTIONS = [
    # question, expected_path, alternates, kind, answer, split
    ("how do I serve the docs under a subpath with Cloudflare", CLOUDFLARE,
     "deploy/docs-subpath.mdx", "paraphrase", CLOUDFLARE_LINE, ""),
    ("which font does the site use by default", "customize/fonts.mdx", "", "vague",
     "The default font varies by theme.", ""),
    ("set a custom domain for the docs", "customize/custom-domain.mdx", "", "exact", "",
     "held-out"),
]  # fmt: skip


def script(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=cwd,
        check=False,
    )


def refused(*args: str) -> str:
    """The one-line error of a run of the script that must fail."""
    proc = script(*args)
    assert proc.returncode != 0, proc.stdout
    return proc.stderr


def bench(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    proc = script(*args, cwd=cwd)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


class Agent:
    """Runs commands the way an agent would: through a session's ``run`` wrapper, keeping
    what it was shown."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.shown: dict[tuple[str, str], list[tuple[int, bytes]]] = {}

    def shell(self, arm: str, qid: str, command: str) -> bytes:
        wrapper = self.work / "sessions" / arm / qid / "run"
        proc = subprocess.run(
            [str(wrapper), command], capture_output=True, timeout=TIMEOUT, check=False
        )
        self.shown.setdefault((arm, qid), []).append((proc.returncode, proc.stdout))
        return proc.stdout

    def answer(self, arm: str, qid: str, *args: str) -> None:
        answer = self.work / "sessions" / arm / qid / "answer"
        subprocess.run([str(answer), *args], capture_output=True, timeout=TIMEOUT, check=True)


def our_processes(marker: str) -> list[int]:
    """Processes whose command line names ``marker`` (this test's folder): the ones it
    started."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


def end_processes(marker: str) -> list[int]:
    """Wait a little for this test's processes to exit, then end those left; return them."""
    deadline = time.monotonic() + 30
    while (left := our_processes(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


def log(work: Path, arm: str, qid: str) -> list[dict[str, Any]]:
    path = work / "sessions" / arm / qid / "log.jsonl"
    if not path.exists():  # a session without commands
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.mount
def test_setup_fake_agent_and_score(tmp_path: Path) -> None:
    store, work = tmp_path / "store", tmp_path / "work"
    ingest = subprocess.run(
        [SEMFS, "ingest", str(SAMPLE_CORPUS), "--store", str(store), "-m", "hash"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert ingest.returncode == 0, ingest.stderr
    questions = tmp_path / "questions.tsv"
    header = "question\texpected_path\talternates\tkind\tanswer\tsplit"
    questions.write_text("\n".join([header, *("\t".join(q) for q in QUESTIONS)]) + "\n")
    mnt = work / "mnt"
    try:
        setup = ["--collection", str(SAMPLE_CORPUS), "--store", str(store)]
        setup += ["--questions", str(questions)]
        bench("setup", *setup, "--work", str(work), "--max-output", "2000")
        assert os.path.ismount(mnt)
        sessions = (work / "sessions.tsv").read_text().splitlines()[1:]
        assert len(sessions) == 9  # 3 arms x 3 questions
        prompt = (work / "sessions" / "mount" / "q01" / "prompt.md").read_text()
        assert QUESTIONS[0][0] in prompt and str(mnt) in prompt and ".search" in prompt
        assert CLOUDFLARE not in prompt  # the prompt never gives the answer away
        assert "search(query" in (work / "sessions" / "mcp" / "q01" / "prompt.md").read_text()

        agent = Agent(work)
        results = agent.shell("mount", "q01", 'cat ".search/cloudflare subpath/00-results.md"')
        assert CLOUDFLARE.encode() in results
        assert CLOUDFLARE_LINE.encode() in agent.shell("mount", "q01", f"sed -n 12p {CLOUDFLARE}")
        agent.answer("mount", "q01", CLOUDFLARE, CLOUDFLARE_LINE)
        agent.shell("mount", "q02", "grep -rn 'default font' .")
        agent.answer("mount", "q02", "customize/themes.mdx", "not it")  # a wrong page
        agent.shell("mount", "q03", "cat customize/custom-domain.mdx")  # cut at 2000 bytes
        agent.answer("mount", "q03", f"{mnt}/customize/custom-domain.mdx")  # absolute: right

        grepped = agent.shell("grep", "q01", "grep -rln 'Cloudflare Worker' . | sort")
        assert b"./deploy/cloudflare.mdx" in grepped
        agent.shell("grep", "q01", "grep -rn 'no such words anywhere' .")  # exit 1
        agent.answer("grep", "q01", "./deploy/cloudflare.mdx", "a line not on the page")
        agent.shell("grep", "q02", "ls")
        agent.shell("grep", "q03", "ls customize")
        agent.answer("grep", "q03", "customize/custom-domain.mdx")

        found = agent.shell("mcp", "q01", """mcpcall search '{"query": "cloudflare subpath"}'""")
        assert CLOUDFLARE.encode() in found
        read = agent.shell(
            "mcp",
            "q01",
            f"""mcpcall read '{{"path": "{CLOUDFLARE}", "start_line": 12,
            "end_line": 12}}'""",
        )
        assert CLOUDFLARE_LINE.encode() in read
        agent.shell("mcp", "q01", "mcpcall nosuch '{}'")  # an unknown tool: exit 1
        agent.answer("mcp", "q01", CLOUDFLARE, CLOUDFLARE_LINE)

        # The log: each command, its exit status, the bytes shown (what the wrapper printed).
        for (arm, qid), shown in agent.shown.items():
            logged = log(work, arm, qid)
            assert [r["exit"] for r in logged] == [code for code, _ in shown]
            for record, (_, out) in zip(logged, shown, strict=True):
                if record["bytes_produced"] == record["bytes"]:  # not cut: all of it was shown
                    assert record["bytes"] == len(out), record
                else:  # cut: the bytes shown, then the wrapper's note
                    assert out[record["bytes"] :].startswith(b"\n[output cut"), record
        cut = log(work, "mount", "q03")[0]
        page = (SAMPLE_CORPUS / "customize" / "custom-domain.mdx").read_bytes()
        assert cut["bytes"] == 2000 and cut["bytes_produced"] == len(page)
        assert agent.shown[("mount", "q03")][0][1].startswith(page[:2000])
        for arm, qid, n in (("mount", "q01", 0), ("mount", "q01", 1), ("grep", "q01", 0),
                            ("mcp", "q01", 0), ("mcp", "q01", 1)):  # fmt: skip
            assert log(work, arm, qid)[n]["bytes"] == len(agent.shown[(arm, qid)][n][1])
        assert [r["exit"] for r in log(work, "grep", "q01")] == [0, 1]
        assert [r["exit"] for r in log(work, "mcp", "q01")] == [0, 0, 1]
        assert (work / "sessions" / "mcp" / "q01" / "mcp.jsonl").is_file()

        bench("score", "--work", str(work), "--json", str(tmp_path / "score.json"))
        score = json.loads((tmp_path / "score.json").read_text())
        arms = score["arms"]
        expect_bytes = {
            arm: sum(r["bytes"] for q in ("q01", "q02", "q03") for r in log(work, arm, q))
            for arm in ("mount", "grep", "mcp")
        }
        assert arms["mount"]["all"] == {
            "questions": 3, "commands": 4, "bytes": expect_bytes["mount"], "answered": 3,
            "right": 2, "quoted": 1,
        }  # fmt: skip
        assert arms["grep"]["all"] == {
            "questions": 3, "commands": 4, "bytes": expect_bytes["grep"], "answered": 2,
            "right": 2, "quoted": 0,
        }  # fmt: skip
        assert arms["mcp"]["all"] == {
            "questions": 3, "commands": 3, "bytes": expect_bytes["mcp"], "answered": 1,
            "right": 1, "quoted": 1,
        }  # fmt: skip
        assert arms["mount"]["held-out"]["questions"] == 1
        assert arms["mount"]["held-out"]["right"] == 1
        assert arms["mount"]["tuned"]["right"] == 1
        assert arms["mount"]["by_format"]["mdx"]["questions"] == 3
        assert arms["mcp"]["mcp_structured_bytes"] > 0
        assert score["warnings"] == []

        # One session for many questions: the same wrapper, answers by question id.
        many = tmp_path / "many"
        bench("setup", *setup, "--work", str(many), "--arms", "grep", "--mode", "many")
        assert "q03" in (many / "sessions" / "grep" / "all" / "prompt.md").read_text()
        # A source tree's sessions (issue 42) name files of a source tree, not pages.
        code = tmp_path / "code"
        bench("setup", *setup, "--work", str(code), "--arms", "grep", "--subject", "code")
        told = (code / "sessions" / "grep" / "q01" / "prompt.md").read_text()
        assert "from the source tree described below" in told and "git grep" in told
        assert "page" not in told and "pdftotext" not in told
        Agent(many).shell("grep", "all", "ls deploy")
        Agent(many).answer("grep", "all", "--id", "q02", "customize/fonts.mdx",
                           "The default font varies by theme.")  # fmt: skip
        table = bench("score", "--work", str(many), "--json", str(tmp_path / "many.json")).stdout
        # All counted on the session's first question: only the totals are shown.
        assert "| grep | 3 | all | 1 |" in table and "| grep | 2 | tuned |" not in table
        totals = json.loads((tmp_path / "many.json").read_text())["arms"]["grep"]["all"]
        assert totals["questions"] == 3 and totals["commands"] == 1
        assert totals["right"] == 1 and totals["quoted"] == 1

        # Arms join a work folder later (grep can run while the store is built), never twice,
        # and only for the same questions.
        again = refused("setup", *setup, "--work", str(many), "--arms", "grep", "--mode", "many")
        assert "already has grep" in again
        other = tmp_path / "other.tsv"
        other.write_text(questions.read_text())
        moved = [*setup[:-1], str(other)]
        assert "another questions" in refused(
            "setup", *moved, "--work", str(many), "--arms", "mcp", "--mode", "many"
        )
        bench("setup", *setup, "--work", str(many), "--arms", "mcp", "--mode", "many")
        assert json.loads((many / "bench.json").read_text())["arms"] == ["grep", "mcp"]
        listed = (many / "sessions.tsv").read_text().splitlines()
        assert [row.split("\t")[0] for row in listed] == ["arm", "grep", "mcp"]
        bench("score", "--work", str(many), "--json", str(tmp_path / "many.json"))
        arms = json.loads((tmp_path / "many.json").read_text())["arms"]
        assert arms["grep"]["all"]["commands"] == 1 and arms["mcp"]["all"]["commands"] == 0

        bench("stop", "--work", str(work))
        assert not os.path.ismount(mnt)
    finally:
        force_unmount(mnt)
        left = end_processes(str(tmp_path))
    assert not os.path.ismount(mnt)
    assert left == [], f"processes left running: {left}"
