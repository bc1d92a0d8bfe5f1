#!/usr/bin/env python3
"""Search quality while a collection embeds (issue 45.5): hit@1, hit@3 and nDCG@10 against the
share of chunks that have their dense vector, for keyword search, the hybrid fusion of before
issue 45 (the fused score alone: a chunk without a vector gets only its keyword half), the
hybrid of BENCHMARKS.md section 30 (:class:`Section30`: unembedded keyword candidates at twice
their keyword score, embedded ones weighed by the folder's embedded share), today's ranking as
section 42's code ran it (:class:`Section42`: every candidate's record read) and today's
(:meth:`semfs.ingest.search.Searcher._partly_embedded`), with the query time each hybrid takes
and how many questions today's hybrid answers exactly as section 42's did.

For each question set (``shared/datasets/doc-questions/NAME.tsv`` beside ``shared/corpora/NAME``,
or ``--corpus NAME=DIR`` with ``--questions TSV``: the large mixed collection of
``scripts/bigcorpus.py`` and ``scripts/agentbench/bigcorpus.tsv``) the corpus is ingested once,
keywords only (the real model's tokenizer chunks it, as a first pass does), into a store kept
under ``--work`` (``NAME/keywords``; each run works on a copy of it, so the next run, in another
order, does not ingest again: remove it when the corpus changes). Every chunk's real dense
vector comes from a store of the same corpus that has them (``--vectors-from ROOT``:
``ROOT/NAME/store``, as ``scripts/answers.py --work ROOT`` and ``scripts/bigcorpus.py --out
ROOT/NAME`` keep them; looked up by the hash of each chunk's model text, window by window),
else from a full ingest made here and kept in ``--work`` (``NAME/embedded``; slow: the model
embeds every chunk), outside git. The chunks then get their vectors in an order (``--order``:
``random``, seeded; ``folder``, a folder at a time in a seeded order, as the issue's case where
one product's folder was embedded first; ``store``, the dense pass's own order, store order),
share after share (0, 1, 5, 25, 50, 100 %: each share adds to the last), and every question is
asked in process (``Searcher``, ``k`` 10) at each share, by each scheme, the hybrids one
after the other per question, their order turning question by question. At 100 % the meta says
every chunk is embedded, as after a dense pass. A share whose chunks the source store has no
vectors for yet (a dense pass still running there) is waited for (``--wait`` seconds in all),
else left out and said so: with ``--order store`` the shares measured are those the pass has
reached, as a user meets them.

Relevance is the question's expected page or one of its alternates; nDCG@10 counts the first
relevant document (binary, one per question): 1 / log2(1 + rank). A question file with a
``split`` column (held-out, tuned) gets each split's figures too. Latency: the p50 of each
hybrid's search (query embedding included).

Example:
    .venv/bin/python scripts/answers.py --work /var/tmp/answers --via searcher
    nice -n 10 .venv/bin/python scripts/bench_share.py --vectors-from /var/tmp/answers \\
        --work /var/tmp/share --markdown share.md --json share.json
    nice -n 10 .venv/bin/python scripts/bench_share.py --corpus big=/var/tmp/big/collection \
        --questions scripts/agentbench/bigcorpus.tsv --vectors-from /var/tmp --order store \
        --work /var/tmp/share
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
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
from semfs.ingest.request import SearchRequest, normalize_under  # noqa: E402
from semfs.ingest.search import Searcher, meaning_weight  # noqa: E402
from semfs.ingest.store import FUSION_CANDIDATES, SparseQuery, Store  # noqa: E402
from semfs.ingest.store.address import CollectionAddress  # noqa: E402
from semfs.ingest.store.backends import open_store  # noqa: E402
from semfs.ingest.store.schema import ChunkRecord, DenseVector, ScoredChunk  # noqa: E402

SETS = ("fastapi-docs", "mem0-docs", "mintlify-docs")
SHARES = (0, 1, 5, 25, 50, 100)
ORDERS = ("random", "folder", "store")
SCHEMES = ("keyword", "hybrid before", "hybrid sec30", "hybrid sec42", "hybrid now")
HYBRIDS = SCHEMES[1:]
K = 10


class Section30(Searcher):
    """The hybrid of BENCHMARKS.md section 30 (issue 45's first scheme, kept here to compare):
    the fused query, then one more keyword query; a keyword candidate without a vector scores
    twice its keyword score, an embedded chunk's fused score counts in proportion to the
    embedded share of the folder searched (two counts in the engine, kept 2 s), the rest of
    its score that doubled keyword score."""

    def _partly_embedded(
        self, dense: list[float], sparse: SparseQuery, limit: int, under: str | None
    ) -> tuple[list[ScoredChunk], float] | None:
        meta = self.store.read_meta()
        if meta is None or not meta.dense_pending:
            return None
        fused = self.store.query(dense, sparse, "hybrid", limit=limit, under=under)
        embedded, total = self._embedding_counts(normalize_under(under))
        share = embedded / total if total else 1.0
        keyword = self.store.query(dense, sparse, "keyword", limit=limit, under=under)

        def key(sc: ScoredChunk) -> tuple[str, int, int]:
            return sc.record.path, sc.record.gen, sc.record.index

        doubled = {key(sc): 2 * sc.score for sc in keyword}
        rescored = {
            key(sc): replace(sc, score=(1 - share) * doubled.get(key(sc), 0.0) + share * sc.score)
            for sc in fused
        }
        for sc in keyword:
            if sc.similarity is None:
                rescored[key(sc)] = replace(sc, score=doubled[key(sc)])
        return sorted(rescored.values(), key=lambda sc: -sc.score)[:limit], 1.0


class Section42(Searcher):
    """Today's ranking as BENCHMARKS.md section 42 ran it, kept here to compare its time: each
    retriever's 200 candidates come back with their records (payloads), where today's reads
    ids and scores, then the records of the 50 kept (section 47). Its hits must be today's."""

    def _partly_embedded(
        self, dense: list[float], sparse: SparseQuery, limit: int, under: str | None
    ) -> tuple[list[ScoredChunk], float] | None:
        meta = self.store.read_meta()
        if meta is None or not meta.dense_pending:
            return None
        candidates = FUSION_CANDIDATES
        keyword = self.store.query(dense, sparse, "keyword", limit=candidates, under=under)
        embedded = [sc for sc in keyword if sc.similarity is not None]
        if not embedded:
            return keyword[:limit], 0.0
        meaning = self.store.query(
            dense, SparseQuery([], []), "semantic", candidates, under, similarities=False
        )

        def key(sc: ScoredChunk) -> tuple[str, int, int]:
            return sc.record.path, sc.record.gen, sc.record.index

        halves = {key(sc): sc.score for sc in meaning}
        w = meaning_weight(len(embedded) / len(keyword))
        mean = sum(halves.get(key(sc), 0.0) for sc in embedded) / len(embedded)
        scored: dict[tuple[str, int, int], tuple[float, ScoredChunk]] = {}
        for sc in keyword:
            if sc.similarity is None:
                guess = (1 - w) * sc.score + w * mean
            else:
                guess = halves.get(key(sc), 0.0)
            scored[key(sc)] = (sc.score + w * guess, sc)
        for sc in meaning:
            scored.setdefault(key(sc), (w * sc.score, sc))
        ranked = sorted(scored.values(), key=lambda t: (-t[0], t[1].record.path, t[1].record.index))
        return [replace(sc, score=score) for score, sc in ranked[:limit]], w


def all_chunks(store: Store) -> list[ChunkRecord]:
    """Every chunk of a store written keywords only (none has a vector yet)."""
    out: list[ChunkRecord] = []
    after: str | None = None
    while True:
        page, after = store.chunks_without_dense(1000, after)
        out.extend(page)
        if after is None or not page:
            return out


def vector_source(corpus: Path, work: Path, source: Path | None, model: str) -> Path:
    """A store of ``corpus`` that has its dense vectors: ``source``, else a full ingest made in
    ``work`` once (the model embeds every chunk: slow) and kept there."""
    if source is not None and (source / "docs").exists():
        return source
    made = work / "embedded"
    if not (made / "docs").exists():
        with open_store(CollectionAddress(store=made)) as store:
            ingest(corpus, store, model=model)
    return made


def with_vectors(
    source: Store, chunks: Sequence[ChunkRecord]
) -> Iterator[tuple[ChunkRecord, list[float] | None]]:
    """Each chunk with its dense vector from ``source`` (by its model text's hash), None
    when ``source`` has none yet; read 256 at a time (100k vectors in memory at once would
    take gigabytes as Python floats)."""
    for i in range(0, len(chunks), 256):
        part = chunks[i : i + 256]
        found = source.dense_by_hash(sorted({c.vhash for c in part}))
        yield from ((c, found.get(c.vhash)) for c in part)


def order(
    chunks: list[ChunkRecord], seed: int, how: str, first: str | None = None
) -> list[ChunkRecord]:
    """The order in which the chunks get their vectors (``how``: one of :data:`ORDERS`;
    ``chunks`` come in store order, the dense pass's; ``first``: that folder's chunks before
    the rest, as the dense pass gives them after searches scoped there)."""
    if first is not None:
        inside = [c for c in chunks if c.path.startswith(first + "/")]
        rest = [c for c in chunks if not c.path.startswith(first + "/")]
        return order(inside, seed, "random" if how == "folder" else how) + order(rest, seed, how)
    if how == "store":
        return list(chunks)
    rng = random.Random(seed)
    out = sorted(chunks, key=lambda c: (c.path, c.index))
    if how == "random":
        rng.shuffle(out)
        return out
    folders = sorted({c.path.partition("/")[0] if "/" in c.path else "" for c in out})
    rng.shuffle(folders)
    rank = {f: i for i, f in enumerate(folders)}
    return sorted(out, key=lambda c: rank[c.path.partition("/")[0] if "/" in c.path else ""])


def first_relevant(paths: Sequence[str], question: Question) -> int | None:
    """The rank of the first hit that is a relevant document, or its text view (a PDF, Word,
    PowerPoint or HTML page's hit is named PATH.md, as the mount shows it)."""
    targets = question.targets
    return next(
        (i for i, p in enumerate(paths, 1) if p in targets or p.removesuffix(".md") in targets),
        None,
    )


def figures(ranks: Sequence[int | None]) -> dict[str, float]:
    n = len(ranks)
    return {
        "hit@1": sum(1 for r in ranks if r == 1) / n,
        "hit@3": sum(1 for r in ranks if r is not None and r <= 3) / n,
        "ndcg@10": sum(1 / math.log2(1 + r) for r in ranks if r is not None and r <= K) / n,
    }


def splits(path: Path) -> list[str] | None:
    """Each question's ``split`` (held-out, tuned), when the file has that column."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    header = lines[0].split("\t")
    if "split" not in header:
        return None
    return [line.split("\t")[header.index("split")] for line in lines[1:]]


def ask(
    searchers: dict[str, Searcher], questions: Sequence[Question], under: str | None = None
) -> tuple[dict[str, list[int | None]], dict[str, list[float]], int]:
    """Each question by each scheme (``searchers``: one a hybrid scheme): the rank of the
    first relevant document, each hybrid's seconds, and how many questions today's hybrid
    answers exactly as section 42's code did (every hit's fields)."""
    ranks: dict[str, list[int | None]] = {s: [] for s in SCHEMES}
    seconds: dict[str, list[float]] = {s: [] for s in HYBRIDS}
    same = 0  # questions whose hits (paths, scores, strengths, lines) today equal section 42's
    for n, q in enumerate(questions):
        hits = searchers["hybrid now"].search(
            SearchRequest(q.text, k=K, mode="keyword", under=under)
        )
        ranks["keyword"].append(first_relevant([h.path for h in hits], q))
        listed: dict[str, list[dict[str, Any]]] = {}
        turn = n % len(HYBRIDS)  # each scheme first in turn: none always meets a warm cache
        for scheme in HYBRIDS[turn:] + HYBRIDS[:turn]:
            started = time.perf_counter()
            hits = searchers[scheme].search(SearchRequest(q.text, k=K, mode="hybrid", under=under))
            seconds[scheme].append(time.perf_counter() - started)
            ranks[scheme].append(first_relevant([h.path for h in hits], q))
            listed[scheme] = [h.to_json() for h in hits]
        same += listed["hybrid now"] == listed["hybrid sec42"]
    return ranks, seconds, same


def keyword_store(corpus: Path, work: Path, model: str, embedder: Any) -> Path:
    """A copy of the corpus's keywords-only store for one run; the store itself is made once
    and kept in ``work`` (``keywords``) for the next runs."""
    kept = work / "keywords"
    if not (kept / "docs").exists():
        making = work / f"keywords-{os.getpid()}"
        shutil.rmtree(making, ignore_errors=True)
        with open_store(CollectionAddress(store=making)) as store:
            ingest(corpus, store, model=model, embedder=embedder, dense=False)
        shutil.rmtree(kept, ignore_errors=True)
        making.rename(kept)
    copy = work / f"share-{os.getpid()}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(kept, copy)
    return copy


def run_set(
    name: str,
    corpus: Path,
    question_file: Path,
    work: Path,
    source: Path | None,
    shares: Sequence[int],
    seed: int,
    how: str,
    log: Callable[[str], None],
    under: str | None = None,
    first: str | None = None,
    wait: float = 0,
) -> dict[str, Any]:
    wait_until = time.monotonic() + wait
    questions = read_questions(question_file)
    split = splits(question_file)
    if under is not None:  # someone working in one folder: its questions, asked there
        keep = [i for i, q in enumerate(questions) if q.expected.startswith(under + "/")]
        questions = [questions[i] for i in keep]
        split = [split[i] for i in keep] if split else None
    work.mkdir(parents=True, exist_ok=True)
    model = canonical_model_name(DEFAULT_MODEL)
    embedder = load_embedder(model)
    store_dir = keyword_store(corpus, work, model, embedder)
    vector_store = vector_source(corpus, work, source, model)
    rows: list[dict[str, Any]] = []
    with (
        open_store(CollectionAddress(store=store_dir)) as store,
        open_store(CollectionAddress(store=vector_store)) as vectors,
    ):
        chunks = all_chunks(store)
        todo = order(chunks, seed, how, first)
        searchers = {
            "hybrid before": Searcher(store, embedder=embedder),
            "hybrid sec30": Section30(store, embedder=embedder),
            "hybrid sec42": Section42(store, embedder=embedder),
            "hybrid now": Searcher(store, embedder=embedder),
        }
        searchers["hybrid before"].partial_fusion = False
        searchers["hybrid now"].warm_up()
        done = 0
        for share in shares:
            upto = round(len(todo) * share / 100)
            batch = list(with_vectors(vectors, todo[done:upto]))
            missing = next((i for i, (_c, v) in enumerate(batch) if v is None), None)
            while missing is not None and time.monotonic() < wait_until:  # a pass under way
                time.sleep(30)
                batch = list(with_vectors(vectors, todo[done:upto]))
                missing = next((i for i, (_c, v) in enumerate(batch) if v is None), None)
            if missing is not None:
                log(
                    f"{name} {share:>3} %: {vector_store} has vectors for the first "
                    f"{done + missing} of {len(todo)} chunks in this order only; "
                    "this share and the next are left out"
                )
                break
            for i in range(0, len(batch), 256):
                store.set_dense(
                    [DenseVector(c.path, c.gen, c.index, v) for c, v in batch[i : i + 256] if v]
                )
            done = max(done, upto)
            if share == 100:
                mark_embedded(store)  # as a finished dense pass leaves it
            load = os.getloadavg()[0]
            ranks, seconds, same = ask(searchers, questions, under)
            row: dict[str, Any] = {"share": share, "load": load, "same as sec42": same}
            row["embedded"] = store.embedding_counts()
            for scheme in SCHEMES:
                row[scheme] = figures(ranks[scheme])
            for scheme, xs in seconds.items():
                row[scheme]["p50_ms"] = round(1000 * statistics.median(xs), 1)
            if split:
                row["splits"] = {
                    part: {
                        s: figures([r for r, p in zip(ranks[s], split, strict=True) if p == part])
                        for s in SCHEMES
                    }
                    for part in sorted(set(split))
                }
            rows.append(row)
            log(
                f"{name} {share:>3} %: "
                + "  ".join(
                    f"{s} {row[s]['hit@1']:.2f}/{row[s]['hit@3']:.2f}/{row[s]['ndcg@10']:.3f}"
                    for s in SCHEMES
                )
                + "  p50 ms "
                + " / ".join(str(row[s]["p50_ms"]) for s in HYBRIDS)
                + f"  same as sec42 {same}/{len(questions)}  (load {load:.1f})"
            )
    shutil.rmtree(store_dir, ignore_errors=True)
    return {"set": name, "chunks": len(chunks), "questions": len(questions), "rows": rows}


def markdown(results: Sequence[dict[str, Any]], how: str) -> str:
    order_name = {
        "random": "seeded random chunks",
        "folder": "a folder at a time",
        "store": "the dense pass's order",
    }[how]
    lines = [
        f"Embedded share ({order_name}) | set | keyword hit@1 / hit@3 / nDCG@10 | hybrid before"
        " | hybrid sec. 30 | hybrid sec. 42 | hybrid now"
        " | hybrid p50 ms before / sec. 30 / sec. 42 / now | same as sec. 42 | load",
        "---|---|---|---|---|---|---|---|---|---",
    ]
    for res in results:
        for row in res["rows"]:
            groups = [(res["set"], row)]
            groups += [(f"{res['set']} ({k})", v) for k, v in row.get("splits", {}).items()]
            for label, figs in groups:
                cells = [
                    f"{figs[s]['hit@1']:.2f} / {figs[s]['hit@3']:.2f} / {figs[s]['ndcg@10']:.3f}"
                    for s in SCHEMES
                ]
                lines.append(
                    f"{row['share']} % | {label} | "
                    + " | ".join(cells)
                    + " | "
                    + " / ".join(str(row[s]["p50_ms"]) for s in HYBRIDS)
                    + f" | {row['same as sec42']}"
                    + f" | {row['load']:.1f}"
                )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--set", action="append", dest="sets", help=f"Question set [{', '.join(SETS)}].")
    p.add_argument("--corpus", metavar="NAME=DIR", help="A corpus of its own (with --questions).")
    p.add_argument("--questions", type=Path, help="--corpus's questions (answers.py's TSV).")
    p.add_argument("--work", type=Path, required=True, help="Keyword and embedded stores.")
    p.add_argument("--data", type=Path, default=SHARED, help="Holds corpora/ and datasets/.")
    p.add_argument("--vectors-from", type=Path, help="ROOT of stores that have the vectors.")
    p.add_argument("--shares", default=",".join(map(str, SHARES)), help="Percent, ascending.")
    p.add_argument("--seed", type=int, default=45)
    p.add_argument("--order", choices=ORDERS, default="random", help="Which chunks come first.")
    p.add_argument("--by-folder", action="store_true", help="Embed a folder at a time.")
    p.add_argument("--under", help="Only the questions of this folder, asked scoped to it.")
    p.add_argument("--first", help="Embed this folder's chunks first (issue 45.2's order).")
    p.add_argument(
        "--wait",
        type=float,
        default=0,
        help="Seconds to wait, in all, for vectors the source store is still embedding.",
    )
    p.add_argument("--markdown", type=Path)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    if bool(args.corpus) != bool(args.questions) or (args.corpus and "=" not in args.corpus):
        p.error("--corpus NAME=DIR goes with --questions TSV")
    how = "folder" if args.by_folder else args.order
    shares = sorted(int(s) for s in args.shares.split(","))
    corpora = [
        (
            name,
            args.data / "corpora" / name,
            args.data / "datasets" / "doc-questions" / f"{name}.tsv",
        )
        for name in args.sets or ([] if args.corpus else SETS)
    ]
    if args.corpus:
        name, _, folder = args.corpus.partition("=")
        corpora.append((name, Path(folder), args.questions))
    results = []
    for name, corpus, question_file in corpora:
        source = args.vectors_from / name / "store" if args.vectors_from else None
        results.append(
            run_set(
                name,
                corpus,
                question_file,
                args.work / name,
                source,
                shares,
                args.seed,
                how,
                lambda line: print(line, flush=True),
                args.under,
                args.first,
                args.wait,
            )
        )
    table = markdown(results, how)
    print(table)
    if args.markdown:
        args.markdown.write_text(table)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
