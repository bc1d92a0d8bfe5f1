"""The store layer's interface, split by what callers need (:class:`StoreReader`: a search, the
mount, MCP, a check; :class:`StoreWriter`: an ingest; :class:`Store`: the collection a process
keeps, compacts and serves), and :class:`OwnerLink`, what a store reached through its owner
declares. Callers take the narrowest and ask what is declared, never a store's class. No
implementation here.

* :class:`semfs.ingest.store.edge.store.EdgeStore`: Qdrant Edge, in-process, one shard directory per
  collection under the store path (the default; no server).
* :class:`semfs.ingest.store.server_store.ServerStore`: qdrant-client against a Qdrant server or
  cluster. The two share one implementation of every call,
  :class:`semfs.ingest.store.qdrant.QdrantStore`, and differ in their engine adapter.
* :class:`semfs.ingest.store.ipc.client.RemoteStore`: the store of another process that owns it
  (a mount).

:func:`semfs.ingest.store.backends.open_store` picks one;
:class:`semfs.ingest.store.owner.StoreOwner` owns one and serves other processes' writes. All are
written against :mod:`semfs.ingest.store.schema`.
"""

from __future__ import annotations

import math
import operator
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple, Self

from semfs.ingest.errors import SemfsError
from semfs.ingest.store.manifest import Manifest
from semfs.ingest.store.schema import (
    ChunkPoint,
    ChunkRecord,
    DenseVector,
    DirectoryRecord,
    DocumentRecord,
    ScoredChunk,
    ScoredId,
    SparseQuery,
    StoreMeta,
)

DEFAULT_COLLECTION = "docs"


@dataclass(frozen=True)
class Mode:
    """One search mode: what it matches, and how a search runs it. Code asks the row, never
    the mode's name, so a new mode is a row and its query (ARCHITECTURE.md)."""

    meaning: str  # what it matches: `--mode`'s help, the `@` folder words, the MCP tool's
    dense: bool = False  # the query's dense vector is a retriever (so the model must load)
    sparse: bool = False  # its BM25 vector is one
    # A lookup by name: Store.definitions() answers, no vectors; every hit is exact
    # (strength 1).
    definitions: bool = False
    # Its excerpt rule: "lines" (the lines that answer, by the query's words) or
    # "definitions" (the definitions themselves, signature first, not the lines naming them).
    excerpts: Literal["lines", "definitions"] = "lines"
    # While an ingest's dense pass is under way, what the results file's `meaning:` line
    # adds after the embedded share (empty: the mode reads no dense vectors, no line).
    partial: str = ""
    # Few documents matched: rate its hits by the rarity of the words they hold (a keyword
    # search's strength), not by the fused score alone.
    rare_words: bool = False
    miss: str = ""  # what a results file adds when nothing matched

    @property
    def fused(self) -> bool:
        """Two retrievers fused: a chunk without its dense vector yet gets only one half."""
        return self.dense and self.sparse

    @property
    def needs_model(self) -> bool:
        """Whether a search embeds the query (a keyword search must not wait for the model)."""
        return self.dense


