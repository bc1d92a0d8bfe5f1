"""The tree manifest: every committed document and folder record in one compressed blob.

A mount builds its tree from the document and folder records. Scrolling them costs one
request per 1,024 records and, on the embedded store, waits for the engine to load the shard
(seconds at 100k chunks). The manifest holds the same records (documents with their chunk
offsets) as columns, in one blob that a backend stores wherever it can read it in one
request. Its number columns (sizes, times, modes, ...) and the chunk offsets are packed
binary arrays, decoded in C: at 10k documents a JSON list of numbers per column took most of
the decode. Each document column is a compressed JSON section of its own, after a compressed
header (the meta, the folders, where each section is, a checksum of them all), so a mount
decodes the paths and the few columns its first tree needs, and the rest (the digests and
offsets are most of the bytes: ~0.13 s of a 0.2 s decode at 100k documents) when it first
shows a file.

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
* :meth:`Manifest.from_bytes` raises ValueError on a torn or damaged blob (the checksum covers
  every section) and on anything in the header or the columns it decodes that it cannot
  fully decode; a column decoded later that cannot be (a writer's bug: its bytes were checked)
  raises ValueError for every record, so no record is made from part of a column.
  :meth:`Manifest.decode` never raises at all: whatever the decoder meets (a zlib error,
  nesting too deep for json, ...) means "list the records".
"""

from __future__ import annotations

import base64
import contextlib
import gc
import json
import logging
import struct
import sys
import threading
import zlib
from array import array
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields
from itertools import accumulate, chain, islice, repeat
from typing import Any, cast

from semfs.ingest.store.schema import DOC_LOCAL_FIELDS, DirectoryRecord, DocumentRecord, StoreMeta

logger = logging.getLogger(__name__)

FORMAT = 5
# What a manifest blob starts with, then the length of its header ("<Q"). Format 4 and
# earlier were one gzip stream: read as another version.
MAGIC = b"SEMFSMAN"
_HEADER_LENGTH = struct.Struct("<Q")
_GZIP_MAGIC = b"\x1f\x8b"
# The document columns decoded with the header: what a mount's first tree and its count check
# read. The others wait for the first record.
EAGER_COLUMNS = ("path", "original", "chunks", "size")
# Records made together, neighbours by path: one made alone costs twice as much (~4 µs), and
# listing a folder makes them all.
RECORD_BLOCK = 256
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


# What a decoder meets in bytes it cannot read, besides ValueError.
_DAMAGE = (
    OSError,
    EOFError,
    zlib.error,  # flipped bytes inside a deflate stream: not an OSError
    KeyError,
    IndexError,
    TypeError,
    AttributeError,
    RecursionError,  # a nesting json cannot follow
    OverflowError,
    struct.error,
)


class OtherVersion(ValueError):
    """A manifest written by another version of semfs (format or fields): expected after an
    upgrade, not damage; the next ingest (or mount) writes a current one."""


