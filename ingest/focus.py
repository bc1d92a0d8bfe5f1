"""Meaning where it is used first: the folders and documents readers touch, told to the dense
pass (issue 45).

While a large collection embeds (hours, for a million chunks), a user works in a few of its
folders. Every reader (a mount, ``semfs mcp``, ``semfs search``, the Python API) notes what it
touches: the folder a search is scoped to, the documents of its hits, a document read, the
source of a ``.similar`` folder. The dense pass (:mod:`semfs.ingest.densepass`), in whichever
process holds the collection's ``embed.lock``, embeds the chunks of those first, the most
recently touched first, then the rest in store order. So the folder someone works in reaches
full hybrid within minutes, whatever the size of the rest.

The note is a small file in the collection's folder on this machine (:data:`FOCUS_FILE`,
beside ``write.lock`` and ``embed.lock``: every process that reads or embeds the collection
reaches it, owner or client, whatever the backend).

Rules a caller may rely on:

* **Only a hint.** Nothing is lost or refused for it: a reader that cannot write the file (no
  write access to the folder, a read-only disk, a damaged file) goes on as before, and the
  pass embeds in store order what it is not told about. Losing a note to two writers at
  once costs order, never vectors.
* **Bounded.** At most :data:`MAX_ENTRIES` entries, each path at most
  :data:`MAX_PATH_CHARS` characters (longer ones are not noted); a file over
  :data:`MAX_FILE_BYTES` is not read. A reader writes at most every :data:`WRITE_EVERY`
  seconds (what it touches meanwhile is written together), and nothing while the store's
  every chunk has its vector.
* **Owner-only.** The file is written 0600 by a rename, so a reader never writes through a
  symlink, and is read without following one (``O_NOFOLLOW``, no wait on a FIFO): a file that
  is not this user's regular file is ignored, and replaced at the next note.
"""

from __future__ import annotations

import atexit
import errno
import json
import logging
import math
import os
import stat
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from semfs.ingest.privatefile import replace_private
from semfs.ingest.request import normalize_under
from semfs.ingest.store import StoreReader, StoreWriter
from semfs.ingest.store.schema import ChunkRecord

logger = logging.getLogger(__name__)

FOCUS_FILE = "focus.json"
MAX_ENTRIES = 64
MAX_PATH_CHARS = 1024
MAX_FILE_BYTES = 128 * 1024  # 64 entries of the longest path, in JSON, fit
# A reader writes the file at most this often (s); a mount's grep opens thousands of files.
WRITE_EVERY = 1.0
# How long a reader trusts its reading of the meta's ``dense_pending`` (s): nothing is noted
# once every chunk has its vector.
PENDING_TTL = 10.0
FOLDER, DOCUMENT = "folder", "document"


@dataclass(frozen=True)
class Use:
    """One thing a reader touched: a ``folder`` (every chunk below it) or a ``document``."""

    kind: str
    path: str
    at: float  # time.time() when it was touched


def read_uses(path: Path | None) -> list[Use]:
    """The uses noted in the file ``path``, the most recent first; none when it is missing,
    not this user's regular file, too large or not what a reader writes."""
    if path is None:
        return []
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            logger.debug("not reading %s: %s", path, exc)
        return []
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            logger.debug("not reading %s: not a file of this user's", path)
            return []
        if st.st_size > MAX_FILE_BYTES:
            return []
        data = os.read(fd, MAX_FILE_BYTES + 1)
    except OSError as exc:
        logger.debug("not reading %s: %s", path, exc)
        return []
    finally:
        os.close(fd)
    try:
        rows = json.loads(data)
    except (ValueError, RecursionError):
        return []
    uses = [u for u in map(_use, rows if isinstance(rows, list) else []) if u is not None]
    uses.sort(key=lambda u: -u.at)
    return _unique(uses)[:MAX_ENTRIES]


def _use(row: object) -> Use | None:
    if not isinstance(row, dict):
        return None
    kind, path, at = row.get("kind"), row.get("path"), row.get("at")
    if kind not in (FOLDER, DOCUMENT) or not isinstance(path, str) or not _fits(path):
        return None
    if not isinstance(at, (int, float)) or isinstance(at, bool) or not math.isfinite(at):
        return None
    return Use(str(kind), path, float(at))


def _fits(path: str) -> bool:
    return 0 < len(path) <= MAX_PATH_CHARS and "\0" not in path


def _unique(uses: Iterable[Use]) -> list[Use]:
    seen: set[tuple[str, str]] = set()
    out = []
    for u in uses:
        if (u.kind, u.path) not in seen:
            seen.add((u.kind, u.path))
            out.append(u)
    return out


def write_uses(path: Path, uses: Sequence[Use]) -> None:
    """Replace the file ``path`` with ``uses`` (the first :data:`MAX_ENTRIES`), 0600, by a
    rename: a symlink there is replaced, never followed. Raises OSError."""
    rows = [{"kind": u.kind, "path": u.path, "at": u.at} for u in uses[:MAX_ENTRIES]]
    data = json.dumps(rows, separators=(",", ":")).encode("utf-8", "surrogateescape")
    replace_private(path, data)


