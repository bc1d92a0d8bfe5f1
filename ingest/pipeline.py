"""Incremental, atomic ingest: make a collection mirror a source directory, keywords first.

A run has two passes:

1. **Keywords.** Documents stream through one at a time (read, extract, chunk, store), in
   bounded windows: a window's chunks are written with their text and BM25 vector, then each
   document whose chunks are all in is committed (its record: readers follow only records),
   then its older generation is deleted. From its commit on a document is browsable,
   readable and keyword-searchable. A chunk whose model text is unchanged (its ``vhash``,
   anywhere in the collection) is written with the stored dense vector already.
2. **Meaning.** :func:`semfs.ingest.densepass.embed_missing` gives the chunks that lack one
   their dense vector, in place: in the same run by default (``dense``), else by the store's
   long-running owner or the next run. Hybrid search scores a chunk on keywords until then.

Writers take turns for the first pass on the collection's write lock
(:mod:`semfs.ingest.store.writelock`): a run marks the store dirty while it works, and a run
that finds it dirty (an earlier run was killed) first deletes every chunk no record points to,
which is only sound because no other writer is under way. The second pass never holds the
write lock, so no write waits for the model.

Memory is bounded by the window (:data:`WINDOW_CHUNKS` chunks and the documents they come
from), whatever the collection's size; what grows with it is one small record per file (the
scan, the stored records).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from semfs.ingest import formats, parallel
from semfs.ingest.densepass import DenseReport, embed_missing, mark_embedded
from semfs.ingest.embedding.embedder import (
    DEFAULT_MODEL,
    Embedder,
    canonical_model_name,
    load_embedder,
)
from semfs.ingest.errors import DiskFullError, ModelMismatchError
from semfs.ingest.ignores import rules_folder
from semfs.ingest.origin import Claim, claim_source
from semfs.ingest.records import chunk_document, document_record, keyword_text, previous_chunks
from semfs.ingest.skipmemo import SkipMemo
from semfs.ingest.sources import (
    NOT_A_DOCUMENT,
    Document,
    IngestRequest,
    Skipped,
    SourceFile,
    check_source,
    read_document,
    scan,
    scan_paths,
)
from semfs.ingest.store import Store
from semfs.ingest.store.bm25 import Bm25, bm25_average_length, bm25_model
from semfs.ingest.store.check import verify_document
from semfs.ingest.store.schema import (
    SCHEMA_VERSION,
    ChunkPoint,
    ChunkRecord,
    DirectoryRecord,
    DocumentRecord,
    StoreMeta,
)
from semfs.ingest.store.writelock import WRITE_LOCK, CollectionLock
from semfs.ingest.unsearched import KINDS as UNSEARCHED_KINDS
from semfs.ingest.unsearched import kind_of

logger = logging.getLogger(__name__)

# Chunks written per request and window of the keyword pass: what a run holds at most, beside
# the documents they come from (a document's chunks are written whole, in requests of this).
WINDOW_CHUNKS = 256
# ... but a window is written at least this often (s), so the first documents of a slow
# folder (converted formats) are searchable at once, not after the window fills.
WINDOW_SECONDS = 1.0
# A new store weighs BM25 terms by its chunks' average length, measured on its first
# ingest's first chunks (all of them in a smaller one): held before the first window.
BM25_SAMPLE_CHUNKS = 2048
# Chunks written between two compactions of a long ingest. Edge keeps an appendable segment
# in RAM whole (vectors, payload, sparse index) until compact() makes it immutable and on
# disk: one compaction at the end held every chunk of the run in memory, 2.1 GB at 100k
# chunks and more than the machine at 1M. Each compaction seals what was written so far.
COMPACT_EVERY_CHUNKS = 50_000

Progress = Callable[[int], None]
# Told each pass's name ("reading": files, "embedding": chunks) and how many it works through;
# ``on_progress`` then counts them.
OnPhase = Callable[[str, int], None]


@dataclass
class IngestReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    # Files added or updated that are stored as they are, not searched, and why (an image,
    # a binary, a scanned PDF): the mount serves them, a search never ranks them.
    unsearched: list[Skipped] = field(default_factory=list)
    # Documents that failed to read this time and keep their previous version (keep_failed).
    kept: list[str] = field(default_factory=list)
    # Paths the source's .gitignore and .ignore files leave out (a folder with a "/": not
    # entered), as ripgrep would (semfs.ingest.ignores).
    ignored: list[str] = field(default_factory=list)
    # Chunks given their dense vector by the model in this run (one per distinct text), and
    # chunks that took the stored vector of the same text instead.
    chunks_embedded: int = 0
    vectors_reused: int = 0
    # Chunks written by the keyword pass, and the documents it committed.
    chunks_written: int = 0
    committed: int = 0
    # Chunks still without a dense vector when the run ended (another process embeds them,
    # or dense=False), and who embeds them when it is not this run.
    dense_pending: int = 0
    dense_elsewhere: str = ""
    seconds: float = 0.0
    # When the last document was committed (s since the start): keyword-searchable from then.
    keywords_seconds: float = 0.0
    model: str = ""
    compacted: bool = False
    # Unchanged in the source but damaged in the store (verify): re-ingested.
    repaired: list[str] = field(default_factory=list)
    # What the user should know about the run as a whole (the source folder moved, ...).
    notes: list[str] = field(default_factory=list)
    # Words past MAX_WORD_CHARS that keyword search indexes by their beginning only.
    words_cut: int = 0

    def unsearched_counts(self) -> dict[str, int]:
        """How many files of ``unsearched`` each kind of reason holds (``vendored``,
        ``not a document``, ``binary file``, ...), most first."""
        counts: dict[str, int] = {}
        for s in self.unsearched:
            kind = kind_of(s.reason)
            counts[kind] = counts.get(kind, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    @property
    def chunks_per_second(self) -> float:
        return self.chunks_embedded / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "added": len(self.added),
            "updated": len(self.updated),
            "unchanged": len(self.unchanged),
            "deleted": len(self.deleted),
            "skipped": [{"path": s.path, "reason": s.reason} for s in self.skipped],
            "unsearched": [{"path": s.path, "reason": s.reason} for s in self.unsearched],
            "unsearched_counts": self.unsearched_counts(),
            "kept": self.kept,
            "ignored": self.ignored,
            "chunks_written": self.chunks_written,
            "committed": self.committed,
            "chunks_embedded": self.chunks_embedded,
            "vectors_reused": self.vectors_reused,
            "dense_pending": self.dense_pending,
            "seconds": round(self.seconds, 3),
            "keywords_seconds": round(self.keywords_seconds, 3),
            "chunks_per_second": round(self.chunks_per_second, 1),
            "model": self.model,
            "compacted": self.compacted,
            "repaired": self.repaired,
            "notes": self.notes,
            "words_cut": self.words_cut,
            "added_paths": self.added,
            "updated_paths": self.updated,
            "deleted_paths": self.deleted,
        }


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM made one) during a run: ``report`` says what is in. ``phase``:
    "keywords" (the documents committed so far are kept, the rest was not reached) or
    "embedding" (every document is in; ``report.dense_pending`` chunks wait for meaning)."""

    def __init__(self, report: IngestReport, phase: str) -> None:
        super().__init__(phase)
        self.report = report
        self.phase = phase


