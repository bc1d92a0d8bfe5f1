#!/usr/bin/env python3
"""Benchmark: the ``semfs mcp`` grep tool vs ``grep -rn`` over the mount of the same store.

For each store and literal pattern it measures, side by side in one run:

* ``grep -rnF PATTERN`` in the mount's root: cold (the first grep after mounting: every
  file comes from the store through FUSE) and warm (again, from the kernel's page cache);
* the grep tool through the MCP client SDK over stdio, ``semfs mcp`` owning the store: the
  first call (the server just started) and warm calls (a running agent session).

Every tool answer is checked against grep's before it counts. Ratios are grep ÷ tool; the
issue's target is >= 5x at 100k chunks for a literal pattern. Callable from
``scripts/bench.py``: ``rows = bench_grep.measure(label, store, workdir)``.

Example:
    .venv/bin/python scripts/bench_grep.py --store mintlify=/tmp/s1 --store 100k=/tmp/s2
    .venv/bin/python scripts/bench_grep.py --build mintlify=../shared/corpora/mintlify-docs \\
        --workdir /tmp/bg --out bench-out/grep.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

REPO = Path(__file__).resolve().parents[1]
SEMFS = shutil.which("semfs", path=str(Path(sys.executable).parent)) or "semfs"
ENV = {**os.environ, "LC_ALL": "C.UTF-8"}


def semfs(*args: str, timeout: float = 600) -> str:
    proc = subprocess.run(
        [SEMFS, *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"semfs {' '.join(args)}: {proc.stderr.strip()[-400:]}")
    return proc.stdout


@contextmanager
def mounted(store: Path, mnt: Path) -> Iterator[float]:
    """The store mounted at ``mnt`` (as a user runs it); yields seconds to the first listing."""
    mnt.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    semfs("mount", str(mnt), "--store", str(store), "--log-file", str(mnt) + ".log")
    try:
        while not os.listdir(mnt):
            time.sleep(0.01)
        yield time.perf_counter() - start
    finally:
        semfs("umount", str(mnt))


def grep_mount(mnt: Path, pattern: str) -> tuple[float, list[str]]:
    start = time.perf_counter()
    proc = subprocess.run(
        ["grep", "-rnF", "--", pattern], cwd=mnt, capture_output=True, env=ENV, check=False
    )
    seconds = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"grep failed: {proc.stderr!r}")
    out = proc.stdout.decode()
    return seconds, out.split("\n")[:-1] if out else []


@asynccontextmanager
async def mcp_session(store: Path) -> Any:
    params = StdioServerParameters(
        command=SEMFS,
        args=["mcp", "--store", str(store), "--budget", str(1 << 30)],
        env=dict(os.environ),
    )
    async with stdio_client(params) as streams, ClientSession(streams[0], streams[1]) as s:
        await s.initialize()
        yield s


async def tool_grep(
    session: ClientSession, pattern: str
) -> tuple[float, list[str], dict[str, Any]]:
    start = time.perf_counter()
    res = await session.call_tool("grep", {"pattern": pattern, "max_results": 10_000})
    seconds = time.perf_counter() - start
    text = res.content[0].text  # type: ignore[union-attr]
    data = getattr(res, "structured_content", None) or getattr(res, "structuredContent", {})
    return seconds, text.split("\n")[: data["shown"]], data


def pick_patterns(mnt: Path, seed: int = 7) -> list[tuple[str, str]]:
    """Two literals from the corpus itself: a rare phrase of three words (its middle word
    is whole, so the full-text index narrows the filter) and a single mid-frequency word."""
    rng = random.Random(seed)
    files = sorted(p for p in mnt.rglob("*.md*") if p.is_file())
    for path in rng.sample(files, min(200, len(files))):
        lines = path.read_text(errors="replace").splitlines()
        found = [m for line in lines for m in re.finditer(r"\b[a-z]{4,}(?: [a-z]{4,}){3}\b", line)]
        if found:
            words = rng.choice(found).group().split()
            return [("phrase", " ".join(words[:3])), ("word", words[3])]
    raise RuntimeError(f"no four words in a row in {mnt}")


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def measure(label: str, store: Path, workdir: Path, reps: int = 3) -> list[dict[str, Any]]:
    """Rows of figures for one store (see the module docstring)."""
    status = json.loads(semfs("status", "--store", str(store), "--json"))
    mnt = workdir / f"mnt-{label}"
    cold: dict[str, list[float]] = {}
    warm: dict[str, list[float]] = {}
    expected: dict[str, list[str]] = {}
    patterns: list[tuple[str, str]] = []
    for rep in range(reps):
        with mounted(store, mnt):
            if not patterns:
                patterns = pick_patterns(mnt)
            for i, (_kind, pattern) in enumerate(patterns):
                seconds, lines = grep_mount(mnt, pattern)
                if i == 0:  # only the first grep after mounting finds the page cache empty
                    cold.setdefault(pattern, []).append(seconds)
                expected.setdefault(pattern, lines)
                if lines != expected[pattern]:
                    raise RuntimeError(f"grep over the mount changed its answer for {pattern!r}")
            for _kind, pattern in patterns:
                warm.setdefault(pattern, []).append(grep_mount(mnt, pattern)[0])
        print(f"  {label}: mount rep {rep + 1}/{reps} done", file=sys.stderr)

    async def tool_runs() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with mcp_session(store) as session:
            for _kind, pattern in patterns:
                first, lines, data = await tool_grep(session, pattern)
                if lines != expected[pattern]:
                    raise RuntimeError(f"the grep tool differs from grep -rn for {pattern!r}")
                times = [(await tool_grep(session, pattern))[0] for _ in range(max(reps, 3))]
                out[pattern] = {"first": first, "warm": times, "data": data}
        return out

    tool = anyio.run(tool_runs)
    rows = []
    for kind, pattern in patterns:
        t = tool[pattern]
        grep_cold = median(cold[pattern]) if pattern in cold else None
        grep_warm = median(warm[pattern])
        tool_warm = median(t["warm"])
        rows.append(
            {
                "corpus": label,
                "chunks": status["chunks"],
                "documents": status["documents"],
                "pattern_kind": kind,
                "pattern": pattern,
                "matches": len(expected[pattern]),
                "documents_read_by_tool": t["data"]["documents_read"],
                "grep_mount_cold_s": grep_cold,
                "grep_mount_warm_s": grep_warm,
                "tool_first_call_s": t["first"],
                "tool_warm_s": tool_warm,
                "speedup_vs_cold_grep": grep_cold / tool_warm if grep_cold else None,
                "speedup_vs_warm_grep": grep_warm / tool_warm,
                "reps": reps,
            }
        )
    return rows


def build(label: str, source: Path, workdir: Path) -> Path:
    """A hash-model store of ``source`` in ``workdir`` (reused when it exists)."""
    store = workdir / f"store-{label}"
    if not store.exists():
        semfs("ingest", str(source), "--store", str(store), "--model", "hash", timeout=3600)
    return store


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| corpus | chunks | pattern | matches | docs read | grep -rn mount cold | warm "
        "| grep tool first call | warm | tool vs cold grep | vs warm grep |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )

    def s(x: float | None) -> str:
        return "-" if x is None else f"{x * 1000:.0f} ms" if x < 10 else f"{x:.1f} s"

    def r(x: float | None) -> str:
        return "-" if x is None else f"{x:.1f}x"

    return head + "".join(
        f"| {row['corpus']} | {row['chunks']:,} | {row['pattern_kind']} `{row['pattern']}` "
        f"| {row['matches']} | {row['documents_read_by_tool']}/{row['documents']} "
        f"| {s(row['grep_mount_cold_s'])} | {s(row['grep_mount_warm_s'])} "
        f"| {s(row['tool_first_call_s'])} | {s(row['tool_warm_s'])} "
        f"| {r(row['speedup_vs_cold_grep'])} | {r(row['speedup_vs_warm_grep'])} |\n"
        for row in rows
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", action="append", default=[], metavar="LABEL=DIR")
    ap.add_argument("--build", action="append", default=[], metavar="LABEL=SOURCE_DIR")
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = ap.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="semfs-bench-grep-"))
    workdir.mkdir(parents=True, exist_ok=True)
    stores = [(lbl, Path(d)) for lbl, d in (s.split("=", 1) for s in args.store)]
    stores += [
        (lbl, build(lbl, Path(src), workdir)) for lbl, src in (b.split("=", 1) for b in args.build)
    ]
    rows: list[dict[str, Any]] = []
    for label, store in stores:
        print(f"measuring {label} ({store})", file=sys.stderr)
        rows += measure(label, store, workdir, args.reps)
    print(table(rows))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