class UseLog:
    """What this process's readers of one collection touch, noted for its dense pass (see the
    module's rules). Thread-safe; never raises. Get the process's one with :func:`uses_of`."""

    def __init__(self, store: StoreReader, path: Path | None) -> None:
        self.store = store
        self.path = path
        self._lock = threading.Lock()
        self._queued: list[Use] = []
        # time.monotonic() of the last write; none yet: the first note is written at once
        # (0.0 would hold it back while the machine has been up less than WRITE_EVERY).
        self._written = -math.inf
        self._timer: threading.Timer | None = None
        self._pending: tuple[float, bool] | None = None  # (when read, meta.dense_pending)
        self._failed = False  # logged once

    def searched(self, folder: str | None, found: Sequence[str]) -> None:
        """A search below ``folder`` (None: everywhere) found the documents ``found``:
        the folder first, then its best hit (the most recent, so embedded first)."""
        now = time.time()
        under = normalize_under(folder) if folder is not None else None
        top = [Use(DOCUMENT, p, now) for p in found]
        self.note([Use(FOLDER, under, now), *top] if under else top)

    def documents(self, paths: Iterable[str]) -> None:
        """Documents read, found by a search, or a ``.similar`` folder's source."""
        now = time.time()
        self.note([Use(DOCUMENT, p, now) for p in paths])

    def note(self, uses: Sequence[Use]) -> None:
        """Note ``uses``, touched in this order (the last is embedded first)."""
        uses = [u for u in uses if _fits(u.path)]
        if self.path is None or not uses or not self._embedding():
            return
        with self._lock:
            self._queued = _unique([*reversed(uses), *self._queued])[:MAX_ENTRIES]
            wait = self._written + WRITE_EVERY - time.monotonic()
            if wait > 0:  # written a moment ago: with whatever else comes meanwhile
                if self._timer is not None:
                    return
                timer = threading.Timer(wait, self.flush)
                timer.daemon = True
                try:
                    timer.start()
                except RuntimeError:  # no thread to spare: written now instead
                    pass
                else:
                    self._timer = timer
                    _flush_at_exit()
                    return
        self.flush()

    def flush(self) -> None:
        """Write what is queued now, merged with what the file holds (other readers' notes)."""
        with self._lock:
            if self._timer is not None:  # written now: not again when it fires
                self._timer.cancel()
                self._timer = None
            queued, self._queued = self._queued, []
            if not queued or self.path is None:
                return
            self._written = time.monotonic()
            try:
                write_uses(self.path, _unique([*queued, *read_uses(self.path)]))
            except OSError as exc:  # no write access, a full or read-only disk: only a hint
                if not self._failed:
                    self._failed = True
                    logger.debug("not noting what is read first in %s: %s", self.path, exc)

    def _embedding(self) -> bool:
        """Whether some chunks lack their vector (the store's meta says so), read at most
        every :data:`PENDING_TTL` seconds."""
        now = time.monotonic()
        known = self._pending
        if known is None or now - known[0] > PENDING_TTL:
            try:
                meta = self.store.read_meta()
                known = (now, meta is not None and meta.dense_pending)
            except Exception as exc:  # a reader's note must never fail its read
                logger.debug("cannot read the meta of %s: %s", self.store.location, exc)
                known = (now, False)
            self._pending = known
        return known[1]


_logs: dict[Path, UseLog] = {}
_logs_lock = threading.Lock()
_at_exit = False


def _flush_at_exit() -> None:
    """A short-lived reader (``semfs search``, a script) ends before its timer: write what
    is queued when the interpreter exits."""
    global _at_exit
    with _logs_lock:
        if not _at_exit:
            _at_exit = True
            atexit.register(_flush_all)


def _flush_all() -> None:
    for log in list(_logs.values()):
        log.flush()


def uses_of(store: StoreReader) -> UseLog:
    """This process's note of what is used in ``store``'s collection (one per collection, so
    its readers share the write bound)."""
    path = store.lock_path(FOCUS_FILE)
    if path is None:  # no folder on this machine: nothing to note
        return UseLog(store, None)
    with _logs_lock:
        log = _logs.get(path)
        if log is None:
            if len(_logs) >= 64:  # a process with many collections: forget the oldest
                _logs.pop(next(iter(_logs)))
            log = _logs[path] = UseLog(store, path)
        elif log.store is not store:  # the collection opened again: ask the open one
            log.store, log._pending = store, None
        return log


class Focus:
    """The dense pass's side: the chunks without a vector of the uses noted, most recent
    first (:meth:`next_chunks`); the file is read again when it changes."""

    def __init__(self, store: StoreWriter) -> None:
        self.store = store
        self.path = store.lock_path(FOCUS_FILE)
        self._seen: tuple[int, int, int] | None = None  # (inode, size, mtime_ns) read last
        self._uses: list[Use] = []
        # Uses found with nothing left to embed, as of their time then: touched again later,
        # they are looked at again.
        self._done: dict[tuple[str, str], float] = {}
        self._last: tuple[tuple[str, str], frozenset[tuple[str, int, int]]] | None = None

    def next_chunks(self, limit: int) -> list[ChunkRecord]:
        """Up to ``limit`` chunks lacking a vector of the most recent use that has any; none
        when no use has (the pass then goes on in store order)."""
        for use in self._current():
            key = (use.kind, use.path)
            if self._done.get(key, -1.0) >= use.at:
                continue
            if use.kind == FOLDER:
                chunks, _ = self.store.chunks_without_dense(limit, None, under=use.path)
            else:
                chunks, _ = self.store.chunks_without_dense(limit, None, paths=[use.path])
            ids = frozenset((c.path, c.gen, c.index) for c in chunks)
            if chunks and self._last is not None and self._last == (key, ids):
                chunks = []  # the same chunks again: their vectors did not take; leave them
            if not chunks:
                self._done[key] = use.at
                continue
            self._last = (key, ids)
            return chunks
        return []

    def _current(self) -> list[Use]:
        seen = None
        if self.path is not None:
            try:
                st = os.lstat(self.path)
                seen = (st.st_ino, st.st_size, st.st_mtime_ns)
            except OSError:
                seen = None
        if seen != self._seen:
            self._seen = seen
            self._uses = read_uses(self.path) if seen is not None else []
        return self._uses