def resolve_model(store: Store, requested: str | None) -> str:
    """The model to use: the store's, unless another is asked for, which is an error.

    A new store gets ``requested``, else :data:`semfs.ingest.embedding.embedder.DEFAULT_MODEL`
    (torch fp32).
    An existing store always keeps its recorded model: one built with ``@onnx-int8`` goes on
    ingesting and searching with int8 ONNX, one built with torch (the bare name) with torch."""
    meta = store.read_meta()
    if meta is None:
        return canonical_model_name(requested or DEFAULT_MODEL)
    if requested is not None and canonical_model_name(requested) != meta.model:
        raise ModelMismatchError(
            f"{store.location} was built with model {meta.model!r} (dimension {meta.dimension}); "
            f"refusing to add {canonical_model_name(requested)!r} vectors. Drop --model to use "
            "the store's model, or ingest into another --collection"
        )
    return meta.model


def in_scope(path: str, scope: AbstractSet[str]) -> bool:
    """Whether ``path`` is one of the ``scope`` paths or inside one of them (O(depth))."""
    if path in scope:
        return True
    cut = path.find("/")
    while cut != -1:
        if path[:cut] in scope:
            return True
        cut = path.find("/", cut + 1)
    return False


def ensure_collection(store: Store, model: str, embedder: Embedder | None = None) -> Embedder:
    """The embedder for ``model``, after creating the collection for it if there is none (and
    the payload indexes added since an older store was made)."""
    if embedder is None:
        embedder = load_embedder(model)
    if store.read_meta() is None:
        store.create(embedder.dimension)
        store.write_meta(StoreMeta(model=model, dimension=embedder.dimension))
    else:
        store.create(embedder.dimension)
    return embedder


