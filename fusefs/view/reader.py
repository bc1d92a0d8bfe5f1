"""Document bytes by range: a read fetches only the chunks it covers, through a bounded cache.

A document's text is the concatenation of its chunks in index order, and its record's
``offsets`` say where each chunk starts (in bytes), so a range maps to chunk indexes with
two bisections. A text view's original (a record with ``blob``) is read the same way from
its stored blob parts. Chunks are keyed by (path, gen, index): a key names one immutable version,
so cached bytes never go stale; a re-ingested document has a new generation and new keys,
and the old entries age out.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any, Generic, TypeVar

from semfs.ingest.store import Store
from semfs.ingest.store.schema import DocumentRecord

logger = logging.getLogger(__name__)

# The kernel keeps a mounted file's pages (keep_cache), so a warm read never gets here:
# this only bridges chunks cut by consecutive reads and serves direct-I/O handles.
DEFAULT_CACHE_BYTES = 8 * 1024 * 1024
DEFAULT_RECORD_CACHE = 1024
# Rough per-entry cost of a cached bytes object and its key beyond the bytes themselves.
_ENTRY_OVERHEAD = 200

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ChunksMissingError(Exception):
    """The chunks of this document version are gone: it was re-ingested or deleted meanwhile."""


class CorruptDocumentError(Exception):
    """The stored chunks do not add up to the record's byte spans."""


class ServedHash:
    """Checks a document's sha256 against what a handle served, when it served it in order.

    Reads that follow each other (each starting where the last ended, as ``cat``, ``cp`` and
    the kernel's readahead do) feed an incremental sha256; once the whole file has been
    served it must equal the record's ``sha256``, else the store is damaged and the mismatch
    is logged. The first read out of order stops the check for this handle: no buffering,
    so it costs one hash update per read. Thread-safe.
    """

    def __init__(self, doc: DocumentRecord) -> None:
        self.doc = doc
        self._hash: Any = hashlib.sha256() if doc.size else None
        self._next = 0
        self._lock = threading.Lock()
        self.verified: bool | None = None  # None until the whole file was served in order

    def update(self, offset: int, data: bytes) -> None:
        with self._lock:
            if self._hash is None:
                return
            if offset != self._next or (not data and self._next < self.doc.size):
                self._hash = None  # out of order (or a short read): not checked
                return
            self._hash.update(data)
            self._next += len(data)
            if self._next < self.doc.size:
                return
            digest, self._hash = self._hash.hexdigest(), None
        self.verified = digest == self.doc.sha256
        if not self.verified:
            logger.error(
                "%s: the bytes served do not match its sha256 (generation %d): the store is "
                "damaged; run `semfs check`",
                self.doc.path,
                self.doc.gen,
            )


class LRUCache(Generic[K, V]):
    """A thread-safe LRU bounded by a total weight (bytes, or 1 per entry).

    An item heavier than the whole bound is not cached at all.
    """

    def __init__(self, max_weight: int) -> None:
        self.max_weight = max_weight
        self.weight = 0
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return item[0]

    def put(self, key: K, value: V, weight: int = 1) -> None:
        if weight > self.max_weight:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.weight -= old[1]
            self._items[key] = (value, weight)
            self.weight += weight
            while self.weight > self.max_weight:
                _key, (_value, w) = self._items.popitem(last=False)
                self.weight -= w

    def __len__(self) -> int:
        return len(self._items)


