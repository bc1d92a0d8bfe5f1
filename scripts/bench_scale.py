#!/usr/bin/env python3
"""Benchmark: how each cost grows with the collection, from 10k to 100k to 1M chunks.

Synthetic Zipf corpora (``benchmarks.corpora.synthetic_corpus``: ten ``##`` sections, so ten
chunks, per file; 1M chunks is 100k files) ingested with the hash stand-in model, so the
figures are semfs's own costs without the model's. Per size, in one run:

* ingest: chunks/s of ``semfs ingest -m hash`` (a subprocess, as a user runs it) and its peak
  RSS; store bytes on disk per chunk;
* mount → first ``ls``, p50 of several mounts, beside bindfs over the same files (start →
  first ``ls``);
* the daemon's peak RSS (VmHWM) after the first ``ls``, a ``grep -r`` of every file and the
  ``.search`` listings;
* a ``.search/<question>/`` listing, p50 over fresh questions (hash model: no embedding cost);
* the MCP grep tool for a rare phrase vs ``grep -rnF`` over the warm mount
  (``bench_grep.measure``: every tool answer is checked against grep's);
* ``semfs check``, ``semfs compact``, ``semfs collections list``: whole commands.

A growth exponent ``k`` per figure (cost ∝ chunks^k between two sizes) says what grows faster
than linearly (k > 1). A source or store already in ``--workdir`` is reused: the 1M ingest
takes most of an hour on 2 shared cores, and its figures are kept in ``ingest.json`` beside it.

Example:
    .venv/bin/python scripts/bench_scale.py --sizes 10000,100000 --workdir /tmp/scale
    nice .venv/bin/python scripts/bench_scale.py --sizes 1000000 --workdir /tmp/scale \\
        --out bench-out/scale-1m.json
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_grep
from benchmarks.corpora import questions, synthetic_corpus
from benchmarks.harness import (
    BINDFS,
    SEMFS,
    allocated_bytes,
    bindfs_mounted,
    median,
    mounted,
    percentile,
    require_linux,
    vm_hwm_mb,
)
from benchmarks.report import render_scale_plot


def semfs_timed(*args: str, timeout: float = 7200) -> tuple[float, str]:
    """Seconds of one whole ``semfs`` command, and its output; a failure raises."""
    start = time.perf_counter()
    proc = subprocess.run(
        [str(SEMFS), *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"semfs {' '.join(args)} exited {proc.returncode}: {proc.stderr[-400:]}")
    return took, proc.stdout + proc.stderr


def ingested(size: int, workdir: Path) -> tuple[Path, Path, dict[str, Any]]:
    """The size's source and store, made now unless ``workdir`` holds them; its ingest figures."""
    src, store = workdir / f"syn{size}", workdir / f"st{size}"
    figures = store.with_suffix(".ingest.json")
    if not src.is_dir():
        synthetic_corpus(src, size)
    if not figures.is_file():
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        seconds, _ = semfs_timed("ingest", str(src), "--store", str(store), "-m", "hash")
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        figures.write_text(
            json.dumps(
                {
                    "seconds": seconds,
                    # ru_maxrss of all children is a maximum: exact only if this ingest set it.
                    "peak_rss_mb": peak / 1024 if peak > before else None,
                }
            )
        )
    return src, store, json.loads(figures.read_text())


def status(store: Path) -> dict[str, Any]:
    return json.loads(semfs_timed("status", "--store", str(store), "--json")[1])


