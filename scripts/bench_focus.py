#!/usr/bin/env python3
"""Meaning where it is used first (issue 45.2): how long after a reader touches a document or
searches a folder its chunks have their dense vectors, with the readers' note
(:mod:`semfs.ingest.focus`) and without it, in the same run.

The corpus (``--corpus``, repeatable: each becomes a top folder of one collection) is ingested
once, keywords only, into a store under ``--work``. Each arm copies that store and runs the
dense pass (:func:`semfs.ingest.densepass.embed_missing`) on it from the start. Once
``--at`` percent of the chunks have their vector, a reader touches ``--docs`` documents and
one folder (seeded picks among those with no vector yet; the folder the one closest to
``--folder-share`` percent of the chunks): a keyword search scoped to the folder (a real
:class:`~semfs.ingest.search.Searcher`, which notes the folder and its hits) and a read of each
document (noted as :class:`~semfs.ingest.collection.Collection.read` notes it). The arm
``hints`` lets the pass read the note; ``none`` is the pass as before issue 45.2 (the note is
written, the pass does not look). Both arms touch the same things at the same share.

Reported per arm: the seconds from the touch until each document's chunks all have vectors
(median and max), until the folder's do, until the searched hits' do, and the whole pass's
seconds. The arms run in turn, ``--rounds`` times, alternating which goes first.

Example:
    nice -n 10 .venv/bin/python scripts/bench_focus.py -m hash --work /var/tmp/focus \\
        --corpus ../shared/corpora/mintlify-docs --corpus ../shared/corpora/mem0-docs \\
        --corpus ../shared/corpora/fastapi-docs --json focus.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_share import all_chunks

from semfs.ingest import densepass
from semfs.ingest.densepass import embed_missing
from semfs.ingest.embedding.embedder import DEFAULT_MODEL, canonical_model_name, load_embedder
from semfs.ingest.focus import Focus, uses_of
from semfs.ingest.pipeline import ingest
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Searcher
from semfs.ingest.store import DelegatingStore, Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.schema import ChunkRecord, DenseVector

ARMS = ("hints", "none")


class _Watched(DelegatingStore):
    """The store, timing when each watched document's chunks all have vectors, and touching
    what a reader touches once ``at`` chunks have them."""

    def __init__(self, inner: Store, at: int, touch: Any, chunks_of: dict[str, int]) -> None:
        super().__init__(inner)
        self.at, self.touch = at, touch
        self.left = dict(chunks_of)  # watched document -> chunks still without a vector
        self.done: dict[str, float] = {}
        self.vectors = 0
        self.touched: float | None = None

    def set_dense(self, vectors: Sequence[DenseVector]) -> int:
        n = super().set_dense(vectors)
        now = time.perf_counter()
        self.vectors += len(vectors)
        for path, count in Counter(v.path for v in vectors).items():
            if path in self.left:
                self.left[path] -= count
                if self.left[path] <= 0 and path not in self.done:
                    self.done[path] = now
        if self.touched is None and self.vectors >= self.at:
            self.touched = time.perf_counter()
            self.touch(self)
        return n


def run_arm(
    arm: str,
    base: Path,
    work: Path,
    embedder: Any,
    picks: dict[str, Any],
    at: int,
    batch_size: int,
) -> dict[str, Any]:
    store_dir = work / f"arm-{arm}"
    shutil.rmtree(store_dir, ignore_errors=True)
    shutil.copytree(base, store_dir, symlinks=True)
    docs, folder = picks["docs"], picks["folder"]
    watched = {**picks["chunks"]}
    found: list[str] = []

    def touch(store: Store) -> None:
        hits = Searcher(store).search(
            SearchRequest(picks["query"], k=10, mode="keyword", under=folder)
        )
        found.extend(h.path for h in hits)
        uses_of(store).documents(docs)  # as Collection.read and a mount's open note a read
        uses_of(store).flush()

    original = densepass.Focus
    if arm == "none":
        setattr(densepass, "Focus", _NoFocus)  # noqa: B010 - the pass as before 45.2
    try:
        with open_store(CollectionAddress(store=store_dir)) as inner:
            store = _Watched(inner, at, touch, watched)
            started = time.perf_counter()
            embed_missing(store, embedder, batch_size=batch_size)
            total = time.perf_counter() - started
    finally:
        setattr(densepass, "Focus", original)  # noqa: B010
    assert store.touched is not None
    since = {p: t - store.touched for p, t in store.done.items()}
    in_folder = [since[p] for p in since if p.startswith(folder + "/")]
    doc_s = [since[p] for p in docs]
    hit_s = [since[p] for p in found if p in since]
    shutil.rmtree(store_dir, ignore_errors=True)
    return {
        "arm": arm,
        "pass_s": round(total, 2),
        "touched_at_s": round(store.touched - started, 2),
        "docs_median_s": round(statistics.median(doc_s), 2),
        "docs_max_s": round(max(doc_s), 2),
        "hits_max_s": round(max(hit_s), 2) if hit_s else None,
        "folder_s": round(max(in_folder), 2),
        "load": os.getloadavg()[0],
    }


class _NoFocus(Focus):
    def next_chunks(self, limit: int) -> list[ChunkRecord]:
        return []


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--corpus", type=Path, action="append", required=True)
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("-m", "--model", default=DEFAULT_MODEL, help="hash: the stand-in.")
    p.add_argument("--at", type=float, default=5.0, help="Percent embedded when touched.")
    p.add_argument("--docs", type=int, default=5, help="Documents read.")
    p.add_argument("--folder-share", type=float, default=3.0, help="Percent of chunks.")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=45)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    model = canonical_model_name(args.model)
    embedder = load_embedder(model)
    args.work.mkdir(parents=True, exist_ok=True)
    src, base = args.work / "src", args.work / "base"
    if not base.exists():
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir()
        for corpus in args.corpus:
            shutil.copytree(corpus, src / corpus.name)
        with open_store(CollectionAddress(store=base)) as store:
            ingest(src, store, model=model, embedder=embedder, dense=False)
    with open_store(CollectionAddress(store=base)) as store:
        chunks = all_chunks(store)
    rng = random.Random(args.seed)
    per_doc = Counter(c.path for c in chunks)
    # Folders two deep (a product's section); the one nearest the share asked for.
    per_folder = Counter("/".join(c.path.split("/")[:2]) for c in chunks if c.path.count("/") > 1)
    want = len(chunks) * args.folder_share / 100
    folder = min(sorted(per_folder), key=lambda f: abs(per_folder[f] - want))
    # Documents of a few chunks (2-50: a page, not a changelog), outside the folder.
    outside = sorted(d for d in per_doc if not d.startswith(folder + "/") and 1 < per_doc[d] <= 50)
    docs = rng.sample(outside, args.docs)
    word = next(c.heading or c.title for c in chunks if c.path.startswith(folder + "/"))
    picks = {
        "docs": docs,
        "folder": folder,
        "query": word or folder.rsplit("/", 1)[-1],
        "chunks": dict(per_doc),
    }
    at = round(len(chunks) * args.at / 100)
    print(
        f"{len(chunks)} chunks, {len(per_doc)} documents; folder {folder} "
        f"({per_folder[folder]} chunks); documents {docs} ({[per_doc[d] for d in docs]} chunks); "
        f"touched at {at} chunks embedded ({args.at:g} %); model {model}",
        flush=True,
    )
    rows = []
    for r in range(args.rounds):
        for arm in ARMS if r % 2 == 0 else ARMS[::-1]:
            row = run_arm(arm, base, args.work, embedder, picks, at, args.batch_size)
            row["round"] = r
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary = {
        "chunks": len(chunks),
        "documents": len(per_doc),
        "folder": folder,
        "folder_chunks": per_folder[folder],
        "docs": docs,
        "docs_chunks": [per_doc[d] for d in docs],
        "at_percent": args.at,
        "model": model,
        "rows": rows,
    }
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
