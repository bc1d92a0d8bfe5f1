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

Memory is bounded by the window (:data:`semfs.ingest.writer.WINDOW_CHUNKS` chunks and the
documents they come from), whatever the collection's size; what grows with it is one small
record per file (the scan, the stored records). The reading side is here (what changed, read
one by one); the writing side is :mod:`semfs.ingest.writer`, the report :mod:`semfs.ingest.report`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace
from pathlib import Path
from typing import Any

from semfs.ingest import chunkworkers, formats, parallel
from semfs.ingest.chunkworkers import Chunked, ChunkWorkers
from semfs.ingest.densepass import DenseReport, embed_missing, mark_embedded
from semfs.ingest.embedding.embedder import (
    DEFAULT_MODEL,
    Embedder,
    canonical_model_name,
    counts_alone,
    load_embedder,
)
from semfs.ingest.errors import ModelMismatchError
from semfs.ingest.ignores import rules_folder
from semfs.ingest.origin import Claim, claim_source
from semfs.ingest.report import IngestReport, Interrupted
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
from semfs.ingest.store.check import verify_document
from semfs.ingest.store.schema import DirectoryRecord, DocumentRecord
from semfs.ingest.store.writelock import WRITE_LOCK, CollectionLock
from semfs.ingest.unsearched import KINDS as UNSEARCHED_KINDS
from semfs.ingest.unsearched import kind_of
from semfs.ingest.writer import Writer, source_fields

logger = logging.getLogger(__name__)

Progress = Callable[[int], None]
# Told each pass's name ("reading": files, "embedding": chunks) and how many it works through;
# ``on_progress`` then counts them.
OnPhase = Callable[[str, int], None]


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


