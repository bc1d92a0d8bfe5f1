"""One Qdrant core for both backends: each Store method written once, over a small engine.

Qdrant Edge (in this process) and qdrant-client (a server, or its local mode) run the same
engine and take the same requests, spelled differently: Edge's ``qe.Filter(must=[...])`` is
qdrant-client's ``m.Filter(must=[...])`` with keyword arguments, Edge's
``shard.update(UpdateOperation.upsert_points(...))`` is ``client.upsert(...)``. So
:class:`QdrantStore` says once which points, filters and requests each Store call is, in
neutral terms (:class:`Where`, :class:`Point`), and an :class:`Engine` adapter only spells
them: :class:`semfs.ingest.store.edge.store.EdgeEngine` for a shard,
:class:`semfs.ingest.store.server_store.ClientEngine` for a client.

What differs stays with each backend (:class:`~semfs.ingest.store.edge.store.EdgeStore`,
:class:`~semfs.ingest.store.server_store.ServerStore`): opening and creating a collection (a
shard's config, lock and deferred load; a server's collection), where the tree manifest is
kept (a file beside the shard; points), and the embedded store's disk-space guard.

Rules a backend may rely on: a read of a collection that does not exist answers empty
(``None``, ``[]``, ``0``), except reads of one document's chunks or blob and every write,
which raise :class:`StoreNotFoundError`; every write calls :meth:`QdrantStore._drop_manifest`
first, but :meth:`QdrantStore.set_dense`, which changes no record (a manifest lists records).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from semfs.ingest.errors import StoreDamagedError, StoreNotFoundError
from semfs.ingest.store import (
    FUSION_CANDIDATES,
    MODES,
    KeywordStats,
    LineSpan,
    SparseQuery,
    Store,
    similarity,
)
from semfs.ingest.store.diskspace import SpaceGuard, chunk_bytes, dense_bytes
from semfs.ingest.store.manifest import Manifest
from semfs.ingest.store.schema import (
    DENSE,
    DOC_TREE_FIELDS,
    KIND_BLOB,
    KIND_CHUNK,
    KIND_DIR,
    KIND_DOC,
    SPARSE,
    ChunkPoint,
    ChunkRecord,
    DenseVector,
    DirectoryRecord,
    DocumentRecord,
    ScoredChunk,
    ScoredId,
    StoreMeta,
    blob_id,
    blob_part,
    blob_payloads,
    chunk_id,
    dir_id,
    doc_id,
    meta_id,
)
from semfs.ingest.store.tree_records import TreeRecords

SCROLL_PAGE = 1024
_LINE_FIELDS = ["path", "gen", "index", "start_line", "end_line"]


# --- what the core asks for, in neutral terms ---------------------------------------------------


@dataclass(frozen=True)
class Match:
    """Payload field ``key`` equals ``value``."""

    key: str
    value: str | int


@dataclass(frozen=True)
class MatchAny:
    """Payload field ``key`` equals one of ``values``."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Substring:
    """Payload field ``key`` contains ``text`` (exact, case-sensitive)."""

    key: str
    text: str


@dataclass(frozen=True)
class Words:
    """Payload field ``key`` holds every word of ``text`` (Qdrant's full-text match)."""

    key: str
    text: str


@dataclass(frozen=True)
class HasVector:
    """The point has the named vector (a chunk not embedded yet has no ``dense``)."""

    name: str


Condition = Match | MatchAny | Substring | Words | HasVector


@dataclass(frozen=True)
class Where:
    """A filter: every condition of ``must`` and none of ``must_not``."""

    must: tuple[Condition, ...]
    must_not: tuple[Condition, ...] = ()


@dataclass(frozen=True)
class Point:
    """A point to write: a chunk has both vectors, every other kind none."""

    id: str
    payload: dict[str, Any]
    dense: list[float] | None = None
    sparse: SparseQuery | None = None


@dataclass(frozen=True)
class FusedQuery:
    """One query: a prefetch of ``candidates`` points matching ``where`` per retriever given
    (nearest by ``dense``, then by ``sparse``), fused by DBSF; the best ``limit``, with
    payload unless not ``with_payload`` and, ``with_dense``, their dense vector."""

    where: Where
    limit: int
    candidates: int
    dense: list[float] | None
    sparse: SparseQuery | None
    with_dense: bool
    with_payload: bool = True