def ingest(
    source: Path,
    store: Store,
    request: IngestRequest | None = None,
    *,
    embedder: Embedder | None = None,
    on_phase: OnPhase | None = None,
    on_progress: Progress | None = None,
    held: Callable[[str], bool] | None = None,
    on_wait: Callable[[str], None] | None = None,
    **fields: Any,
) -> IngestReport:
    """Make ``store`` mirror ``source`` as ``request`` says (:class:`~semfs.ingest.sources.
    IngestRequest`, or its fields by name: ``ingest(src, store, model="hash")``); return what
    changed. Bad files are skipped, not fatal. The keyword arguments are the run's
    collaborators, not its options: the documents' ``embedder`` (default: the store's model,
    loaded when needed), the progress callbacks, ``held`` and ``on_wait`` (below).

    ``on_phase(name, total)`` and ``on_progress(n)`` drive a progress display: "reading"
    counts files, "embedding" chunks. The model loads only when something must be chunked or
    embedded. Symlinks that resolve outside ``source`` are skipped unless
    ``follow_symlinks``. A file (or folder) that exists but cannot be read this time keeps its
    ingested version, and the skip reason says so.

    ``dense``: give the chunks their dense vectors in this run (the second pass, which also
    resumes what an earlier run left); False: leave them to the store's owner or the next
    run (a watcher's batch, the MCP write tool: a write must not wait for the model). A
    store reached through an owner that embeds (a mount) is left to it either way.

    Writers of one collection take turns (:mod:`semfs.ingest.store.writelock`): ``on_wait``
    is told who holds it when this run must wait; ``lock_timeout`` bounds the wait
    (:class:`~semfs.ingest.errors.StoreBusyError`).

    ``paths`` (relative, '/'-separated) restricts the run to those files and folders: only
    documents at or below them are read, added, updated or deleted; the rest of the
    collection is not looked at (a watcher's batch). With ``keep_failed`` every document
    that fails now (binary, not UTF-8, too large, as well as unreadable) keeps its ingested
    version instead of being deleted: a watcher never loses a document to a bad save. Kept
    documents are listed in ``report.kept``.

    With ``verify``, an unchanged document is also checked against what the store holds
    (:func:`semfs.ingest.store.check.verify_document`): a damaged one is re-ingested, and listed in
    ``report.repaired`` (and ``report.updated``).

    A collection mirrors one folder (:mod:`semfs.ingest.origin`): another folder is refused
    with :class:`semfs.ingest.errors.SourceMismatchError` before anything is read or
    written, unless ``replace_source``; a folder that moved is followed (``report.notes``).

    ``held(path)`` True: the file is being written (a writable mount's open file); it is not
    read now and keeps its ingested version, if any (the watcher runs it again once closed).

    ``skip_memo``: the file where converted files skipped for their bytes are remembered
    (:mod:`semfs.ingest.skipmemo`); one unchanged since is skipped again without being
    extracted, unless ``retry_skipped``. None: nothing is remembered.

    ``dry_run``: read and compare only, and return the report of what a run would add,
    update, delete, store as it is and skip; nothing is written (no model is loaded).

    ``jobs``: files read and extracted at once, each converted file in a bounded worker
    process of its own (default: one per core, :func:`reading_jobs`); 1 reads one at a time.

    Ctrl-C raises :class:`Interrupted` with the report of what is in.
    """
    if request is None:
        request = IngestRequest.of(**fields)
    elif fields:
        raise TypeError("give the options in the IngestRequest, or by name, not both")
    o = request.options
    model, include, exclude, batch_size = o.model, o.include, o.exclude, o.batch_size
    max_bytes, follow_symlinks, jobs = o.max_bytes, o.follow_symlinks, o.jobs
    paths: Collection[str] | None = request.paths
    keep_failed, verify, dry_run, dense = (
        request.keep_failed,
        request.verify,
        request.dry_run,
        request.dense,
    )
    replace_source, skip_memo = request.replace_source, request.skip_memo
    retry_skipped, lock_timeout = request.retry_skipped, request.lock_timeout
    started = time.perf_counter()
    report = IngestReport()
    model_name = resolve_model(store, model)
    report.model = model_name
    check_source(source)
    claim = claim_source(store.read_meta(), source, store.collection, replace=replace_source)
    if claim.note:
        logger.info("%s", claim.note)
        report.notes.append(claim.note)
    dirs: list[DirectoryRecord] = []
    scope: set[str] | None = None
    if paths is not None:
        # A changed .gitignore or .ignore may take or leave any file of its folder.
        folders = {rules_folder(p.strip("/")) for p in paths} - {None}
        paths = None if "" in folders else {*paths, *(f for f in folders if f)}
    if paths is None:
        files, report.skipped = scan(source, include, exclude, dirs, report.ignored)
    else:
        scope = {p.strip("/") for p in paths}
        files, report.skipped = scan_paths(source, scope, include, exclude, dirs, report.ignored)
    reader = _Reader(
        store,
        report,
        max_bytes=max_bytes,
        root=None if follow_symlinks else os.path.realpath(source),
        held=held,
        keep_failed=keep_failed,
        verify=verify,
        retry_skipped=retry_skipped,
        skip_memo=skip_memo,
        jobs=jobs,
    )
    if dry_run:
        reader.load(scope)
        for _change in reader.changes(files, None):
            pass
        reader.finish(scope, save_memo=False)
        report.seconds = time.perf_counter() - started
        return report

    if held is None:
        reader.held = owner_holds(store)  # a writable mount's open files, beside it
    lock = CollectionLock(store.lock_path(WRITE_LOCK), "first")
    lock.acquire(lock_timeout, on_wait)
    writer: _Writer | None = None
    try:
        reader.load(scope)
        stored_dirs = {d.path: d for d in store.list_directories()}
        writer = _Writer(store, report, model_name, embedder, claim, batch_size, started)
        # Folder records (their modes) go in with the run's first write, before any document
        # below them commits: a 0700 folder is never served 0555 meanwhile, nor after a kill.
        writer.folders = _folders_to_write(stored_dirs, dirs)
        meta = store.read_meta()
        if meta is not None and meta.dirty:
            writer.begin(full=scope is None, existing=reader.existing)  # clean up first
        if meta is None and files and embedder is not None:
            # A first ingest chunks, so it needs the model's tokenizer: a broken install is
            # one line now, not after the reading bar has started (a re-run that changes
            # nothing still loads no model).
            embedder.count_tokens(["semfs"])
        if on_phase is not None:
            on_phase("reading", len(files))
        for doc, touched in reader.changes(files, on_progress):
            if touched:
                writer.touch(doc, reader.existing, scope is None)  # mtime or mode only
            else:
                writer.add(doc, reader.existing, scope is None)
        reader.finish(scope, save_memo=True)
        gone_dirs = _folders_gone(stored_dirs, dirs, report.skipped, scope)
        if not writer.begun and (report.deleted or writer.folders or gone_dirs):
            writer.begin(full=scope is None, existing=reader.existing)
        if writer.begun:
            writer.end(reader.existing, gone_dirs, full=scope is None)
        else:
            _unchanged_run(store, claim)
        embedder = writer.embedder
    except KeyboardInterrupt as exc:
        report.seconds = time.perf_counter() - started
        raise Interrupted(report, "keywords") from exc
    finally:
        lock.release()
    report.keywords_seconds = report.keywords_seconds or time.perf_counter() - started
    _second_pass(store, report, model_name, embedder, dense, batch_size, on_phase, on_progress)
    report.seconds = time.perf_counter() - started
    return report