def in_paths(path: str, only: AbstractSet[str]) -> bool:
    """Whether ``path`` is one of ``only`` or inside one of them (O(depth))."""
    if path in only:
        return True
    cut = path.find("/")
    while cut != -1:
        if path[:cut] in only:
            return True
        cut = path.find("/", cut + 1)
    return False


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
    embedded (an ONNX model's session: only when something is embedded). Symlinks that
    resolve outside ``source`` are skipped unless ``follow_symlinks``. A file (or folder)
    that exists but cannot be read this time keeps its ingested version, and the skip reason
    says so.

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
    only: set[str] | None = None
    if paths is not None:
        # A changed .gitignore or .ignore may take or leave any file of its folder.
        folders = {rules_folder(p.strip("/")) for p in paths} - {None}
        paths = None if "" in folders else {*paths, *(f for f in folders if f)}
    if paths is None:
        files, report.skipped = scan(source, include, exclude, dirs, report.ignored)
    else:
        only = {p.strip("/") for p in paths}
        files, report.skipped = scan_paths(source, only, include, exclude, dirs, report.ignored)
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
        reader.load(only)
        for _change in reader.changes(files, None):
            pass
        reader.finish(only, save_memo=False)
        report.seconds = time.perf_counter() - started
        return report

    if held is None:
        reader.held = owner_holds(store)  # a writable mount's open files, beside it
    lock = CollectionLock(store.lock_path(WRITE_LOCK), "first")
    lock.acquire(lock_timeout, on_wait)
    writer: Writer | None = None
    try:
        reader.load(only)
        stored_dirs = {d.path: d for d in store.list_directories()}
        writer = Writer(store, report, model_name, embedder, claim, batch_size, started)
        reader.chunker = writer.chunker = _chunk_workers(store, writer, len(files), jobs)
        # Folder records (their modes) go in with the run's first write, before any document
        # below them commits: a 0700 folder is never served 0555 meanwhile, nor after a kill.
        writer.folders = _folders_to_write(stored_dirs, dirs)
        meta = store.read_meta()
        if meta is not None and meta.dirty:
            writer.begin(full=only is None, existing=reader.existing)  # clean up first
        if meta is None and files and embedder is not None:
            # A first ingest chunks, so it needs the model's tokenizer and its window for the
            # chunks' size (an ONNX model's session loads with the first text to embed): a
            # broken install is one line now, not after the reading bar has started (a re-run
            # that changes nothing still loads no model).
            embedder.count_tokens(["semfs"])
            _ = embedder.max_tokens
            check = getattr(embedder, "check", None)  # an ONNX model: without its session
            if check is not None:
                check()
        if on_phase is not None:
            on_phase("reading", len(files))
        for doc, touched, chunked in reader.changes(files, on_progress):
            if touched:
                writer.touch(doc, reader.existing, only is None)  # mtime or mode only
            else:
                writer.add(doc, reader.existing, only is None, chunked)
        reader.finish(only, save_memo=True)
        gone_dirs = _folders_gone(stored_dirs, dirs, report.skipped, only)
        if not writer.begun and (report.deleted or writer.folders or gone_dirs):
            writer.begin(full=only is None, existing=reader.existing)
        if writer.begun:
            writer.end(reader.existing, gone_dirs, full=only is None)
        else:
            _unchanged_run(store, claim)
        embedder = writer.embedder
    except KeyboardInterrupt as exc:
        report.seconds = time.perf_counter() - started
        raise Interrupted(report, "keywords") from exc
    finally:
        if writer is not None and writer.chunker is not None:
            writer.chunker.close()
        lock.release()
    report.keywords_seconds = report.keywords_seconds or time.perf_counter() - started
    try:
        _second_pass(store, report, model_name, embedder, dense, batch_size, on_phase, on_progress)
    finally:  # stopped while embedding too: the report says how long it ran
        report.seconds = time.perf_counter() - started
    return report


def reading_jobs(jobs: int | None) -> int:
    """The files an ingest reads at once: ``jobs``, else one per core; the process's worker
    pool may then run as many extractions at once."""
    from semfs.ingest.formats import worker

    n = max(1, jobs) if jobs is not None else worker.default_jobs()
    worker.shared(n)
    return n


def _chunk_workers(
    store: Store, writer: Writer, files: int, jobs: int | None
) -> ChunkWorkers | None:
    """Children that chunk the new documents of a run that reads many files on several
    cores (:mod:`semfs.ingest.chunkworkers`), when they count tokens as the run's embedder
    does without loading its model; None: the run chunks in process."""
    n = reading_jobs(jobs)
    model = writer.model
    if n < 2 or files < chunkworkers.FROM_FILES or not counts_alone(model):
        return None
    if writer.embedder is None:
        writer.embedder = load_embedder(model)  # loads on first use
    embedder = writer.embedder
    # A caller's own embedder (another model's name, or a count_tokens of its own: a test's
    # pause in the keyword pass) counts as only it knows: the children count as the
    # library's embedders do.
    library = counts_alone.__module__.rpartition(".")[0]  # semfs.ingest.embedding
    own = type(embedder).count_tokens.__module__
    if embedder.name != model or not own.startswith(library + "."):
        return None
    meta = store.read_meta()  # under the write lock: begin() takes the generation after it
    gen = (meta.generation if meta is not None else 0) + 1
    return ChunkWorkers(model, lambda: embedder.max_tokens, gen, n)


def owner_holds(store: Store, ttl: float = 0.5) -> Callable[[str], bool] | None:
    """For a store reached through its owner's socket: whether the owner's writable mount
    holds a file open for writing (asked again at most every ``ttl`` seconds), so an ingest
    beside it leaves the file as it is, as the owner's watcher does; None elsewhere."""
    owner = store.owner_link()
    if owner is None:
        return None
    known: list[Any] = [0.0, frozenset()]

    def held(path: str) -> bool:
        now = time.monotonic()
        if now - known[0] > ttl:
            known[:] = [now, owner.held_open()]
        return path in known[1]

    return held


def _unchanged_run(store: Store, claim: Claim) -> None:
    """Nothing to write but, perhaps, the source's record and a manifest (a store from
    before either): an unchanged re-run writes nothing else and loads no model."""
    meta = store.read_meta()
    if meta is None:
        return
    if claim.changes(meta):  # a folder that moved, a store from before sources were kept
        store.write_meta(replace(meta, **source_fields(claim)))
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
    owner = store.owner_link()
    if owner is not None and owner.embeds:
        report.dense_elsewhere = f"pid {owner.pid}"  # the mount's (or watcher's) own pass
        return
    if not dense:
        return
    if embedder is None:
        embedder = load_embedder(model_name)
    done = DenseReport()  # filled as it goes: a Ctrl-C's report counts what was embedded
    try:
        embed_missing(
            store,
            embedder,
            batch_size=batch_size,
            wait=owner is None,  # beside an owner, another client's pass may have it
            on_phase=on_phase,
            on_progress=on_progress,
            into=done,
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
        self.chunker: ChunkWorkers | None = None  # chunks new documents where they are read

    def load(self, only: set[str] | None) -> None:
        """The stored records this run compares with (read under the write lock)."""
        if only is None:
            self.existing = {d.path: d for d in self.store.list_documents()}
        else:
            # A converted file's record is its view's: report.pdf among them covers report.pdf.md.
            stored = only | {v for v in map(formats.view_path, only) if v is not None}
            self.existing = {
                d.path: d for d in self.store.list_documents() if in_paths(d.path, stored)
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

    def _read_chunked(self, f: SourceFile) -> tuple[Document | Skipped, Chunked | None]:
        """:meth:`_read`, and a new document's chunks made by the run's chunker, in the
        reading thread (a changed one is chunked by the writer: it keeps what it can of the
        stored version's chunks)."""
        doc = self._read(f)
        chunker = self.chunker
        if (
            chunker is None
            or not isinstance(doc, Document)
            or doc.text is None
            or doc.unsearched
            or self._previous(f) is not None
        ):
            return doc, None
        return doc, chunker.chunk(doc)

    def changes(
        self, files: Sequence[SourceFile], on_progress: Progress | None
    ) -> Iterator[tuple[Document, bool, Chunked | None]]:
        """Each document that changed, one at a time, whether only its mtime, mode or
        owner did (the record is rewritten, nothing chunked), and its chunks when the run's
        chunker made them. Files are read and extracted in ``jobs`` threads (each converted
        file in a bounded worker process), a few ahead of the one taken here, in the order of
        the scan: what a run holds stays bounded."""
        report = self.report
        work, jobs = self._read_chunked, reading_jobs(self.jobs)
        # Chunking children keep working while the writer writes: more documents ahead.
        ahead = jobs * (chunkworkers.AHEAD if self.chunker is not None else 2)
        for f, (result, made) in parallel.stream(self._wanted(files), work, jobs, ahead):
            old = self._previous(f)
            doc, chunked = result, made
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
                    chunked = None
            if old is not None and same and not damage:
                report.unchanged.append(doc.path)
                if (old.st_mtime_ns, old.mode, old.uid, old.gid) != (
                    doc.mtime_ns,
                    doc.mode,
                    doc.uid,
                    doc.gid,
                ):
                    yield doc, True, None
            else:
                (report.updated if old is not None else report.added).append(doc.path)
                if doc.unsearched:
                    report.unsearched.append(Skipped(doc.path, doc.unsearched))
                yield doc, False, chunked

    def finish(self, only: set[str] | None, save_memo: bool) -> None:
        """After the last file: the skips' kept versions, and what is deleted."""
        report = self.report
        if save_memo:
            self.memo.update(only, report.skipped)
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


def doc_unreadable(doc: Document, old: DocumentRecord | None) -> bool:
    """Whether ``doc`` is a searchable document (``old``) that its bytes no longer let be
    read: stored as it is now for its content, not for its name."""
    return (
        doc.unsearched not in ("", NOT_A_DOCUMENT)
        and kind_of(doc.unsearched) not in UNSEARCHED_KINDS  # kept out for what it is
        and old is not None
        and not old.as_is
    )


def _folders_to_write(
    stored: dict[str, DirectoryRecord], walked: list[DirectoryRecord]
) -> list[DirectoryRecord]:
    """The folder records of ``walked`` that the store does not hold as they are."""
    return sorted((d for d in walked if stored.get(d.path) != d), key=lambda d: d.path)


def _folders_gone(
    stored: dict[str, DirectoryRecord],
    walked: list[DirectoryRecord],
    skipped: Sequence[Skipped],
    only: AbstractSet[str] | None = None,
) -> list[str]:
    """Folder records to forget (given ``only``, a watcher's batch: those at or below it alone);
    a folder that could not be read keeps the records below it."""
    new = {d.path for d in walked}
    unreadable = [s.path for s in skipped if s.transient]
    return [
        p
        for p in sorted(stored)
        if (only is None or in_paths(p, only))
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
