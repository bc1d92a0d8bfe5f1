"""Retrieval quality on the Cranfield collection, through semfs's own search code.

Every Cranfield abstract becomes one Markdown file (``# title`` then the abstract), the folder
is ingested with :func:`semfs.ingest.pipeline.ingest` and the store's default model, and each query
runs through :meth:`semfs.ingest.search.Searcher.search` (the code path of ``semfs search`` and of
the mount's ``.search`` folders) in every mode. Beside them, a plain BM25 from ``bm25s`` over
the same file texts is the baseline.

Relevance (see cranqrel.readme): codes 1-4 are relevant, 1 being "a complete answer" and 4 "of
minimum interest"; ``-1`` is "of no interest", i.e. not relevant. nDCG@10 uses the graded gain
``5 - code`` (1 -> 4 ... 4 -> 1); recall@10 counts any code 1-4 as relevant. Query ids in
cran.qry are not 1..225; the qrels number queries by their position in the file. Queries with
no relevant document are left out of the averages (none are, in the standard files).

Needs the bench extra (``pip install -e '.[bench]'``); runs offline.

Usage::

    python scripts/cranfield.py                       # full: ingest 1400 docs (a few minutes)
    python scripts/cranfield.py --limit-queries 20    # quick look
    python scripts/cranfield.py --work /tmp/cran      # keep the store: a re-run skips ingest
    python scripts/cranfield.py --json
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# The shared data sits beside the checkout (or beside the worktree folder holding it).
SHARED = next(
    (p / "shared" for p in REPO.parents if (p / "shared" / "datasets").is_dir()),
    REPO.parent / "shared",
)
DEFAULT_DATA = SHARED / "datasets" / "cranfield"
MODES = ("semantic", "keyword", "hybrid")
K = 10
_FIELD = re.compile(r"^\.([A-Z])(?:\s+(\S+))?\s*$")


@dataclass(frozen=True)
class CranDoc:
    doc_id: int
    title: str
    text: str

    @property
    def file_name(self) -> str:
        return f"{self.doc_id:04d}.md"

    def markdown(self) -> str:
        return f"# {self.title}\n\n{self.text}\n" if self.title else f"{self.text}\n"


def _records(path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """SMART format: ``.I id`` opens a record; ``.X`` lines open its fields."""
    rec_id: str | None = None
    fields: dict[str, list[str]] = {}
    current: str | None = None
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        m = _FIELD.match(raw)
        if m and m.group(1) == "I":
            if rec_id is not None:
                yield rec_id, {k: " ".join(" ".join(v).split()) for k, v in fields.items()}
            rec_id, fields, current = m.group(2) or "", {}, None
        elif m and m.group(2) is None:
            current = m.group(1)
            fields.setdefault(current, [])
        elif current is not None:
            fields[current].append(raw)
    if rec_id is not None:
        yield rec_id, {k: " ".join(" ".join(v).split()) for k, v in fields.items()}


def load_docs(data: Path) -> list[CranDoc]:
    docs = []
    for rec_id, f in _records(data / "cran.all.1400"):
        title = f.get("T", "").rstrip(" .")
        docs.append(CranDoc(int(rec_id), title, f.get("W", "")))
    return docs


def load_queries(data: Path) -> list[str]:
    """Query texts in file order: the qrels' query number is the position (1-based)."""
    return [f.get("W", "") for _id, f in _records(data / "cran.qry")]


def load_qrels(data: Path) -> dict[int, dict[int, int]]:
    """query position -> {doc id: gain}, gain ``5 - code`` for codes 1-4; -1 lines dropped."""
    qrels: dict[int, dict[int, int]] = {}
    for line in (data / "cranqrel").read_text().splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        qid, doc_id, code = int(parts[0]), int(parts[1]), int(parts[2])
        if 1 <= code <= 4:
            gains = qrels.setdefault(qid, {})
            gains[doc_id] = max(gains.get(doc_id, 0), 5 - code)
    return qrels


