#!/usr/bin/env python3
"""Benchmark issue 38's keywords first and small changes, beside a baseline checkout in the
same run (the two sides alternated, each round):

* ``edit``: one line of a file of about 100 chunks (a log of even lines) edited, then
  ``semfs ingest``: the command's wall time, process start included, and the chunks it sent
  through the model (``chunks_embedded``). Target: <= 2 s, one or two chunks.
* ``log``: a 1.3 MB log written into a writable mount (``seq 1 200000 > MNT/notes/big.log``,
  the guide's own advice), then the seconds from its close until a keyword search through the
  mount lists it (``.search/@keyword/199999/``), and then a small file written after it, until
  a search lists that one (later writes must not wait behind the big file's embedding).
  Target: <= 5 s. The baseline's wait is cut at ``--log-timeout``.
* ``rss``: ``semfs ingest`` of a synthetic folder of ``--rss-chunks`` chunks (files of about
  ten chunks each) into a new store: peak RSS (the process's own, ``wait4``) and wall time.
  Target: <= 1 GB at 100k chunks (``--model hash`` measures the pipeline alone; the model adds
  what it holds).

Example (the baseline: main before keywords first):
    .venv/bin/python scripts/bench_small_changes.py --baseline-rev b917e93
    .venv/bin/python scripts/bench_small_changes.py --baseline-rev b917e93 --only rss \\
        --model hash --rss-chunks 100000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_update import baseline_tree, timed_rss

SEMFS = shutil.which("semfs", path=str(Path(sys.executable).parent)) or "semfs"
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def log_lines(n: int) -> list[str]:
    """A log of even lines: what a greedy chunker misaligned after one edit."""
    stamp = "2026-11-01 12:{:02d}:{:02d} INFO worker {} finished job {} in {} ms\n"
    return [stamp.format(i // 60 % 60, i % 60, i % 7, i, 100 + i % 900) for i in range(n)]


def ingest_json(src: Path, store: Path, env: dict[str, str], model: str) -> tuple[float, dict]:
    cmd = [SEMFS, "ingest", str(src), "--store", str(store), "--json", "-m", model]
    wall, _rss, out, _err = timed_rss(cmd, env)
    return wall, json.loads(out)


def bench_edit(sides: dict[str, dict[str, str]], work: Path, model: str, rounds: int) -> dict:
    """One line edited in a ~100-chunk file, then an ingest: wall time and model chunks."""
    out: dict[str, Any] = {}
    prepared = {}
    for name, env in sides.items():
        src, store = work / f"edit-{name}" / "src", work / f"edit-{name}" / "store"
        src.mkdir(parents=True)
        lines = log_lines(3300)
        (src / "run.log").write_text("".join(lines))
        _wall, first = ingest_json(src, store, env, model)
        prepared[name] = (src, store, lines)
        out[name] = {"chunks": first.get("chunks_written") or first["chunks_embedded"], "runs": []}
    for r in range(rounds):
        for name, env in sides.items():
            src, store, lines = prepared[name]
            mid = len(lines) // 2 + r
            lines[mid] = lines[mid].replace("finished", "FAILED" if r % 2 == 0 else "finished")
            (src / "run.log").write_text("".join(lines))
            wall, report = ingest_json(src, store, env, model)
            out[name]["runs"].append(
                {"seconds": round(wall, 2), "embedded": report["chunks_embedded"]}
            )
    for name in sides:
        runs = out[name]["runs"]
        out[name]["median_s"] = statistics.median(r["seconds"] for r in runs)
        out[name]["embedded"] = sorted({r["embedded"] for r in runs})
    return out


def _listed(folder: Path, name: str) -> Callable[[], bool]:
    """Whether the query folder ``folder`` lists a link to a file called ``name``."""

    def check() -> bool:
        try:
            return any(entry.name.endswith(name) for entry in folder.iterdir())
        except OSError:
            return False

    return check


def _until(check: Callable[[], bool], timeout: float) -> float | None:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            return None
        time.sleep(0.05)
    return time.monotonic() - started


def bench_log(
    sides: dict[str, dict[str, str]], work: Path, model: str, timeout: float
) -> dict[str, Any]:
    """A 1.3 MB log written into a writable mount: seconds from its close to a keyword hit,
    then a small file after it."""
    out: dict[str, Any] = {}
    for name, env in sides.items():
        base = work / f"log-{name}"
        src, store, mnt = base / "src", base / "store", base / "mnt"
        (src / "notes").mkdir(parents=True)
        (src / "notes" / "readme.md").write_text("# Notes\n\nwhat the agent keeps\n")
        subprocess.run(
            [SEMFS, "ingest", str(src), "--store", str(store), "-m", model],
            env=env,
            check=True,
            capture_output=True,
        )
        mnt.mkdir()
        args = ["--store", str(store), "--watch", str(src), "--writable", "-m", model]
        subprocess.run([SEMFS, "mount", str(mnt), *args], env=env, check=True, timeout=300)
        try:
            # The model warm first: a search loads it, as a user's first search would.
            _until(_listed(mnt / ".search" / "@keyword" / "agent", "readme.md"), 300)
            with open(mnt / "notes" / "big.log", "w") as f:
                subprocess.run(["seq", "1", "200000"], stdout=f, check=True)
            big = _until(
                _listed(mnt / ".search" / "@keyword" / "@k=5" / "199999", "big.log"), timeout
            )
            (mnt / "notes" / "after.md").write_text("# After\n\nplatypus crossing\n")
            after = _until(_listed(mnt / ".search" / "@keyword" / "platypus", "after.md"), timeout)
        finally:
            subprocess.run([SEMFS, "umount", str(mnt)], env=env, capture_output=True, check=False)
        out[name] = {
            "bytes": (src / "notes" / "big.log").stat().st_size,
            "big_log_s": None if big is None else round(big, 2),
            "write_after_s": None if after is None else round(after, 2),
            "timeout_s": timeout,
        }
    return out


def bench_rss(sides: dict[str, dict[str, str]], work: Path, model: str, chunks: int) -> dict:
    """A first ingest of a synthetic folder of ``chunks`` chunks: peak RSS and wall time."""
    src = work / "rss-src"
    per_file = 10
    words = [
        "alpha",
        "bravo",
        "charlie",
        "delta",
        "echo",
        "foxtrot",
        "golf",
        "hotel",
        "india",
        "juliet",
        "kilo",
        "lima",
    ]
    for i in range(chunks // per_file):
        folder = src / f"f{i // 500:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        paras = []
        for p in range(per_file):
            body = " ".join(words[(i + p + k) % len(words)] for k in range(150))
            paras.append(f"## Part {p} of {i}\n\n{body} {i} {p}\n")
        (folder / f"d{i:06d}.md").write_text(f"# Document {i}\n\n" + "\n".join(paras))
    out: dict[str, Any] = {}
    for name, env in sides.items():
        store = work / f"rss-{name}"
        cmd = [SEMFS, "ingest", str(src), "--store", str(store), "--json", "-m", model]
        wall, rss, stdout, _err = timed_rss(cmd, env)
        report = json.loads(stdout)
        out[name] = {
            "chunks": report.get("chunks_written") or report["chunks_embedded"],
            "peak_rss_mb": round(rss),
            "seconds": round(wall, 1),
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline-rev", required=True, help="the commit to compare with")
    p.add_argument("--only", choices=("edit", "log", "rss"), action="append")
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--log-timeout", type=float, default=600.0)
    p.add_argument("--rss-chunks", type=int, default=100_000)
    p.add_argument("--workdir", type=Path, default=None)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="semfs-small-", dir=args.workdir))
    try:
        base_path = baseline_tree(args.baseline_rev, work / "baseline")
        clean = {k: v for k, v in os.environ.items() if k not in ("SEMFS_STORE", "PYTHONPATH")}
        sides = {"this": clean, "baseline": {**clean, "PYTHONPATH": str(base_path)}}
        results: dict[str, Any] = {"baseline": args.baseline_rev, "model": args.model}
        load = os.getloadavg()[0]
        for what in args.only or ("edit", "log", "rss"):
            if what == "edit":
                results["edit"] = bench_edit(sides, work, args.model, args.rounds)
            elif what == "log":
                results["log"] = bench_log(sides, work, args.model, args.log_timeout)
            else:
                results["rss"] = bench_rss(sides, work, args.model, args.rss_chunks)
            print(json.dumps({what: results[what]}), flush=True)
        results["load_average"] = [round(load, 1), round(os.getloadavg()[0], 1)]
        print(json.dumps(results, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