class Record(Protocol):
    """A retrieved or scrolled point, as both engines return it."""

    @property
    def id(self) -> Any: ...

    @property
    def payload(self) -> dict[str, Any] | None: ...


class ScoredPoint(Protocol):
    """A point a query found: its id, payload, fused score and (when asked for) vectors."""

    @property
    def id(self) -> Any: ...

    @property
    def payload(self) -> dict[str, Any] | None: ...

    @property
    def score(self) -> float: ...

    @property
    def vector(self) -> Any: ...


class Engine(ABC):
    """One collection's engine calls, each a translation of one Qdrant request."""

    @abstractmethod
    def retrieve(
        self, ids: Sequence[str], fields: list[str] | None = None, with_dense: bool = False
    ) -> Sequence[Record]:
        """The points of ``ids`` that exist, in any order, with only the payload ``fields``
        (None: the whole payload), and their dense vector only ``with_dense`` (``vector``)."""

    @abstractmethod
    def scroll(
        self,
        where: Where,
        fields: list[str] | None,
        offset: Any,
        limit: int = SCROLL_PAGE,
        with_dense: bool = False,
    ) -> tuple[Sequence[Record], Any]:
        """One page of ``limit`` points matching ``where`` from ``offset`` (None: the first),
        payload and vector as in :meth:`retrieve`; the next page's offset, None after the last."""

    @abstractmethod
    def upsert(self, points: Sequence[Point]) -> None: ...

    @abstractmethod
    def set_vectors(self, dense: Sequence[tuple[str, list[float]]]) -> None:
        """Set the dense vector of each point id given, keeping its payload and other vector;
        raises (after setting some, perhaps) when a point does not exist."""

    @abstractmethod
    def delete(self, ids: Sequence[str]) -> None: ...

    @abstractmethod
    def delete_where(self, where: Where) -> None: ...

    @abstractmethod
    def count(self, where: Where) -> int:
        """The exact number of points matching ``where``."""

    @abstractmethod
    def fuse(self, query: FusedQuery) -> Sequence[ScoredPoint]: ...

    @abstractmethod
    def sparse_best(
        self, queries: Sequence[tuple[SparseQuery, Where]]
    ) -> list[tuple[float, dict[int, float]] | None]:
        """For each (sparse vector, filter), in one request: the point matching the filter
        that BM25 (the IDF applied) scores highest, as its score and its sparse vector (token
        id -> weight); None where none matches."""

    def flush(self) -> None:  # noqa: B027 - a server persists on write
        """Make the writes so far durable."""


# --- the store, written once -------------------------------------------------------------------


def sparse_weights(vectors: Any) -> dict[int, float]:
    """Token id -> weight of the BM25 vector in a point's ``vectors`` (as either engine
    returns them: a dict of named vectors, the sparse one with ``indices`` and ``values``)."""
    found = vectors[SPARSE]
    return dict(zip(found.indices, found.values, strict=True))


def _holding(chunks: int, score: float, weight: float | None) -> int:
    """How many of ``chunks`` hold a term whose best match alone scores ``score`` with the
    term's ``weight`` there: Qdrant's IDF, ln(1 + (N - n + 0.5) / (n + 0.5)), solved for n."""
    if not weight or score <= 0:
        return 0
    x = math.exp(score / weight) - 1.0
    return max(1, min(chunks, round((chunks + 0.5 - 0.5 * x) / (1.0 + x))))


def _chunks_under(under: str | None) -> list[Condition]:
    must: list[Condition] = [Match("kind", KIND_CHUNK)]
    if under:
        must.append(Match("dirs", under))
    return must


_DOCS = Where((Match("kind", KIND_DOC),))
# Tries of set_dense when points went meanwhile (a writer replaced their document).
_SET_DENSE_TRIES = 4
_DIRS = Where((Match("kind", KIND_DIR),))
# Chunks and blob parts: what a document version owns besides its record.
_VERSIONED = MatchAny("kind", (KIND_CHUNK, KIND_BLOB))


def _has_dense(vectors: Any) -> bool:
    """Whether a point's ``vectors`` (as either engine returns them) hold its dense one."""
    return isinstance(vectors, dict) and bool(vectors.get(DENSE))


