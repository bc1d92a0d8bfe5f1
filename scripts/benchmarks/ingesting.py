"""Section ``ingest``: chunks/s vs the model's raw encode, unchanged re-runs, hash stores.

The real-model figures use the default model of a new store (:data:`DEFAULT_MODEL`, torch
fp32), measured against that same backend's raw encode (``encode_array``: the vectors
as one numpy array, no pipeline around them)."""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from semfs.ingest.chunking import chunk_text, document_title, embedding_text
from semfs.ingest.embedding.embedder import DEFAULT_MODEL, HASH_MODEL, Embedder, load_embedder
from semfs.ingest.pipeline import ingest
from semfs.ingest.report import IngestReport
from semfs.ingest.sources import DEFAULT_MAX_BYTES, Skipped, read_document, scan
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store

from .config import Config
from .corpora import questions
from .harness import SEMFS, CannotMeasure, median, percentile, repeat, run, timed
from .results import CorpusInfo, Results, Row

# -- ingest --------------------------------------------------------------------------------


class TimedEmbedder:
    """An embedder that counts the seconds spent in ``encode`` (to split ingest time)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.encode_seconds = 0.0

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @property
    def max_tokens(self) -> int:
        return self.inner.max_tokens

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> list[list[float]]:
        took, out = timed(self.inner.encode, texts, batch_size=batch_size)
        self.encode_seconds += took
        return out

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)


def chunk_texts(source: Path, embedder: Embedder) -> list[str]:
    """The texts the pipeline hands to the model for ``source``, computed as it does."""
    texts: list[str] = []
    files, _skipped = scan(source)
    for f in files:
        doc = read_document(f, DEFAULT_MAX_BYTES)
        if isinstance(doc, Skipped) or doc.text is None:
            continue
        spans = chunk_text(doc.text, doc.path, embedder.count_tokens, embedder.max_tokens)
        title = document_title(doc.text, doc.path)
        texts.extend(embedding_text(s, title) for s in spans)
    return texts


def ingest_into(source: Path, store_dir: Path, embedder: Embedder, batch_size: int) -> IngestReport:
    """A fresh ingest of ``source`` into a new store at ``store_dir``."""
    if store_dir.exists():
        shutil.rmtree(store_dir)
    with open_store(CollectionAddress(store=store_dir)) as store:
        # The model name is the embedder's: the store records it and later runs check it.
        return ingest(source, store, model=embedder.name, embedder=embedder, batch_size=batch_size)


def measure_model_ingest(cfg: Config, res: Results, source: Path, label: str) -> Path:
    """Full ingest vs one raw encode of the same texts by the same backend, runs interleaved;
    the store."""
    embedder = load_embedder(DEFAULT_MODEL)
    # The first use of an ONNX backend in a fresh bench folder includes its one-off export.
    load_s, _ = timed(embedder.load)  # type: ignore[attr-defined]
    raw_encode = embedder.encode_array  # type: ignore[attr-defined]
    texts = chunk_texts(source, embedder)
    raw_encode(texts[:16], batch_size=cfg.batch_size)  # warm-up
    timed_embedder = TimedEmbedder(embedder)
    base: list[float] = []
    pipe: list[float] = []
    enc_share: list[float] = []
    store_dir = cfg.workdir / "stores" / (re.sub(r"[^A-Za-z0-9_.-]+", "-", label) + "-model")

    def baseline() -> None:
        took, _ = timed(raw_encode, texts, batch_size=cfg.batch_size)
        base.append(took)

    def pipeline() -> None:
        timed_embedder.encode_seconds = 0.0
        report = ingest_into(source, store_dir, timed_embedder, cfg.batch_size)
        if report.chunks_embedded != len(texts):
            raise RuntimeError(f"ingest embedded {report.chunks_embedded} chunks, not {len(texts)}")
        pipe.append(report.seconds)
        enc_share.append(timed_embedder.encode_seconds / report.seconds)

    for rep in range(cfg.model_reps):  # alternate the order: drift hits both sides alike
        for step in (baseline, pipeline) if rep % 2 == 0 else (pipeline, baseline):
            step()
    n = len(texts)
    ratio = median([(n / p) / (n / b) for p, b in zip(pipe, base, strict=True)])
    res.add(
        Row(
            "ingest",
            "ingest throughput (real model)",
            label,
            value=n / median(pipe),
            unit="chunks/s",
            baseline=f"one raw encode by the same backend ({embedder.name.rpartition('/')[2]}) "
            f"of the same {n} chunk texts, batch_size={cfg.batch_size}",
            baseline_value=n / median(base),
            ratio=ratio,
            ratio_note="semfs ÷ baseline throughput (median of per-run ratios)",
            target="≥ 0.85x raw encode",
            met=ratio >= 0.85,
            chunks=n,
            samples=pipe,
            note=f"model {embedder.name} (the default for new stores); {cfg.model_reps} "
            f"run(s) each, interleaved; model loaded once beforehand ({load_s:.1f} s, the "
            f"ONNX export included when not cached; not counted); encode is "
            f"{median(enc_share):.0%} of ingest time",
            extra={"baseline_samples": base, "model_load_s": load_s, "model": embedder.name},
        )
    )
    measure_real_query_embedding(cfg, res, embedder, source, label)
    return store_dir


def measure_real_query_embedding(
    cfg: Config, res: Results, embedder: Embedder, source: Path, label: str
) -> None:
    """One fresh question at a time through the real model, as a query directory does."""
    qs = questions(source, cfg.queries + 3, seed=31)
    embedder.encode(qs[:3])
    samples = [timed(embedder.encode, [q])[0] for q in qs[3:]]
    for p in (50, 95):
        res.add(
            Row(
                "search",
                f"query embedding alone p{p}",
                label,
                value=percentile(samples, p) * 1000,
                unit="ms",
                baseline="part of Searcher.search",
                samples=[s * 1000 for s in samples] if p == 50 else [],
                note=f"{len(samples)} fresh questions, model {DEFAULT_MODEL}",
            )
        )


def measure_rerun(cfg: Config, res: Results, source: Path, store_dir: Path, label: str) -> None:
    """``semfs ingest`` with nothing changed, as a subprocess: time, and was torch imported."""
    if SEMFS is None:
        raise CannotMeasure("the `semfs` console script is not installed in this environment")
    cmd = [SEMFS, "ingest", str(source), "--store", str(store_dir), "--json"]
    samples = []
    for _ in range(cfg.reps):
        took, proc = timed(
            subprocess.run, cmd, capture_output=True, text=True, timeout=300, check=False
        )
        if proc.returncode != 0:
            raise RuntimeError(f"semfs ingest exited {proc.returncode}: {proc.stderr[-300:]}")
        report = json.loads(proc.stdout)
        if report["chunks_embedded"] or report["added"] or report["updated"]:
            raise RuntimeError(f"re-run was not a no-op: {report}")
        samples.append(took)
    probe = subprocess.run(
        [sys.executable, "-X", "importtime", *cmd],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    torch = bool(re.search(r"\|\s+torch$", probe.stderr, re.M))
    startup = startup_floor()
    res.add(
        Row(
            "ingest",
            "unchanged re-run (subprocess)",
            label,
            value=median(samples),
            unit="s",
            baseline="`semfs --version` (interpreter + CLI start-up)",
            baseline_value=startup,
            target="< 2 s, torch not imported",
            met=median(samples) < 2 and not torch,
            samples=samples,
            note=f"torch imported: {'yes' if torch else 'no'}; {cfg.reps} runs",
            extra={"torch_imported": torch},
        )
    )


@functools.cache
def startup_floor() -> float:
    """Seconds `semfs --version` takes (median of 3): what any semfs command pays first."""
    if SEMFS is None:
        raise CannotMeasure("the `semfs` console script is not installed in this environment")
    return median(repeat(lambda: run([SEMFS, "--version"]), 3))


def build_hash_store(res: Results, info: CorpusInfo, batch_size: int) -> None:
    """Ingest with the hash stand-in: the synthetic sizes' store, timed as a side figure."""
    embedder = TimedEmbedder(load_embedder(HASH_MODEL))
    report = ingest_into(info.source, info.store, embedder, batch_size)
    info.chunks = report.chunks_embedded
    res.add(
        Row(
            "ingest",
            "ingest throughput (hash stand-in)",
            info.name,
            value=report.chunks_embedded / report.seconds,
            unit="chunks/s",
            baseline="the stand-in's encode alone, inside the same run",
            baseline_value=report.chunks_embedded / max(embedder.encode_seconds, 1e-9),
            ratio=embedder.encode_seconds / report.seconds,
            ratio_note="semfs ÷ baseline throughput",
            chunks=report.chunks_embedded,
            samples=[report.seconds],
            note="1 run (it builds the store); the stand-in embeds ~1000x faster than the "
            "model, so this shows what ingest costs besides the model as the corpus grows",
        )
    )
