"""The Qdrant schema shared by ingest (writer) and fusefs (reader): the store contract.

One collection holds these kinds of points, told apart by the ``kind`` payload field:

* ``chunk``: one per chunk, with a BM25 sparse vector (``bm25``, IDF modifier), the payload
  of :class:`ChunkRecord` and, once embedded, a dense vector (``dense``, cosine). Ingest
  writes a chunk with its text and BM25 vector first (it is keyword-searchable from its
  document's commit on) and gives it its dense vector later, in place
  (:meth:`semfs.ingest.store.Store.set_dense`); ``vhash``, the hash of what the model sees,
  lets a chunk whose text is unchanged take a stored vector instead of the model's time.
* ``doc``: one per document, without vectors: the committed version of a document
  (:class:`DocumentRecord`). Readers follow only these; chunks of any other
  generation are invisible, which is what makes a document switch atomically.
* ``meta``: exactly one, without vectors: model, dimension, schema version, the
  store-wide generation counter and the source folder it mirrors (:class:`StoreMeta`).
* ``blob``: the original bytes of a converted document (a PDF beside its text view), in
  parts of :data:`BLOB_PART` bytes, without vectors: path (the original's), gen, index and
  ``data`` (base64). Written before the view's record commits, deleted with its chunks.
* ``dir``: one per source folder, without vectors: its mode, owner and mtime
  (:class:`DirectoryRecord`). Optional: stores written before they existed have none.
* ``manifest``: on a server only, the parts of the tree manifest
  (:mod:`semfs.ingest.store.manifest`), without vectors; the embedded store keeps it as a file
  beside the shard.

Point ids are UUIDv5 of stable keys, so a writer can address any point without a lookup.

One encoding: each type's ``to_payload``/``from_payload`` is the only place its fields are
named. Both backends store those payloads, and :func:`encode`/:func:`decode` (the JSON form
:mod:`semfs.ingest.store.ipc` sends) wrap the same payloads in a ``{"$": tag}`` object. A new field
is added in one pair of methods and reaches the stores and the socket alike.

``SCHEMA_VERSION`` is what this code writes and reads. :func:`check_schema` refuses any
other with one line, except the versions in :data:`READABLE`: version 1 (before converted
documents) has the same points minus the new optional fields, so it is read as it is, and
the next ingest stamps it with this version.
"""

from __future__ import annotations

import base64
import hashlib
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from semfs.ingest.errors import SchemaVersionError

SCHEMA_VERSION = 2
# Older versions this code reads unchanged: 1 lacks only blobs and optional fields.
READABLE = frozenset({1, 2})
# Bytes of an original per blob point: ~0.7 MB of base64 payload, well inside a request.
BLOB_PART = 512 * 1024
DENSE = "dense"
SPARSE = "bm25"

KIND_CHUNK = "chunk"
KIND_DOC = "doc"
KIND_META = "meta"
KIND_DIR = "dir"
KIND_BLOB = "blob"
# The tree manifest's parts, on a backend that keeps it in points (semfs.ingest.store.server_store).
KIND_MANIFEST = "manifest"

# Payload fields with an index: everything a reader filters by.
INDEXED_KEYWORDS = ("kind", "path", "dirs", "symbols", "vhash")
INDEXED_INTEGERS = ("gen",)
# Full-text index on chunk text (word tokens, lowercased): grep's prefilter. Added after the
# first stores were made; a store without it answers the same filters, only slower.
INDEXED_TEXT = ("text",)

# The ids' uuid5 namespace, 6f1d3a52-9a53-4c5e-8f0e-5e6d2b1c9a10, as bytes: ``uuid`` itself is
# not imported (it imports ``portable``), a mount's start pays each module it imports.
_NAMESPACE_BYTES = bytes.fromhex("6f1d3a529a534c5e8f0e5e6d2b1c9a10")


def _uuid5(name: str) -> str:
    """``str(uuid.uuid5(NAMESPACE, name))``, without building a UUID object.

    A cold read computes one id per chunk it fetches; uuid.UUID's integer round trips cost
    several times the SHA-1 itself.
    """
    h = bytearray(hashlib.sha1(_NAMESPACE_BYTES + name.encode()).digest()[:16])
    h[6] = (h[6] & 0x0F) | 0x50  # version 5
    h[8] = (h[8] & 0x3F) | 0x80  # RFC 4122 variant
    x = h.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


def meta_id() -> str:
    return _uuid5("meta")