class DocumentReader:
    """Reads byte ranges of committed documents from a store. Thread-safe.

    Caches, both bounded:

    * chunk bytes, keyed by (path, gen, index): at most ``cache_bytes`` bytes
      (default 8 MiB) plus ~200 bytes per entry;
    * document records with their offsets, keyed by (path, gen): at most
      ``record_cache`` records (default 1024), so re-opening a file costs no store call.
    """

    def __init__(
        self,
        store: Store,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        record_cache: int = DEFAULT_RECORD_CACHE,
    ) -> None:
        self.store = store
        self.chunks: LRUCache[tuple[str, int, int], bytes] = LRUCache(cache_bytes)
        self.records: LRUCache[tuple[str, int], DocumentRecord] = LRUCache(record_cache)
        self.chunks_fetched = 0

    def document(self, shown: DocumentRecord) -> DocumentRecord | None:
        """The committed record (with offsets) of the document ``shown`` in the tree.

        That is ``shown``'s version when it is still committed, else the newer one the
        store holds now; None when the document was deleted. A tree record that carries its
        offsets is that version already (the caller checks it is still committed, as for a
        cached one): no store call.
        """
        if shown.offsets is not None:
            return shown
        cached = self.records.get((shown.path, shown.gen))
        if cached is not None:
            return cached
        return self.latest(shown.path, shown.blob)

    def latest(self, path: str, blob: bool | None = False) -> DocumentRecord | None:
        """The newest committed record of ``path`` (with offsets), from the store. For an
        original (``blob``), the one its text view's record makes: it has no record itself."""
        if blob:
            # Here, not at the top: a mount's start imports no format (zipfile, lzma).
            from semfs.ingest.formats import VIEW_SUFFIX

            view = self.store.get_document(path + VIEW_SUFFIX)
            if view is None or view.original != path:
                view = self.store.get_document(path)  # a file stored as it is: its own record
            rec = view.original_record() if view is not None else None
            if rec is not None and rec.path != path:
                rec = None  # that view is another file's (cannot happen from one source)
        else:
            rec = self.store.get_document(path)
        if rec is not None:
            self.records.put((rec.path, rec.gen), rec)
        return rec

    def whole(self, shown: DocumentRecord, tries: int = 3) -> tuple[DocumentRecord, bytes] | None:
        """The whole text of ``shown``'s document, as committed now: ``shown``'s version, or
        the newer one that replaced it while it was being read (a re-ingest drops the old
        version's chunks); None when the document was deleted. ChunksMissingError only when
        it changed ``tries`` times in a row under the reader."""
        rec = self.document(shown)
        for attempt in range(tries):
            if rec is None:
                return None
            try:
                return rec, self.read(rec, 0, rec.size)
            except ChunksMissingError:
                if attempt == tries - 1:
                    raise
                rec = self.latest(shown.path, shown.blob)
        return None  # pragma: no cover - the loop returns or raises

    def read(self, doc: DocumentRecord, offset: int, size: int) -> bytes:
        """Bytes ``[offset, offset + size)`` of ``doc`` (fewer at the end of the document)."""
        end = min(offset + size, doc.size)
        if offset >= end:
            return b""
        offsets = doc.offsets or ()
        if not offsets or offsets[0] != 0:
            raise CorruptDocumentError(f"{doc.path}: record has no chunk offsets")
        first = bisect_right(offsets, offset) - 1
        last = bisect_right(offsets, end - 1) - 1
        data = b"".join(self._chunks(doc, range(first, last + 1)))
        base = offsets[first]
        return data[offset - base : end - base]

    def _span(self, doc: DocumentRecord, index: int) -> int:
        offsets = doc.offsets or ()
        stop = offsets[index + 1] if index + 1 < len(offsets) else doc.size
        return stop - offsets[index]

    def _fetch(self, doc: DocumentRecord, missing: Sequence[int]) -> dict[int, bytes]:
        if doc.blob:
            return self.store.read_blob(doc.path, doc.gen, missing)
        texts = self.store.chunk_texts(doc.path, doc.gen, missing)
        return {index: text.encode("utf-8") for index, text in texts.items()}

    def _chunks(self, doc: DocumentRecord, indexes: Sequence[int]) -> list[bytes]:
        found = {i: self.chunks.get((doc.path, doc.gen, i)) for i in indexes}
        missing = [i for i, data in found.items() if data is None]
        if missing:
            for index, data in self._fetch(doc, missing).items():
                if len(data) != self._span(doc, index):
                    raise CorruptDocumentError(
                        f"{doc.path}: chunk {index} of generation {doc.gen} has "
                        f"{len(data)} bytes, its span {self._span(doc, index)}"
                    )
                found[index] = data
                self.chunks.put((doc.path, doc.gen, index), data, len(data) + _ENTRY_OVERHEAD)
            self.chunks_fetched += len(missing)
        out = [data for data in (found[i] for i in indexes) if data is not None]
        if len(out) != len(indexes):
            raise ChunksMissingError(f"{doc.path}: generation {doc.gen} is no longer stored")
        return out
