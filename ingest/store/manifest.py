"""The tree manifest: every committed document and folder record in one compressed blob.

A mount builds its tree from the document and folder records. Scrolling them costs one
request per 1,024 records and, on the embedded store, waits for the engine to load the shard
(seconds at 100k chunks). The manifest holds the same records (documents with their chunk
offsets) as one gzipped columnar JSON document that a backend stores wherever it can read it
in one request. Its number columns (sizes, times, modes, ...) and the chunk offsets are
packed binary arrays inside it, decoded in C: at 10k documents a JSON list of numbers per
column took most of the decode.

Rules a reader may rely on:

* A manifest is written only after an ingest run has committed everything and marked the
  store clean, and it carries the store's meta of that moment (:attr:`Manifest.meta`, whose
  generation stamps it).
* Before a backend changes anything it drops its stored manifest, so a manifest that can be
  read describes the committed records exactly. A reader that can also read the store's meta
  checks that it is the manifest's (same generation, not dirty) and falls back to scrolling
  the records when it is not.
* Its columns are the fields of :class:`DocumentRecord` and :class:`DirectoryRecord`, read
  from the dataclasses themselves: a field added to the schema is carried without an edit
  here, and a manifest whose columns are not this code's fields is refused (the reader
  scrolls), so no field is ever silently dropped or defaulted.
* :meth:`Manifest.from_bytes` raises ValueError on anything it cannot fully decode: a torn or
  foreign file is never half-used. :meth:`Manifest.decode` never raises at all: whatever the
  decoder meets (a zlib error, nesting too deep for json, ...) means "list the records".
"""

from __future__ import annotations

import base64
import contextlib
import gc
import gzip
import json
import logging
import sys
import zlib
from array import array
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from itertools import accumulate, repeat
from typing import Any

from semfs.ingest.store.schema import DOC_LOCAL_FIELDS, DirectoryRecord, DocumentRecord, StoreMeta

logger = logging.getLogger(__name__)

FORMAT = 4
# gzip level 6: the path and digest columns compress ~3x; higher levels cost more than they save.
COMPRESS_LEVEL = 6
# A record's unstored fields (DOC_LOCAL_FIELDS) keep their class default when decoded.
DOC_COLUMNS = tuple(f.name for f in fields(DocumentRecord) if f.name not in DOC_LOCAL_FIELDS)
DIR_COLUMNS = tuple(f.name for f in fields(DirectoryRecord))
# Columns whose JSON list is an array('Q') in the record (as DocumentRecord.from_payload makes).
_ARRAYS = frozenset({"offsets"})
# Item sizes of array typecodes vary by platform; these are 4 and 8 bytes on every one
# semfs runs on (Linux and macOS, 64-bit).
_PACKED_TYPES = ("I", "Q")
# A scalar column packed whole: "q" ints (int64), "d" floats, "B" bools (one byte each).
_SCALAR_TYPES = ("q", "d", "B")
_INT64 = range(-(1 << 63), 1 << 63)


class OtherVersion(ValueError):
    """A manifest written by another version of semfs (format or fields): expected after an
    upgrade, not damage; the next ingest (or mount) writes a current one."""