def ndcg_at_k(ranked: Sequence[int], gains: dict[int, int], k: int = K) -> float:
    dcg = sum(gains.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(gains.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at_k(ranked: Sequence[int], gains: dict[int, int], k: int = K) -> float:
    return len(set(ranked[:k]) & gains.keys()) / len(gains) if gains else 0.0


def write_corpus(docs: Sequence[CranDoc], folder: Path) -> None:
    """One file per document; files whose bytes are unchanged are left alone (a re-run of a
    kept --work folder then embeds nothing)."""
    folder.mkdir(parents=True, exist_ok=True)
    for doc in docs:
        path = folder / doc.file_name
        data = doc.markdown().encode()
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)


def ingest_corpus(corpus: Path, store_dir: Path, model: str | None) -> None:
    from semfs.ingest.pipeline import ingest
    from semfs.ingest.store.address import CollectionAddress
    from semfs.ingest.store.backends import open_store

    state = {"total": 0, "done": 0, "shown": -1}

    def on_phase(name: str, total: int) -> None:
        state["total"], state["done"], state["shown"] = total, 0, -1
        print(f"{name}: {total} {'files' if name == 'reading' else 'chunks'} ...", file=sys.stderr)

    def on_progress(n: int) -> None:
        state["done"] += n
        tenth = 10 * state["done"] // max(state["total"], 1)
        if tenth != state["shown"]:
            state["shown"] = tenth
            print(f"  {state['done']}/{state['total']}", file=sys.stderr)

    with open_store(CollectionAddress(store=store_dir)) as store:
        report = ingest(corpus, store, model=model, on_phase=on_phase, on_progress=on_progress)
    print(
        f"ingested: {len(report.added)} added, {len(report.updated)} updated, "
        f"{len(report.unchanged)} unchanged, {len(report.skipped)} skipped; "
        f"{report.chunks_embedded} chunks in {report.seconds:.0f} s ({report.model})",
        file=sys.stderr,
    )
    for s in report.skipped:
        print(f"  skipped {s.path}: {s.reason}", file=sys.stderr)


def doc_id_of(path: str) -> int:
    return int(Path(path).stem)


def run_semfs(
    store_dir: Path, queries: Sequence[str]
) -> tuple[dict[str, list[list[int]]], dict[str, float]]:
    """Ranked doc ids per mode per query, and the mean seconds per query per mode."""
    from semfs.ingest.request import SearchRequest
    from semfs.ingest.search import Searcher
    from semfs.ingest.store.address import CollectionAddress
    from semfs.ingest.store.backends import open_store

    runs: dict[str, list[list[int]]] = {}
    seconds: dict[str, float] = {}
    with open_store(CollectionAddress(store=store_dir)) as store:
        searcher = Searcher(store)
        searcher.warm_up()
        for mode in MODES:
            start = time.perf_counter()
            runs[mode] = [
                [doc_id_of(h.path) for h in searcher.search(SearchRequest(q, k=K, mode=mode))]
                for q in queries
            ]
            seconds[mode] = (time.perf_counter() - start) / max(len(queries), 1)
    return runs, seconds


def run_bm25s(docs: Sequence[CranDoc], queries: Sequence[str]) -> tuple[list[list[int]], str]:
    """bm25s (Lucene BM25, k1=1.5, b=0.75), English stop words and Snowball stemming when
    PyStemmer is installed: the same text processing as the store's BM25 vectors."""
    import bm25s

    try:
        import Stemmer

        stemmer = Stemmer.Stemmer("english")
        label = "bm25s (stemmed)"
    except ImportError:
        stemmer = None
        label = "bm25s (no stemmer)"
    texts = [d.markdown() for d in docs]
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False),
        show_progress=False,
    )
    tokens = bm25s.tokenize(
        list(queries), stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False
    )
    found, _scores = retriever.retrieve(tokens, k=K, show_progress=False)
    return [[docs[int(i)].doc_id for i in row] for row in found], label


