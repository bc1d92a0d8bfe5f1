"""The Qdrant schema shared by ingest (writer) and fusefs (reader): the store contract.

One collection holds three kinds of points, told apart by the ``kind`` payload field:

* ``chunk``: one per chunk, with a dense vector (``dense``, cosine) and a BM25 sparse
  vector (``bm25``, IDF modifier) and the payload of :class:`ChunkRecord`.
* ``doc``: one per document, without vectors: the committed version of a document
  (:class:`DocumentRecord`). Readers follow only these; chunks of any other
  generation are invisible, which is what makes a document switch atomically.
* ``meta``: exactly one, without vectors: model, dimension, schema version and the
  store-wide generation counter (:class:`StoreMeta`).

Point ids are UUIDv5 of stable keys, so a writer can address any point without a lookup.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1
DENSE = "dense"
SPARSE = "bm25"

KIND_CHUNK = "chunk"
KIND_DOC = "doc"
KIND_META = "meta"

# Payload fields with an index: everything a reader filters by.
INDEXED_KEYWORDS = ("kind", "path", "dirs")
INDEXED_INTEGERS = ("gen",)
# Full-text index on chunk text (word tokens, lowercased): grep's prefilter. Added after the
# first stores were made; a store without it answers the same filters, only slower.
INDEXED_TEXT = ("text",)

_NAMESPACE = uuid.UUID("6f1d3a52-9a53-4c5e-8f0e-5e6d2b1c9a10")


def meta_id() -> str:
    return str(uuid.uuid5(_NAMESPACE, "meta"))


def doc_id(path: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, "doc\0" + path))


def chunk_id(path: str, gen: int, index: int) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"chunk\0{path}\0{gen}\0{index}"))


def parent_dirs(path: str) -> list[str]:
    """Every directory containing ``path``: ``"a/b/c.md"`` -> ``["", "a", "a/b"]``.

    Stored on chunks so a search can be scoped to a directory with one keyword match,
    which both backends index (prefix matching is not available on both).
    """
    parts = path.split("/")[:-1]
    return [""] + ["/".join(parts[: i + 1]) for i in range(len(parts))]


@dataclass(frozen=True)
class StoreMeta:
    model: str
    dimension: int
    schema: int = SCHEMA_VERSION
    generation: int = 0
    # True while an ingest run is under way or was interrupted: the next run cleans up.
    dirty: bool = False

    def to_payload(self) -> dict[str, Any]:
        return {
            "kind": KIND_META,
            "model": self.model,
            "dimension": self.dimension,
            "schema": self.schema,
            "generation": self.generation,
            "dirty": self.dirty,
        }

    @classmethod
    def from_payload(cls, p: dict[str, Any]) -> StoreMeta:
        return cls(
            model=str(p["model"]),
            dimension=int(p["dimension"]),
            schema=int(p.get("schema", SCHEMA_VERSION)),
            generation=int(p.get("generation", 0)),
            dirty=bool(p.get("dirty", False)),
        )


@dataclass(frozen=True)
class DocumentRecord:
    """The committed version of one document: enough to build a directory tree.

    ``offsets`` holds the byte offset where each chunk starts; it is left out of tree
    scrolls (it can be long) and fetched when a file is opened.
    """

    path: str
    size: int
    mtime: float
    sha256: str
    chunks: int
    gen: int
    offsets: tuple[int, ...] | None = field(default=None, compare=False)
    # Exact source mtime; ``mtime`` (float seconds) loses the last digits of nanoseconds.
    mtime_ns: int | None = None

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
            "offsets": list(self.offsets or ()),
        }

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
            offsets=tuple(int(o) for o in offsets) if offsets is not None else None,
            mtime_ns=int(p["mtime_ns"]) if p.get("mtime_ns") is not None else None,
        )


# The payload fields of a doc record that a tree needs; "offsets" is left out.
DOC_TREE_FIELDS = ["kind", "path", "size", "mtime", "mtime_ns", "sha256", "chunks", "gen"]


@dataclass(frozen=True)
class ChunkRecord:
    """One chunk as stored: an exact byte span of its document, and its text."""

    path: str
    gen: int
    index: int
    start: int
    end: int
    start_line: int
    end_line: int
    text: str
    heading: str = ""

    def to_payload(self) -> dict[str, Any]:
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
        )


@dataclass(frozen=True)
class ChunkPoint:
    """A chunk with its vectors, ready to upsert."""

    record: ChunkRecord
    dense: list[float]
    sparse_indices: list[int]
    sparse_values: list[float]


@dataclass(frozen=True)
class ScoredChunk:
    record: ChunkRecord
    score: float