def reading_jobs(jobs: int | None) -> int:
    """The files an ingest reads at once: ``jobs``, else one per core; the process's worker
    pool may then run as many extractions at once."""
    from semfs.ingest.formats import worker

    n = max(1, jobs) if jobs is not None else worker.default_jobs()
    worker.shared(n)
    return n


def owner_holds(store: Store, ttl: float = 0.5) -> Callable[[str], bool] | None:
    """For a store reached through its owner's socket: whether the owner's writable mount
    holds a file open for writing (asked again at most every ``ttl`` seconds), so an ingest
    beside it leaves the file as it is, as the owner's watcher does; None elsewhere."""
    from semfs.ingest.store.ipc.client import RemoteStore

    if not isinstance(store, RemoteStore):
        return None
    known: list[Any] = [0.0, frozenset()]

    def held(path: str) -> bool:
        now = time.monotonic()
        if now - known[0] > ttl:
            known[:] = [now, store.held_open()]
        return path in known[1]

    return held


def _unchanged_run(store: Store, claim: Claim) -> None:
    """Nothing to write but, perhaps, the source's record and a manifest (a store from
    before either): an unchanged re-run writes nothing else and loads no model."""
    meta = store.read_meta()
    if meta is None:
        return
    if claim.changes(meta):  # a folder that moved, a store from before sources were kept
        store.write_meta(replace(meta, **_source_fields(claim)))
        store.flush()
    store.write_manifest(meta.generation)  # a no-op when current; else a store from before


def _second_pass(
    store: Store,
    report: IngestReport,
    model_name: str,
    embedder: Embedder | None,
    dense: bool,
    batch_size: int,
    on_phase: OnPhase | None,
    on_progress: Progress | None,
) -> None:
    """The dense vectors: embedded here (``dense``) unless the store's owner does it."""
    meta = store.read_meta()
    if meta is None or not meta.dense_pending:
        return  # every chunk has its vector: nothing to count
    embedded, total = store.embedding_counts()
    report.dense_pending = total - embedded
    if not report.dense_pending:
        mark_embedded(store)
        return
    owner = store.served_by()
    if owner is not None and getattr(store, "owner_embeds", False):
        report.dense_elsewhere = f"pid {owner}"  # the mount's (or watcher's) own pass
        return
    if not dense:
        return
    if embedder is None:
        embedder = load_embedder(model_name)
    done = DenseReport()
    try:
        done = embed_missing(
            store,
            embedder,
            batch_size=batch_size,
            wait=owner is None,  # beside an owner, another client's pass may have it
            on_phase=on_phase,
            on_progress=on_progress,
        )
    except KeyboardInterrupt as exc:
        report.dense_pending = _pending(store)
        raise Interrupted(report, "embedding") from exc
    finally:
        report.chunks_embedded += done.embedded
        report.vectors_reused += done.reused
    report.dense_pending = done.left
    report.dense_elsewhere = done.elsewhere


def _pending(store: Store) -> int:
    try:
        embedded, total = store.embedding_counts()
    except Exception:  # interrupted while the store was busy: the message says what it can
        return 0
    return total - embedded


