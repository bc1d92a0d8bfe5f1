#!/usr/bin/env python3
"""Search quality while a collection embeds (issue 45.5): hit@1, hit@3 and nDCG@10 against the
share of chunks that have their dense vector, for keyword search, the hybrid fusion of before
issue 45 (the fused score alone: a chunk without a vector gets only its keyword half) and
today's hybrid (:meth:`semfs.ingest.search.Searcher._keywords_where_unembedded`), with the
query time each hybrid takes.

For each question set (``shared/datasets/doc-questions/NAME.tsv`` beside ``shared/corpora/NAME``)
the corpus is ingested once, keywords only (the real model's tokenizer chunks it, as a first
pass does), into a store under ``--work``. Every chunk's real dense vector comes from a store of
the same corpus that has them (``--vectors-from ROOT``: ``ROOT/NAME/store``, as
``scripts/answers.py --work ROOT`` keeps them; looked up by the hash of each chunk's model
text), else from a full ingest made here (slow: the model embeds every chunk); they are kept in
``--work`` (``NAME/vectors.json``), outside git. The chunks then get their vectors in a seeded
random order (``--by-folder``: a folder at a time, in a seeded order, as the issue's case where
one product's folder was embedded first), share after share (0, 1, 5, 25, 50, 100 %: each share
adds to the last), and every question is asked in process (``Searcher``, ``k`` 10) at each
share, by each scheme. At 100 % the meta says every chunk is embedded, as after a dense pass.

Relevance is the question's expected page or one of its alternates; nDCG@10 counts the first
relevant document (binary, one per question): 1 / log2(1 + rank). Latency: the p50 of each
hybrid's search (query embedding included), the two asked one after the other per question.

Example:
    .venv/bin/python scripts/answers.py --work /var/tmp/answers --via searcher
    nice -n 10 .venv/bin/python scripts/bench_share.py --vectors-from /var/tmp/answers \\
        --work /var/tmp/share --markdown share.md --json share.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from answers import SHARED, Question, read_questions  # noqa: E402

from semfs.ingest.densepass import mark_embedded  # noqa: E402
from semfs.ingest.embedding.embedder import (  # noqa: E402
    DEFAULT_MODEL,
    canonical_model_name,
    load_embedder,
)
from semfs.ingest.pipeline import ingest  # noqa: E402
from semfs.ingest.request import SearchRequest  # noqa: E402
from semfs.ingest.search import Searcher  # noqa: E402
from semfs.ingest.store import Store  # noqa: E402
from semfs.ingest.store.address import CollectionAddress  # noqa: E402
from semfs.ingest.store.backends import open_store  # noqa: E402
from semfs.ingest.store.schema import ChunkRecord, DenseVector  # noqa: E402

SETS = ("fastapi-docs", "mem0-docs", "mintlify-docs")
SHARES = (0, 1, 5, 25, 50, 100)
SCHEMES = ("keyword", "hybrid before", "hybrid now")
K = 10


def all_chunks(store: Store) -> list[ChunkRecord]:
    """Every chunk of a store written keywords only (none has a vector yet)."""
    out: list[ChunkRecord] = []
    after: str | None = None
    while True:
        page, after = store.chunks_without_dense(1000, after)
        out.extend(page)
        if after is None or not page:
            return out


def vectors_for(
    chunks: Sequence[ChunkRecord], corpus: Path, work: Path, source: Path | None, model: str
) -> dict[str, list[float]]:
    """Each chunk's dense vector by its model text's hash: cached in ``work``, else read from
    ``source`` (a store of the same corpus that has them), else from a full ingest here."""
    cache = work / "vectors.json"
    hashes = sorted({c.vhash for c in chunks})
    if cache.is_file():
        known: dict[str, list[float]] = json.loads(cache.read_text())
        if all(h in known for h in hashes):
            return known
    if source is None or not (source / "docs").exists():
        source = work / "embedded"
        with open_store(CollectionAddress(store=source)) as store:
            ingest(corpus, store, model=model)  # the model embeds every chunk: slow
    found: dict[str, list[float]] = {}
    with open_store(CollectionAddress(store=source)) as store:
        for i in range(0, len(hashes), 256):
            found.update(store.dense_by_hash(hashes[i : i + 256]))
    missing = [h for h in hashes if h not in found]
    if missing:
        raise SystemExit(f"{source}: {len(missing)} of {len(hashes)} chunk texts have no vector")
    cache.write_text(json.dumps(found))
    return found


def order(
    chunks: list[ChunkRecord], seed: int, by_folder: bool, first: str | None = None
) -> list[ChunkRecord]:
    """The order in which the chunks get their vectors (``first``: that folder's chunks
    before the rest, as the dense pass gives them after searches scoped there)."""
    rng = random.Random(seed)
    out = sorted(chunks, key=lambda c: (c.path, c.index))
    if first is not None:
        rest = order([c for c in out if not c.path.startswith(first + "/")], seed, by_folder)
        return order([c for c in out if c.path.startswith(first + "/")], seed, False) + rest
    if not by_folder:
        rng.shuffle(out)
        return out
    folders = sorted({c.path.partition("/")[0] if "/" in c.path else "" for c in out})
    rng.shuffle(folders)
    rank = {f: i for i, f in enumerate(folders)}
    return sorted(out, key=lambda c: rank[c.path.partition("/")[0] if "/" in c.path else ""])


def first_relevant(paths: Sequence[str], question: Question) -> int | None:
    return next((i for i, p in enumerate(paths, 1) if p in question.targets), None)


def figures(ranks: Sequence[int | None]) -> dict[str, float]:
    n = len(ranks)
    return {
        "hit@1": sum(1 for r in ranks if r == 1) / n,
        "hit@3": sum(1 for r in ranks if r is not None and r <= 3) / n,
        "ndcg@10": sum(1 / math.log2(1 + r) for r in ranks if r is not None and r <= K) / n,
    }


def ask(
    searcher: Searcher, questions: Sequence[Question], under: str | None = None
) -> tuple[dict[str, list[int | None]], dict[str, list[float]]]:
    """Each question by each scheme: the rank of the first relevant document, and each
    hybrid's seconds."""
    ranks: dict[str, list[int | None]] = {s: [] for s in SCHEMES}
    seconds: dict[str, list[float]] = {s: [] for s in SCHEMES[1:]}
    for q in questions:
        hits = searcher.search(SearchRequest(q.text, k=K, mode="keyword", under=under))
        ranks["keyword"].append(first_relevant([h.path for h in hits], q))
        for scheme, partial in (("hybrid before", False), ("hybrid now", True)):
            searcher.partial_fusion = partial
            started = time.perf_counter()
            hits = searcher.search(SearchRequest(q.text, k=K, mode="hybrid", under=under))
            seconds[scheme].append(time.perf_counter() - started)
            ranks[scheme].append(first_relevant([h.path for h in hits], q))
    searcher.partial_fusion = True
    return ranks, seconds