def manifest_id(part: int) -> str:
    """Part ``part`` of the tree manifest, on a backend that keeps it in points."""
    return _uuid5(f"manifest\0{part}")


def doc_id(path: str) -> str:
    return _uuid5("doc\0" + path)


def dir_id(path: str) -> str:
    return _uuid5("dir\0" + path)


def chunk_id(path: str, gen: int, index: int) -> str:
    return _uuid5(f"chunk\0{path}\0{gen}\0{index}")


def blob_id(path: str, gen: int, index: int) -> str:
    return _uuid5(f"blob\0{path}\0{gen}\0{index}")


def blob_offsets(size: int) -> tuple[int, ...]:
    """Where each blob part of a ``size``-byte original starts (one empty part for 0 bytes)."""
    return tuple(range(0, size, BLOB_PART)) or (0,)


def blob_payloads(path: str, gen: int, data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """(point id, payload) of each blob part of ``data``: the one encoding of a blob."""
    return [
        (
            blob_id(path, gen, index),
            {
                "kind": KIND_BLOB,
                "path": path,
                "gen": gen,
                "index": index,
                "data": base64.b64encode(data[start : start + BLOB_PART]).decode("ascii"),
            },
        )
        for index, start in enumerate(blob_offsets(len(data)))
    ]


def blob_part(payload: dict[str, Any]) -> tuple[int, bytes]:
    """(index, bytes) of a blob point's payload."""
    return int(payload["index"]), base64.b64decode(payload["data"], validate=True)


def parent_dirs(path: str) -> list[str]:
    """Every directory containing ``path``: ``"a/b/c.md"`` -> ``["", "a", "a/b"]``.

    Stored on chunks so a search can be scoped to a directory with one keyword match,
    which both backends index (prefix matching is not available on both).
    """
    parts = path.split("/")[:-1]
    return [""] + ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class StoreMeta:
    model: str
    dimension: int
    schema: int = SCHEMA_VERSION
    generation: int = 0
    # True while an ingest run is under way or was interrupted: the next run cleans up.
    dirty: bool = False
    # What the last finished run left: a store holding fewer is damaged (semfs check).
    # None in stores written before these were recorded.
    documents: int | None = None
    chunks: int | None = None
    # BM25's average chunk length (in its tokens) the sparse vectors were written with:
    # measured on the first ingest and kept, so every later ingest weighs terms alike.
    # None in stores written before it was recorded (their vectors used Bm25's 256).
    bm25_avg_len: float | None = None
    # The folder the collection mirrors, recorded at its first ingest: its absolute path and
    # the device and inode of that folder, so an ingest of another folder is refused (it
    # would delete every document) and a folder that moved is recognised. None in stores
    # written before it was recorded (the next ingest records its folder).
    source: str | None = None
    source_dev: int | None = None
    source_ino: int | None = None
    # When the last run that changed the collection finished (Unix time) and how long it
    # took (seconds); an unchanged re-run writes nothing, so it leaves them.
    ingested_at: float | None = None
    ingest_seconds: float | None = None
    # True while some chunks may lack their dense vectors: set by a keyword pass that wrote
    # chunks without one, cleared by a dense pass that found none left (under the write lock,
    # so no writer added any meanwhile). False in stores written before it (every chunk had
    # its vector): a reader counts nothing while it is False.
    dense_pending: bool = False

    def to_payload(self) -> dict[str, Any]:
        return {
            "kind": KIND_META,
            "model": self.model,
            "dimension": self.dimension,
            "schema": self.schema,
            "generation": self.generation,
            "dirty": self.dirty,
            "documents": self.documents,
            "chunks": self.chunks,
            "bm25_avg_len": self.bm25_avg_len,
            "source": self.source,
            "source_dev": self.source_dev,
            "source_ino": self.source_ino,
            "ingested_at": self.ingested_at,
            "ingest_seconds": self.ingest_seconds,
            "dense_pending": self.dense_pending,
        }

    @classmethod
    def from_payload(cls, p: dict[str, Any]) -> StoreMeta:
        return cls(
            model=str(p["model"]),
            dimension=int(p["dimension"]),
            schema=int(p.get("schema", SCHEMA_VERSION)),
            generation=int(p.get("generation", 0)),
            dirty=bool(p.get("dirty", False)),
            documents=int(p["documents"]) if p.get("documents") is not None else None,
            chunks=int(p["chunks"]) if p.get("chunks") is not None else None,
            bm25_avg_len=float(p["bm25_avg_len"]) if p.get("bm25_avg_len") else None,
            source=str(p["source"]) if p.get("source") is not None else None,
            source_dev=_int_or_none(p.get("source_dev")),
            source_ino=_int_or_none(p.get("source_ino")),
            ingested_at=_float_or_none(p.get("ingested_at")),
            ingest_seconds=_float_or_none(p.get("ingest_seconds")),
            dense_pending=bool(p.get("dense_pending", False)),
        )


@dataclass(frozen=True)
class DocumentRecord:
    """The committed version of one document: enough to build a directory tree and read it.

    ``offsets`` holds the byte offset where each chunk starts, as an ``array('Q')`` when
    read from a payload (8 bytes an offset: a tuple of ints costs ~36). Tree listings carry
    it, so opening a file needs no store call; None means "not fetched".
    """

    path: str
    size: int
    mtime: float
    sha256: str
    chunks: int
    gen: int
    offsets: Sequence[int] | None = field(default=None, compare=False)
    # Exact source mtime; ``mtime`` (float seconds) loses the last digits of nanoseconds.
    mtime_ns: int | None = None
    # Whether a chunk boundary falls inside a line (grep must then read the whole document);
    # None in records written before this field existed.
    split_lines: bool | None = None
    # The source file's permission bits and owner, which the mount serves (minus write).
    # None in stores written before they were recorded: the mount shows 0444, its own user.
    mode: int | None = None
    uid: int | None = None
    gid: int | None = None
    # A text view (``report.pdf.md``): the path of the original it was extracted from, whose
    # bytes are stored as blob points under that path (same gen), with their size and sha256,
    # and what extracted it (semfs.ingest.formats.extractor_tag). None for a text document.
    # ``original == path``: a file stored as it is (an image, a binary): its bytes are the
    # blob parts, it has no view and no chunks (``extractor`` "as-is").
    original: str | None = None
    original_size: int | None = None
    original_sha256: str | None = None
    extractor: str | None = None
    # Never stored: True on the record a tree makes for an original, whose bytes are blob
    # parts (``offsets`` are the parts' starts), not chunks.
    blob: bool | None = None

    @property
    def as_is(self) -> bool:
        """Whether this records a file stored as it is, not a document (no chunks)."""
        return self.original is not None and self.original == self.path

    @property
    def st_mtime_ns(self) -> int:
        return self.mtime_ns if self.mtime_ns is not None else round(self.mtime * 1e9)

    def to_payload(self) -> dict[str, Any]:
        return {
            "kind": KIND_DOC,
            "path": self.path,
            "size": self.size,
            "mtime": self.mtime,
            "mtime_ns": self.mtime_ns,
            "sha256": self.sha256,
            "chunks": self.chunks,
            "gen": self.gen,
            # None ("not fetched", from a tree scroll) stays apart from () ("no chunks").
            "offsets": None if self.offsets is None else list(self.offsets),
            "split_lines": self.split_lines,
            "mode": self.mode,
            "uid": self.uid,
            "gid": self.gid,
            "original": self.original,
            "original_size": self.original_size,
            "original_sha256": self.original_sha256,
            "extractor": self.extractor,
        }

    def original_record(self) -> DocumentRecord | None:
        """The record a tree shows for this view's original: its path, size and sha256, this
        view's generation, mtime, mode and owner, and the blob parts' offsets; None when this
        is not a text view. For a file stored as it is, the record of the file itself."""
        if self.original is None or self.original_size is None or self.original_sha256 is None:
            return None
        offsets = blob_offsets(self.original_size)
        return DocumentRecord(
            self.original,
            self.original_size,
            self.mtime,
            self.original_sha256,
            len(offsets),
            self.gen,
            offsets,
            mtime_ns=self.mtime_ns,
            split_lines=False,
            mode=self.mode,
            uid=self.uid,
            gid=self.gid,
            blob=True,
        )

    @classmethod
    def from_payload(cls, p: dict[str, Any]) -> DocumentRecord:
        offsets = p.get("offsets")
        return cls(
            path=str(p["path"]),
            size=int(p["size"]),
            mtime=float(p["mtime"]),
            sha256=str(p["sha256"]),
            chunks=int(p["chunks"]),
            gen=int(p["gen"]),
            offsets=array("Q", map(int, offsets)) if offsets is not None else None,
            mtime_ns=int(p["mtime_ns"]) if p.get("mtime_ns") is not None else None,
            split_lines=bool(p["split_lines"]) if p.get("split_lines") is not None else None,
            mode=_int_or_none(p.get("mode")),
            uid=_int_or_none(p.get("uid")),
            gid=_int_or_none(p.get("gid")),
            original=_str_or_none(p.get("original")),
            original_size=_int_or_none(p.get("original_size")),
            original_sha256=_str_or_none(p.get("original_sha256")),
            extractor=_str_or_none(p.get("extractor")),
        )


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


# Fields of DocumentRecord that are never stored (made by a tree): not in payloads or manifests.
DOC_LOCAL_FIELDS = frozenset({"blob"})

# The payload fields of a doc record that a tree needs, offsets included: the mount then
# opens a file without a store call (10 offsets cost ~150 bytes a document).
DOC_TREE_FIELDS = [
    "kind",
    "path",
    "size",
    "mtime",
    "mtime_ns",
    "sha256",
    "chunks",
    "gen",
    "offsets",
    "split_lines",
    "mode",
    "uid",
    "gid",
    "original",
    "original_size",
    "original_sha256",
    "extractor",
]


@dataclass(frozen=True)
class DirectoryRecord:
    """A source folder as ingested: its permission bits, owner and mtime.

    Written by an ingest run for every folder it walked (the root is ``""``; a watcher's
    batch also records the folders above its paths) with the run's first write, before any
    document below it commits, so the mount shows empty folders and each folder's own mode
    at every moment of a run, and after a run killed mid-way. Folders without a record
    (stores written before issue 46) are inferred from document paths and shown 0555,
    owned by the mounting user; ``semfs check`` reports them.
    """

    path: str
    mode: int
    uid: int
    gid: int
    mtime_ns: int

    def to_payload(self) -> dict[str, Any]:
        return {
            "kind": KIND_DIR,
            "path": self.path,
            "mode": self.mode,
            "uid": self.uid,
            "gid": self.gid,
            "mtime_ns": self.mtime_ns,
        }

    @classmethod
    def from_payload(cls, p: dict[str, Any]) -> DirectoryRecord:
        return cls(
            path=str(p["path"]),
            mode=int(p["mode"]),
            uid=int(p["uid"]),
            gid=int(p["gid"]),
            mtime_ns=int(p["mtime_ns"]),
        )


class OutlineEntry(NamedTuple):
    """A definition a chunk of source code overlaps (lines 1-based): from ``start_line``
    (its comments and decorators) to ``end_line``, its signature on ``line`` (whose text is
    ``signature``), and its label path (``class Uploader > def retry_upload``)."""

    start_line: int
    end_line: int
    line: int
    label: str
    signature: str


@dataclass(frozen=True)
class ChunkRecord:
    """One chunk as stored: an exact byte span of its document, and its text.

    ``title`` and ``description`` are the document's (the same on each of its chunks), so a
    search shows them without reading anything but the chunks it found; "" in stores written
    before they were recorded.
    """

    path: str
    gen: int
    index: int
    start: int
    end: int
    start_line: int
    end_line: int
    text: str
    heading: str = ""
    title: str = ""
    description: str = ""
    # Where in the original a chunk of a text view is: "page 7", "pages 7-8", "slide 3",
    # "chapter 2"; "" elsewhere (and in stores written before it was recorded).
    place: str = ""
    # The code fence the chunk starts inside ("```"), else "" (and in older stores): its
    # "# " lines are code, not headings (semfs.ingest.chunking.ChunkSpan).
    fence: str = ""
    # Source code chunked by its syntax (semfs.ingest.syntax): the language ("python"), the
    # definitions the chunk overlaps, outer before inner, and the names of those whose
    # signature is in it (what a lookup by name matches: ``retry_upload``,
    # ``Uploader.retry_upload``). Empty for prose, and in stores written before them.
    syntax: str = ""
    outline: tuple[OutlineEntry, ...] = ()
    symbols: tuple[str, ...] = ()
    # vector_hash() of what the model embeds for this chunk (the context line and the text):
    # equal hashes, equal dense vectors. "" in stores written before it was recorded.
    vhash: str = ""

    def to_payload(self) -> dict[str, Any]:
        code: dict[str, Any] = {}
        if self.syntax:  # prose chunks carry no empty fields: their payload stays as it was
            code = {
                "syntax": self.syntax,
                "outline": [list(e) for e in self.outline],
                "symbols": list(self.symbols),
            }
        return {
            "kind": KIND_CHUNK,
            "path": self.path,
            "dirs": parent_dirs(self.path),
            "gen": self.gen,
            "index": self.index,
            "start": self.start,
            "end": self.end,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "heading": self.heading,
            "text": self.text,
            "title": self.title,
            "description": self.description,
            "place": self.place,
            "fence": self.fence,
            "vhash": self.vhash,
            **code,
        }

    @classmethod
    def from_payload(cls, p: dict[str, Any]) -> ChunkRecord:
        return cls(
            path=str(p["path"]),
            gen=int(p["gen"]),
            index=int(p["index"]),
            start=int(p["start"]),
            end=int(p["end"]),
            start_line=int(p["start_line"]),
            end_line=int(p["end_line"]),
            text=str(p["text"]),
            heading=str(p.get("heading", "")),
            title=str(p.get("title", "")),
            description=str(p.get("description", "")),
            place=str(p.get("place", "")),
            fence=str(p.get("fence", "")),
            syntax=str(p.get("syntax") or ""),
            outline=tuple(
                OutlineEntry(int(e[0]), int(e[1]), int(e[2]), str(e[3]), str(e[4]))
                for e in p.get("outline") or ()
            ),
            symbols=tuple(str(n) for n in p.get("symbols") or ()),
            vhash=str(p.get("vhash") or ""),
        )


def vector_hash(text: str) -> str:
    """The hash a chunk's ``vhash`` holds for ``text``, what the model embeds: 128 bits of
    SHA-256 (a collision would only give a chunk another chunk's meaning)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@dataclass(frozen=True)
class ChunkPoint:
    """A chunk with its vectors, ready to upsert. ``dense`` None: written for keywords
    first, its dense vector set later (:meth:`semfs.ingest.store.Store.set_dense`)."""

    record: ChunkRecord
    dense: list[float] | None
    sparse_indices: list[int]
    sparse_values: list[float]

    def to_payload(self) -> dict[str, Any]:
        return {
            "record": self.record.to_payload(),
            "dense": None if self.dense is None else pack_floats(self.dense),
            "indices": [int(i) for i in self.sparse_indices],
            "values": [float(w) for w in self.sparse_values],
        }

    @classmethod
    def from_payload(cls, p: dict[str, Any]) -> ChunkPoint:
        dense = p.get("dense")
        return cls(
            ChunkRecord.from_payload(p["record"]),
            None if dense is None else unpack_floats(dense),
            [int(i) for i in p["indices"]],
            [float(w) for w in p["values"]],
        )


@dataclass(frozen=True)
class DenseVector:
    """A dense vector for the stored chunk ``path``/``gen``/``index`` (what
    :meth:`semfs.ingest.store.Store.set_dense` takes)."""

    path: str
    gen: int
    index: int
    vector: list[float]

    def to_payload(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "gen": self.gen,
            "index": self.index,
            "vector": pack_floats(self.vector),
        }

    @classmethod
    def from_payload(cls, p: dict[str, Any]) -> DenseVector:
        return cls(str(p["path"]), int(p["gen"]), int(p["index"]), unpack_floats(p["vector"]))


@dataclass(frozen=True)
class ScoredChunk:
    """A chunk a query found: ``score``, the DBSF-fused score (each retriever's score mapped
    through mean +- 3 std of its candidates, summed; see :meth:`semfs.ingest.store.Store.query`),
    and ``similarity``, the cosine between the query's and the chunk's dense vectors (None when
    the query had no dense vector: keyword mode)."""

    record: ChunkRecord
    score: float
    similarity: float | None = None

    def to_payload(self) -> dict[str, Any]:
        return {
            "record": self.record.to_payload(),
            "score": float(self.score),
            "similarity": self.similarity,
        }

    @classmethod
    def from_payload(cls, p: dict[str, Any]) -> ScoredChunk:
        sim = p.get("similarity")
        return cls(
            ChunkRecord.from_payload(p["record"]),
            float(p["score"]),
            None if sim is None else float(sim),
        )


@dataclass(frozen=True)
class ScoredId:
    """A chunk a query found, without its payload
    (:meth:`semfs.ingest.store.StoreReader.query_ids`): its point id (:func:`chunk_id`), its
    score as :class:`ScoredChunk`'s, and whether it has its dense vector yet. A ranking that
    weighs hundreds of candidates reads only these, then the records of the few it keeps
    (:meth:`semfs.ingest.store.StoreReader.chunks_by_id`)."""

    id: str
    score: float
    embedded: bool

    def to_payload(self) -> dict[str, Any]:
        return {"id": self.id, "score": float(self.score), "embedded": self.embedded}

    @classmethod
    def from_payload(cls, p: dict[str, Any]) -> ScoredId:
        return cls(str(p["id"]), float(p["score"]), bool(p["embedded"]))


@dataclass(frozen=True)
class SparseQuery:
    """A BM25 query vector: token ids and their weights."""

    indices: list[int]
    values: list[float]

    def to_payload(self) -> dict[str, Any]:
        return {
            "indices": [int(i) for i in self.indices],
            "values": [float(w) for w in self.values],
        }

    @classmethod
    def from_payload(cls, p: dict[str, Any]) -> SparseQuery:
        return cls([int(i) for i in p["indices"]], [float(w) for w in p["values"]])


def check_schema(meta: StoreMeta, location: str) -> None:
    """Refuse, with one line, a store this code cannot read (SchemaVersionError)."""
    if meta.schema in READABLE:
        return
    if meta.schema > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"store {location} has schema version {meta.schema}, newer than this semfs reads "
            f"({SCHEMA_VERSION}): upgrade semfs"
        )
    if meta.schema < SCHEMA_VERSION:
        raise SchemaVersionError(
            f"store {location} has schema version {meta.schema}, from an older semfs (this one "
            f"reads {SCHEMA_VERSION}): ingest again into a new store (--store or --collection)"
        )


# --- the JSON form of schema values (ipc) ----------------------------------------------------


class Vector:
    """Marks a list of floats to encode packed as float32: 4 bytes a value, not ~20 as JSON.

    Both backends store vectors as float32, so nothing is lost that the store would keep.
    """

    __slots__ = ("values",)

    def __init__(self, values: Sequence[float]) -> None:
        self.values = values


def pack_floats(values: Sequence[float]) -> str:
    """Float32, little-endian, base64: a dense vector in a JSON string."""
    arr = array("f", values)
    if sys.byteorder == "big":
        arr.byteswap()
    return base64.b64encode(arr.tobytes()).decode("ascii")


def unpack_floats(text: str) -> list[float]:
    arr = array("f")
    arr.frombytes(base64.b64decode(text, validate=True))
    if sys.byteorder == "big":
        arr.byteswap()
    return arr.tolist()


_Encodable = (
    StoreMeta
    | DocumentRecord
    | DirectoryRecord
    | ChunkRecord
    | ChunkPoint
    | DenseVector
    | ScoredChunk
    | ScoredId
    | SparseQuery
)
# Tag -> type, for every schema type that crosses the socket.
_TYPES: dict[str, type[_Encodable]] = {
    "meta": StoreMeta,
    "doc": DocumentRecord,
    "dir": DirectoryRecord,
    "chunk": ChunkRecord,
    "point": ChunkPoint,
    "dense": DenseVector,
    "scored": ScoredChunk,
    "scored_id": ScoredId,
    "sparse": SparseQuery,
}
_TAGS = {cls: tag for tag, cls in _TYPES.items()}


def encode(value: Any) -> Any:
    """A JSON form of a Store argument or result; schema objects become ``{"$": tag, ...}``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, (set, frozenset)):  # chunk_versions: (path, gen) pairs
        return {"$": "pairs", "v": sorted([str(p), int(g)] for p, g in value)}
    if isinstance(value, Vector):
        return {"$": "f32", "v": pack_floats(value.values)}
    if isinstance(value, bytes):  # put_blob's data
        return {"$": "bytes", "v": base64.b64encode(value).decode("ascii")}
    if isinstance(value, dict):  # read_blob's parts by index
        return {"$": "map", "v": [[encode(k), encode(v)] for k, v in value.items()]}
    tag = _TAGS.get(type(value))
    if tag is None:
        raise TypeError(f"cannot encode a {type(value).__name__}")
    return {"$": tag, "v": value.to_payload()}


def decode(value: Any) -> Any:
    """The inverse of :func:`encode`. Raises ValueError, KeyError or TypeError on bad input."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    tag = value["$"]
    if tag == "pairs":
        return {(str(p), int(g)) for p, g in value["v"]}
    if tag == "f32":
        return unpack_floats(value["v"])
    if tag == "bytes":
        return base64.b64decode(value["v"], validate=True)
    if tag == "map":
        return {decode(k): decode(v) for k, v in value["v"]}
    cls = _TYPES.get(tag)
    if cls is None:
        raise ValueError(f"unknown value tag {tag!r}")
    return cls.from_payload(dict(value["v"]))
