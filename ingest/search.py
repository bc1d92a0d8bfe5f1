"""Search: a query to ranked documents, shared by ``semfs search`` and the mount's .search dirs.

Qdrant ranks chunks; a document appears once, at the rank of its best chunk. Chunks of
generations no committed record points to (a re-ingest in flight) are dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import qdrant_edge as qe

from .embedder import Embedder, load_embedder
from .errors import SemfsError
from .store import DEFAULT_K, MAX_K, MODES, SparseQuery, Store

# A query is one short text: a second torch thread barely speeds it up on an idle machine,
# and on a busy one every op waits for it (measured: ~26 ms with one thread, ~500 ms with two).
QUERY_THREADS = 1
# Chunks fetched per wanted document: several chunks of one page often rank together.
CHUNKS_PER_DOC = 5


@dataclass(frozen=True)
class Hit:
    rank: int
    path: str
    score: float
    start_line: int
    end_line: int
    text: str
    heading: str = ""

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["score"] = round(self.score, 6)
        return d


def normalize_under(under: str | None) -> str | None:
    """``"deploy/"``, ``"./deploy"`` -> ``"deploy"``; the root -> None."""
    if under is None:
        return None
    parts = [p for p in under.strip().split("/") if p not in ("", ".")]
    return "/".join(parts) or None


class Searcher:
    """Runs queries against one store with the store's model; safe to share across threads."""

    def __init__(
        self,
        store: Store,
        model: str | None = None,
        embedder: Embedder | None = None,
        threads: int | None = QUERY_THREADS,
    ):
        self.store = store
        if embedder is None:
            meta = store.read_meta()
            if meta is None:
                raise SemfsError(f"{store.location} is empty: run `semfs ingest DIR` first")
            embedder = load_embedder(model or meta.model, threads=threads)
        self.embedder = embedder
        self._bm25 = qe.Bm25()

    def warm_up(self) -> None:
        """Load the model now, so that the first query does not wait for it."""
        self.embedder.encode(["warm up"])

    def search(
        self,
        query: str,
        k: int = DEFAULT_K,
        mode: str = "hybrid",
        under: str | None = None,
        min_score: float | None = None,
        committed: Callable[[str, int], bool] | None = None,
    ) -> list[Hit]:
        """The ``k`` best documents for ``query``. ``committed(path, gen)`` says whether a
        chunk's version is the visible one; by default the store is asked."""
        if mode not in MODES:
            raise SemfsError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
        if not 1 <= k <= MAX_K:
            raise SemfsError(f"k must be between 1 and {MAX_K}, not {k}")
        text = query.strip()
        if not text:
            return []
        # A keyword query needs no model: it must not wait for one to load.
        dense = self.embedder.encode([text])[0] if mode != "keyword" else []
        sv = self._bm25.embed_query(text)
        chunks = self.store.query(
            dense,
            SparseQuery(list(sv.indices), list(sv.values)),
            mode,
            limit=max(k * CHUNKS_PER_DOC, 50),
            under=normalize_under(under),
        )
        # Fused (RRF) scores depend on ranks only, so ties are common, and Qdrant returns tied
        # points in no fixed order: break ties by path and chunk so a query ranks the same
        # every time (`semfs search` and a .search directory must agree).
        chunks = sorted(chunks, key=lambda sc: (-sc.score, sc.record.path, sc.record.index))
        if committed is None:
            committed = self._store_committed()
        hits: list[Hit] = []
        seen: set[str] = set()
        for sc in chunks:
            rec = sc.record
            if rec.path in seen or not committed(rec.path, rec.gen):
                continue
            if min_score is not None and sc.score < min_score:
                break  # scores come sorted: nothing after this passes the floor either
            seen.add(rec.path)
            hits.append(
                Hit(
                    len(hits) + 1,
                    rec.path,
                    sc.score,
                    rec.start_line,
                    rec.end_line,
                    rec.text,
                    rec.heading,
                )
            )
            if len(hits) == k:
                break
        return hits

    def _store_committed(self) -> Callable[[str, int], bool]:
        cache: dict[str, int | None] = {}

        def committed(path: str, gen: int) -> bool:
            if path not in cache:
                rec = self.store.get_document(path)
                cache[path] = rec.gen if rec else None
            return cache[path] == gen

        return committed