def _fused(
    dense: list[float],
    sparse: SparseQuery,
    mode: str,
    limit: int,
    under: str | None,
    with_dense: bool,
    with_payload: bool = True,
) -> FusedQuery | None:
    """The engine query of a search in ``mode``; None when it has nothing to ask."""
    row = MODES[mode]
    if row.definitions or (not row.dense and not sparse.indices):
        return None  # a lookup by name has no vectors: definitions() answers it
    # Every mode is one prefetch per retriever, fused by DBSF: each retriever's scores are
    # normalised over its own candidates, so a score means the same across queries and
    # modes (see semfs.ingest.store.FUSION_CANDIDATES).
    return FusedQuery(
        Where(tuple(_chunks_under(under))),
        limit,
        candidates=max(limit, FUSION_CANDIDATES),
        dense=dense if row.dense else None,
        sparse=sparse if row.sparse and sparse.indices else None,
        with_dense=with_dense,
        with_payload=with_payload,
    )


class QdrantStore(Store):
    """The Store of one Qdrant collection, through :attr:`engine`. A backend supplies the
    engine (:meth:`_open_engine`), the error for a missing collection, and what is not the
    same: ``create``, ``exists``, ``location``, the manifest (:meth:`_drop_manifest`,
    :meth:`read_manifest`, :meth:`_keep_manifest`) and ``close``."""

    # The embedded store's guard against filling the disk; a server checks its own.
    space: SpaceGuard | None = None
    # The records as this process wrote them (semfs.ingest.store.tree_records): a backend
    # whose writes all go through it starts them; else they stay unknown and a manifest scrolls.
    tree: TreeRecords

    @abstractmethod
    def _open_engine(self) -> Engine | None:
        """The engine, when the collection exists (opening it first if need be), else None."""

    @abstractmethod
    def _missing(self) -> StoreNotFoundError:
        """The error for a call that needs the collection when it does not exist."""

    @abstractmethod
    def _drop_manifest(self) -> None:
        """Before every write: no stored manifest may describe what the write changes."""

    @abstractmethod
    def _keep_manifest(self, meta: StoreMeta) -> None:
        """Store a manifest of the committed records, stamped with ``meta`` (clean, current),
        unless the stored one is already that; build it with :meth:`_manifest_bytes`."""

    @property
    def engine(self) -> Engine:
        engine = self._open_engine()
        if engine is None:
            raise self._missing()
        return engine

    def _scroll(
        self, engine: Engine, where: Where, fields: list[str] | None
    ) -> Iterator[dict[str, Any]]:
        """Payloads matching ``where``: only ``fields``, or whole when None."""
        offset: Any = None
        while True:
            records, offset = engine.scroll(where, fields, offset)
            yield from (r.payload for r in records if r.payload)
            if offset is None:
                return

    def read_meta(self) -> StoreMeta | None:
        engine = self._open_engine()
        if engine is None:
            return None
        records = engine.retrieve([meta_id()])
        if not records:
            return None
        try:
            return StoreMeta.from_payload(records[0].payload or {})
        except (KeyError, TypeError, ValueError) as exc:
            # The point is there but its payload is not (a zeroed payload tracker, say).
            raise StoreDamagedError(
                f"store {self.location} is damaged: its meta point has no readable payload "
                f"(missing {exc}); rebuild it: `semfs check --rebuild SOURCE` sets the shard "
                "aside and ingests SOURCE afresh"
            ) from None

    def write_meta(self, meta: StoreMeta) -> None:
        self._drop_manifest()
        engine = self.engine
        engine.upsert([Point(meta_id(), meta.to_payload())])
        engine.flush()

    def write_manifest(self, generation: int) -> None:
        meta = self.read_meta()
        if meta is None or meta.dirty or meta.generation != generation:
            return
        self._keep_manifest(meta)

    def _manifest_bytes(self, meta: StoreMeta) -> bytes:
        """A manifest of every committed document (whole records) and folder, as stored:
        from the records kept as this process wrote them when known, else from a scroll."""
        kept = self.tree.snapshot()
        manifest = self._scrolled_manifest(meta) if kept is None else Manifest.of(meta, *kept)
        return manifest.to_bytes()

    def _scrolled_manifest(self, meta: StoreMeta) -> Manifest:
        docs = [DocumentRecord.from_payload(p) for p in self._scroll(self.engine, _DOCS, None)]
        return Manifest.of(meta, docs, self.list_directories())

    def list_documents(self) -> list[DocumentRecord]:
        engine = self._open_engine()
        if engine is None:
            return []
        return [
            DocumentRecord.from_payload(p) for p in self._scroll(engine, _DOCS, DOC_TREE_FIELDS)
        ]

    def get_document(self, path: str) -> DocumentRecord | None:
        engine = self._open_engine()
        if engine is None:
            return None
        records = engine.retrieve([doc_id(path)])
        return DocumentRecord.from_payload(records[0].payload or {}) if records else None

    def put_document(self, record: DocumentRecord) -> None:
        self._drop_manifest()
        with self.tree.change():
            self.engine.upsert([Point(doc_id(record.path), record.to_payload())])
            self.tree.put_documents([record])

    def delete_documents(self, paths: Sequence[str]) -> None:
        if not paths:
            return
        self._drop_manifest()
        with self.tree.change():
            self.engine.delete([doc_id(p) for p in paths])
            self.tree.delete_documents(paths)
        for path in paths:
            self.delete_stale_chunks(path, None)

    def list_directories(self) -> list[DirectoryRecord]:
        engine = self._open_engine()
        if engine is None:
            return []
        return [DirectoryRecord.from_payload(p) for p in self._scroll(engine, _DIRS, None)]

    def put_directories(self, records: Sequence[DirectoryRecord]) -> None:
        if records:
            self._drop_manifest()
            with self.tree.change():
                self.engine.upsert([Point(dir_id(r.path), r.to_payload()) for r in records])
                self.tree.put_directories(records)

    def delete_directories(self, paths: Sequence[str]) -> None:
        if paths:
            self._drop_manifest()
            with self.tree.change():
                self.engine.delete([dir_id(p) for p in paths])
                self.tree.delete_directories(paths)

    def upsert_chunks(self, points: Sequence[ChunkPoint]) -> None:
        if not points:
            return
        self._drop_manifest()
        if self.space is not None:
            self.space.check_write(chunk_bytes(points))
        self.engine.upsert(
            [
                Point(
                    chunk_id(p.record.path, p.record.gen, p.record.index),
                    p.record.to_payload(),
                    p.dense,
                    SparseQuery(p.sparse_indices, p.sparse_values),
                )
                for p in points
            ]
        )

    def get_chunks(self, path: str, gen: int, indexes: Sequence[int]) -> list[ChunkRecord]:
        records = self.engine.retrieve([chunk_id(path, gen, i) for i in indexes])
        by_index = {int((r.payload or {})["index"]): r for r in records}
        return [
            ChunkRecord.from_payload(by_index[i].payload or {}) for i in indexes if i in by_index
        ]

    def chunk_vectors(self, path: str, gen: int, indexes: Sequence[int]) -> dict[int, list[float]]:
        records = self.engine.retrieve(
            [chunk_id(path, gen, i) for i in indexes], ["index"], with_dense=True
        )
        out: dict[int, list[float]] = {}
        for r in records:
            vectors = getattr(r, "vector", None)
            vec = vectors.get(DENSE) if isinstance(vectors, dict) else None
            if r.payload and isinstance(vec, list):
                out[int(r.payload["index"])] = [float(x) for x in vec]
        return out

    def chunk_texts(self, path: str, gen: int, indexes: Sequence[int]) -> dict[int, str]:
        # One retrieve of the text and index only: decoding and wrapping the other ten
        # fields cost a third of a file's read (measured at 10k chunks).
        ids = [chunk_id(path, gen, i) for i in indexes]
        records = self.engine.retrieve(ids, ["index", "text"])
        return {int(p["index"]): str(p["text"]) for p in (r.payload for r in records) if p}

    def delete_stale_chunks(self, path: str, keep_gen: int | None) -> None:
        self._drop_manifest()
        must_not = (Match("gen", keep_gen),) if keep_gen is not None else ()
        self.engine.delete_where(Where((_VERSIONED, Match("path", path)), must_not))

    def chunk_versions(self) -> set[tuple[str, int]]:
        engine = self._open_engine()
        if engine is None:
            return set()
        pairs = self._scroll(engine, Where((_VERSIONED,)), ["path", "gen"])
        return {(str(p["path"]), int(p["gen"])) for p in pairs}

    def put_blob(self, path: str, gen: int, data: bytes) -> None:
        self._drop_manifest()
        if self.space is not None:
            self.space.check_write(len(data) * 4 // 3 + 1024)
        engine = self.engine
        for point_id, payload in blob_payloads(path, gen, data):
            engine.upsert([Point(point_id, payload)])  # a part a request: bounded messages

    def read_blob(self, path: str, gen: int, indexes: Sequence[int]) -> dict[int, bytes]:
        records = self.engine.retrieve([blob_id(path, gen, i) for i in indexes])
        return dict(blob_part(r.payload) for r in records if r.payload)

    def query(
        self,
        dense: list[float],
        sparse: SparseQuery,
        mode: str,
        limit: int,
        under: str | None = None,
        similarities: bool = True,
    ) -> list[ScoredChunk]:
        engine = self._open_engine()
        if engine is None:
            return []
        fused = _fused(dense, sparse, mode, limit, under, with_dense=bool(dense) and similarities)
        if fused is None:
            return []
        hits = engine.fuse(fused)
        # The chunks' dense vectors come back too: their cosine to the query is a similarity
        # a caller may want beside the fused score.
        square = sum(x * x for x in dense)
        return [
            ScoredChunk(
                ChunkRecord.from_payload(p.payload or {}),
                float(p.score),
                similarity(dense, p.vector, DENSE, square),
            )
            for p in hits
        ]

    def query_ids(
        self,
        dense: list[float],
        sparse: SparseQuery,
        mode: str,
        limit: int,
        under: str | None = None,
    ) -> list[ScoredId]:
        engine = self._open_engine()
        row = MODES[mode]
        # A dense retriever finds only chunks that have a vector; a BM25 one finds any, so
        # their vectors come back to tell (cheaper than their payloads: 0.7 ms against 2.0 for
        # 200 candidates, measured on mem0-docs).
        flags = row.sparse and bool(sparse.indices)
        fused = _fused(dense, sparse, mode, limit, under, with_dense=flags, with_payload=False)
        if engine is None or fused is None:
            return []
        return [
            ScoredId(
                str(p.id),
                float(p.score),
                not flags or _has_dense(p.vector),
            )
            for p in engine.fuse(fused)
        ]

    def chunks_by_id(self, ids: Sequence[str]) -> dict[str, ChunkRecord]:
        engine = self._open_engine()
        if engine is None or not ids:
            return {}
        return {
            str(r.id): ChunkRecord.from_payload(r.payload)
            for r in engine.retrieve(ids)
            if r.payload and r.payload.get("kind") == KIND_CHUNK
        }

    def keyword_stats(self, sparse: SparseQuery, under: str | None = None) -> KeywordStats | None:
        engine = self._open_engine()
        if engine is None or not sparse.indices:
            return None
        everywhere = Where(tuple(_chunks_under(None)))
        # Qdrant applies the IDF itself and never shows it: a term's best match alone scores
        # its IDF times the term's weight there, and the IDF gives back its count. One batch.
        alone = [(SparseQuery([index], [1.0]), everywhere) for index in sparse.indices]
        best, *each = engine.sparse_best([(sparse, Where(tuple(_chunks_under(under)))), *alone])
        if best is None:
            return None
        chunks = engine.count(everywhere)
        holding = [
            0 if one is None else _holding(chunks, one[0], one[1].get(index))
            for index, one in zip(sparse.indices, each, strict=True)
        ]
        weights = best[1]
        return KeywordStats(
            chunks, tuple(holding), tuple(float(weights.get(i, 0.0)) for i in sparse.indices)
        )

    def definitions(
        self, names: Sequence[str], limit: int, under: str | None = None
    ) -> list[ScoredChunk]:
        engine = self._open_engine()
        if engine is None or not names or limit < 1:
            return []
        where = Where((*_chunks_under(under), MatchAny("symbols", tuple(names))))
        found: list[ChunkRecord] = []
        for payload in self._scroll(engine, where, None):
            found.append(ChunkRecord.from_payload(payload))
        # Every generation is listed (the caller keeps the committed one): sort, then cut.
        found.sort(key=lambda r: (r.path, r.index, r.gen))
        return [ScoredChunk(r, 1.0) for r in found[:limit]]

    def chunk_paths_matching(
        self,
        substrings: Sequence[str],
        words: Sequence[str],
        under: str | Sequence[str] | None = None,
        paths: Sequence[str] | None = None,
    ) -> list[str]:
        engine = self._open_engine()
        if engine is None:
            return []
        if isinstance(under, str) or under is None:
            must = _chunks_under(under)
        else:
            must = [Match("kind", KIND_CHUNK), MatchAny("dirs", tuple(under))]
        if paths is not None:
            must.append(MatchAny("path", tuple(paths)))
        must += [Substring("text", s) for s in substrings]
        if words:
            must.append(Words("text", " ".join(words)))
        return sorted({str(p["path"]) for p in self._scroll(engine, Where(tuple(must)), ["path"])})

    def chunk_line_spans(self, under: str | None = None) -> Iterator[LineSpan]:
        engine = self._open_engine()
        if engine is None:
            return
        for p in self._scroll(engine, Where(tuple(_chunks_under(under))), _LINE_FIELDS):
            yield (
                str(p["path"]),
                int(p["gen"]),
                int(p["index"]),
                int(p["start_line"]),
                int(p["end_line"]),
            )

    def count_chunks(self) -> int:
        engine = self._open_engine()
        if engine is None:
            return 0
        return engine.count(Where(tuple(_chunks_under(None))))

    def set_dense(self, vectors: Sequence[DenseVector]) -> int:
        if not vectors:
            return 0
        engine = self.engine
        if self.space is not None:
            self.space.check_write(dense_bytes(len(vectors), len(vectors[0].vector)))
        todo = {chunk_id(v.path, v.gen, v.index): v.vector for v in vectors}
        for attempt in range(_SET_DENSE_TRIES):
            try:
                engine.set_vectors(list(todo.items()))
                return len(todo)
            except Exception:
                # A point went since it was read (a newer version of its document replaced
                # it): set the others; an update never makes a point again.
                present = {str(r.id) for r in engine.retrieve(list(todo), ["kind"])}
                if len(present) == len(todo) or attempt == _SET_DENSE_TRIES - 1:
                    raise
                todo = {k: v for k, v in todo.items() if k in present}
                if not todo:
                    return 0
        return 0  # not reached: the last try returns or raises

    def chunks_without_dense(
        self,
        limit: int,
        after: str | None = None,
        under: str | None = None,
        paths: Sequence[str] | None = None,
    ) -> tuple[list[ChunkRecord], str | None]:
        engine = self._open_engine()
        if engine is None or (paths is not None and not paths):
            return [], None
        must = _chunks_under(under)
        if paths is not None:
            must.append(MatchAny("path", tuple(paths)))
        where = Where(tuple(must), (HasVector(DENSE),))
        records, offset = engine.scroll(where, None, after, limit=max(1, limit))
        chunks = [ChunkRecord.from_payload(r.payload) for r in records if r.payload]
        return chunks, None if offset is None else str(offset)

    def dense_by_hash(self, hashes: Sequence[str]) -> dict[str, list[float]]:
        engine = self._open_engine()
        remaining = {h for h in hashes if h}
        found: dict[str, list[float]] = {}
        while engine is not None and remaining:
            # Only the hashes still wanted: a chunk repeated in many documents (navigation,
            # a licence) fills one page at most, then its hash is left out of the filter.
            where = Where(
                (
                    Match("kind", KIND_CHUNK),
                    MatchAny("vhash", tuple(sorted(remaining))),
                    HasVector(DENSE),
                )
            )
            limit = max(64, 2 * len(remaining))
            records, _next = engine.scroll(where, ["vhash"], None, limit=limit, with_dense=True)
            new = False
            for r in records:
                vectors = getattr(r, "vector", None)
                vec = vectors.get(DENSE) if isinstance(vectors, dict) else None
                h = (r.payload or {}).get("vhash")
                if h in remaining and isinstance(vec, list) and vec:
                    found[h] = [float(x) for x in vec]
                    remaining.discard(h)
                    new = True
            if not new:
                break
        return found

    def embedding_counts(self, under: str | None = None) -> tuple[int, int]:
        engine = self._open_engine()
        if engine is None:
            return 0, 0
        must = tuple(_chunks_under(under))
        # Two counts while a pass may write between them: those with a vector first, so that
        # chunks added meanwhile raise the total and never make the share negative (counting
        # the total and then those without one gave "embedded: -256" during a first pass).
        embedded = engine.count(Where((*must, HasVector(DENSE))))
        total = engine.count(Where(must))
        return min(embedded, total), total
