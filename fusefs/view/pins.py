"""Keeping a document version readable while a file handle on it is open.

A re-ingest commits a document's new generation, then deletes the old one's chunks. A file
opened before the commit must keep reading the version it opened, so the mount daemon, which
owns the embedded store and serves the ingest's writes (:mod:`semfs.ingest.store.ipc`), routes those
writes through :meth:`GenerationPins.guard`: deleting a generation that a handle holds is
deferred until the last such handle is released, and done then (or when the ingest run ends,
whichever is later, so a half-written newer generation is never touched).

Rules a caller may rely on:

* :meth:`GenerationPins.hold` returns a committed version and pins it; its chunks stay until
  :meth:`GenerationPins.release`. It never returns a version whose chunks are gone.
* A document deleted from the source while a handle on it is open can no longer be opened
  (:meth:`hold` returns None) and is in :meth:`deleted` until that handle is closed: the tree
  leaves it out (so do search results, which name only what the tree shows); the open
  handle keeps reading it.
* When the last handle that deferred deletions is closed and they are done, ``on_settled``
  runs (the daemon compacts the store then).
* Only writes that go through :meth:`guard` are deferred. A Qdrant server is written by the
  ingest directly, so there a handle reads its version only while the version's chunks
  exist (or are in the reader's cache); past that a read fails with ESTALE.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from semfs.fusefs.view.reader import DocumentReader
from semfs.ingest.store import DelegatingStore, Store
from semfs.ingest.store.schema import DocumentRecord, StoreMeta

logger = logging.getLogger(__name__)

# hold() retries when the version it found was superseded meanwhile; a re-ingest that
# commits faster than we can pin is not worth chasing further (the open fails with ESTALE).
HOLD_TRIES = 3


class GenerationPins:
    """Open handles per (path, gen), and the chunk deletions they defer. Thread-safe."""

    def __init__(
        self,
        store: Store,
        on_change: Callable[[], None] | None = None,
        on_settled: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.on_change = on_change
        # Called (outside the lock) once the last handle that held deletions back is closed
        # and they are done: the daemon compacts then, else a store re-ingested under open
        # handles keeps every old generation's space until the next `semfs compact`.
        self.on_settled = on_settled
        self._lock = threading.RLock()
        # Plain dicts: Counter's item deletion is Python code, and this runs on every release.
        self._pins: dict[tuple[str, int], int] = {}
        self._by_path: dict[str, int] = {}
        # path -> the one generation whose chunks survived the last deletion (None: none).
        # One entry per path ever re-ingested or deleted through guard().
        self._survivor: dict[str, int | None] = {}
        # path -> the generation to keep when its older ones are deleted, as the writer said
        # it (a converted document's original has no record of its own to ask).
        self._deferred_clean: dict[str, int | None] = {}
        self._deferred_delete: set[str] = set()  # whole documents to delete
        meta = store.read_meta()
        self._ingesting = bool(meta is not None and meta.dirty)

    def guard(self, store: Store | None = None) -> Store:
        """``store`` (default: ours) with deletions deferred while a handle needs them."""
        return _PinnedStore(store or self.store, self)

    def hold(self, reader: DocumentReader, shown: DocumentRecord) -> DocumentRecord | None:
        """The committed version to serve for ``shown``, pinned; None when it was deleted."""
        rec = reader.document(shown)
        for _ in range(HOLD_TRIES):
            if rec is None:
                return None
            key = (rec.path, rec.gen)
            with self._lock:
                if rec.path in self._deferred_delete:
                    return None  # deleted from the source: only open handles still read it
                survivor = self._survivor.get(rec.path, rec.gen)
                if key in self._pins or survivor == rec.gen:
                    self._pin(key)
                    return rec
            # Superseded and deleted since it was cached or read: take the newest.
            rec = reader.latest(rec.path, rec.blob)
        return rec if rec is None else self._hold_unchecked(rec)

    def _hold_unchecked(self, rec: DocumentRecord) -> DocumentRecord | None:
        with self._lock:
            if rec.path in self._deferred_delete:
                return None
            self._pin((rec.path, rec.gen))
        return rec

    def deleted(self) -> frozenset[str]:
        """Documents deleted whose chunks wait for open handles: a tree must not show them."""
        with self._lock:
            return frozenset(self._deferred_delete)

    def _pin(self, key: tuple[str, int]) -> None:
        self._pins[key] = self._pins.get(key, 0) + 1
        self._by_path[key[0]] = self._by_path.get(key[0], 0) + 1

    def release(self, path: str, gen: int) -> None:
        with self._lock:
            key = (path, gen)
            left = self._pins.get(key, 0) - 1
            if left > 0:
                self._pins[key] = left
            else:
                self._pins.pop(key, None)
            left = self._by_path.get(path, 0) - 1
            if left > 0:
                self._by_path[path] = left
                return
            self._by_path.pop(path, None)
            if path not in self._deferred_clean and path not in self._deferred_delete:
                return  # nothing waited for this handle (the usual case)
            # Mid-run, a newer half-written generation may exist: the run's end cleans up
            # (and the ingest compacts after it).
            if self._ingesting:
                return
            changed = self._run_deferred([path])
            settled = not (self._deferred_clean or self._deferred_delete)
        if changed and self.on_change is not None:
            self.on_change()
        if settled and self.on_settled is not None:
            self.on_settled()

    def close(self) -> None:
        """Do every deferred deletion (the daemon is stopping: no handle reads any more)."""
        with self._lock:
            self._pins.clear()
            self._by_path.clear()
            self._run_deferred(sorted(set(self._deferred_clean) | self._deferred_delete))

    # -- called by _PinnedStore, under the lock ---------------------------------------------

    def _delete_stale_chunks(self, path: str, keep_gen: int | None) -> None:
        if any(g != keep_gen for p, g in self._pins if p == path):
            self._deferred_clean[path] = keep_gen
            logger.info("keeping the old chunks of %s while a handle reads them", path)
            return
        self.store.delete_stale_chunks(path, keep_gen)
        self._survivor[path] = keep_gen

    def _delete_documents(self, paths: Sequence[str]) -> None:
        now = [p for p in paths if p not in self._by_path]
        self.store.delete_documents(now)
        for path in now:
            self._survivor[path] = None
            self._deferred_delete.discard(path)
        self._deferred_delete.update(p for p in paths if p in self._by_path)

    def _put_document(self, record: DocumentRecord) -> None:
        self.store.put_document(record)
        self._deferred_delete.discard(record.path)  # back in the source: keep it

    def _write_meta(self, meta: StoreMeta) -> None:
        self.store.write_meta(meta)
        self._ingesting = meta.dirty
        if not meta.dirty:  # the run is over: no half-written generation to spare
            pending = (set(self._deferred_clean) | self._deferred_delete) - set(self._by_path)
            self._run_deferred(sorted(pending))

    def _run_deferred(self, paths: Sequence[str]) -> bool:
        """Deferred deletions of ``paths``; True when a document went (the tree changes)."""
        changed = False
        for path in paths:
            try:
                if path in self._deferred_delete:
                    self.store.delete_documents([path])
                    self._survivor[path] = None
                    changed = True
                elif path in self._deferred_clean:
                    # The generation the writer kept, not get_document(path)'s: a PDF's
                    # original (report.pdf) has no record (its text view report.pdf.md has),
                    # and asking for it gave None: every generation of the original went,
                    # the one just committed too (reads of it failed with ESTALE for good).
                    keep = self._deferred_clean[path]
                    self.store.delete_stale_chunks(path, keep)
                    self._survivor[path] = keep
            except Exception as exc:  # the next ingest's clean-up finds the leftovers
                logger.warning("cannot delete the old chunks of %s: %s", path, exc)
            self._deferred_delete.discard(path)
            self._deferred_clean.pop(path, None)
        return changed


class _PinnedStore(DelegatingStore):
    """A Store whose deletions wait for the handles that still read what they delete.

    Every other call passes through (:class:`semfs.ingest.store.DelegatingStore`), so a method added
    to the interface later reaches the daemon's store without an edit here.
    """

    def __init__(self, store: Store, pins: GenerationPins) -> None:
        super().__init__(store)
        self._pins = pins

    def write_meta(self, meta: StoreMeta) -> None:
        with self._pins._lock:
            self._pins._write_meta(meta)

    def put_document(self, record: DocumentRecord) -> None:
        with self._pins._lock:
            self._pins._put_document(record)

    def delete_documents(self, paths: Sequence[str]) -> None:
        with self._pins._lock:
            self._pins._delete_documents(paths)

    def delete_stale_chunks(self, path: str, keep_gen: int | None) -> None:
        with self._pins._lock:
            self._pins._delete_stale_chunks(path, keep_gen)

    def close(self) -> None:
        """The daemon owns the store: closing this view closes nothing."""
