"""The records a tree manifest lists, kept as this process writes them: a manifest without a scroll.

An ingest ends by writing the tree manifest (:mod:`semfs.ingest.store.manifest`). Built from a
scroll of every document record it took 0.8 s at 100k chunks and 3.3 s at 300k (growing faster
than the store: BENCHMARKS.md section 19). A store whose writes all go through this process
(the embedded one: Edge locks its shard) can instead start from an exact list of the records
and apply its own writes to it; the manifest is then built from memory.

Rules a store may rely on:

* The records are known only from an exact start (:meth:`TreeRecords.start`): a new
  collection's (none), or the current manifest before the first write of a session. Until then,
  and after :meth:`TreeRecords.forget`, :meth:`TreeRecords.snapshot` is None: scroll instead.
* A write of document or folder records runs inside :meth:`TreeRecords.change` and applies
  itself there, after the store took it: concurrent writes apply in the store's order, and a
  write that raises leaves the records unknown (the store may hold it or not).
* A record is kept as the store hands it back, which is not always what it was given (Edge
  parses a float payload to within a unit in the last place: an mtime may differ in its last
  digit): the store supplies ``as_stored``, so the manifest is the one a scroll would build.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from semfs.ingest.store.schema import DirectoryRecord, DocumentRecord

Payload = dict[str, Any]


class TreeRecords:
    """Every committed document and folder record of one store, by path, when known."""

    def __init__(self, as_stored: Callable[[Payload], Payload] = lambda p: p) -> None:
        """``as_stored(payload)``: the payload the store hands back for one written."""
        self.as_stored = as_stored
        # Reentrant: the apply calls take it too, inside a change().
        self._lock = threading.RLock()
        self._documents: dict[str, DocumentRecord] | None = None
        self._directories: dict[str, DirectoryRecord] | None = None

    @property
    def known(self) -> bool:
        return self._documents is not None

    def start(
        self, documents: Iterable[DocumentRecord], directories: Iterable[DirectoryRecord]
    ) -> None:
        """From now on the records are these (every record the store holds, as it holds them)."""
        with self._lock:
            self._documents = {d.path: d for d in documents}
            self._directories = {d.path: d for d in directories}

    def forget(self) -> None:
        with self._lock:
            self._documents = self._directories = None

    @contextlib.contextmanager
    def change(self) -> Iterator[None]:
        """Around one write of records and its apply: one at a time; unknown if it raises."""
        with self._lock:
            try:
                yield
            except BaseException:
                self.forget()
                raise

    def put_documents(self, records: Iterable[DocumentRecord]) -> None:
        with self._lock:
            if self._documents is not None:
                for r in records:
                    payload = self.as_stored(r.to_payload())
                    self._documents[r.path] = DocumentRecord.from_payload(payload)

    def delete_documents(self, paths: Iterable[str]) -> None:
        with self._lock:
            if self._documents is not None:
                for path in paths:
                    self._documents.pop(path, None)

    def put_directories(self, records: Iterable[DirectoryRecord]) -> None:
        with self._lock:
            if self._directories is not None:
                for r in records:
                    payload = self.as_stored(r.to_payload())
                    self._directories[r.path] = DirectoryRecord.from_payload(payload)

    def delete_directories(self, paths: Iterable[str]) -> None:
        with self._lock:
            if self._directories is not None:
                for path in paths:
                    self._directories.pop(path, None)

    def snapshot(self) -> tuple[list[DocumentRecord], list[DirectoryRecord]] | None:
        """Every document and folder record now, or None when they are not known."""
        with self._lock:
            if self._documents is None or self._directories is None:
                return None
            return list(self._documents.values()), list(self._directories.values())