class _Reader:
    """The reading side of a run: which files changed, read one by one (bounded look-ahead,
    :func:`semfs.ingest.parallel.stream`), with the report's bookkeeping."""

    def __init__(
        self,
        store: Store,
        report: IngestReport,
        *,
        max_bytes: int,
        root: str | None,
        held: Callable[[str], bool] | None,
        keep_failed: bool,
        verify: bool,
        retry_skipped: bool,
        skip_memo: Path | None,
        jobs: int | None,
    ) -> None:
        self.store = store
        self.report = report
        self.max_bytes = max_bytes
        self.root = root
        self.held = held
        self.keep_failed = keep_failed
        self.verify = verify
        self.retry_skipped = retry_skipped
        self.jobs = jobs
        self.memo = SkipMemo.load(None if retry_skipped else skip_memo)
        self.memo.path = skip_memo
        self.remembered = self.memo.reason if skip_memo is not None else None
        self.existing: dict[str, DocumentRecord] = {}
        self.seen: set[str] = set()
        self.held_back: list[str] = []  # files being written: left as they are

    def load(self, scope: set[str] | None) -> None:
        """The stored records this run compares with (read under the write lock)."""
        if scope is None:
            self.existing = {d.path: d for d in self.store.list_documents()}
        else:
            # A converted file's record is its view's: report.pdf in scope covers report.pdf.md.
            stored = scope | {v for v in map(formats.view_path, scope) if v is not None}
            self.existing = {
                d.path: d for d in self.store.list_documents() if in_scope(d.path, stored)
            }

    def _wanted(self, files: Sequence[SourceFile]) -> Iterator[SourceFile]:
        """The files to read: all but those being written (they keep their stored version)."""
        for f in files:
            if self.held is not None and self.held(f.path):
                key = formats.view_path(f.path) or f.path
                self.seen.update(k for k in (key, f.path) if k in self.existing)
                self.held_back.append(f.path)
                continue
            yield f

    def _previous(self, f: SourceFile) -> DocumentRecord | None:
        # A converted file no extractor could read is stored as it is, under its own name.
        return self.existing.get(formats.view_path(f.path) or f.path) or self.existing.get(f.path)

    def _read(self, f: SourceFile) -> Document | Skipped:
        old = self._previous(f)
        # --retry-skipped: a file stored as it is because its extractor refused it is tried again.
        retry = self.retry_skipped and old is not None and old.as_is
        return read_document(f, self.max_bytes, self.root, None if retry else old, self.remembered)

    def changes(
        self, files: Sequence[SourceFile], on_progress: Progress | None
    ) -> Iterator[tuple[Document, bool]]:
        """Each document that changed, one at a time, and whether only its mtime, mode or
        owner did (the record is rewritten, nothing chunked). Files are read and extracted in
        ``jobs`` threads (each converted file in a bounded worker process), a few ahead of
        the one taken here, in the order of the scan: what a run holds stays bounded."""
        report = self.report
        for f, result in parallel.stream(self._wanted(files), self._read, reading_jobs(self.jobs)):
            old = self._previous(f)
            doc = result
            if on_progress is not None:
                on_progress(1)
            if self.keep_failed and isinstance(doc, Document) and doc_unreadable(doc, old):
                # A text document that reads as no text now (caught mid-write): a failure, so
                # its ingested version stays until the watcher reads it again.
                doc = Skipped(f.path, doc.unsearched)
            if isinstance(doc, Skipped):
                report.skipped.append(doc)
                continue
            self.seen.add(doc.path)
            same = old is not None and _same(old, doc)
            damage = verify_document(self.store, old) if self.verify and same and old else None
            if damage:
                logger.warning("%s is damaged in the store (%s): re-ingesting it", doc.path, damage)
                report.repaired.append(doc.path)
                if doc.text is None:  # the stored view is part of what is damaged: extract again
                    again = read_document(f, self.max_bytes, self.root, None)
                    if isinstance(again, Skipped):
                        report.skipped.append(again)
                        self.seen.discard(doc.path)
                        continue
                    doc = again
            if old is not None and same and not damage:
                report.unchanged.append(doc.path)
                if (old.st_mtime_ns, old.mode, old.uid, old.gid) != (
                    doc.mtime_ns,
                    doc.mode,
                    doc.uid,
                    doc.gid,
                ):
                    yield doc, True
            else:
                (report.updated if old is not None else report.added).append(doc.path)
                if doc.unsearched:
                    report.unsearched.append(Skipped(doc.path, doc.unsearched))
                yield doc, False

    def finish(self, scope: set[str] | None, save_memo: bool) -> None:
        """After the last file: the skips' kept versions, and what is deleted."""
        report = self.report
        if save_memo:
            self.memo.update(scope, report.skipped)
            self.memo.save()
        before = set(self.seen)
        report.skipped = [
            _keep_old(s, self.existing, self.seen, self.keep_failed) for s in report.skipped
        ]
        report.kept = sorted(self.seen - before)
        report.deleted = sorted(set(self.existing) - self.seen)
        if self.held_back:
            report.notes.append(
                f"{len(self.held_back)} files are open for writing through a mount "
                f"({', '.join(self.held_back[:3])}{', ...' if len(self.held_back) > 3 else ''})"
                ": left as they were; the mount indexes each once it is closed"
            )
        report.skipped.sort(key=lambda s: s.path)


