"""The keyword pass's writing side: a run's generation, the window of chunks it writes (each
with its BM25 vector, and the stored dense vector of its text where there is one), the commits
of documents whose chunks are all in, the deletions, and the clean meta and manifest at the
end. :mod:`semfs.ingest.pipeline` decides what changed and hands each document here;
:mod:`semfs.ingest.records` builds the records written."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from semfs.ingest import chunkworkers, formats
from semfs.ingest.chunkworkers import Chunked, ChunkWorkers
from semfs.ingest.embedding.embedder import Embedder, load_embedder
from semfs.ingest.errors import DiskFullError
from semfs.ingest.origin import Claim
from semfs.ingest.records import chunk_document, document_record, keyword_text, previous_chunks
from semfs.ingest.report import IngestReport
from semfs.ingest.sources import Document
from semfs.ingest.store import Store
from semfs.ingest.store.bm25 import Bm25, bm25_average_length, bm25_model
from semfs.ingest.store.schema import (
    SCHEMA_VERSION,
    ChunkPoint,
    ChunkRecord,
    DirectoryRecord,
    DocumentRecord,
    StoreMeta,
)

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
# What a compaction maps is about 22 KB a chunk of the window (the appendable segment's
# payload pages and the zeros of its dense slots, their copies in the segment builder, the
# in-RAM indexes): at 50,000 the pass's peak was 1.4 GB at the first compaction of a 103k-chunk
# mixed collection, 0.3 GB of it the process itself; at 25,000 it is about half (issue 45.4).
COMPACT_EVERY_CHUNKS = 25_000


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


@dataclass
class _Pending:
    """A document whose chunks are being written; committed when all are."""

    doc: Document
    chunks: list[ChunkRecord]
    texts: list[str]  # what the model sees (context line + chunk text), for BM25 and vhash
    sparse: list[chunkworkers.Sparse] | None = None  # the BM25 vectors, when a child made them
    written: int = 0


class Writer:
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
        self.no_vectors = False  # the store held no chunk when the run began
        self.bm25: Bm25 | None = None
        self.window: list[_Pending] = []
        self.window_chunks = 0
        self.last_write = time.monotonic()
        self.sealed = 0
        self.flipped: set[str] = set()
        self.without_dense = 0  # chunks written without their dense vector
        self.folders: list[DirectoryRecord] = []  # new or changed: written by begin()
        self.chunker: ChunkWorkers | None = None
        self.words_cut = 0  # by the chunker's children

    def begin(self, full: bool, existing: dict[str, DocumentRecord]) -> None:
        """The run's generation, the store marked dirty (and cleaned after a killed run)."""
        store = self.store
        self.embedder = ensure_collection(store, self.model, self.embedder)
        meta = store.read_meta() or StoreMeta(model=self.model, dimension=self.embedder.dimension)
        self.gen = meta.generation + 1
        self.was_dirty = meta.dirty
        # The source is recorded with the first write: a first run that is killed keeps it.
        # This run writes what SCHEMA_VERSION describes (an older readable store is stamped).
        meta = replace(meta, schema=SCHEMA_VERSION, **source_fields(self.claim))
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
        # Nor a vector to reuse (this pass writes none of its own): no lookup per window.
        self.no_vectors = store.count_chunks() == 0
        if meta.bm25_avg_len is not None or not self.no_vectors:
            # A store with chunks keeps what they were written with (None: Bm25's default).
            self.bm25 = bm25_model(meta)
            self._share_bm25(meta)
        self.meta = meta
        self.begun = True

    def _share_bm25(self, meta: StoreMeta) -> None:
        """The run's BM25 weights, to the chunker's children (documents sent from now on come
        back with their sparse vectors)."""
        if self.chunker is not None:
            self.chunker.bm25 = (meta.bm25_avg_len,)

    def add(
        self,
        doc: Document,
        existing: dict[str, DocumentRecord],
        full: bool,
        chunked: Chunked | None = None,
    ) -> None:
        """A changed document: chunked now (unless ``chunked`` holds its chunks of this
        run's generation), written with its window."""
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
        if chunked is not None and chunked.gen == self.gen:
            chunks, texts, sparse = chunked.records, chunked.texts, chunked.sparse
            self.words_cut += chunked.words_cut
        else:
            previous = previous_chunks(self.store, existing.get(doc.path))
            chunks, texts = chunk_document(self.embedder, doc, self.gen, previous)
            sparse = None
        self.window.append(_Pending(doc, chunks, texts, sparse))
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
        self._share_bm25(self.meta)
        self._write_window()

    def _write_window(self) -> None:
        """The window's chunks (each with the stored vector of its text, when there is one),
        in requests of :data:`WINDOW_CHUNKS`; each document is committed as soon as its chunks
        are in (a window held for the BM25 sample is thousands of chunks)."""
        assert self.bm25 is not None
        self.last_write = time.monotonic()
        store = self.store
        done = 0  # documents of the window committed
        part: list[tuple[_Pending, ChunkRecord, str, chunkworkers.Sparse | None]] = []
        for i, p in enumerate(self.window):
            sparse: list[chunkworkers.Sparse | None] = (
                [*p.sparse] if p.sparse else [None] * len(p.chunks)
            )
            for rec, text, sv in zip(p.chunks, p.texts, sparse, strict=True):
                part.append((p, rec, text, sv))
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

    def _upsert(
        self, part: list[tuple[_Pending, ChunkRecord, str, chunkworkers.Sparse | None]]
    ) -> None:
        """One request of chunks with their BM25 vectors (made here unless a child made
        them), and the stored dense vector of each one's model text where the store has it."""
        if not part:
            return
        assert self.bm25 is not None
        hashes = list({rec.vhash for _p, rec, _t, _s in part})
        known = {} if self.no_vectors else self.store.dense_by_hash(hashes)
        points = []
        for p, rec, text, made in part:
            if made is None:
                sv = self.bm25.embed_document(keyword_text(rec, text))
                indices, values = list(sv.indices), list(sv.values)
            else:
                indices, values = made
            points.append(ChunkPoint(rec, known.get(rec.vhash), indices, values))
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
        report.words_cut = (self.bm25.words_cut if self.bm25 is not None else 0) + self.words_cut
        if report.updated or report.deleted or report.chunks_written:
            report.compacted = _compact(store)
        # Last: a mount reads its tree from this in one request (semfs.ingest.store.manifest).
        store.write_manifest(self.gen)


def _delete(store: Store, paths: Sequence[str], existing: dict[str, DocumentRecord]) -> None:
    """Delete the documents ``paths`` and the stored originals of those that are views."""
    store.delete_documents(paths)
    for path in paths:
        gone = existing[path].original
        if gone is not None and gone != path:
            store.delete_stale_chunks(gone, None)


def source_fields(claim: Claim) -> dict[str, Any]:
    return {
        "source": claim.source.path,
        "source_dev": claim.source.dev,
        "source_ino": claim.source.ino,
    }


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