# The search modes, name -> its row (the one table: `--mode`, the `@` folder words, the MCP
# tool and their help read it). Each is a way of QdrantStore.query() (store/qdrant.py), but
# a lookup by name (``definitions``), which Store.definitions() answers.
MODES: dict[str, Mode] = {
    "hybrid": Mode(
        "meaning and words, dense + BM25 scores fused",
        dense=True,
        sparse=True,
        partial="keyword scores for the rest",
    ),
    "semantic": Mode(
        "meaning only, dense vectors",
        dense=True,
        partial="@semantic searched only that part (@hybrid adds keyword scores)",
    ),
    "keyword": Mode(
        "exact words only (BM25): names, flags, error messages", sparse=True, rare_words=True
    ),
    "symbol": Mode(
        "the definition of a name in code: NAME or Class.method, exact",
        definitions=True,
        excerpts="definitions",
        miss=(
            "No definition has this exact name (case matters; Class.method names a method). "
            "Search the words without @symbol, or grep -rn NAME."
        ),
    ),
}
# Documents per search. 3, not 5 (issue 28): on the public question sets hits 4-5 rarely
# held the right page (hit@3 0.95-0.97), and the bytes of their list lines, spent on the
# answering lines instead (EXCERPT_TOTAL 800), raised answer-in-results from 0.35-0.38 to
# 0.43 with a smaller results file and a lower cost (scripts/answers.py, BENCHMARKS.md
# section 16). Earlier: 5, not 10, as hits 6-10 held the right page for 1 question in 40.
DEFAULT_K = 3
MAX_K = 100
# Candidates each retriever (dense, BM25) hands to the fusion. Qdrant's DBSF maps a
# retriever's scores through mean +- 3 standard deviations of its candidates and sums them, so
# the count is fixed (not derived from the limit): a chunk's score then does not depend on k.
# Measured on the question sets and Cranfield: 100-300 rank alike; 200 was best on Cranfield.
FUSION_CANDIDATES = 200
_COLLECTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def default_store_path() -> Path:
    """``$SEMFS_STORE``, else ``$XDG_DATA_HOME/semfs``, else ``~/.local/share/semfs``."""
    env = os.environ.get("SEMFS_STORE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "semfs"


def check_collection_name(name: str) -> str:
    if not _COLLECTION_NAME.match(name):
        raise SemfsError(
            f"invalid collection name {name!r}: use letters, digits, '_', '-' or '.', "
            "starting with a letter or digit (at most 64)"
        )
    return name


# (path, gen, index, start_line, end_line) of one chunk.
LineSpan = tuple[str, int, int, int, int]


class KeywordStats(NamedTuple):
    """What BM25 knows of a query's terms in one collection (:meth:`StoreReader.keyword_stats`):
    enough to score its best keyword match with the IDF of several collections together."""

    chunks: int  # the collection's chunks: BM25's N
    holding: tuple[int, ...]  # per query term, in the query's order: chunks holding it (df)
    best: tuple[float, ...]  # per query term: its weight in the best keyword match (0: absent)


def similarity(
    query: Sequence[float], vectors: object, name: str, square: float | None = None
) -> float | None:
    """The cosine of ``query`` and the vector called ``name`` in a point's ``vectors`` (as
    either backend returns them: a dict of named vectors); None when it is not there.
    ``square``: ``query``'s dot product with itself, when the caller has it (one per query,
    not one per candidate: a partly embedded hybrid search measures 200)."""
    vec = vectors.get(name) if isinstance(vectors, dict) else None
    if not query or not isinstance(vec, list) or len(vec) != len(query):
        return None
    # map(operator.mul): the products in C, several times faster than a generator; a search
    # computes this for each of its ~50 candidate chunks.
    dot = sum(map(operator.mul, query, vec))
    if square is None:
        square = sum(map(operator.mul, query, query))
    norm = math.sqrt(square * sum(map(operator.mul, vec, vec)))
    return dot / norm if norm else 0.0


@dataclass(frozen=True)
class QueryService:
    """How the process that owns a store embeds other processes' search queries: with its own
    model, already warm (:meth:`Store.serve_writers`). ``embed`` turns one query text into its
    dense vector; ``backend`` says what runs the model (``onnxruntime fp32``) without loading it.
    ``search``, when given, runs a whole search: a request's fields
    (:meth:`semfs.ingest.request.SearchRequest.hit_fields`: query, k, mode, min_score, under,
    more) to its hits as plain values (:func:`semfs.ingest.search.hit_fields`).
    """

    embed: Callable[[str], list[float]]
    backend: Callable[[], str]
    search: Callable[[dict[str, Any]], list[dict[str, Any]]] | None = None


class OwnerLink(ABC):
    """The process that owns a store, as seen by one that reaches the store through it
    (:meth:`StoreReader.owner_link`): what its hello declared it does for this process, and
    the requests that use it. Callers ask these, never a store's class."""

    pid: int
    command: str  # the command line it runs, as it said ("" when it did not)
    # What embeds queries in the owner (``onnxruntime fp32``), or None when it does not.
    query_backend: str | None
    searches: bool  # it runs whole searches (:meth:`search`)
    embeds: bool  # it gives the chunks this process writes their dense vectors

    @abstractmethod
    def embed_query(self, text: str) -> list[float]:
        """``text``'s dense vector, embedded by the owner's model (when ``query_backend``)."""

    @abstractmethod
    def search(self, fields: dict[str, Any]) -> list[dict[str, Any]]:
        """A whole search run by the owner (when ``searches``): the request's fields
        (:meth:`semfs.ingest.request.SearchRequest.hit_fields`); its hits as plain values."""

    @abstractmethod
    def held_open(self) -> frozenset[str]:
        """The files the owner's writable mount holds open for writing (none when it has no
        writable mount): an ingest through it leaves them as they are until closed."""


class StoreReader(ABC):
    """What a search, a mount and the MCP tools read: a collection's committed documents, their
    chunks, blobs and folders, and its queries. Methods raise :class:`SemfsError` subtypes.

    Readers see only chunks whose generation matches a committed :class:`DocumentRecord`
    (:class:`StoreWriter` says why). A backend that serves reads only implements this.
    """

    backend: str
    collection: str

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the store is, for messages: a directory or a URL plus collection."""

    @property
    def address(self) -> str:
        """Where the store is, as data rather than prose (what `semfs status --json` prints):
        a directory, or a URL plus collection. A proxy answers its owner's folder, where
        :attr:`location` adds, for people, which process relays the calls."""
        return self.location

    @abstractmethod
    def exists(self) -> bool:
        """Whether the collection has been created."""

    @abstractmethod
    def read_meta(self) -> StoreMeta | None: ...

    @abstractmethod
    def list_documents(self) -> list[DocumentRecord]:
        """Every committed document with its chunk offsets: one scroll, no chunks read."""

    @abstractmethod
    def get_document(self, path: str) -> DocumentRecord | None:
        """One committed document with its chunk offsets, or None."""

    @abstractmethod
    def list_directories(self) -> list[DirectoryRecord]:
        """Every recorded source folder (none in stores written before folders were)."""

    @abstractmethod
    def get_chunks(self, path: str, gen: int, indexes: Sequence[int]) -> list[ChunkRecord]:
        """The chunks of one document version, in the order of ``indexes``."""

    def chunk_texts(self, path: str, gen: int, indexes: Sequence[int]) -> dict[int, str]:
        """The text of each stored chunk of one document version, by index (missing ones
        left out): all a file read needs. A backend may override it to fetch only the text
        field, which a cold ``grep -r`` does for every chunk of every file."""
        return {c.index: c.text for c in self.get_chunks(path, gen, indexes)}

    @abstractmethod
    def chunk_vectors(self, path: str, gen: int, indexes: Sequence[int]) -> dict[int, list[float]]:
        """The dense vector of each stored chunk of one document version, by index (missing
        ones left out): what "documents like this one" is asked with."""

    @abstractmethod
    def read_blob(self, path: str, gen: int, indexes: Sequence[int]) -> dict[int, bytes]:
        """The stored parts ``indexes`` of one blob version, by index (missing ones left out)."""

    @abstractmethod
    def query(
        self,
        dense: list[float],
        sparse: SparseQuery,
        mode: str,
        limit: int,
        under: str | None = None,
        similarities: bool = True,
    ) -> list[ScoredChunk]:
        """Best chunks, any generation (callers drop uncommitted ones), each with its cosine
        ``similarity`` to ``dense`` when ``dense`` is given and ``similarities`` (else None:
        the chunks' vectors are not read back). One request to Qdrant: a prefetch of
        :data:`FUSION_CANDIDATES` per retriever of ``mode`` (hybrid: dense and BM25), fused by
        DBSF, so ``score`` is the sum of the retrievers' normalised scores (each ~0-1)."""

    @abstractmethod
    def query_ids(
        self,
        dense: list[float],
        sparse: SparseQuery,
        mode: str,
        limit: int,
        under: str | None = None,
    ) -> list[ScoredId]:
        """:meth:`query`'s best chunks, in its order and with its scores, without their
        payloads: each one's point id and whether it has its dense vector. A ranking that
        weighs a few hundred candidates and keeps a few dozen (hybrid on a partly embedded
        store) reads these, then the kept ones' records (:meth:`chunks_by_id`): turning
        every candidate's payload into a record was a third of its time."""

    @abstractmethod
    def chunks_by_id(self, ids: Sequence[str]) -> dict[str, ChunkRecord]:
        """The chunks of the point ids ``ids`` (:meth:`query_ids` gave them), by id; ids
        whose chunk is gone (a newer version of its document replaced it) left out."""

    @abstractmethod
    def definitions(
        self, names: Sequence[str], limit: int, under: str | None = None
    ) -> list[ScoredChunk]:
        """Chunks of source code, any generation, that define one of ``names`` (an exact
        ``ChunkRecord.symbols`` entry: ``retry_upload``, ``Uploader.retry_upload``), at most
        ``limit``, by path and chunk; each scored 1.0. No vector is looked at: the ``symbol``
        search mode, a lookup cheaper than a query."""

    @abstractmethod
    def count_chunks(self) -> int: ...

    @abstractmethod
    def embedding_counts(self, under: str | None = None) -> tuple[int, int]:
        """(chunks with a dense vector, all chunks), of any generation, below ``under``."""

    def keyword_stats(self, sparse: SparseQuery, under: str | None = None) -> KeywordStats | None:
        """BM25's statistics of ``sparse``'s terms here: the collection's chunk count, how
        many chunks hold each term (its IDF's inputs, over the whole collection, as Qdrant
        computes it), and each term's weight in the best keyword match below ``under``; None
        when this backend cannot tell or no chunk holds a term. A search of several
        collections scores each one's best match with the IDF of all of them together
        (:func:`semfs.ingest.search.several.merge_hits`): each collection's own IDF makes a
        word rare in one collection weigh more there, so BM25 scores are not comparable."""
        return None

    def chunk_paths_matching(
        self,
        substrings: Sequence[str],
        words: Sequence[str],
        under: str | Sequence[str] | None = None,
        paths: Sequence[str] | None = None,
    ) -> list[str]:
        """Paths (sorted, once each) having a chunk, of any generation, whose text contains
        every string of ``substrings`` (exact, case-sensitive) and every word of ``words``
        as a whole word (Qdrant's full-text match: lowercased words of letters and digits).

        Only chunks of documents below ``under`` (a folder, or any of several) and among
        ``paths`` (documents) are looked at, in the engine: what lies outside costs nothing,
        so a caller limited to some folders learns nothing of the rest from the time taken.

        The filter runs in the engine (a grep prefilter); it is an over-approximation of the
        documents whose committed text matches, never an under-approximation, except that a
        string can straddle two chunks: see :meth:`split_line_paths`.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot filter chunks by text")

    def split_line_paths(self, under: str | None = None) -> list[str]:
        """Paths (sorted, once each) with a chunk boundary inside a line, in any generation:
        the only documents where a line's text is not whole inside one chunk."""
        ends: dict[tuple[str, int], dict[int, tuple[int, int]]] = {}
        for path, gen, index, start_line, end_line in self.chunk_line_spans(under):
            ends.setdefault((path, gen), {})[index] = (start_line, end_line)
        out: set[str] = set()
        for (path, _gen), spans in ends.items():
            for index, (_start, end) in spans.items():
                following = spans.get(index + 1)
                if following is not None and following[0] == end:
                    out.add(path)
                    break
        return sorted(out)

    def chunk_line_spans(self, under: str | None = None) -> Iterator[LineSpan]:
        """(path, gen, index, start_line, end_line) of every chunk: no text is read."""
        raise NotImplementedError(f"{type(self).__name__} cannot list chunk lines")

    def read_manifest(self) -> Manifest | None:
        """Every committed document (with its offsets) and folder, in one read
        (:mod:`semfs.ingest.store.manifest`), or None when no current manifest is stored: then list
        the documents and folders.

        A returned manifest describes the committed records exactly (a backend drops its
        manifest before any change and checks it against the meta it reads with it). It may
        answer before the store has finished opening (the embedded shard loads meanwhile).
        """
        return None

    def disk_bytes(self) -> int | None:
        """Bytes on disk for an embedded store; None where the backend cannot tell."""
        return None

    def lock_path(self, name: str) -> Path | None:
        """Where the collection's lock file ``name`` is on this machine
        (:mod:`semfs.ingest.store.writelock`: writers take turns on it); None when this
        store has no folder here."""
        return None

    def owner_link(self) -> OwnerLink | None:
        """The process that owns this store and relays our calls, with what it declared it
        does for us (embeds queries, runs searches, embeds what we write); None when this
        process talks to the store itself. Callers ask this, never the store's class."""
        return None

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class StoreWriter(StoreReader):
    """What an ingest and its dense pass write, besides reading.

    Writers follow the atomic protocol: upsert a new generation's chunks, then
    :meth:`put_document` (the commit), then :meth:`delete_stale_chunks`.
    """

    @abstractmethod
    def create(self, dimension: int) -> None:
        """Create the collection (vectors, payload indexes). No-op when it exists."""

    @abstractmethod
    def write_meta(self, meta: StoreMeta) -> None: ...

    @abstractmethod
    def put_document(self, record: DocumentRecord) -> None:
        """Commit a document version; its chunks must already be written."""

    @abstractmethod
    def delete_documents(self, paths: Sequence[str]) -> None:
        """Remove the records first (readers stop seeing them), then their chunks."""

    @abstractmethod
    def put_directories(self, records: Sequence[DirectoryRecord]) -> None:
        """Record folders (replacing the records of the same paths)."""

    @abstractmethod
    def delete_directories(self, paths: Sequence[str]) -> None:
        """Forget folder records; documents are not touched."""

    @abstractmethod
    def upsert_chunks(self, points: Sequence[ChunkPoint]) -> None: ...

    @abstractmethod
    def delete_stale_chunks(self, path: str, keep_gen: int | None) -> None:
        """Delete the chunks and blob parts of ``path`` of every generation but ``keep_gen``
        (None: all)."""

    @abstractmethod
    def chunk_versions(self) -> set[tuple[str, int]]:
        """The (path, gen) pairs that have chunks or blob parts: used to clean up after an
        interrupted run."""

    @abstractmethod
    def put_blob(self, path: str, gen: int, data: bytes) -> None:
        """Store ``data`` (an original file, served as it is) under ``path`` and ``gen``, in
        parts of :data:`~semfs.ingest.store.schema.BLOB_PART` bytes: written before the record
        that points to it commits, deleted by :meth:`delete_stale_chunks` like chunks."""

    @abstractmethod
    def set_dense(self, vectors: Sequence[DenseVector]) -> int:
        """Give stored chunks their dense vector, in place. A chunk that is gone (a newer
        version of its document replaced it) is left out, never made again; the number set."""

    @abstractmethod
    def chunks_without_dense(
        self,
        limit: int,
        after: str | None = None,
        under: str | None = None,
        paths: Sequence[str] | None = None,
    ) -> tuple[list[ChunkRecord], str | None]:
        """Up to ``limit`` chunks, of any generation, that have no dense vector yet, from the
        cursor ``after`` (None: the start), and the next page's cursor (None after the last).
        Only those below the folder ``under`` and (given) of the documents ``paths``: what
        readers use is embedded first (:mod:`semfs.ingest.focus`)."""

    @abstractmethod
    def dense_by_hash(self, hashes: Sequence[str]) -> dict[str, list[float]]:
        """A stored dense vector for each of ``hashes`` some embedded chunk has (its
        ``vhash``): a chunk whose model text is unchanged takes it instead of the model's time."""

    def write_manifest(self, generation: int) -> None:
        """Store a manifest of every committed record if the store is clean at
        ``generation`` (ingest calls it last); a no-op when the stored one is current."""

    def flush(self) -> None:
        """Make everything written so far durable."""


class Store(StoreWriter):
    """A collection this process keeps: read, written, maintained (compaction) and, when it
    owns it exclusively, served to other processes. What every backend of
    :data:`semfs.ingest.store.backends.BACKENDS` opens."""

    def compact(self) -> bool:
        """Reclaim the space of deleted points where enough of them pile up; True if it did.

        The embedded store runs Edge's optimizers: a segment is rewritten once a fifth of
        its points are deleted, and an appendable one whose vectors pass Edge's indexing
        threshold (10 MB, ~6.5k chunks) becomes immutable, its indexes on disk. A Qdrant
        server optimizes on its own: nothing to do.
        """
        return False

    def serve_writers(
        self,
        on_change: Callable[[], None] | None = None,
        served: Store | None = None,
        queries: QueryService | None = None,
        embeds: bool = False,
        held: Callable[[], Collection[str]] | None = None,
    ) -> Callable[[], None] | None:
        """Let other processes write through this one, when this process owns the store
        exclusively (an embedded shard); returns the function that stops serving.
        Their calls reach ``served`` (a view of this store), default this store;
        ``queries``, when given, embeds their search queries with this process's model;
        ``embeds``: this process gives the chunks they write their dense vectors
        (:class:`semfs.ingest.densepass.DenseService`), so a writer need not; ``held()``:
        the files this process's writable mount holds open for writing (their ingests leave
        them as they are until closed).

        ``on_change`` runs after another process commits a change (write_meta,
        delete_documents). None when there is nothing to serve: a server takes every writer
        itself, and a proxy's owner serves them. Use :class:`semfs.ingest.store.owner.StoreOwner`.
        """
        return None


class DelegatingStore(Store):
    """A Store that passes every call to ``inner``: subclass it to watch or adapt a few calls
    (test spies count reads this way) without restating the rest of the interface."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.backend = inner.backend
        self.collection = inner.collection

    @property
    def location(self) -> str:
        return self.inner.location

    @property
    def address(self) -> str:
        return self.inner.address

    def exists(self) -> bool:
        return self.inner.exists()

    def create(self, dimension: int) -> None:
        self.inner.create(dimension)

    def read_meta(self) -> StoreMeta | None:
        return self.inner.read_meta()

    def write_meta(self, meta: StoreMeta) -> None:
        self.inner.write_meta(meta)

    def list_documents(self) -> list[DocumentRecord]:
        return self.inner.list_documents()

    def get_document(self, path: str) -> DocumentRecord | None:
        return self.inner.get_document(path)

    def put_document(self, record: DocumentRecord) -> None:
        self.inner.put_document(record)

    def delete_documents(self, paths: Sequence[str]) -> None:
        self.inner.delete_documents(paths)

    def list_directories(self) -> list[DirectoryRecord]:
        return self.inner.list_directories()

    def put_directories(self, records: Sequence[DirectoryRecord]) -> None:
        self.inner.put_directories(records)

    def delete_directories(self, paths: Sequence[str]) -> None:
        self.inner.delete_directories(paths)

    def upsert_chunks(self, points: Sequence[ChunkPoint]) -> None:
        self.inner.upsert_chunks(points)

    def get_chunks(self, path: str, gen: int, indexes: Sequence[int]) -> list[ChunkRecord]:
        return self.inner.get_chunks(path, gen, indexes)

    def chunk_texts(self, path: str, gen: int, indexes: Sequence[int]) -> dict[int, str]:
        return self.inner.chunk_texts(path, gen, indexes)

    def chunk_vectors(self, path: str, gen: int, indexes: Sequence[int]) -> dict[int, list[float]]:
        return self.inner.chunk_vectors(path, gen, indexes)

    def delete_stale_chunks(self, path: str, keep_gen: int | None) -> None:
        self.inner.delete_stale_chunks(path, keep_gen)

    def chunk_versions(self) -> set[tuple[str, int]]:
        return self.inner.chunk_versions()

    def put_blob(self, path: str, gen: int, data: bytes) -> None:
        self.inner.put_blob(path, gen, data)

    def read_blob(self, path: str, gen: int, indexes: Sequence[int]) -> dict[int, bytes]:
        return self.inner.read_blob(path, gen, indexes)

    def query(
        self,
        dense: list[float],
        sparse: SparseQuery,
        mode: str,
        limit: int,
        under: str | None = None,
        similarities: bool = True,
    ) -> list[ScoredChunk]:
        return self.inner.query(dense, sparse, mode, limit, under, similarities)

    def query_ids(
        self,
        dense: list[float],
        sparse: SparseQuery,
        mode: str,
        limit: int,
        under: str | None = None,
    ) -> list[ScoredId]:
        return self.inner.query_ids(dense, sparse, mode, limit, under)

    def chunks_by_id(self, ids: Sequence[str]) -> dict[str, ChunkRecord]:
        return self.inner.chunks_by_id(ids)

    def definitions(
        self, names: Sequence[str], limit: int, under: str | None = None
    ) -> list[ScoredChunk]:
        return self.inner.definitions(names, limit, under)

    def count_chunks(self) -> int:
        return self.inner.count_chunks()

    def set_dense(self, vectors: Sequence[DenseVector]) -> int:
        return self.inner.set_dense(vectors)

    def chunks_without_dense(
        self,
        limit: int,
        after: str | None = None,
        under: str | None = None,
        paths: Sequence[str] | None = None,
    ) -> tuple[list[ChunkRecord], str | None]:
        return self.inner.chunks_without_dense(limit, after, under, paths)

    def dense_by_hash(self, hashes: Sequence[str]) -> dict[str, list[float]]:
        return self.inner.dense_by_hash(hashes)

    def embedding_counts(self, under: str | None = None) -> tuple[int, int]:
        return self.inner.embedding_counts(under)

    def keyword_stats(self, sparse: SparseQuery, under: str | None = None) -> KeywordStats | None:
        return self.inner.keyword_stats(sparse, under)

    def lock_path(self, name: str) -> Path | None:
        return self.inner.lock_path(name)

    def chunk_paths_matching(
        self,
        substrings: Sequence[str],
        words: Sequence[str],
        under: str | Sequence[str] | None = None,
        paths: Sequence[str] | None = None,
    ) -> list[str]:
        return self.inner.chunk_paths_matching(substrings, words, under, paths)

    def split_line_paths(self, under: str | None = None) -> list[str]:
        return self.inner.split_line_paths(under)

    def chunk_line_spans(self, under: str | None = None) -> Iterator[LineSpan]:
        return self.inner.chunk_line_spans(under)

    def disk_bytes(self) -> int | None:
        return self.inner.disk_bytes()

    def owner_link(self) -> OwnerLink | None:
        return self.inner.owner_link()

    def serve_writers(
        self,
        on_change: Callable[[], None] | None = None,
        served: Store | None = None,
        queries: QueryService | None = None,
        embeds: bool = False,
        held: Callable[[], Collection[str]] | None = None,
    ) -> Callable[[], None] | None:
        return self.inner.serve_writers(on_change, served or self, queries, embeds, held)

    def compact(self) -> bool:
        return self.inner.compact()

    def read_manifest(self) -> Manifest | None:
        return self.inner.read_manifest()

    def write_manifest(self, generation: int) -> None:
        self.inner.write_manifest(generation)

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()