def run_set(
    name: str,
    data: Path,
    work: Path,
    source: Path | None,
    shares: Sequence[int],
    seed: int,
    by_folder: bool,
    log: Callable[[str], None],
    under: str | None = None,
    first: str | None = None,
) -> dict[str, Any]:
    corpus = data / "corpora" / name
    questions = read_questions(data / "datasets" / "doc-questions" / f"{name}.tsv")
    if under is not None:  # someone working in one folder: its questions, asked there
        questions = [q for q in questions if q.expected.startswith(under + "/")]
    work.mkdir(parents=True, exist_ok=True)
    model = canonical_model_name(DEFAULT_MODEL)
    embedder = load_embedder(model)
    store_dir = work / f"share-{os.getpid()}"
    rows: list[dict[str, Any]] = []
    with open_store(CollectionAddress(store=store_dir)) as store:
        ingest(corpus, store, model=model, embedder=embedder, dense=False)
        chunks = all_chunks(store)
        vectors = vectors_for(chunks, corpus, work, source, model)
        todo = order(chunks, seed, by_folder, first)
        searcher = Searcher(store, embedder=embedder)
        searcher.warm_up()
        done = 0
        for share in shares:
            upto = round(len(todo) * share / 100)
            batch = todo[done:upto]
            for i in range(0, len(batch), 256):
                part = batch[i : i + 256]
                store.set_dense(
                    [DenseVector(c.path, c.gen, c.index, vectors[c.vhash]) for c in part]
                )
            done = max(done, upto)
            if share == 100:
                mark_embedded(store)  # as a finished dense pass leaves it
            load = os.getloadavg()[0]
            ranks, seconds = ask(searcher, questions, under)
            row: dict[str, Any] = {"share": share, "load": load}
            row["embedded"] = store.embedding_counts()
            for scheme in SCHEMES:
                row[scheme] = figures(ranks[scheme])
            for scheme, xs in seconds.items():
                row[scheme]["p50_ms"] = round(1000 * statistics.median(xs), 1)
            rows.append(row)
            log(
                f"{name} {share:>3} %: "
                + "  ".join(
                    f"{s} {row[s]['hit@1']:.2f}/{row[s]['hit@3']:.2f}/{row[s]['ndcg@10']:.3f}"
                    for s in SCHEMES
                )
                + f"  p50 {row['hybrid before']['p50_ms']} -> {row['hybrid now']['p50_ms']} ms"
                + f"  (load {load:.1f})"
            )
    store.close()
    return {"set": name, "chunks": len(chunks), "questions": len(questions), "rows": rows}