def measure(
    size: int, workdir: Path, mounts: int, queries: int, grep_reps: int, skip: set[str]
) -> dict[str, Any]:
    src, store, ingest = ingested(size, workdir)
    st = status(store)
    chunks, files = st["chunks"], st["documents"]
    out: dict[str, Any] = {"size": size, "chunks": chunks, "documents": files}
    out["ingest_s"] = ingest["seconds"]
    out["ingest_chunks_per_s"] = chunks / ingest["seconds"]
    out["ingest_peak_rss_mb"] = ingest.get("peak_rss_mb")
    out["store_bytes_per_chunk"] = allocated_bytes(store) / chunks
    log(f"{size}: {chunks} chunks in {files} files; ingest {out['ingest_chunks_per_s']:.0f}/s")

    ready, ready_bindfs = [], []
    mnt = workdir / f"mnt{size}"
    for _ in range(mounts):
        with mounted(store, mnt) as m:
            ready.append(m.ready_s)
        if BINDFS is not None:
            with bindfs_mounted(src, workdir / f"bind{size}") as b:
                ready_bindfs.append(b.ready_s)
    out["mount_first_ls_ms"] = {"p50": median(ready) * 1000, "samples": [r * 1000 for r in ready]}
    if ready_bindfs:
        out["bindfs_first_ls_ms"] = {"p50": median(ready_bindfs) * 1000}
    log(f"{size}: mount → first ls p50 {median(ready) * 1000:.0f} ms")

    with mounted(store, mnt) as m:
        out["daemon_rss_after_first_ls_mb"] = vm_hwm_mb(m.pid)
        root = m.path / ".search"
        qs = questions(src, queries + 3, seed=11)
        for q in qs[:3]:
            os.listdir(root / q)
        samples = []
        for q in qs[3:]:
            start = time.perf_counter()
            os.listdir(root / q)
            samples.append(time.perf_counter() - start)
        out["search_listing_ms"] = {
            "p50": median(samples) * 1000,
            "p95": percentile(samples, 95) * 1000,
            "n": len(samples),
        }
        log(f"{size}: .search listing p50 {median(samples) * 1000:.1f} ms")
        if "grep" not in skip:  # every file through the daemon once: its memory after that
            start = time.perf_counter()
            subprocess.run(["grep", "-rqc", "zzzzqq", "."], cwd=m.path, check=False)
            out["grep_r_cold_s"] = time.perf_counter() - start
        out["daemon_peak_rss_mb"] = vm_hwm_mb(m.pid)
        out["daemon_rss_split_mb"] = rss_split(m.pid)
        log(f"{size}: daemon peak RSS {out['daemon_peak_rss_mb']:.0f} MB")

    if "grep" not in skip:
        out["mcp_grep"] = bench_grep.measure(f"scale{size}", store, workdir, reps=grep_reps)

    for name, args in (
        ("check_s", ("check", "--store", str(store))),
        ("collections_list_s", ("collections", "list", "--store", str(store))),
        ("compact_s", ("compact", "--store", str(store))),
    ):
        if args[0] in skip:
            continue
        out[name] = semfs_timed(*args)[0]
        log(f"{size}: semfs {args[0]} {out[name]:.2f} s")
    return out


def rss_split(pid: int | None) -> dict[str, float]:
    """The daemon's resident memory now, by kind: its own (anonymous) and mapped store files
    (file pages the kernel can drop and share: the payload and vectors it read)."""
    out: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile", "RssShmem"):
                out[key] = int(value.split()[0]) / 1024
    return out


def exponents(results: list[dict[str, Any]]) -> dict[str, list[float]]:
    """cost ∝ chunks^k between consecutive sizes, per figure (k > 1: faster than linear)."""
    figures = {
        "ingest seconds": lambda r: r["ingest_s"],
        "store bytes": lambda r: r["store_bytes_per_chunk"] * r["chunks"],
        "mount → first ls": lambda r: r["mount_first_ls_ms"]["p50"],
        "daemon peak RSS": lambda r: r["daemon_peak_rss_mb"],
        ".search listing p50": lambda r: r["search_listing_ms"]["p50"],
        "semfs check": lambda r: r["check_s"],
        "semfs compact": lambda r: r["compact_s"],
        "semfs collections list": lambda r: r["collections_list_s"],
    }
    out: dict[str, list[float]] = {}
    rs = sorted(results, key=lambda r: r["chunks"])
    for name, get in figures.items():
        out[name] = []
        for a, b in itertools.pairwise(rs):
            with contextlib.suppress(KeyError):  # a figure skipped at one size
                out[name].append(math.log(get(b) / get(a)) / math.log(b["chunks"] / a["chunks"]))
    return out


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", default="10000,100000", help="Chunk counts [10000,100000].")
    p.add_argument("--workdir", type=Path, required=True, help="Sources and stores (kept).")
    p.add_argument("--out", type=Path, default=Path("bench-out/scale.json"))
    p.add_argument("--plot", type=Path, default=Path("bench-out/scale.png"), help="PNG curves.")
    p.add_argument("--mounts", type=int, default=7, help="Mounts for mount → first ls [7].")
    p.add_argument("--queries", type=int, default=20, help="Fresh .search questions [20].")
    p.add_argument("--grep-reps", type=int, default=2, help="Mounts for the grep figures [2].")
    p.add_argument(
        "--skip",
        default="",
        help="Leave out: grep (the cold grep and MCP grep figures), check, compact; comma-"
        "separated. At 1M chunks a cold pass over the mount alone takes ~10 min on 2 cores.",
    )
    a = p.parse_args(argv)
    require_linux("bench_scale")
    a.workdir.mkdir(parents=True, exist_ok=True)
    previous: list[dict[str, Any]] = []
    with contextlib.suppress(OSError, ValueError):
        previous = json.loads(a.out.read_text())["sizes"]
    sizes = [int(s) for s in a.sizes.split(",") if s]
    results = [r for r in previous if r["size"] not in sizes]
    for size in sizes:
        skip = {w for w in a.skip.split(",") if w}
        results.append(measure(size, a.workdir, a.mounts, a.queries, a.grep_reps, skip))
        results.sort(key=lambda r: r["chunks"])
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(
            json.dumps({"sizes": results, "exponents": exponents(results)}, indent=1) + "\n"
        )
    problem = render_scale_plot(results, a.plot)
    if problem:
        log(f"no plot: {problem}")
    print(json.dumps(exponents(results), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
