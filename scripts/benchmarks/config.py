"""Command-line options and the machine the run is on."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import platform
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semfs.ingest.embedding.embedder import DEFAULT_BATCH_SIZE

from .harness import REPO, SAMPLE_CORPUS, SHARED_CORPUS

# -- configuration -------------------------------------------------------------------------


@dataclass
class Config:
    quick: bool
    out: Path
    markdown: Path
    plot: Path
    workdir: Path
    keep: bool
    sizes: list[int]
    corpus: Path | None
    model: bool
    model_reps: int
    model_slice_bytes: int | None  # None: the whole corpus
    reps: int
    mounts: int
    queries: int
    store_points: int
    batch_size: int
    answers: bool = False
    backends: bool = False  # ONNX Runtime vs torch (section backends)
    backend_texts: int = 512  # chunk texts each backend embeds per round
    backend_reps: int = 3  # rounds, backends in turn
    backend_quality: bool = True  # Cranfield nDCG@10 per backend (two real-model ingests)


def parse_args(argv: Sequence[str] | None = None) -> Config:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n", 1)[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Outputs: --out (JSON), --markdown, --plot (PNG beside the Markdown file).",
    )
    p.add_argument("--quick", action="store_true", help="Smoke-test run, < 2 min on 2 cores.")
    p.add_argument(
        "--out", type=Path, help="JSON results [bench-out/results.json; quick: quick.json]"
    )
    p.add_argument("--markdown", type=Path, help="Markdown table [BENCHMARKS.md; quick: quick.md]")
    p.add_argument(
        "--write-benchmarks-md",
        action="store_true",
        help="With --quick, still write BENCHMARKS.md at the repo root.",
    )
    p.add_argument("--plot", type=Path, help="PNG plot [the Markdown path with .png]")
    p.add_argument(
        "--workdir", type=Path, help="Scratch directory, kept [a new one under $TMPDIR, removed]."
    )
    p.add_argument("--keep", action="store_true", help="Keep the scratch directory.")
    p.add_argument(
        "--sizes",
        help="Synthetic corpus sizes in chunks, comma-separated [1000,10000,100000; "
        "quick: 1000,10000]; '' for none.",
    )
    p.add_argument(
        "--corpus",
        type=Path,
        help=f"Real corpus [{SHARED_CORPUS}, else {SAMPLE_CORPUS.relative_to(REPO)}].",
    )
    p.add_argument("--no-model", action="store_true", help="Never load the real model.")
    # One full-corpus run each way takes ~7 min here (the model embeds ~15 full-window chunks/s
    # on 2 cores), so the default is 1 to stay within 15 minutes; the two sides still alternate.
    p.add_argument("--model-reps", type=int, help="Ingest vs encode runs [1; quick: 2].")
    p.add_argument(
        "--reps", type=int, help="Runs per reading measurement [5, 3 above 20k chunks; quick: 2]."
    )
    p.add_argument("--mounts", type=int, help="Mounts for readiness [10; quick: 5].")
    p.add_argument("--queries", type=int, help="Fresh queries per search method [30; quick: 10].")
    p.add_argument(
        "--store-points",
        type=int,
        help="Points for Edge vs qdrant-client local mode [5000; quick: 300]. Local mode "
        "commits every point to SQLite on its own: ~10-20 ms each on a VM disk.",
    )
    p.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, help="Model batch size.")
    p.add_argument("-v", "--verbose", action="store_true", help="Debug logging.")
    p.add_argument(
        "--answers",
        action=argparse.BooleanOptionalAction,
        help="scripts/answers.py's question sets through a real mount, with issue 8's targets "
        "(ingests fastapi-docs and mem0-docs with the real model: ~9 min) [full: on; quick: off].",
    )
    p.add_argument(
        "--backends",
        action=argparse.BooleanOptionalAction,
        help="ONNX Runtime fp32/int8 vs torch: chunks/s on the same texts, and Cranfield "
        "nDCG@10 per backend (~7 min) [full: on; quick: off].",
    )
    p.add_argument(
        "--backend-texts", type=int, help="Chunk texts per backend per round [512; quick: 64]."
    )
    p.add_argument(
        "--no-cranfield",
        action="store_true",
        help="With --backends: throughput only, no Cranfield ingests [quick: implied].",
    )
    a = p.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if a.verbose else logging.INFO,
        format="%(asctime)s %(message)s",
        datefmt="%H:%M:%S",
    )
    q = a.quick
    out_dir = REPO / "bench-out"
    markdown = a.markdown or (
        REPO / "BENCHMARKS.md" if not q or a.write_benchmarks_md else out_dir / "quick.md"
    )
    sizes_arg = a.sizes if a.sizes is not None else ("1000,10000" if q else "1000,10000,100000")
    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="semfs-bench-"))
    return Config(
        quick=q,
        out=a.out or out_dir / ("quick.json" if q else "results.json"),
        markdown=markdown,
        plot=a.plot or markdown.with_suffix(".png"),
        workdir=workdir,
        keep=a.keep or a.workdir is not None,
        sizes=[int(s) for s in sizes_arg.split(",") if s.strip()],
        corpus=a.corpus,
        model=not a.no_model,
        model_reps=a.model_reps or (2 if q else 1),
        model_slice_bytes=25_000 if q else None,
        reps=a.reps or (2 if q else 5),
        mounts=a.mounts or (5 if q else 10),
        queries=a.queries or (10 if q else 30),
        store_points=a.store_points or (300 if q else 5000),
        batch_size=a.batch_size,
        answers=(a.answers if a.answers is not None else not q) and not a.no_model,
        backends=(a.backends if a.backends is not None else not q) and not a.no_model,
        backend_texts=a.backend_texts or (64 if q else 512),
        backend_reps=2 if q else 3,
        backend_quality=not (q or a.no_cranfield),
    )


# -- machine -------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    ram = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        ram = int(Path("/proc/meminfo").read_text().split()[1]) / 1024 / 1024
    try:
        nproc = len(os.sched_getaffinity(0))
    except AttributeError:
        nproc = os.cpu_count() or 0
    return {
        "nproc": nproc,
        "cpu": cpu,
        "ram_gb": round(ram, 1) if ram else None,
        "python": platform.python_version(),
        "kernel": platform.release(),
        "platform": platform.platform(),
        "loadavg_start": list(os.getloadavg()),
    }


def fs_type(path: Path) -> str:
    """The filesystem type holding ``path`` (from /proc/mounts), for the 'local disk' note."""
    best, kind = "", "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            mnt = parts[1]
            if str(path).startswith(mnt) and len(mnt) > len(best):
                best, kind = mnt, parts[2]
    return kind
