#!/usr/bin/env python3
"""Embedding backends compared by CPU time: torch fp32, ONNX Runtime fp32 and int8, one thread each.

Wall-clock chunks/s on a shared 2-core machine swing 3x from one minute to the next; CPU
seconds per chunk of a single-threaded backend barely move, so their ratio holds under load
(``scripts/bench.py`` section 7 measures wall-clock throughput on a quiet machine). The
backends embed the same chunk texts of a corpus (chosen evenly across it, built as ingest builds
them) in turn, the order rotating each round; the ratio is the median of per-round ratios.

Example:
    .venv/bin/python scripts/backend_speed.py ../shared/corpora/fastapi-docs --texts 128 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.ingesting import chunk_texts

from semfs.ingest.embedding.embedder import PACKAGED_MODEL, load_embedder, load_torch_embedder

BACKENDS = ("torch", "onnx", "onnx-int8")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("corpus", type=Path)
    p.add_argument("--texts", type=int, default=128, help="Chunk texts per round [128].")
    p.add_argument("--rounds", type=int, default=5, help="Rounds, backends in turn [5].")
    args = p.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    embedders = {
        b: load_torch_embedder(PACKAGED_MODEL, threads=1)
        if b == "torch"
        else load_embedder(f"{PACKAGED_MODEL}@{b}", threads=1)
        for b in BACKENDS
    }
    texts = chunk_texts(args.corpus, embedders["torch"])
    texts = texts[:: max(1, len(texts) // args.texts)][: args.texts]
    for e in embedders.values():
        e.encode(["warm up"] * 4)  # loads (and on first use exports) the model
    cpu: dict[str, list[float]] = {b: [] for b in BACKENDS}
    for rnd in range(args.rounds):
        for b in BACKENDS[rnd % 3 :] + BACKENDS[: rnd % 3]:
            started = time.process_time()
            embedders[b].encode(texts)
            cpu[b].append(time.process_time() - started)
            print(
                f"round {rnd} {b}: {len(texts) / cpu[b][-1]:.1f} chunks per CPU-second, "
                f"load {os.getloadavg()[0]:.1f}",
                file=sys.stderr,
            )
    result = {}
    for b in BACKENDS:
        ratios = [t / o for t, o in zip(cpu["torch"], cpu[b], strict=True)]
        result[b] = {
            "chunks_per_cpu_s": round(len(texts) / statistics.median(cpu[b]), 2),
            "vs_torch": round(statistics.median(ratios), 2),
            "vs_torch_per_round": [round(r, 2) for r in ratios],
        }
    print(json.dumps({"texts": len(texts), "threads": 1, "backends": result}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
