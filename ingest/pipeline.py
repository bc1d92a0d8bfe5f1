"""Incremental, atomic ingest: make a collection mirror a source directory.

Per document the switch is atomic for readers: the new generation's chunks are written,
then the document record is committed (readers follow only records), then the old
generation is deleted. A run marks the store dirty while it works; a run that finds it
dirty (an earlier run was killed) first deletes every chunk no record points to.
"""

from __future__ import annotations

import logging
import os
import time
from bisect import bisect_right
from collections.abc import Callable, Collection, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from semfs.ingest import formats, parallel
from semfs.ingest.chunking import (
    chunk_text,
    code_embedding_text,
    document_description,
    document_title,
    embedding_text,
)
from semfs.ingest.embedding.embedder import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MODEL,
    Embedder,
    canonical_model_name,
    load_embedder,
)
from semfs.ingest.errors import DiskFullError, ModelMismatchError
from semfs.ingest.ignores import rules_folder
from semfs.ingest.origin import Claim, claim_source
from semfs.ingest.skipmemo import SkipMemo
from semfs.ingest.sources import (
    DEFAULT_MAX_BYTES,
    NOT_A_DOCUMENT,
    Document,
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
from semfs.ingest.unsearched import KINDS as UNSEARCHED_KINDS
from semfs.ingest.unsearched import kind_of

logger = logging.getLogger(__name__)

# Chunks handed to the model per encode() call. sentence-transformers sorts a call's texts by
# length before batching, so larger calls waste less on padding; this bounds memory.
ENCODE_WINDOW_BATCHES = 8
# Chunks written between two compactions of a long ingest. Edge keeps an appendable segment
# in RAM whole (vectors, payload, sparse index) until compact() makes it immutable and on
# disk: one compaction at the end held every chunk of the run in memory, 2.1 GB at 100k
# chunks and more than the machine at 1M. Each compaction seals what was written so far.
COMPACT_EVERY_CHUNKS = 50_000

Progress = Callable[[int], None]


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
    chunks_embedded: int = 0
    seconds: float = 0.0
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
            "chunks_embedded": self.chunks_embedded,
            "seconds": round(self.seconds, 3),
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


@dataclass
class _Pending:
    """A document whose new chunks are being embedded; committed when all are written."""

    doc: Document
    chunks: list[ChunkRecord]
    # What the models see: context line + chunk text. Stored text stays the exact span.
    texts: list[str]
    written: int = 0


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
    """The embedder for ``model``, after creating the collection for it if there is none."""
    if embedder is None:
        embedder = load_embedder(model)
    if store.read_meta() is None:
        store.create(embedder.dimension)
        store.write_meta(StoreMeta(model=model, dimension=embedder.dimension))
    return embedder


def ingest(
    source: Path,
    store: Store,
    *,
    model: str | None = None,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_bytes: int = DEFAULT_MAX_BYTES,
    follow_symlinks: bool = False,
    embedder: Embedder | None = None,
    on_start: Callable[[int], None] | None = None,
    on_progress: Progress | None = None,
    paths: Collection[str] | None = None,
    keep_failed: bool = False,
    verify: bool = False,
    replace_source: bool = False,
    held: Callable[[str], bool] | None = None,
    skip_memo: Path | None = None,
    retry_skipped: bool = False,
    dry_run: bool = False,
    jobs: int | None = None,
) -> IngestReport:
    """Make ``store`` mirror ``source``; return what changed. Bad files are skipped, not fatal.

    ``on_start(total_chunks)`` and ``on_progress(n_chunks)`` drive a progress display.
    The model loads only when something must be embedded. Symlinks that resolve outside
    ``source`` are skipped unless ``follow_symlinks``. A file (or folder) that exists but
    cannot be read this time keeps its ingested version, and the skip reason says so.

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
    """
    started = time.perf_counter()
    report = IngestReport()
    model_name = resolve_model(store, model)
    report.model = model_name
    check_source(source)
    claim = claim_source(store.read_meta(), source, store.collection, replace=replace_source)
    if claim.note:
        logger.info("%s", claim.note)
        report.notes.append(claim.note)
    dirs: list[DirectoryRecord] | None = None
    if paths is not None:
        # A changed .gitignore or .ignore may take or leave any file of its folder.
        folders = {rules_folder(p.strip("/")) for p in paths} - {None}
        paths = None if "" in folders else {*paths, *(f for f in folders if f)}
    if paths is None:
        dirs = []
        files, report.skipped = scan(source, include, exclude, dirs, report.ignored)
        existing = {d.path: d for d in store.list_documents()}
    else:
        scope = {p.strip("/") for p in paths}
        dirs = []
        files, report.skipped = scan_paths(source, scope, include, exclude, dirs, report.ignored)
        # A converted file's record is its view's: report.pdf in scope covers report.pdf.md.
        stored = scope | {v for v in map(formats.view_path, scope) if v is not None}
        existing = {d.path: d for d in store.list_documents() if in_scope(d.path, stored)}
    root = None if follow_symlinks else os.path.realpath(source)
    memo = SkipMemo.load(None if retry_skipped else skip_memo)
    memo.path = skip_memo
    remembered = memo.reason if skip_memo is not None else None

    changed: list[Document] = []
    touched: list[Document] = []
    seen: set[str] = set()

    def previous(f: SourceFile) -> DocumentRecord | None:
        # A converted file no extractor could read is stored as it is, under its own name.
        return existing.get(formats.view_path(f.path) or f.path) or existing.get(f.path)

    def read(f: SourceFile) -> Document | Skipped:
        old = previous(f)
        # --retry-skipped: a file stored as it is because its extractor refused it is tried again.
        retry = retry_skipped and old is not None and old.as_is
        return read_document(f, max_bytes, root, None if retry else old, remembered)

    wanted = []
    for f in files:
        if held is not None and held(f.path):
            key = formats.view_path(f.path) or f.path
            seen.update(k for k in (key, f.path) if k in existing)
        else:
            wanted.append(f)
    # Read and extracted in ``jobs`` threads, each converted file in a worker process of its
    # own; taken here in the order of the scan.
    for f, got in parallel.stream(wanted, read, reading_jobs(jobs)):
        doc, old = got, previous(f)
        if keep_failed and isinstance(doc, Document) and doc_unreadable(doc, old):
            # A text document that reads as no text now (caught mid-write): a failure, so
            # its ingested version stays until the watcher reads it again.
            doc = Skipped(f.path, doc.unsearched)
        if isinstance(doc, Skipped):
            report.skipped.append(doc)
            continue
        seen.add(doc.path)
        same = old is not None and _same(old, doc)
        damage = verify_document(store, old) if verify and same and old else None
        if damage:
            logger.warning("%s is damaged in the store (%s): re-ingesting it", doc.path, damage)
            report.repaired.append(doc.path)
            if doc.text is None:  # the stored view is part of what is damaged: extract again
                again = read_document(f, max_bytes, root, None)
                if isinstance(again, Skipped):
                    report.skipped.append(again)
                    seen.discard(doc.path)
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
                touched.append(doc)
        else:
            changed.append(doc)
            (report.updated if old is not None else report.added).append(doc.path)
            if doc.unsearched:
                report.unsearched.append(Skipped(doc.path, doc.unsearched))
    if not dry_run:
        memo.update(None if paths is None else scope, report.skipped)
        memo.save()
    before = set(seen)
    report.skipped = [_keep_old(s, existing, seen, keep_failed) for s in report.skipped]
    report.kept = sorted(seen - before)
    report.deleted = sorted(set(existing) - seen)
    report.skipped.sort(key=lambda s: s.path)
    put_dirs, gone_dirs = _directory_changes(
        store, dirs, report.skipped, None if paths is None else scope
    )
    if dry_run:
        report.seconds = time.perf_counter() - started
        return report

    meta = store.read_meta()
    unchanged = not (changed or report.deleted or touched or put_dirs or gone_dirs)
    if unchanged and meta is not None and not meta.dirty:
        if claim.changes(meta):  # a folder that moved, a store from before sources were kept
            store.write_meta(replace(meta, **_source_fields(claim)))
            store.flush()
        store.write_manifest(meta.generation)  # a no-op when current; else a store from before
        report.seconds = time.perf_counter() - started
        return report

    embedder = ensure_collection(store, model_name, embedder)
    gen = (meta.generation if meta is not None else 0) + 1
    pending = _chunk_documents(embedder, changed, gen)
    if meta is None:
        meta = StoreMeta(model=model_name, dimension=embedder.dimension)
    if meta.bm25_avg_len is None and store.count_chunks() == 0:
        # A new store weighs BM25 terms by its own chunks' average length; a store with
        # chunks keeps what they were written with (None: Bm25's default).
        average = bm25_average_length([t for p in pending for t in p.texts])
        meta = replace(meta, bm25_avg_len=average)
    was_dirty = meta.dirty
    # The source is recorded with the first write: a first run that is killed keeps it.
    # This run writes what SCHEMA_VERSION describes (an older readable store is stamped).
    meta = replace(meta, schema=SCHEMA_VERSION, **_source_fields(claim))
    store.write_meta(replace(meta, generation=gen, dirty=True, documents=None, chunks=None))
    if was_dirty:
        _clean_interrupted(store)
    # A full run that finds no record (a new store, or one whose killed first run left only
    # chunks, deleted just above) has no older version of anything to delete: each document's
    # delete is a filtered request over every segment, ~0.2 ms at 300k chunks, more as it grows.
    nothing_stale = paths is None and not existing
    # A file that turned from a document into one stored as it is, or back (a PDF that
    # became readable): its old record goes first, with every stored version of its
    # original, whose path the new record's original shares.
    renewed = {p.doc.original.path for p in pending if p.doc.original is not None}
    flipped = [
        path for path in report.deleted if path in renewed or existing[path].original in renewed
    ]
    _delete(store, flipped, existing)
    # Originals first, under the new generation (invisible until their view commits), and
    # let go of their bytes: a run over many PDFs does not hold them all until the end.
    for p in pending:
        original = p.doc.original
        if original is not None and original.data:
            store.put_blob(original.path, gen, original.data)
            p.doc = replace(p.doc, original=replace(original, data=b""))

    for doc in touched:  # same content, new mtime or mode: rewrite the record, no embedding
        old_rec = store.get_document(doc.path)
        if old_rec is not None:
            store.put_document(
                _record(doc, old_rec.chunks, old_rec.gen, old_rec.offsets, old_rec.split_lines)
            )
    bm25 = bm25_model(meta)
    report.chunks_embedded = _embed_documents(
        store,
        embedder,
        pending,
        gen,
        batch_size,
        bm25,
        on_start,
        on_progress,
        nothing_stale,
    )
    report.words_cut = bm25.words_cut
    _delete(store, [p for p in report.deleted if p not in flipped], existing)
    store.put_directories(put_dirs)
    store.delete_directories(gone_dirs)
    documents, chunks = _counts(store, meta, was_dirty, existing, report, paths is None)
    store.write_meta(
        replace(
            meta,
            generation=gen,
            dirty=False,
            documents=documents,
            chunks=chunks,
            ingested_at=time.time(),
            ingest_seconds=round(time.perf_counter() - started, 3),
        )
    )
    store.flush()
    if report.updated or report.deleted or report.chunks_embedded:
        report.compacted = _compact(store)
    # Last: a mount reads its tree from this in one request (semfs.ingest.store.manifest).
    store.write_manifest(gen)
    report.seconds = time.perf_counter() - started
    return report


def reading_jobs(jobs: int | None) -> int:
    """The files an ingest reads at once: ``jobs``, else one per core; the process's worker
    pool may then run as many extractions at once."""
    from semfs.ingest.formats import worker

    n = max(1, jobs) if jobs is not None else worker.default_jobs()
    worker.shared(n)
    return n


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


def _directory_changes(
    store: Store,
    walked: list[DirectoryRecord] | None,
    skipped: Sequence[Skipped],
    scope: AbstractSet[str] | None = None,
) -> tuple[list[DirectoryRecord], list[str]]:
    """Folder records to write and to forget (only at or below ``scope``, when given: a
    watcher's batch); a folder that could not be read keeps the records below it."""
    if walked is None:
        return [], []
    old = {d.path: d for d in store.list_directories() if scope is None or in_scope(d.path, scope)}
    new = {d.path: d for d in walked}
    unreadable = [s.path for s in skipped if s.transient]
    gone = [
        p
        for p in sorted(set(old) - set(new))
        if not any(p == u or p.startswith(u + "/") for u in unreadable)
    ]
    return [d for p, d in sorted(new.items()) if old.get(p) != d], gone


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
    gone = [*report.updated, *report.deleted]
    change = (
        len(report.added) - len(report.deleted),
        report.chunks_embedded - sum(existing[p].chunks for p in gone),
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


def _record(
    doc: Document,
    chunks: int,
    gen: int,
    offsets: Sequence[int] | None,
    split_lines: bool | None,
) -> DocumentRecord:
    """The committed record of ``doc``: what the source says, plus where its chunks are."""
    original = doc.original
    return DocumentRecord(
        doc.path,
        doc.size,
        doc.mtime,
        doc.sha256,
        chunks,
        gen,
        offsets,
        mtime_ns=doc.mtime_ns,
        split_lines=split_lines,
        mode=doc.mode,
        uid=doc.uid,
        gid=doc.gid,
        original=original.path if original else None,
        original_size=original.size if original else None,
        original_sha256=original.sha256 if original else None,
        extractor=original.extractor if original else None,
    )


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


def _chunk_documents(embedder: Embedder, docs: Sequence[Document], gen: int) -> list[_Pending]:
    pending: list[_Pending] = []
    for doc in docs:
        assert doc.text is not None  # only unchanged views go unextracted, and are not here
        where = _Places(doc.original.unit, doc.original.marks) if doc.original else None
        # A page (slide, chapter) starts a chunk, so a hit cites one: sections need not.
        cuts = where.lines if where and where.numbered else []
        spans = chunk_text(doc.text, doc.path, embedder.count_tokens, embedder.max_tokens, cuts)
        title = document_title(doc.text, doc.path)
        description = document_description(doc.text, doc.path)
        records = [
            ChunkRecord(
                doc.path,
                gen,
                s.index,
                s.start,
                s.end,
                s.start_line,
                s.end_line,
                s.text,
                s.heading,
                title,
                description,
                where.of(s.start_line, s.end_line) if where else "",
                s.fence,
                s.syntax,
                s.outline,
                s.symbols,
            )
            for s in spans
        ]
        # Code: the path and the definitions around the chunk say what it is about.
        texts = [
            code_embedding_text(s, doc.path) if s.syntax else embedding_text(s, title)
            for s in spans
        ]
        pending.append(_Pending(doc, records, texts))
    return pending


class _Places:
    """Which page (slide, chapter) a chunk's lines are on, from a view's marks."""

    def __init__(self, unit: str, marks: Sequence[tuple[int, str]]) -> None:
        self.unit = unit
        self.numbered = unit in ("page", "slide", "chapter")
        self.lines = [line for line, _label in marks]
        self.labels = [label for _line, label in marks]

    def of(self, start_line: int, end_line: int) -> str:
        """ "page 7", "pages 7-8"; for sections the one a chunk starts in: "section Setup"."""
        if not self.unit or not self.lines:
            return ""
        first = bisect_right(self.lines, start_line) - 1
        last = bisect_right(self.lines, end_line) - 1
        if last < 0:
            return ""
        first = max(first, 0)
        if self.unit == "section":
            return f"section {self.labels[first]}"
        if first == last:
            return f"{self.unit} {self.labels[first]}"
        return f"{self.unit}s {self.labels[first]}-{self.labels[last]}"


def _embed_documents(
    store: Store,
    embedder: Embedder,
    pending: list[_Pending],
    gen: int,
    batch_size: int,
    bm25: Bm25,
    on_start: Callable[[int], None] | None,
    on_progress: Progress | None,
    nothing_stale: bool = False,
) -> int:
    if not pending:
        return 0
    total = sum(len(p.chunks) for p in pending)
    if on_start:
        on_start(total)
    window = max(batch_size, 1) * ENCODE_WINDOW_BATCHES
    done = 0
    sealed = 0
    queue = iter(pending)
    open_docs: list[_Pending] = []
    for batch in _windows(pending, window):
        texts = [text for _p, _rec, text in batch]
        dense = _encode(embedder, texts, batch_size, on_progress)
        points = []
        for (p, rec, text), vec in zip(batch, dense, strict=True):
            sv = bm25.embed_document(text)
            points.append(ChunkPoint(rec, vec, list(sv.indices), list(sv.values)))
            p.written += 1
        store.upsert_chunks(points)
        done += len(points)
        open_docs = _commit_finished(store, open_docs, queue, gen, nothing_stale)
        if done - sealed >= COMPACT_EVERY_CHUNKS:
            sealed = done
            _compact(store)
    _commit_finished(store, open_docs, queue, gen, nothing_stale)
    return done


def _encode(
    embedder: Embedder, texts: list[str], batch_size: int, on_progress: Progress | None
) -> list[list[float]]:
    """``texts``' vectors, one model batch at a time, each reported to ``on_progress`` (a
    window of 256 chunks takes seconds on a busy machine: the bar must not wait for it).
    Longest first, as sentence-transformers orders one call's texts, so a batch pads little."""
    if on_progress is None:
        return embedder.encode(texts, batch_size=batch_size)
    size = max(batch_size, 1)
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    out: list[list[float]] = [[] for _ in texts]
    for start in range(0, len(order), size):
        idx = order[start : start + size]
        for i, vec in zip(
            idx, embedder.encode([texts[i] for i in idx], batch_size=size), strict=True
        ):
            out[i] = vec
        on_progress(len(idx))
    return out


def _windows(
    pending: Sequence[_Pending], size: int
) -> Iterator[list[tuple[_Pending, ChunkRecord, str]]]:
    batch: list[tuple[_Pending, ChunkRecord, str]] = []
    for p in pending:
        for rec, text in zip(p.chunks, p.texts, strict=True):
            batch.append((p, rec, text))
            if len(batch) >= size:
                yield batch
                batch = []
    if batch:
        yield batch


def _commit_finished(
    store: Store,
    open_docs: list[_Pending],
    queue: Iterator[_Pending],
    gen: int,
    nothing_stale: bool = False,
) -> list[_Pending]:
    """Commit, in order, every document whose chunks are all written, then delete its older
    chunks, unless ``nothing_stale`` (the store held no document when the run began)."""
    while True:
        if not open_docs:
            nxt = next(queue, None)
            if nxt is None:
                return open_docs
            open_docs.append(nxt)
        p = open_docs[0]
        if p.written < len(p.chunks):
            return open_docs
        doc = p.doc
        split = any(not c.text.endswith("\n") for c in p.chunks[:-1])
        store.put_document(
            _record(doc, len(p.chunks), gen, tuple(c.start for c in p.chunks), split)
        )
        if not nothing_stale:
            store.delete_stale_chunks(doc.path, gen)
            if doc.original is not None:
                store.delete_stale_chunks(doc.original.path, gen)
        open_docs.pop(0)