def evaluate(run: Sequence[Sequence[int]], qrels: Sequence[dict[int, int]]) -> dict[str, float]:
    n = len(qrels)
    return {
        "ndcg@10": sum(ndcg_at_k(r, g) for r, g in zip(run, qrels, strict=True)) / n,
        "recall@10": sum(recall_at_k(r, g) for r, g in zip(run, qrels, strict=True)) / n,
    }


def paired(
    a: Sequence[Sequence[int]], b: Sequence[Sequence[int]], qrels: Sequence[dict[int, int]]
) -> dict[str, int]:
    """Per-query nDCG@10 of ``a`` against ``b``: how many queries it wins, ties, loses."""
    out = {"wins": 0, "ties": 0, "losses": 0}
    for ra, rb, g in zip(a, b, qrels, strict=True):
        diff = ndcg_at_k(ra, g) - ndcg_at_k(rb, g)
        out["wins" if diff > 1e-12 else "losses" if diff < -1e-12 else "ties"] += 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the cranfield folder")
    parser.add_argument(
        "--limit-queries",
        type=int,
        metavar="N",
        help="only the first N queries (the ingest is still whole)",
    )
    parser.add_argument(
        "--work",
        type=Path,
        help="keep the corpus and store here (re-runs skip the ingest) "
        "[default: a temporary folder, removed]",
    )
    parser.add_argument(
        "--model",
        help="embedding model [default: all-MiniLM-L6-v2 on torch fp32, semfs's; "
        "all-MiniLM-L6-v2@onnx-int8: int8 on ONNX Runtime]",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    docs = load_docs(args.data)
    texts = load_queries(args.data)
    qrels_by_pos = load_qrels(args.data)
    positions = [p for p in range(1, len(texts) + 1) if qrels_by_pos.get(p)]
    if args.limit_queries is not None:
        positions = positions[: args.limit_queries]
    queries = [texts[p - 1] for p in positions]
    qrels = [qrels_by_pos[p] for p in positions]

    with tempfile.TemporaryDirectory(prefix="semfs-cranfield-") as tmp:
        work = args.work or Path(tmp)
        write_corpus(docs, work / "corpus")
        ingest_corpus(work / "corpus", work / "store", args.model)
        runs, seconds = run_semfs(work / "store", queries)
    bm25_run, bm25_label = run_bm25s(docs, queries)

    systems = {f"semfs {m}": evaluate(runs[m], qrels) for m in MODES}
    systems[bm25_label] = evaluate(bm25_run, qrels)
    best_single = max(("semantic", "keyword"), key=lambda m: systems[f"semfs {m}"]["ndcg@10"])
    margin = {
        metric: systems["semfs hybrid"][metric] - systems[f"semfs {best_single}"][metric]
        for metric in ("ndcg@10", "recall@10")
    }
    versus: dict[str, Any] = {
        "mode": best_single,
        **{m: round(v, 4) for m, v in margin.items()},
        **paired(runs["hybrid"], runs[best_single], qrels),
    }
    result = {
        "documents": len(docs),
        "queries": len(queries),
        "k": K,
        "systems": {name: {m: round(v, 4) for m, v in s.items()} for name, s in systems.items()},
        "seconds_per_query": {m: round(s, 4) for m, s in seconds.items()},
        "hybrid_vs_best_single": versus,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"Cranfield: {len(docs)} documents, {len(queries)} queries, cut-off {K}")
    print(f"{'system':<22} {'nDCG@10':>8} {'recall@10':>10} {'ms/query':>9}")
    for name, s in systems.items():
        mode = name.removeprefix("semfs ")
        ms = f"{seconds[mode] * 1000:9.1f}" if mode in seconds else f"{'-':>9}"
        print(f"{name:<22} {s['ndcg@10']:8.4f} {s['recall@10']:10.4f} {ms}")
    h = versus
    print(
        f"hybrid vs {best_single} (the better single mode): nDCG@10 {margin['ndcg@10']:+.4f}, "
        f"recall@10 {margin['recall@10']:+.4f}; per query {h['wins']} better, {h['ties']} same, "
        f"{h['losses']} worse"
    )
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