def markdown(results: Sequence[dict[str, Any]], by_folder: bool) -> str:
    order_name = "a folder at a time" if by_folder else "seeded random chunks"
    lines = [
        f"Embedded share ({order_name}) | set | keyword hit@1 / hit@3 / nDCG@10 | hybrid before"
        " | hybrid now | hybrid p50 ms before -> now | load",
        "---|---|---|---|---|---|---",
    ]
    for res in results:
        for row in res["rows"]:
            cells = [
                f"{row[s]['hit@1']:.2f} / {row[s]['hit@3']:.2f} / {row[s]['ndcg@10']:.3f}"
                for s in SCHEMES
            ]
            lines.append(
                f"{row['share']} % | {res['set']} | "
                + " | ".join(cells)
                + f" | {row['hybrid before']['p50_ms']} -> {row['hybrid now']['p50_ms']}"
                + f" | {row['load']:.1f}"
            )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--set", action="append", dest="sets", help=f"Question set [{', '.join(SETS)}].")
    p.add_argument("--work", type=Path, required=True, help="Stores and the vectors' cache.")
    p.add_argument("--data", type=Path, default=SHARED, help="Holds corpora/ and datasets/.")
    p.add_argument("--vectors-from", type=Path, help="ROOT of stores that have the vectors.")
    p.add_argument("--shares", default=",".join(map(str, SHARES)), help="Percent, ascending.")
    p.add_argument("--seed", type=int, default=45)
    p.add_argument("--by-folder", action="store_true", help="Embed a folder at a time.")
    p.add_argument("--under", help="Only the questions of this folder, asked scoped to it.")
    p.add_argument("--first", help="Embed this folder's chunks first (issue 45.2's order).")
    p.add_argument("--markdown", type=Path)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    shares = sorted(int(s) for s in args.shares.split(","))
    results = []
    for name in args.sets or SETS:
        source = args.vectors_from / name / "store" if args.vectors_from else None
        results.append(
            run_set(
                name,
                args.data,
                args.work / name,
                source,
                shares,
                args.seed,
                args.by_folder,
                lambda line: print(line, flush=True),
                args.under,
                args.first,
            )
        )
    table = markdown(results, args.by_folder)
    print(table)
    if args.markdown:
        args.markdown.write_text(table)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
