"""Checking a store against itself (``semfs check``, ``semfs ingest --verify``).

Rules a caller may rely on:

* A document is sound when its committed generation has every chunk ``0 .. chunks-1``, the
  chunks start at the record's offsets and follow each other without gap or overlap, they
  end at the record's size, and their bytes hash to the record's ``sha256`` (the source's
  hash at ingest). A text view's stored original must have every blob part, of the
  original's size, hashing to its ``original_sha256``. Anything else is one
  :class:`Problem` naming the document.
* The store is sound when every document is, and it holds at least the documents and chunks
  the meta says the last finished ingest left (a store with fewer lost some: a truncated id
  tracker reads as an empty store). More is not damage: an interrupted run's leftovers, or
  the old version a mounted reader still has open; the next ingest removes them.
* The dense vectors are read too (one semantic query over every chunk): a truncated vector
  file, with which every search fails, is a problem of the store.
* What is not verified is said in every report (:data:`NOT_VERIFIED`): the dense vectors'
  values and the keyword index. Checking them would mean embedding every chunk again, or
  searching for every term of it; bytes flipped there pass ``semfs check`` and only skew
  rankings, which `semfs check --rebuild SOURCE` (or `semfs ingest --replace`) makes afresh.
* A document whose points the engine cannot decode is a problem naming it; records that
  cannot be read at all raise :class:`StoreDamagedError` saying the store must be rebuilt.
* Reading only: nothing here writes to the store.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from semfs.ingest.errors import SemfsError, StoreDamagedError
from semfs.ingest.store import StoreReader
from semfs.ingest.store.schema import DocumentRecord, SparseQuery, StoreMeta

# Chunks fetched per store call while checking a document.
_FETCH = 256
# What a check does not verify, said with every report (issue 29: flipped bytes passed).
NOT_VERIFIED = (
    "the dense vectors' values (each vector is read, so a lost or cut vector file is found, "
    "but changed numbers are not: that would mean embedding every chunk again)",
    "the keyword index (sparse vectors and the text index): only what the engine checks as "
    "it loads them",
)


@dataclass(frozen=True)
class Problem:
    path: str
    reason: str

    def __str__(self) -> str:
        return (
            f"{self.path!r}: {self.reason}" if "\n" in self.path else f"{self.path}: {self.reason}"
        )


@dataclass
class CheckReport:
    documents: int = 0
    chunks: int = 0
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    not_verified: tuple[str, ...] = NOT_VERIFIED

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def damaged_paths(self) -> list[str]:
        return sorted({p.path for p in self.problems if p.path})


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def verify_document(store: StoreReader, rec: DocumentRecord) -> str | None:
    """Why the stored document ``rec`` is not what was ingested, or None when it is.

    A store call that fails on this document's points (an engine that cannot decode what
    it stored: random bytes in a payload page) is this document's damage, named as such.
    """
    try:
        return _verify(store, rec)
    except (KeyboardInterrupt, SystemExit, MemoryError, SemfsError):
        raise  # a full disk, a locked store: not damage of the store's points
    except BaseException as exc:  # Exception, and the engine's Rust panics (pyo3)
        return f"its chunks cannot be read ({_one_line(exc)})"


def _verify(store: StoreReader, rec: DocumentRecord) -> str | None:
    full = rec if rec.offsets is not None else store.get_document(rec.path)
    if full is None:
        return "its record is gone"
    if full.as_is:  # a file stored as it is (an image, a PDF no extractor opens): its bytes
        as_is = full.original_record()
        assert as_is is not None  # as_is means the record names its original
        return verify_original(store, as_is)
    offsets = full.offsets or ()
    if len(offsets) != full.chunks:
        return f"its record has {len(offsets)} chunk offsets for {full.chunks} chunks"
    digest = hashlib.sha256()
    pos = 0
    for first in range(0, full.chunks, _FETCH):
        wanted = list(range(first, min(first + _FETCH, full.chunks)))
        got = store.get_chunks(full.path, full.gen, wanted)
        found = {c.index for c in got}
        missing = [i for i in wanted if i not in found]
        if missing:
            return f"chunk {missing[0]} of generation {full.gen} is missing"
        for c in got:
            data = c.text.encode("utf-8", "surrogatepass")
            if c.start != pos or offsets[c.index] != pos:
                return f"chunk {c.index} starts at byte {c.start}, expected {pos}"
            if c.end - c.start != len(data):
                return f"chunk {c.index} holds {len(data)} bytes for a span of {c.end - c.start}"
            digest.update(data)
            pos = c.end
    if pos != full.size:
        return f"its chunks hold {pos} bytes, the document {full.size}"
    if digest.hexdigest() != full.sha256:
        return "its chunks do not hash to its sha256 (the stored text was changed)"
    original = full.original_record()
    return None if original is None else verify_original(store, original)


def verify_original(store: StoreReader, rec: DocumentRecord) -> str | None:
    """Why the stored original ``rec`` (made by :meth:`DocumentRecord.original_record`) is
    not the bytes that were ingested, or None when it is."""
    offsets = rec.offsets or ()
    digest = hashlib.sha256()
    size = 0
    for first in range(0, len(offsets), _FETCH // 16):  # parts are 512 KiB: fetch fewer
        wanted = list(range(first, min(first + _FETCH // 16, len(offsets))))
        parts = store.read_blob(rec.path, rec.gen, wanted)
        for index in wanted:
            data = parts.get(index)
            if data is None:
                return f"part {index} of its stored original {rec.path} is missing"
            digest.update(data)
            size += len(data)
    if size != rec.size:
        return f"its stored original {rec.path} holds {size} bytes, the file {rec.size}"
    if digest.hexdigest() != rec.sha256:
        return f"its stored original {rec.path} does not hash to its sha256"
    return None


def count_problem(meta: StoreMeta | None, documents: int, chunks: int) -> str | None:
    """Why these counts show a damaged store (fewer than the last run left), or None."""
    if meta is None or meta.dirty or meta.documents is None or meta.chunks is None:
        return None
    if documents < meta.documents or chunks < meta.chunks:
        return (
            f"the last ingest left {meta.documents} documents and {meta.chunks} chunks, "
            f"the store now holds {documents} and {chunks}"
        )
    return None


def require_counts(
    store: StoreReader,
    documents: int,
    chunks: int | None = None,
    meta: StoreMeta | None = None,
) -> None:
    """Raise StoreDamagedError when the store holds fewer than its meta says it should.
    ``meta``: the meta as read *before* ``documents`` was counted. A meta read after the count
    may be that of an ingest that committed its last documents in between (its counts above
    the ones taken): a status or a mount start at the end of a first pass called the store
    damaged (issue 45.5's 103k-chunk run). Read here, after the counts, when not given."""
    if meta is None:
        meta = store.read_meta()
    n_chunks = store.count_chunks() if chunks is None else chunks
    reason = count_problem(meta, documents, n_chunks)
    if reason:
        raise StoreDamagedError(
            f"store {store.location} is damaged: {reason}; run `semfs check` for details"
        )


def _vectors_problem(store: StoreReader, meta: StoreMeta | None, chunks: int) -> str | None:
    """Why the dense vectors cannot be searched, or None: one semantic query asking for every
    chunk, which makes the engine score (so read) each stored vector, as searches will."""
    if meta is None or not meta.dimension or chunks == 0:
        return None
    probe = [1.0 / meta.dimension**0.5] * meta.dimension
    try:
        store.query(probe, SparseQuery([], []), "semantic", limit=chunks)
    except (KeyboardInterrupt, SystemExit, MemoryError, SemfsError):
        raise  # a full disk, a locked store: not damage of the store's points
    except BaseException as exc:
        return (
            f"its dense vectors cannot be read ({_one_line(exc)}), so every search fails; "
            "rebuild it: `semfs check --rebuild SOURCE`"
        )
    return None


def _folders_problem(store: StoreReader, docs: Iterable[DocumentRecord]) -> str | None:
    """Why some documents' folders have no record, or None: a folder without one (its mode)
    is served 0555, so a 0700 folder's files would be open to every user of a shared mount
    (an ingest killed before it wrote its folder records, by a semfs before issue 46)."""
    recorded = {d.path for d in store.list_directories()}
    missing: set[str] = set()
    for doc in docs:
        folder = doc.path
        while folder:
            folder = folder.rpartition("/")[0]
            if folder in missing or folder in recorded:
                break
            missing.add(folder)
    if not missing:
        return None
    first = min(missing, key=lambda p: (p.count("/"), p))
    return (
        f"{len(missing)} folders holding documents have no record of their permissions "
        f"(for one, {first or 'the top folder'!r}), so a shared mount serves them open to "
        "every user; re-ingest their folder (`semfs ingest SOURCE`) to record them"
    )


def check_store(
    store: StoreReader,
    on_document: Callable[[int], None] | None = None,
    paths: Iterable[str] | None = None,
) -> CheckReport:
    """Check every committed document (or those in ``paths``) and the store's counts."""
    report = CheckReport()
    meta = store.read_meta()
    if meta is None:
        report.problems.append(Problem("", "the store has no meta point (model, counts)"))
    try:
        docs = store.list_documents()
    except (KeyboardInterrupt, SystemExit, MemoryError, SemfsError):
        raise  # a full disk, a locked store: not damage of the store's points
    except BaseException as exc:  # no record names a document: nothing to repair one by one
        raise StoreDamagedError(
            f"store {store.location} is damaged: its document records cannot be read "
            f"({_one_line(exc)}); it must be rebuilt: `semfs check --rebuild SOURCE` sets "
            "it aside and ingests SOURCE afresh"
        ) from exc
    wanted = set(paths) if paths is not None else None
    report.documents = len(docs)
    report.chunks = store.count_chunks()
    reason = count_problem(meta, report.documents, report.chunks)
    if reason:
        report.problems.append(Problem("", reason))
    committed = sum(d.chunks for d in docs)
    if report.chunks > committed:
        report.notes.append(
            f"{report.chunks - committed} chunks belong to no committed document (left by an "
            "interrupted ingest, or kept for a reader); the next ingest removes them"
        )
    vectors = _vectors_problem(store, meta, report.chunks)
    if vectors:
        report.problems.append(Problem("", vectors))
    if wanted is None:
        folders = _folders_problem(store, docs)
        if folders:
            report.problems.append(Problem("", folders))
    for i, rec in enumerate(sorted(docs, key=lambda d: d.path)):
        if wanted is not None and rec.path not in wanted:
            continue
        why = verify_document(store, rec)
        if why:
            report.problems.append(Problem(rec.path, why))
        if on_document:
            on_document(i + 1)
    return report