@dataclass(frozen=True)
class Manifest:
    """The committed documents and folders of one store generation, documents with offsets."""

    meta: StoreMeta
    documents: tuple[DocumentRecord, ...]
    directories: tuple[DirectoryRecord, ...] = ()

    @property
    def generation(self) -> int:
        return self.meta.generation

    def matches(self, meta: StoreMeta | None) -> bool:
        """Whether ``meta`` (read from the store now) is the state this manifest describes."""
        return meta is not None and not meta.dirty and meta == self.meta

    def to_bytes(self) -> bytes:
        # Columns, not objects: the field names are not repeated 100k times.
        body = {
            "format": FORMAT,
            "meta": self.meta.to_payload(),
            "documents": _columns(self.documents, DOC_COLUMNS),
            "directories": _columns(self.directories, DIR_COLUMNS),
        }
        # ensure_ascii (the default) keeps lone surrogates (undecodable file names) intact.
        text = json.dumps(body, separators=(",", ":"))
        return gzip.compress(text.encode("ascii"), COMPRESS_LEVEL, mtime=0)

    @classmethod
    def from_bytes(cls, data: bytes) -> Manifest:
        try:
            body = json.loads(gzip.decompress(data))
            if body.get("format") != FORMAT:
                raise OtherVersion(f"manifest format {body.get('format')!r}, not {FORMAT}")
            docs = _rows(DocumentRecord, body["documents"], DOC_COLUMNS)
            dirs = _rows(DirectoryRecord, body["directories"], DIR_COLUMNS)
            # Positional and unconverted (this runs once per record on a mount's way up):
            # JSON already gives these types. Spot-check one record of each kind.
            if docs and not _looks_like(docs[0]):
                raise ValueError("manifest document columns have the wrong types")
            if dirs and not (isinstance(dirs[0].path, str) and isinstance(dirs[0].mode, int)):
                raise ValueError("manifest folder columns have the wrong types")
            return cls(StoreMeta.from_payload(body["meta"]), docs, dirs)
        except (
            OSError,
            EOFError,
            zlib.error,  # flipped bytes inside the deflate stream: not an OSError
            KeyError,
            IndexError,
            TypeError,
            AttributeError,
            RecursionError,  # a nesting json cannot follow
            OverflowError,
        ) as exc:
            raise ValueError(f"unreadable manifest: {exc}") from exc

    @classmethod
    def decode(cls, data: bytes, where: str) -> Manifest | None:
        """The manifest in ``data`` (of ``where``, for the log), or None when it cannot
        stand in for the records: another format, or damaged. Either way the caller falls
        back to listing the records, so this logs why instead of raising."""
        try:
            with collector_paused():
                return cls.from_bytes(data)
        except OtherVersion as exc:
            logger.info("not using the manifest of %s: %s", where, exc)
        except ValueError as exc:
            logger.warning("ignoring the manifest of %s: %s", where, exc)
        except Exception as exc:  # damage the list above missed: still not fatal
            logger.warning("ignoring the manifest of %s: %s: %s", where, type(exc).__name__, exc)
        return None

    @classmethod
    def of(
        cls,
        meta: StoreMeta,
        documents: Sequence[DocumentRecord],
        directories: Sequence[DirectoryRecord] = (),
    ) -> Manifest:
        return cls(
            meta,
            tuple(sorted(documents, key=lambda d: d.path)),
            tuple(sorted(directories, key=lambda d: d.path)),
        )


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection meanwhile: for work that makes a few objects per document
    and keeps them all (a manifest's decode, the first tree built from it), so the collections
    they would set off (one per 700 allocations, an older generation now and then) free nothing
    (~10 ms at 10k documents)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _columns(records: Sequence[Any], names: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        values = [getattr(r, name) for r in records]
        out[name] = _pack(values) if name in _ARRAYS else _pack_scalars(values)
    return out


def _pack_scalars(values: list[Any]) -> Any:
    """A column of ints, floats or bools (None allowed) as one binary array plus the
    positions of its Nones; any other column (strings, mixed types) as a JSON list."""
    present = [v for v in values if v is not None]
    kinds = {type(v) for v in present}
    if kinds == {bool}:
        typecode = "B"
    elif kinds == {int} and all(v in _INT64 for v in present):
        typecode = "q"
    elif kinds == {float}:
        typecode = "d"
    else:
        return values
    packed = array(typecode, [0 if v is None else v for v in values])
    if sys.byteorder == "big":
        packed.byteswap()
    return {
        "type": typecode,
        "nulls": [i for i, v in enumerate(values) if v is None],
        "data": base64.b64encode(packed.tobytes()).decode("ascii"),
    }


def _unpack_scalars(column: Any) -> list[Any]:
    if isinstance(column, list):
        return column
    typecode = column["type"]
    if typecode not in _SCALAR_TYPES:
        raise ValueError(f"manifest column type {typecode!r}")
    packed = array(typecode)
    packed.frombytes(base64.b64decode(column["data"], validate=True))
    if sys.byteorder == "big":
        packed.byteswap()
    values: list[Any] = packed.tolist()
    if typecode == "B":
        values = [v == 1 for v in values]
    for i in column["nulls"]:
        values[i] = None
    return values


def _pack(arrays: list[Sequence[int] | None]) -> dict[str, Any]:
    """Integer arrays as one little-endian blob (base64; uint32 when every value fits, else
    uint64) and each one's length (-1: None): 100k offsets decode in a few ms, where a JSON
    list of lists takes ~50."""
    flat = array("Q")
    for a in arrays:
        if a is not None:
            flat.extend(a)
    if not flat or max(flat) < 1 << 32:
        flat = array("I", flat)
    if sys.byteorder == "big":
        flat.byteswap()
    return {
        "lengths": [-1 if a is None else len(a) for a in arrays],
        "type": flat.typecode,
        "data": base64.b64encode(flat.tobytes()).decode("ascii"),
    }


def _unpack(packed: dict[str, Any]) -> list[array[int] | None]:
    if packed["type"] not in _PACKED_TYPES:
        raise ValueError(f"manifest array type {packed['type']!r}")
    flat = array(packed["type"])
    flat.frombytes(base64.b64decode(packed["data"], validate=True))
    if sys.byteorder == "big":
        flat.byteswap()
    flat = array("Q", flat)  # what DocumentRecord.from_payload makes
    lengths = packed["lengths"]
    ends = list(accumulate(n if n > 0 else 0 for n in lengths))
    if (ends[-1] if ends else 0) != len(flat):
        raise ValueError("manifest offsets do not add up")
    # One slice per document, made in C (a Python loop here was a third of the decode).
    out: list[array[int] | None] = list(map(flat.__getitem__, map(slice, [0, *ends], ends)))
    for i in [i for i, n in enumerate(lengths) if n < 0]:
        out[i] = None
    return out


def _rows(cls: Any, columns: dict[str, Any], names: tuple[str, ...]) -> tuple[Any, ...]:
    if not isinstance(columns, dict) or tuple(columns) != names:
        # Another version's fields: scrolling the records is right, guessing is not.
        raise OtherVersion(f"manifest columns {list(columns)} are not {list(names)}")
    data = [_unpack(columns[n]) if n in _ARRAYS else _unpack_scalars(columns[n]) for n in names]
    if len({len(c) for c in data}) > 1:
        raise ValueError("manifest columns differ in length")
    # Each record gets its __dict__ whole: the frozen dataclass's __init__ (a setattr per
    # field) would double the cost, which a mount pays once per document. All in C (maps,
    # no Python loop): half the time of a loop over the rows.
    dicts = map(dict, map(zip, repeat(names), zip(*data, strict=True)))
    records = list(map(object.__new__, repeat(cls, len(data[0]) if data else 0)))
    deque(map(object.__setattr__, records, repeat("__dict__"), dicts), maxlen=0)
    return tuple(records)


def _looks_like(doc: DocumentRecord) -> bool:
    return (
        isinstance(doc.path, str)
        and isinstance(doc.size, int)
        and isinstance(doc.mtime, float)
        and isinstance(doc.gen, int)
        and all(isinstance(o, int) for o in doc.offsets or ())
    )
