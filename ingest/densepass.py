"""The second pass of an ingest: dense vectors for the chunks that are stored without one.

Ingest writes each chunk with its text and BM25 vector, and commits its document (browsable,
readable, keyword-searchable) without waiting for the model (:mod:`semfs.ingest.pipeline`).
This pass gives those chunks their dense vectors afterwards, in place: in the same run by
default, else whenever a writer or the store's long-running owner runs it next
(:class:`DenseService`), so a pass that was stopped (Ctrl-C, ``kill -9``, a closed mount)
resumes where it was.

Rules a caller may rely on:

* **What is in is not embedded again.** A chunk that has its vector is never sent to the
  model; a chunk whose model text (``vhash``) another chunk already has a vector for takes
  that vector (:meth:`semfs.ingest.store.Store.dense_by_hash`), and equal texts in one window
  are embedded once. Vectors are stored window by window (``set_dense``), so a stop loses
  one window's model time at most.
* **Never a second version.** Setting a vector changes no record and never makes a point:
  a chunk whose document was replaced meanwhile is left out.
* **One pass per collection at a time.** The pass holds the collection's ``embed.lock``
  (:mod:`semfs.ingest.store.writelock`): a second one waits, or (``wait=False``) leaves the
  work to the one running. Writers never wait for it: they hold ``write.lock``.
* It loops until a sweep from the start finds nothing to embed, so chunks written while it
  runs (a watcher's next batch) are embedded by the same pass.
* **What readers use, first.** Before each window it looks at the folders and documents that
  searches, reads and ``.similar`` touched (:mod:`semfs.ingest.focus`), the most recent
  first, and embeds theirs; the sweep in store order goes on when none is left.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from semfs.ingest.chunking import code_model_text, model_text
from semfs.ingest.embedding.embedder import DEFAULT_BATCH_SIZE, Embedder
from semfs.ingest.focus import Focus
from semfs.ingest.store import Store
from semfs.ingest.store.schema import ChunkRecord, DenseVector, vector_hash
from semfs.ingest.store.writelock import EMBED_LOCK, WRITE_LOCK, CollectionLock

logger = logging.getLogger(__name__)

# Chunks read, embedded and stored per window: a stop loses at most one window's model time.
# sentence-transformers sorts one call's texts by length before batching, so a window of a
# few batches pads little; it also bounds the memory a window holds.
ENCODE_WINDOW_BATCHES = 8
# Vectors set between two compactions of the embedded store: an update of a chunk in a
# sealed segment copies it into the appendable one, which lives in RAM until compact() seals
# it again (semfs.ingest.writer.COMPACT_EVERY_CHUNKS for the keyword pass).
COMPACT_EVERY_VECTORS = 50_000

# Told the number of chunks a phase will work through, then each step done.
OnPhase = Callable[[str, int], None]
Progress = Callable[[int], None]


@dataclass
class DenseReport:
    """What a pass did: chunks given a vector by the model (``embedded``: model texts, one per
    distinct text), by a stored vector of the same text (``reused``), and ``left`` without
    one (another pass holds the lock, or it was stopped)."""

    embedded: int = 0
    reused: int = 0
    left: int = 0
    # Who holds the embedding when this pass left it to them ("pid N (semfs mount ...)").
    elsewhere: str = ""
    seconds: float = 0.0


def embed_missing(
    store: Store,
    embedder: Embedder,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    wait: bool = True,
    on_phase: OnPhase | None = None,
    on_progress: Progress | None = None,
    stop: threading.Event | None = None,
    on_wait: Callable[[str], None] | None = None,
    into: DenseReport | None = None,
) -> DenseReport:
    """Give every chunk of ``store`` that lacks one its dense vector (see the module's rules).

    ``wait``: wait for another pass that holds the collection's embed lock, then embed what it
    left; False: leave it to that pass (``report.elsewhere`` says who). ``stop`` set: end at
    the next model batch, the window under way left for the next pass (``report.left`` then
    counts what is still to embed). ``into``: the report to fill, so that a caller stopped by
    Ctrl-C still knows what was embedded."""
    started = time.perf_counter()
    report = DenseReport() if into is None else into
    lock = CollectionLock(store.lock_path(EMBED_LOCK), "embedding")
    if not lock.try_acquire():
        if not wait:
            report.elsewhere = lock.holder()
            report.left = _missing(store)
            return report
        lock.acquire(on_wait=on_wait)
    try:
        missing = _missing(store)
        if not missing:
            return report
        if on_phase is not None:
            on_phase("embedding", missing)
        window = max(batch_size, 1) * ENCODE_WINDOW_BATCHES
        since_compact = 0
        cursor: str | None = None
        swept_empty = True  # this sweep (from the start) has found nothing yet
        focus = Focus(store)  # what readers use, first
        while not (stop is not None and stop.is_set()):
            chunks = focus.next_chunks(window)
            focused = bool(chunks)
            if not focused:
                chunks, cursor = store.chunks_without_dense(window, cursor)
            if chunks:
                swept_empty = False
                try:
                    done = _embed_window(
                        store, embedder, chunks, batch_size, on_progress, report, stop
                    )
                except _Stopped:
                    break
                since_compact += done
                if since_compact >= COMPACT_EVERY_VECTORS:
                    since_compact = 0
                    _compact(store)
            if focused:
                continue  # the sweep goes on where it was
            if cursor is None:
                if swept_empty:
                    break
                swept_empty = True  # chunks written behind the cursor: one more sweep
        report.left = _missing(store) if stop is not None and stop.is_set() else 0
        if since_compact:
            store.flush()
        if not report.left:
            mark_embedded(store)
        return report
    finally:
        lock.release()
        report.seconds = time.perf_counter() - started


def _missing(store: Store) -> int:
    embedded, total = store.embedding_counts()
    return total - embedded


def mark_embedded(store: Store) -> bool:
    """Clear the meta's ``dense_pending`` when no chunk lacks its vector, under the write
    lock (no writer adds chunks meanwhile), and store the manifest again for the new meta.
    Does nothing while a writer is under way (its run sets the flag as it finds it; the
    next pass clears it). True when it cleared it."""
    lock = CollectionLock(store.lock_path(WRITE_LOCK), "first")
    if not lock.try_acquire():
        return False
    try:
        meta = store.read_meta()
        if meta is None or meta.dirty or not meta.dense_pending or _missing(store):
            return False
        store.write_meta(replace(meta, dense_pending=False))
        store.flush()
        store.write_manifest(meta.generation)
        return True
    finally:
        lock.release()


def model_text_of(chunk: ChunkRecord) -> str:
    """What the model embeds for a stored chunk: the text the first pass hashed (``vhash``),
    made again from the record (code chunks have a context line of their own)."""
    if chunk.syntax:
        return code_model_text(chunk.text, chunk.heading, chunk.path)
    return model_text(chunk.text, chunk.heading, chunk.title)


class _Stopped(Exception):
    """The pass was told to stop between two model batches."""


def _embed_window(
    store: Store,
    embedder: Embedder,
    chunks: Sequence[ChunkRecord],
    batch_size: int,
    on_progress: Progress | None,
    report: DenseReport,
    stop: threading.Event | None = None,
) -> int:
    """Vectors for ``chunks``: stored ones of the same text first, the model for the rest."""
    texts: dict[str, str] = {}
    hashes: list[str] = []
    for c in chunks:
        text = model_text_of(c)
        h = c.vhash or vector_hash(text)
        texts.setdefault(h, text)
        hashes.append(h)
    vectors = store.dense_by_hash(list(texts))
    reused = sum(1 for h in hashes if h in vectors)
    todo = [h for h in texts if h not in vectors]
    if todo:
        # Each model batch moves the bar: a window takes seconds on a busy machine.
        encoded = encode(embedder, [texts[h] for h in todo], batch_size, on_progress, stop)
        vectors.update(zip(todo, encoded, strict=True))
    dense = [
        DenseVector(c.path, c.gen, c.index, vectors[h]) for c, h in zip(chunks, hashes, strict=True)
    ]
    store.set_dense(dense)
    report.embedded += len(todo)
    report.reused += reused
    if on_progress is not None and len(chunks) > len(todo):
        on_progress(len(chunks) - len(todo))  # stored vectors, and repeats of one text
    return len(dense)


def encode(
    embedder: Embedder,
    texts: list[str],
    batch_size: int,
    on_progress: Progress | None,
    stop: threading.Event | None = None,
) -> list[list[float]]:
    """``texts``' vectors, one model batch at a time, each reported to ``on_progress``.
    Longest first, as sentence-transformers orders one call's texts, so a batch pads little.
    ``stop`` set before a batch: :class:`_Stopped` (a closing mount waits one batch at most)."""
    if on_progress is None and stop is None:
        return embedder.encode(texts, batch_size=batch_size)
    size = max(batch_size, 1)
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    out: list[list[float]] = [[] for _ in texts]
    for start in range(0, len(order), size):
        if stop is not None and stop.is_set():
            raise _Stopped
        idx = order[start : start + size]
        for i, vec in zip(
            idx, embedder.encode([texts[i] for i in idx], batch_size=size), strict=True
        ):
            out[i] = vec
        if on_progress is not None:
            on_progress(len(idx))
    return out


def _compact(store: Store) -> None:
    from semfs.ingest.errors import DiskFullError

    try:
        store.compact()
    except DiskFullError as exc:  # the vectors are in; the next pass tries again
        logger.warning("not compacting the store: %s", exc)


class DenseService:
    """The second pass for a long-running owner (a mount, ``semfs mcp``, a watcher): a thread
    that embeds what its store lacks at start and after each change it is told of
    (:meth:`poke`), so an ingest stopped before its vectors were in, a watcher's batch and
    another process's write all end embedded. The model loads on the first chunk to embed;
    a store with nothing to embed never loads it.

    ``embedder()`` makes the documents' embedder (the store's model). Failures are logged and
    tried again at the next change, never raised."""

    # While another process's pass holds the embed lock, look again this often (s): it may
    # stop before our chunks (it ends when a sweep finds nothing).
    RECHECK = 5.0
    # ``on_vectors`` is told at most this often (s) while a pass stores vectors, and at its
    # end: searches cached since then rank otherwise now.
    NOTE_EVERY = 30.0

    def __init__(
        self,
        store: Store,
        embedder: Callable[[], Embedder],
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        on_phase: OnPhase | None = None,
        on_progress: Progress | None = None,
        on_vectors: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self._make = embedder
        self.on_vectors = on_vectors
        self._noted = 0.0
        self._embedder: Embedder | None = None
        self.batch_size = batch_size
        self.on_phase = on_phase
        self.on_progress = on_progress
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Event()  # set while nothing is under way (tests wait on it)
        self._thread: threading.Thread | None = None
        self.last: DenseReport | None = None

    def start(self) -> None:
        self._wake.set()  # what an earlier run left
        self._thread = threading.Thread(target=self._run, name="semfs-embed", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """Something was written: embed what it lacks."""
        self._idle.clear()
        self._wake.set()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until the chunks known when this is called are embedded (or it gave up)."""
        return self._idle.wait(timeout)

    def stop(self) -> None:
        """Stop after the window under way (its vectors are stored; the rest waits)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            if self._stop.is_set():
                return
            self._wake.clear()
            try:
                report = self._pass()
            except Exception as exc:  # a store or model failure: the next change tries again
                logger.warning(
                    "cannot embed the new chunks of %s: %s",
                    self.store.location,
                    exc,
                    exc_info=logger.isEnabledFor(logging.DEBUG),
                )
                report = None
            self.last = report
            if report is not None and report.elsewhere and report.left:
                self._stop.wait(self.RECHECK)  # another process embeds: look again later
                self._wake.set()
                continue
            if not self._wake.is_set():
                self._idle.set()

    def _pass(self) -> DenseReport:
        meta = self.store.read_meta()  # answered by a mount's manifest: no shard loads
        if meta is None or not meta.dense_pending or not _missing(self.store):
            if meta is not None and meta.dense_pending:
                mark_embedded(self.store)
            return DenseReport()
        if self._embedder is None:
            self._embedder = self._make()
        report = embed_missing(
            self.store,
            self._embedder,
            batch_size=self.batch_size,
            wait=False,
            on_phase=self.on_phase,
            on_progress=self._progress,
            stop=self._stop,
        )
        if (report.embedded or report.reused) and self.on_vectors is not None:
            self.on_vectors()  # the last windows' vectors: searches rank with them now
        if report.embedded or report.reused:
            logger.info(
                "embedded %d chunks (%d took a stored vector) in %.1f s",
                report.embedded + report.reused,
                report.reused,
                report.seconds,
            )
        return report

    def _progress(self, n: int) -> None:
        if self.on_progress is not None:
            self.on_progress(n)
        now = time.monotonic()
        if self.on_vectors is not None and now - self._noted >= self.NOTE_EVERY:
            self._noted = now
            self.on_vectors()
