"""Section ``backends``: the same model on ONNX Runtime (fp32, int8) vs torch, and its quality.

Issue 11's rule: ONNX int8 becomes the default only at >= 1.8x torch's chunks/s with
Cranfield nDCG@10 within 0.005 of torch's (hybrid and semantic); otherwise it stays an
option (``--model all-MiniLM-L6-v2@onnx-int8``). Throughput is measured on the same chunk
texts, the backends taking turns (the order rotates each round), so drift on a shared
machine hits all alike; the ratio is the median of per-round ratios. Every backend runs on
every core: a Searcher earlier in this process caps torch at one thread for the whole
process (:data:`semfs.ingest.search.QUERY_THREADS`), which once made int8 look 1.9x faster. The
ONNX export is made in this run (its time is reported) under the bench's own store folder,
never the user's.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from semfs.ingest.embedding.embedder import (
    PACKAGED_MODEL,
    Embedder,
    load_embedder,
    load_torch_embedder,
)

from .config import Config
from .harness import REPO, CannotMeasure, median, timed
from .ingesting import chunk_texts
from .results import IN_SAMPLE_CRANFIELD, Results, Row

BACKENDS = ("torch", "onnx", "onnx-int8")
SPEED_TARGET = 1.8  # x torch's chunks/s, to become the default
NDCG_SLACK = 0.005  # nDCG@10 may trail torch's by at most this
CRANFIELD_MODES = ("hybrid", "semantic")
# Issue 8: Cranfield hybrid nDCG@10 must not fall below the figure of 2026-11-29.
CRANFIELD_HYBRID_FLOOR = 0.418

THROUGHPUT_ROWS = (
    *(f"encode throughput, {b} vs torch" for b in BACKENDS[1:]),
    "int8 vectors: cosine to torch's, mean",
)
CRANFIELD_ROWS = (
    *(f"Cranfield nDCG@10 {m}, {b}" for m in CRANFIELD_MODES for b in ("torch", "onnx-int8")),
)
ADOPTION_ROW = "ONNX int8 as the default embedding backend"


def model_name(backend: str) -> str:
    return PACKAGED_MODEL if backend == "torch" else f"{PACKAGED_MODEL}@{backend}"


def measure_throughput(cfg: Config, res: Results, source: Path, label: str) -> float | None:
    """chunks/s of each backend on the same texts, interleaved; the int8 speed-up."""
    import numpy as np

    from semfs.ingest.embedding.torchmodel import torch_installed

    if not torch_installed():
        raise CannotMeasure("torch itself is the baseline: needs the [torch] extra")
    threads = os.cpu_count() or 1  # see the module's docstring: no backend runs capped
    # torch itself (the default name would run on its fp32 export once there is one).
    embedders: dict[str, Embedder] = {
        b: (load_torch_embedder if b == "torch" else load_embedder)(model_name(b), threads=threads)
        for b in BACKENDS
    }
    load_s = {b: timed(e.encode, ["warm up"])[0] for b, e in embedders.items()}
    texts = chunk_texts(source, embedders["torch"])[: cfg.backend_texts]
    if not texts:
        raise CannotMeasure(f"no chunk texts in {source}")
    seconds: dict[str, list[float]] = {b: [] for b in BACKENDS}
    vectors: dict[str, Any] = {}
    for rnd in range(cfg.backend_reps):
        order = BACKENDS[rnd % 3 :] + BACKENDS[: rnd % 3]
        for b in order:
            took, vecs = timed(embedders[b].encode, texts, batch_size=cfg.batch_size)
            seconds[b].append(took)
            vectors[b] = np.asarray(vecs, dtype=np.float32)
    n = len(texts)
    speedup = None
    for b in BACKENDS[1:]:
        ratios = [t / o for t, o in zip(seconds["torch"], seconds[b], strict=True)]
        ratio = median(ratios)
        cos = (vectors[b] * vectors["torch"]).sum(1)
        int8 = b == "onnx-int8"
        if int8:
            speedup = ratio
        res.add(
            Row(
                "backends",
                f"encode throughput, {b} vs torch",
                label,
                value=n / median(seconds[b]),
                unit="chunks/s",
                baseline=f"torch fp32 (sentence-transformers; --model all-MiniLM-L6-v2), "
                f"same {n} chunk texts",
                baseline_value=n / median(seconds["torch"]),
                ratio=ratio,
                ratio_note="backend ÷ torch throughput (median of per-round ratios)",
                target=f"≥ {SPEED_TARGET:g}x (rule for the default)" if int8 else "",
                met=ratio >= SPEED_TARGET if int8 else None,
                chunks=n,
                samples=seconds[b],
                note=f"{cfg.backend_reps} rounds, backends in turn, {threads} threads each; "
                f"first use "
                f"{load_s[b]:.1f} s (ONNX: the export included unless cached; torch: loading) "
                f"not counted; "
                f"cosine to torch mean {float(cos.mean()):.4f}, min {float(cos.min()):.4f}",
                extra={"torch_samples": seconds["torch"], "first_use_s": load_s[b]},
            )
        )
    return speedup


def measure_cranfield(cfg: Config, res: Results) -> dict[str, dict[str, float]]:
    """nDCG@10 per mode for torch and ONNX int8: Cranfield ingested once per backend."""
    sys.path.insert(0, str(REPO / "scripts"))
    import cranfield

    data = cranfield.DEFAULT_DATA
    if not (data / "cran.all.1400").exists():
        raise CannotMeasure(f"no Cranfield collection at {data}")
    docs = cranfield.load_docs(data)
    texts = cranfield.load_queries(data)
    qrels_by_pos = cranfield.load_qrels(data)
    positions = [p for p in range(1, len(texts) + 1) if qrels_by_pos.get(p)]
    queries = [texts[p - 1] for p in positions]
    qrels = [qrels_by_pos[p] for p in positions]
    work = cfg.workdir / "cranfield"
    cranfield.write_corpus(docs, work / "corpus")
    ndcg: dict[str, dict[str, float]] = {}
    for b in ("torch", "onnx-int8"):
        store = work / f"store-{b}"
        took, _ = timed(cranfield.ingest_corpus, work / "corpus", store, model_name(b))
        runs, _seconds = cranfield.run_semfs(store, queries)
        ndcg[b] = {m: cranfield.evaluate(runs[m], qrels)["ndcg@10"] for m in CRANFIELD_MODES}
        res.details.setdefault("cranfield_ingest_s", {})[b] = took
    for mode in CRANFIELD_MODES:
        torch_v = ndcg["torch"][mode]
        floor = mode == "hybrid"
        res.add(
            Row(
                "backends",
                f"Cranfield nDCG@10 {mode}, torch",
                "cranfield",
                value=torch_v,
                baseline="issue 8: the figure of 2026-11-29" if floor else "",
                baseline_value=CRANFIELD_HYBRID_FLOOR if floor else None,
                target=f"≥ {CRANFIELD_HYBRID_FLOOR}" if floor else "",
                met=torch_v >= CRANFIELD_HYBRID_FLOOR if floor else None,
                sample=IN_SAMPLE_CRANFIELD,
                note=f"{len(docs)} documents, {len(queries)} queries, graded gains "
                "(scripts/cranfield.py's scoring)",
            )
        )
        int8_v = ndcg["onnx-int8"][mode]
        res.add(
            Row(
                "backends",
                f"Cranfield nDCG@10 {mode}, onnx-int8",
                "cranfield",
                value=int8_v,
                baseline="torch, same run",
                baseline_value=torch_v,
                target=f"≥ torch − {NDCG_SLACK} (rule for the default)",
                met=int8_v >= torch_v - NDCG_SLACK,
                sample=IN_SAMPLE_CRANFIELD,
                note=f"difference {int8_v - torch_v:+.4f}",
            )
        )
    return ndcg


def measure_backends(cfg: Config, res: Results, source: Path, label: str) -> None:
    """Throughput, then quality, then the adoption rule's verdict (one row)."""
    if importlib.util.find_spec("onnxruntime") is None:
        raise CannotMeasure("onnxruntime is not installed (pip install -e '.[bench]')")
    speedup = None
    with res.guard("backends", THROUGHPUT_ROWS[:2], label):
        speedup = measure_throughput(cfg, res, source, label)
    ndcg = None
    if cfg.backend_quality:
        with res.guard("backends", CRANFIELD_ROWS, "cranfield"):
            ndcg = measure_cranfield(cfg, res)
    else:
        for what in CRANFIELD_ROWS:
            res.skipped("backends", what, "cranfield", "--quick (or --no-cranfield): not run")
    if speedup is None or ndcg is None:
        res.skipped(
            "backends",
            ADOPTION_ROW,
            label,
            "needs both the int8 speed-up and the Cranfield nDCG@10 of this run",
        )
        return
    close = all(ndcg["onnx-int8"][m] >= ndcg["torch"][m] - NDCG_SLACK for m in CRANFIELD_MODES)
    adopt = speedup >= SPEED_TARGET and close
    res.add(
        Row(
            "backends",
            ADOPTION_ROW,
            label,
            value=speedup,
            unit="x",
            target=f"≥ {SPEED_TARGET:g}x and nDCG@10 within {NDCG_SLACK} (hybrid, semantic)",
            met=adopt,
            note=(
                "the rule is met: int8 could be the default (it is an option today)"
                if adopt
                else "the rule is missed: int8 stays an option"
            )
            + f"; speed-up {speedup:.2f}x, nDCG@10 "
            + ", ".join(
                f"{m} {ndcg['onnx-int8'][m] - ndcg['torch'][m]:+.4f}" for m in CRANFIELD_MODES
            ),
        )
    )