@dataclass
class _Pending:
    """A document whose chunks are being written; committed when all are."""

    doc: Document
    chunks: list[ChunkRecord]
    texts: list[str]  # what the model sees (context line + chunk text), for BM25 and vhash
    written: int = 0


class _Writer:
    """The writing side of a run, begun at its first change: the run's generation, the
    window of chunks to write, and the commits."""

    def __init__(
        self,
        store: Store,
        report: IngestReport,
        model: str,
        embedder: Embedder | None,
        claim: Claim,
        batch_size: int,
        started: float,
    ) -> None:
        self.store = store
        self.report = report
        self.model = model
        self.embedder = embedder
        self.claim = claim
        self.batch_size = batch_size
        self.started = started
        self.begun = False
        self.gen = 0
        self.meta: StoreMeta | None = None
        self.was_dirty = False
        self.nothing_stale = False
        self.bm25: Bm25 | None = None
        self.window: list[_Pending] = []
        self.window_chunks = 0
        self.last_write = time.monotonic()
        self.sealed = 0
        self.flipped: set[str] = set()
        self.without_dense = 0  # chunks written without their dense vector
        self.folders: list[DirectoryRecord] = []  # new or changed: written by begin()

    def begin(self, full: bool, existing: dict[str, DocumentRecord]) -> None:
        """The run's generation, the store marked dirty (and cleaned after a killed run)."""
        store = self.store
        self.embedder = ensure_collection(store, self.model, self.embedder)
        meta = store.read_meta() or StoreMeta(model=self.model, dimension=self.embedder.dimension)
        self.gen = meta.generation + 1
        self.was_dirty = meta.dirty
        # The source is recorded with the first write: a first run that is killed keeps it.
        # This run writes what SCHEMA_VERSION describes (an older readable store is stamped).
        meta = replace(meta, schema=SCHEMA_VERSION, **_source_fields(self.claim))
        store.write_meta(
            replace(meta, generation=self.gen, dirty=True, documents=None, chunks=None)
        )
        if self.was_dirty:
            _clean_interrupted(store)
        store.put_directories(self.folders)
        # A full run that finds no record (a new store, or one whose killed first run left
        # only chunks, deleted just above) has no older version of anything to delete: each
        # document's delete is a filtered request over every segment.
        self.nothing_stale = full and not existing
        if meta.bm25_avg_len is not None or store.count_chunks() > 0:
            # A store with chunks keeps what they were written with (None: Bm25's default).
            self.bm25 = bm25_model(meta)
        self.meta = meta
        self.begun = True

    def add(self, doc: Document, existing: dict[str, DocumentRecord], full: bool) -> None:
        """A changed document: chunked now, written with its window."""
        if not self.begun:
            self.begin(full, existing)
        assert self.embedder is not None and doc.text is not None
        self._flip(doc, existing)
        original = doc.original
        if original is not None and original.data:
            # The original first, under the new generation (invisible until its view
            # commits), and let go of its bytes.
            self.store.put_blob(original.path, self.gen, original.data)
            doc = replace(doc, original=replace(original, data=b""))
        chunks, texts = chunk_document(
            self.embedder, doc, self.gen, previous_chunks(self.store, existing.get(doc.path))
        )
        self.window.append(_Pending(doc, chunks, texts))
        self.window_chunks += len(chunks)
        if self.bm25 is None:  # a new store: its BM25 weights wait for the sample
            if self.window_chunks >= BM25_SAMPLE_CHUNKS:
                self._measure_bm25()
            return
        if (
            self.window_chunks >= WINDOW_CHUNKS
            or time.monotonic() - self.last_write >= WINDOW_SECONDS
        ):
            self._write_window()

    def touch(self, doc: Document, existing: dict[str, DocumentRecord], full: bool) -> None:
        """Same content, new mtime or mode: the record rewritten, nothing chunked."""
        if not self.begun:
            self.begin(full, existing)
        old = self.store.get_document(doc.path)
        if old is not None:
            self.store.put_document(
                document_record(doc, old.chunks, old.gen, old.offsets, old.split_lines)
            )

    def _flip(self, doc: Document, existing: dict[str, DocumentRecord]) -> None:
        """A file that turned from a document into one stored as it is, or back (a PDF that
        became readable): its old record goes first, with every stored version of its
        original, whose path the new record's original shares."""
        if doc.original is None:
            return
        name = doc.original.path
        for other in (name, formats.view_path(name)):
            if other and other != doc.path and other in existing and other not in self.flipped:
                self.flipped.add(other)
                _delete(self.store, [other], existing)

    def _measure_bm25(self) -> None:
        assert self.meta is not None
        average = bm25_average_length(
            [
                keyword_text(r, t)
                for p in self.window
                for r, t in zip(p.chunks, p.texts, strict=True)
            ]
        )
        self.meta = replace(self.meta, bm25_avg_len=average)
        self.store.write_meta(
            replace(self.meta, generation=self.gen, dirty=True, documents=None, chunks=None)
        )
        self.bm25 = bm25_model(self.meta)
        self._write_window()

    def _write_window(self) -> None:
        """The window's chunks (each with the stored vector of its text, when there is one),
        in requests of :data:`WINDOW_CHUNKS`; each document is committed as soon as its chunks
        are in (a window held for the BM25 sample is thousands of chunks)."""
        assert self.bm25 is not None
        self.last_write = time.monotonic()
        store = self.store
        done = 0  # documents of the window committed
        part: list[tuple[_Pending, ChunkRecord, str]] = []
        for i, p in enumerate(self.window):
            for rec, text in zip(p.chunks, p.texts, strict=True):
                part.append((p, rec, text))
                if len(part) >= WINDOW_CHUNKS:
                    self._upsert(part)
                    part = []
                    while done < i and self.window[done].written == len(self.window[done].chunks):
                        self._commit(self.window[done])
                        done += 1
        self._upsert(part)
        for p in self.window[done:]:
            self._commit(p)
        if self.window:
            self.report.keywords_seconds = time.perf_counter() - self.started
        if self.report.chunks_written - self.sealed >= COMPACT_EVERY_CHUNKS:
            self.sealed = self.report.chunks_written
            _compact(store)
        self.window = []
        self.window_chunks = 0

    def _upsert(self, part: list[tuple[_Pending, ChunkRecord, str]]) -> None:
        """One request of chunks with their BM25 vectors, and the stored dense vector of each
        one's model text where the store has it."""
        if not part:
            return
        assert self.bm25 is not None
        known = self.store.dense_by_hash(list({rec.vhash for _p, rec, _t in part}))
        points = []
        for p, rec, text in part:
            sv = self.bm25.embed_document(keyword_text(rec, text))
            points.append(ChunkPoint(rec, known.get(rec.vhash), list(sv.indices), list(sv.values)))
            p.written += 1
        reused = sum(1 for pt in points if pt.dense is not None)
        if reused < len(points) and self.meta is not None and not self.meta.dense_pending:
            # Said before the first chunk without a vector is in, not at the end of the pass:
            # status, the results' meaning line, @semantic and MCP count what is embedded.
            self.meta = replace(self.meta, dense_pending=True)
            self.store.write_meta(
                replace(self.meta, generation=self.gen, dirty=True, documents=None, chunks=None)
            )
        self.store.upsert_chunks(points)
        self.report.chunks_written += len(points)
        self.report.vectors_reused += reused
        self.without_dense += len(points) - reused

    def _commit(self, p: _Pending) -> None:
        """Commit a document whose chunks are all written, then delete its older chunks,
        unless ``nothing_stale`` (the store held no document when the run began)."""
        doc = p.doc
        split = any(not c.text.endswith("\n") for c in p.chunks[:-1])
        self.store.put_document(
            document_record(doc, len(p.chunks), self.gen, tuple(c.start for c in p.chunks), split)
        )
        self.report.committed += 1
        if not self.nothing_stale:
            self.store.delete_stale_chunks(doc.path, self.gen)
            if doc.original is not None:
                self.store.delete_stale_chunks(doc.original.path, self.gen)

    def end(
        self,
        existing: dict[str, DocumentRecord],
        gone_dirs: list[str],
        full: bool,
    ) -> None:
        """The last window, the deletions and the folders gone, then the clean meta and its
        manifest."""
        store = self.store
        report = self.report
        if self.bm25 is None:
            self._measure_bm25()
        self._write_window()
        _delete(store, [p for p in report.deleted if p not in self.flipped], existing)
        store.delete_directories(gone_dirs)
        assert self.meta is not None
        documents, chunks = _counts(store, self.meta, self.was_dirty, existing, report, full)
        store.write_meta(
            replace(
                self.meta,
                generation=self.gen,
                dirty=False,
                documents=documents,
                chunks=chunks,
                ingested_at=time.time(),
                ingest_seconds=round(time.perf_counter() - self.started, 3),
                # Cleared only by a dense pass that finds nothing left (semfs.ingest.densepass).
                dense_pending=self.meta.dense_pending or self.without_dense > 0,
            )
        )
        store.flush()
        report.words_cut = self.bm25.words_cut if self.bm25 is not None else 0
        if report.updated or report.deleted or report.chunks_written:
            report.compacted = _compact(store)
        # Last: a mount reads its tree from this in one request (semfs.ingest.store.manifest).
        store.write_manifest(self.gen)


