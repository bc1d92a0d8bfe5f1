#!/usr/bin/env python3
"""What makes the dense vectors of an ingest faster on this CPU (issue 38.5), measured.

The same chunk texts of a corpus (built as the pipeline builds them, from files chosen evenly
across it) are embedded by each variant in turn, the order rotating each round:

* ``today``: the ingest's encoder as it stands (fp32 on ONNX Runtime, batches of 32, texts
  sorted by length within each window of 256 chunks, as ``pipeline._encode`` hands them);
* ``batch N``: the same with batches of N;
* ``sorted``: the same texts sorted by length as one window (bucketing across documents);
* ``fused``: the fp32 graph after ONNX Runtime's transformer optimizer (attention, GELU, layer
  norms fused), loaded with every graph optimization;
* ``int8``: the int8 graph (``@onnx-int8``'s recipe: MatMul weights per channel), for
  documents only, queries staying fp32; its cosine to fp32 is reported.

Figures: CPU seconds per chunk with one thread (steady under load: the machine is shared),
wall-clock chunks/s with ``--threads`` threads, padding (tokens run / tokens of the texts), and
the cosine of each variant's vectors to today's. With ``--duplicates`` it also counts the chunk
texts of the whole corpus that repeat byte for byte (navigation, boilerplate): what embedding
each distinct text once would save.

Example:
    .venv/bin/python scripts/bench_encode.py bench-out/bigcorpus/collection --files 300
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from semfs.ingest.chunking import chunk_text, document_title, embedding_text
from semfs.ingest.embedding.embedder import PACKAGED_MODEL, load_embedder
from semfs.ingest.sources import DEFAULT_MAX_BYTES, Skipped, read_document, scan

WINDOW = 256  # chunks per encode call of the pipeline (ENCODE_WINDOW_BATCHES x 32)


def corpus_texts(
    source: Path, files: int | None, count: Callable[..., list[int]], budget: int
) -> list[str]:
    """The texts the pipeline hands the model for ``files`` files chosen evenly across
    ``source`` (all with None)."""
    found, _skipped = scan(source)
    if files is not None and files < len(found):
        found = found[:: max(1, len(found) // files)][:files]
    texts: list[str] = []
    for f in found:
        doc = read_document(f, DEFAULT_MAX_BYTES)
        if isinstance(doc, Skipped) or not doc.text:
            continue
        title = document_title(doc.text, doc.path)
        texts.extend(
            embedding_text(s, title) for s in chunk_text(doc.text, doc.path, count, budget)
        )
    return texts


class Session:
    """One ONNX graph, run as OnnxEmbedder runs it (tokenizer, mean pooling, L2 norm)."""

    def __init__(self, path: Path, tokenizer: Any, threads: int, fused: bool = False) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        if fused:
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.names = {i.name for i in self.session.get_inputs()}
        self.tokenizer = tokenizer
        self.tokens_run = 0

    def encode(self, texts: Sequence[str], batch: int, window: int) -> np.ndarray:
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for w in range(0, len(texts), window):
            part = range(w, min(w + window, len(texts)))
            order = sorted(part, key=lambda i: -len(texts[i]))
            for s in range(0, len(order), batch):
                idx = order[s : s + batch]
                encs = self.tokenizer.encode_batch([texts[i] for i in idx])
                ids = np.array([e.ids for e in encs], dtype=np.int64)
                mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
                feeds = {"input_ids": ids, "attention_mask": mask}
                if "token_type_ids" in self.names:
                    feeds["token_type_ids"] = np.zeros_like(ids)
                self.tokens_run += ids.size
                hidden = self.session.run(None, feeds)[0]
                weights = mask[..., None].astype(np.float32)
                pooled = (hidden * weights).sum(1) / np.clip(weights.sum(1), 1e-9, None)
                out[idx] = pooled / np.clip(
                    np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None
                )
        return out


def fused_graph(fp32: Path) -> Path:
    """``fp32`` after ONNX Runtime's transformer optimizer (made once, beside it)."""
    dest = fp32.with_name(fp32.stem + ".fused.onnx")
    if not dest.exists():
        from onnxruntime.transformers.optimizer import optimize_model

        model = optimize_model(
            str(fp32), model_type="bert", num_heads=12, hidden_size=384, opt_level=1
        )
        model.save_model_to_file(str(dest))
    return dest


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("corpus", type=Path)
    p.add_argument("--files", type=int, default=300, help="Files chosen evenly [300].")
    p.add_argument("--texts", type=int, default=512, help="Chunk texts measured [512].")
    p.add_argument("--rounds", type=int, default=3, help="Rounds, variants in turn [3].")
    p.add_argument("--threads", type=int, default=2, help="Threads of the wall-clock runs [2].")
    p.add_argument(
        "--batches", type=int, nargs="*", default=[1, 2, 4, 8, 16], help="Batch sizes [1 2 4 8 16]."
    )
    p.add_argument("--duplicates", action="store_true", help="Count repeated texts of the corpus.")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    fp32 = load_embedder(PACKAGED_MODEL)
    int8 = load_embedder(f"{PACKAGED_MODEL}@onnx-int8")
    fp32.load()  # type: ignore[attr-defined]
    int8.load()  # type: ignore[attr-defined]
    tokenizer = fp32._tokenizer  # type: ignore[attr-defined]  # what the model sees
    started = time.perf_counter()
    texts = corpus_texts(args.corpus, args.files, fp32.count_tokens, fp32.max_tokens)
    prep = time.perf_counter() - started
    sample = texts[:: max(1, len(texts) // args.texts)][: args.texts]
    counter = fp32._counter  # type: ignore[attr-defined]  # word pieces, no padding or cut
    window = fp32._max_seq  # type: ignore[attr-defined]
    lengths = [min(len(e.ids) + 2, window) for e in counter.encode_batch(sample)]
    paths = {
        "fp32": fp32.export_path(),  # type: ignore[attr-defined]
        "int8": int8.export_path(),  # type: ignore[attr-defined]
    }
    paths["fused"] = fused_graph(paths["fp32"])
    variants: dict[str, tuple[str, int, int, bool]] = {  # graph, batch, window, fused
        "today": ("fp32", 32, WINDOW, False),
        **{f"batch {b}": ("fp32", b, WINDOW, False) for b in args.batches},
        "sorted": ("fp32", 32, len(sample), False),
        "fused": ("fused", 32, len(sample), True),
        "int8": ("int8", 32, WINDOW, False),
        **{f"int8 batch {b}": ("int8", b, WINDOW, False) for b in args.batches},
    }
    results: dict[str, Any] = {}
    reference: np.ndarray | None = None
    for threads, label in ((1, "cpu"), (args.threads, "wall")):
        sessions = {
            name: Session(paths[g], tokenizer, threads, fused)
            for name, (g, _b, _w, fused) in variants.items()
        }
        runs: dict[str, list[float]] = {name: [] for name in variants}
        for r in range(args.rounds):
            names = list(variants)
            names = names[r % len(names) :] + names[: r % len(names)]
            for name in names:
                _g, batch, window, _f = variants[name]
                s = sessions[name]
                s.tokens_run = 0
                clock = time.process_time if label == "cpu" else time.perf_counter
                t = clock()
                vectors = s.encode(sample, batch, window)
                runs[name].append(clock() - t)
                if name == "today" and reference is None:
                    reference = vectors
                entry = results.setdefault(name, {"graph": variants[name][0], "batch": batch})
                if label == "cpu" and r == 0:
                    assert reference is not None
                    cos = (vectors * reference).sum(1)
                    entry["cosine_mean"] = round(float(cos.mean()), 5)
                    entry["cosine_min"] = round(float(cos.min()), 5)
                    entry["padding"] = round(s.tokens_run / sum(lengths), 3)
        for name, seconds in runs.items():
            best = statistics.median(seconds)
            if label == "cpu":
                results[name]["cpu_ms_per_chunk"] = round(1000 * best / len(sample), 2)
            else:
                results[name][f"chunks_per_s_{args.threads}_threads"] = round(len(sample) / best, 1)
    base = results["today"]["cpu_ms_per_chunk"]
    for entry in results.values():
        entry["speed_vs_today"] = round(base / entry["cpu_ms_per_chunk"], 2)
    report: dict[str, Any] = {
        "corpus": str(args.corpus),
        "texts": len(sample),
        "tokens_mean": round(statistics.mean(lengths), 1),
        "tokens_quartiles": statistics.quantiles(lengths, n=4),
        "prepare_seconds": round(prep, 1),
        "load": os.getloadavg(),
        "variants": results,
    }
    if args.duplicates:
        everything = corpus_texts(args.corpus, None, fp32.count_tokens, fp32.max_tokens)
        counts = Counter(everything)
        report["duplicates"] = {
            "chunks": len(everything),
            "distinct": len(counts),
            "repeated_share": round(1 - len(counts) / max(1, len(everything)), 4),
            "most_repeated": [[t[:80], n] for t, n in counts.most_common(5)],
        }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