class Manifest:
    """The committed documents and folders of one store generation, documents with offsets.

    A decoded manifest keeps its documents as columns (:class:`DocumentColumns`): a mount's
    first tree needs the paths and a few numbers, not a Python record per document, which at
    100k documents took most of the decode. :attr:`documents` makes every record, once, on
    first use; :meth:`document` makes one.
    """

    def __init__(
        self,
        meta: StoreMeta,
        documents: Sequence[DocumentRecord] | DocumentColumns,
        directories: Sequence[DirectoryRecord] = (),
    ) -> None:
        self.meta = meta
        self.directories: tuple[DirectoryRecord, ...] = tuple(directories)
        if isinstance(documents, DocumentColumns):
            self.columns: DocumentColumns | None = documents
            self._documents: tuple[DocumentRecord, ...] | None = None
        else:
            self.columns, self._documents = None, tuple(documents)

    @property
    def documents(self) -> tuple[DocumentRecord, ...]:
        made = self._documents
        if made is None:
            assert self.columns is not None
            made = self._documents = self.columns.records()
        return made

    def document(self, index: int) -> DocumentRecord:
        """The record of the ``index``-th document (by path), made now unless made already."""
        if self._documents is not None or self.columns is None:
            return self.documents[index]
        return self.columns.record(index)

    @property
    def paths(self) -> Sequence[str]:
        """The documents' paths, sorted (as :meth:`of` sorts them)."""
        if self.columns is not None:
            return self.columns.paths
        return [d.path for d in self.documents]

    @property
    def chunk_count(self) -> int:
        """The chunks of every document (a sum over one column, no records made)."""
        if self.columns is not None:
            return int(sum(self.columns.column("chunks")))
        return sum(d.chunks for d in self.documents)

    @property
    def generation(self) -> int:
        return self.meta.generation

    def matches(self, meta: StoreMeta | None) -> bool:
        """Whether ``meta`` (read from the store now) is the state this manifest describes."""
        return meta is not None and not meta.dirty and meta == self.meta

    def to_bytes(self) -> bytes:
        # Columns, not objects: the field names are not repeated 100k times.
        return assemble(
            {
                "format": FORMAT,
                "meta": self.meta.to_payload(),
                "documents": _columns(self.documents, DOC_COLUMNS),
                "directories": _columns(self.directories, DIR_COLUMNS),
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> Manifest:
        try:
            header, sections = _header(data)
            where = header["documents"]["sections"]
            if not isinstance(where, dict) or tuple(where) != DOC_COLUMNS:
                raise OtherVersion(f"manifest columns {list(where)} are not {list(DOC_COLUMNS)}")
            for at, size in where.values():
                if not (isinstance(at, int) and isinstance(size, int)) or at < 0 or size < 0:
                    raise ValueError("manifest sections out of place")
                if at + size > len(sections):
                    raise ValueError("manifest sections beyond its end")
            count = header["documents"]["count"]
            if not isinstance(count, int) or count < 0:
                raise ValueError("manifest document count is not a count")

            def raw(name: str) -> Any:
                at, size = where[name]
                return json.loads(zlib.decompress(sections[at : at + size]))

            docs = DocumentColumns(count, raw)
            dirs = _rows(DirectoryRecord, header["directories"], DIR_COLUMNS)
            # Positional and unconverted (a record is made per document a mount shows): JSON
            # already gives these types. Spot-check a folder record (the documents' first
            # record is checked when the columns it needs are decoded).
            if dirs and not (isinstance(dirs[0].path, str) and isinstance(dirs[0].mode, int)):
                raise ValueError("manifest folder columns have the wrong types")
            return cls(StoreMeta.from_payload(header["meta"]), docs, dirs)
        except _DAMAGE as exc:
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


def assemble(body: dict[str, Any]) -> bytes:
    """The blob of a manifest ``body`` (format, meta, documents and directories, each a dict
    of columns): a compressed header, then one compressed section per document column."""
    documents = body["documents"]
    where, sections, at = {}, [], 0
    for name, column in documents.items():
        section = zlib.compress(_json(column), COMPRESS_LEVEL)
        where[name] = [at, len(section)]
        sections.append(section)
        at += len(section)
    rest = b"".join(sections)
    count = len(documents["path"]) if isinstance(documents.get("path"), list) else 0
    header = {k: v for k, v in body.items() if k != "documents"}
    header["documents"] = {"count": count, "sections": where}
    header["crc32"] = zlib.crc32(rest)
    head = zlib.compress(_json(header), COMPRESS_LEVEL)
    return MAGIC + _HEADER_LENGTH.pack(len(head)) + head + rest


def disassemble(data: bytes) -> dict[str, Any]:
    """The body :func:`assemble` made ``data`` of, every section decoded (for tests, tools)."""
    header, sections = _header(data)
    where = header.pop("documents")["sections"]
    header.pop("crc32")
    docs = {n: json.loads(zlib.decompress(sections[a : a + z])) for n, (a, z) in where.items()}
    return {**header, "documents": docs}


def _json(value: Any) -> bytes:
    # ensure_ascii (the default) keeps lone surrogates (undecodable file names) intact.
    return json.dumps(value, separators=(",", ":")).encode("ascii")


def _header(data: bytes) -> tuple[dict[str, Any], memoryview]:
    """A blob's header, checked to be this format's, and its sections, checked whole."""
    if data[: len(_GZIP_MAGIC)] == _GZIP_MAGIC:
        raise OtherVersion(f"manifest of format 4 or older (one gzip stream), not {FORMAT}")
    if data[: len(MAGIC)] != MAGIC:
        raise ValueError("not a manifest")
    (length,) = _HEADER_LENGTH.unpack_from(data, len(MAGIC))
    start = len(MAGIC) + _HEADER_LENGTH.size
    if start + length > len(data):
        raise ValueError("manifest header beyond its end")
    header = json.loads(zlib.decompress(data[start : start + length]))
    if not isinstance(header, dict):
        raise ValueError("manifest header is not an object")
    if header.get("format") != FORMAT:
        raise OtherVersion(f"manifest format {header.get('format')!r}, not {FORMAT}")
    sections = memoryview(data)[start + length :]
    if zlib.crc32(sections) != header["crc32"]:
        raise ValueError("manifest sections do not match their checksum (torn or damaged)")
    return header, sections


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


class DocumentColumns:
    """A manifest's document columns, kept as columns: packed numbers stay arrays (no Python
    object per value), and records are made when asked for (:meth:`record`), ``RECORD_BLOCK``
    neighbours at a time (a folder's files are neighbours by path; made together they cost
    what the whole decode's did each), or all at once (:meth:`records`). Thread-safe. The
    records made are kept: at most one per document, what a decoded manifest held before.

    ``raw(name)`` gives one column as its JSON value: the columns in ``EAGER_COLUMNS`` are
    decoded and checked now, the others when the first record is made (their bytes were
    checked whole already: see :meth:`Manifest.from_bytes`). A column that cannot be decoded
    raises ValueError, then and on every later record: no record is made from part of it.
    """

    def __init__(self, count: int, raw: Callable[[str], Any]) -> None:
        self._count = count
        self._raw: Callable[[str], Any] | None = raw
        self._lock = threading.Lock()
        self._getters: dict[str, Callable[[int], Any]] = {}
        self._lists: dict[str, list[Any]] = {}
        self._arrays: dict[str, Any] = {}
        self._ordered: list[Callable[[int], Any]] | None = None  # every getter, in field order
        self._error: ValueError | None = None
        self._blocks: dict[int, tuple[DocumentRecord, ...]] = {}  # by index // RECORD_BLOCK
        for name in EAGER_COLUMNS:
            self._decode(name)
        self.paths: list[str] = self._lists["path"]
        if not all(isinstance(p, str) for p in islice(self.paths, 1)):
            raise ValueError("manifest paths are not strings")

    def __len__(self) -> int:
        return self._count

    def column(self, name: str) -> Sequence[Any]:
        """One column, in path order: an array for numbers none of which is missing."""
        if name in _ARRAYS:
            return [self.record(i).offsets for i in range(self._count)]
        if name not in self._getters:
            self._all()
        got = self._arrays.get(name)
        return cast("Sequence[Any]", got) if got is not None else self._lists[name]

    def _decode(self, name: str) -> None:
        assert self._raw is not None
        column = self._raw(name)
        getter: Callable[[int], Any]
        if name in _ARRAYS:
            self._flat, self._lengths, self._ends = _unpack_flat(column)
            size, getter = len(self._lengths), self._offsets
        else:
            packed = _scalar_array(column)
            if packed is None:  # a JSON list (strings, mixed types)
                if not isinstance(column, list):
                    raise ValueError(f"manifest column {name!r} is not a list")
                self._lists[name] = values = column
                size, getter = len(values), values.__getitem__
            else:
                typecode, data, nulls = packed
                if typecode == "B" or nulls:
                    self._lists[name] = values = _with_nulls(typecode, data, nulls)
                    size, getter = len(values), values.__getitem__
                else:  # ints or floats, none missing: the array itself
                    self._arrays[name] = data
                    size, getter = len(data), data.__getitem__
        if size != self._count:
            raise ValueError("manifest columns differ in length")
        self._getters[name] = getter

    def _all(self) -> list[Callable[[int], Any]]:
        """Every column's getter, decoding the columns not decoded yet (once, under a lock)."""
        ordered = self._ordered
        if ordered is not None:
            return ordered
        with self._lock:
            if self._error is None and self._ordered is None:
                try:
                    for name in DOC_COLUMNS:
                        if name not in self._getters:
                            self._decode(name)
                    ordered = [self._getters[n] for n in DOC_COLUMNS]
                    if self._count and not _looks_like(_made(ordered, 0)):
                        raise ValueError("manifest document columns have the wrong types")
                except _DAMAGE as exc:
                    self._error = ValueError(f"unreadable manifest column: {exc}")
                except ValueError as exc:
                    self._error = exc
                else:
                    self._ordered, self._raw = ordered, None  # the bytes are not needed now
            if self._error is not None:
                raise self._error
            assert self._ordered is not None
            return self._ordered

    def _offsets(self, index: int) -> array[int] | None:
        if self._lengths[index] < 0:
            return None
        end = self._ends[index]
        # An array('Q') per record, as DocumentRecord.from_payload makes (the whole column
        # converted at once is one Python int per offset: 1M at 100k documents).
        return array("Q", self._flat[end - self._lengths[index] : end])

    def _offsets_between(self, start: int, end: int) -> list[array[int] | None]:
        # One array('Q') per record (as DocumentRecord.from_payload makes), made in C.
        lengths, ends = self._lengths[start:end], self._ends[start:end]
        starts = [e - max(n, 0) for e, n in zip(ends, lengths, strict=True)]
        parts = map(self._flat.__getitem__, map(slice, starts, ends))
        out: list[array[int] | None] = list(map(array, repeat("Q"), parts))
        for i in [i for i, n in enumerate(lengths) if n < 0]:
            out[i] = None
        return out

    def record(self, index: int) -> DocumentRecord:
        if not 0 <= index < self._count:
            raise IndexError(index)
        number, at = divmod(index, RECORD_BLOCK)
        block = self._blocks.get(number)
        return (block if block is not None else self._block(number))[at]

    def records(self) -> tuple[DocumentRecord, ...]:
        """Every record, in path order: the ones made already, and the others now."""
        blocks = range(-(-self._count // RECORD_BLOCK))
        return tuple(chain.from_iterable(self._blocks.get(n) or self._block(n) for n in blocks))

    def _block(self, number: int) -> tuple[DocumentRecord, ...]:
        self._all()
        start = number * RECORD_BLOCK
        made = self._between(start, min(start + RECORD_BLOCK, self._count))
        with self._lock:  # one record per document, whoever made its block first
            return self._blocks.setdefault(number, made)

    def _between(self, start: int, end: int) -> tuple[DocumentRecord, ...]:
        data = [
            self._offsets_between(start, end)
            if n in _ARRAYS
            else self._lists[n][start:end]
            if n in self._lists
            else self._arrays[n][start:end].tolist()
            for n in DOC_COLUMNS
        ]
        return _records(DocumentRecord, DOC_COLUMNS, data)


def _made(getters: list[Callable[[int], Any]], index: int) -> DocumentRecord:
    rec = object.__new__(DocumentRecord)
    # Its __dict__ whole, as _rows does: no setattr per field of a frozen dataclass.
    values = [get(index) for get in getters]
    object.__setattr__(rec, "__dict__", dict(zip(DOC_COLUMNS, values, strict=True)))
    return rec


def _scalar_array(column: Any) -> tuple[str, array[Any], list[int]] | None:
    """A packed number column as (typecode, its array, the positions of its Nones), checked;
    None for a JSON list."""
    if isinstance(column, list):
        return None
    typecode = column["type"]
    if typecode not in _SCALAR_TYPES:
        raise ValueError(f"manifest column type {typecode!r}")
    packed = array(typecode)
    packed.frombytes(base64.b64decode(column["data"], validate=True))
    if sys.byteorder == "big":
        packed.byteswap()
    nulls = column["nulls"]
    if not isinstance(nulls, list) or (nulls and (min(nulls) < 0 or max(nulls) >= len(packed))):
        raise ValueError("manifest column has Nones beyond its end")
    return typecode, packed, nulls


def _with_nulls(typecode: str, packed: array[Any], nulls: list[int]) -> list[Any]:
    values: list[Any] = packed.tolist()
    if typecode == "B":
        values = list(map((1).__eq__, values))
    for i in nulls:
        values[i] = None
    return values


def _unpack_scalars(column: Any) -> list[Any]:
    packed = _scalar_array(column)
    if packed is None:
        return cast("list[Any]", column)
    return _with_nulls(*packed)


def _unpack_flat(packed: dict[str, Any]) -> tuple[array[int], list[int], list[int]]:
    """A packed offsets column as (all offsets, each document's count (-1: None), where each
    document's offsets end), checked to add up."""
    if packed["type"] not in _PACKED_TYPES:
        raise ValueError(f"manifest array type {packed['type']!r}")
    flat = array(packed["type"])
    flat.frombytes(base64.b64decode(packed["data"], validate=True))
    if sys.byteorder == "big":
        flat.byteswap()
    lengths = packed["lengths"]
    if not isinstance(lengths, list):
        raise ValueError("manifest offsets lengths are not a list")
    ends = list(accumulate(map(max, lengths, repeat(0))))
    if (ends[-1] if ends else 0) != len(flat) or (lengths and min(lengths) < -1):
        raise ValueError("manifest offsets do not add up")
    return flat, lengths, ends


def _unpack(packed: dict[str, Any]) -> list[array[int] | None]:
    flat, lengths, ends = _unpack_flat(packed)
    flat = array("Q", flat)  # what DocumentRecord.from_payload makes
    # One slice per document, made in C (a Python loop here was a third of the decode).
    out: list[array[int] | None] = list(map(flat.__getitem__, map(slice, [0, *ends], ends)))
    for i in [i for i, n in enumerate(lengths) if n < 0]:
        out[i] = None
    return out


def _records(cls: Any, names: tuple[str, ...], data: list[list[Any]]) -> tuple[Any, ...]:
    # Each record gets its __dict__ whole: the frozen dataclass's __init__ (a setattr per
    # field) would double the cost. All in C (maps, no Python loop): half the time of a loop.
    dicts = map(dict, map(zip, repeat(names), zip(*data, strict=True)))
    records = list(map(object.__new__, repeat(cls, len(data[0]) if data else 0)))
    deque(map(object.__setattr__, records, repeat("__dict__"), dicts), maxlen=0)
    return tuple(records)


def _rows(cls: Any, columns: dict[str, Any], names: tuple[str, ...]) -> tuple[Any, ...]:
    if not isinstance(columns, dict) or tuple(columns) != names:
        # Another version's fields: scrolling the records is right, guessing is not.
        raise OtherVersion(f"manifest columns {list(columns)} are not {list(names)}")
    data = [_unpack(columns[n]) if n in _ARRAYS else _unpack_scalars(columns[n]) for n in names]
    if len({len(c) for c in data}) > 1:
        raise ValueError("manifest columns differ in length")
    return _records(cls, names, data)


def _looks_like(doc: DocumentRecord) -> bool:
    return (
        isinstance(doc.path, str)
        and isinstance(doc.size, int)
        and isinstance(doc.mtime, float)
        and isinstance(doc.gen, int)
        and all(isinstance(o, int) for o in doc.offsets or ())
    )