def doc_unreadable(doc: Document, old: DocumentRecord | None) -> bool:
    """Whether ``doc`` is a searchable document (``old``) that its bytes no longer let be
    read: stored as it is now for its content, not for its name."""
    return (
        doc.unsearched not in ("", NOT_A_DOCUMENT)
        and kind_of(doc.unsearched) not in UNSEARCHED_KINDS  # kept out for what it is
        and old is not None
        and not old.as_is
    )


def _delete(store: Store, paths: Sequence[str], existing: dict[str, DocumentRecord]) -> None:
    """Delete the documents ``paths`` and the stored originals of those that are views."""
    store.delete_documents(paths)
    for path in paths:
        gone = existing[path].original
        if gone is not None and gone != path:
            store.delete_stale_chunks(gone, None)


def _source_fields(claim: Claim) -> dict[str, Any]:
    return {
        "source": claim.source.path,
        "source_dev": claim.source.dev,
        "source_ino": claim.source.ino,
    }


def _folders_to_write(
    stored: dict[str, DirectoryRecord], walked: list[DirectoryRecord]
) -> list[DirectoryRecord]:
    """The folder records of ``walked`` that the store does not hold as they are."""
    return sorted((d for d in walked if stored.get(d.path) != d), key=lambda d: d.path)


def _folders_gone(
    stored: dict[str, DirectoryRecord],
    walked: list[DirectoryRecord],
    skipped: Sequence[Skipped],
    scope: AbstractSet[str] | None = None,
) -> list[str]:
    """Folder records to forget (only at or below ``scope``, when given: a watcher's batch);
    a folder that could not be read keeps the records below it."""
    new = {d.path for d in walked}
    unreadable = [s.path for s in skipped if s.transient]
    return [
        p
        for p in sorted(stored)
        if (scope is None or in_scope(p, scope))
        and p not in new
        and not any(p == u or p.startswith(u + "/") for u in unreadable)
    ]


def _same(old: DocumentRecord, doc: Document) -> bool:
    """Whether ``doc`` is what ``old`` stores: the same text, and for a view the same
    original (a PDF whose metadata alone changed has the same view and new bytes)."""
    if old.sha256 != doc.sha256:
        return False
    original = doc.original
    if original is None:
        return old.original is None
    return (old.original_sha256, old.extractor) == (original.sha256, original.extractor)


def _keep_old(
    skip: Skipped, existing: dict[str, DocumentRecord], seen: set[str], keep_all: bool = False
) -> Skipped:
    """A transient skip (any skip with ``keep_all``) keeps the ingested versions of the file
    (or of the folder's files): they are marked seen, so not deleted, and the reason says so.
    A skipped original keeps its text view (the record that stores both)."""
    if not (skip.transient or keep_all):
        return skip
    prefix = skip.path + "/"
    key = skip.path if skip.path in existing else formats.view_path(skip.path) or skip.path
    # A file needs no look for a folder's documents (a look over every record).
    in_folder = [] if key in existing else [p for p in existing if p.startswith(prefix)]
    kept = [key] if key in existing else in_folder
    if not kept:
        return skip
    seen.update(kept)
    what = "the ingested version" if kept == [key] else f"{len(kept)} ingested documents"
    return Skipped(skip.path, f"{skip.reason} (kept {what})", transient=True)


def _counts(
    store: Store,
    meta: StoreMeta,
    was_dirty: bool,
    existing: dict[str, DocumentRecord],
    report: IngestReport,
    full: bool,
) -> tuple[int, int]:
    """Documents and chunks the store holds after this run, for the meta (a damage check).

    A full run knows every record; a run over some paths adds its changes to the last run's
    counts, or counts afresh after an interrupted run or in a store without counts yet.
    """
    # A file that turned into a view or back (a PDF that became readable, a page retried
    # with --retry-skipped) is updated under a name the store did not hold: its old record,
    # under the other name, is among the deleted.
    written = {*report.added, *report.updated}
    gone = {p for p in (*report.updated, *report.deleted) if p in existing}
    change = (
        len(written - existing.keys()) - len(set(report.deleted) & existing.keys()),
        report.chunks_written - sum(existing[p].chunks for p in gone),
    )
    if full:  # ``existing`` is every record the store held: exact, whatever the meta says
        return len(existing) + change[0], sum(d.chunks for d in existing.values()) + change[1]
    if was_dirty or meta.documents is None or meta.chunks is None:
        docs = store.list_documents()
        return len(docs), sum(d.chunks for d in docs)
    return meta.documents + change[0], meta.chunks + change[1]


def _compact(store: Store) -> bool:
    """Reclaim replaced chunks when enough pile up, and make grown segments immutable:
    a store that is re-ingested stays small, and a large one opens fast and small."""
    try:
        return store.compact()
    except DiskFullError as exc:  # the ingest itself is done; the next one tries again
        logger.warning("not compacting the store: %s", exc)
        return False


def _clean_interrupted(store: Store) -> None:
    """Delete chunks that no committed record points to: leftovers of a killed run."""
    docs = store.list_documents()
    committed = {d.path: d.gen for d in docs}
    committed.update((d.original, d.gen) for d in docs if d.original is not None)
    stale_paths = {path for path, gen in store.chunk_versions() if committed.get(path) != gen}
    for path in sorted(stale_paths):
        store.delete_stale_chunks(path, committed.get(path))
    if stale_paths:
        logger.info(
            "cleaned up chunks of %d documents left by an interrupted run", len(stale_paths)
        )
