"""Taking turns: the locks that writers of one collection share, on this machine.

A collection has several writers (a mount's watcher, the MCP write tool, a plain
`semfs ingest` beside a mount, `semfs check --repair`), in one process or several. A run
marks the store dirty while it works, and a run that finds it dirty cleans up what the
killed run before it left. That is only sound when no other run is under way, so writers
take turns on the collection's ``write.lock`` (:data:`WRITE_LOCK`) for their keyword pass:
records, chunks, BM25 vectors (seconds for a watcher's batch; a first ingest's whole keyword
pass). Dense vectors are given to chunks that are already stored, by a pass that holds
``embed.lock`` (:data:`EMBED_LOCK`) instead, so no writer waits for the model.

Rules a caller may rely on:

* The lock is ``flock`` on a file in the collection's folder (for a server collection, in
  its folder of this machine: ``CollectionAddress.local_dir``). ``flock`` locks an open
  file, not a process: two threads of one process exclude each other like two processes,
  and a process that dies (``kill -9``) lets go at once.
* :meth:`CollectionLock.acquire` waits, telling ``on_wait`` once who holds it, or gives up
  after ``timeout`` seconds with :class:`~semfs.ingest.errors.StoreBusyError` naming the
  holder. Ctrl-C interrupts the wait. Who holds it is the kernel's answer (the pid that holds
  the ``flock``, with its command line); the note the holder writes into the file is only a
  label, used when it names that pid (or where the kernel does not say).
* The lock file is opened without following a symlink, and one that is not this user's
  regular file, or in a folder another user owns or may write, is refused
  (:class:`~semfs.ingest.errors.StoreFolderError`): nobody else can point it at a file of
  ours, or hold it under a name of their choosing.
* Not protected: writers of a Qdrant server on different machines (each machine has its
  own lock file).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from semfs.ingest import portable
from semfs.ingest.errors import StoreBusyError

WRITE_LOCK = "write.lock"
EMBED_LOCK = "embed.lock"
# How often a waiting writer tries again (s): a watcher's batch takes about a second.
POLL = 0.1


def _command() -> str:
    return " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[:200]


def _note(fd: int) -> tuple[int, str] | None:
    """The holder's note in the lock file: (pid, command), or None."""
    try:
        info = json.loads(os.pread(fd, 4096, 0))
        return int(info["pid"]), str(info["command"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


class CollectionLock:
    """One lock file of a collection (``path``; None: nothing to lock, every call is free)."""

    def __init__(self, path: Path | None, what: str) -> None:
        self.path = path
        self.what = what  # the pass that holds it, for messages: "first" (writes), "embedding"
        self._fd: int | None = None
        self._guard = threading.Lock()  # this object's own fd, across threads

    @property
    def held(self) -> bool:
        return self._fd is not None

    def holder(self) -> str:
        """Who holds the lock: ``pid N (command)``, the pid the kernel says holds the flock
        (the note in the file only labels it); the note where the kernel does not say."""
        if self.path is None:
            return "another writer"
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return "another writer"
        try:
            note = _note(fd)
            pids = portable.flock_holders(fd)
        finally:
            os.close(fd)
        if pids is None or (note is not None and note[0] in pids):
            return f"pid {note[0]} ({note[1]})" if note is not None else "another writer"
        if not pids:
            return "another writer"
        command = portable.process_command(pids[0]) or "?"
        return f"pid {pids[0]} ({command[:200]})"

    def try_acquire(self) -> bool:
        """Take the lock if it is free now; True when taken."""
        with self._guard:
            if self.path is None or self._fd is not None:
                return True
            from semfs.ingest.store.backends import open_private_file, private_folder

            private_folder(self.path.parent)  # a new store's folder, owner-only (or refused)
            fd = open_private_file(self.path)  # never through a symlink; ours, or refused
            os.fchmod(fd, 0o600)  # created under the caller's umask
            try:
                taken = portable.lock_file(fd, wait=False)
            except BaseException:
                os.close(fd)
                raise
            if not taken:
                os.close(fd)
                return False
            # Who holds it, for the others' messages: written in place (the file is never
            # replaced, or a waiter would lock another inode).
            note = json.dumps({"pid": os.getpid(), "command": _command()}).encode()
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, note, 0)
            self._fd = fd
            return True

    def acquire(
        self, timeout: float | None = None, on_wait: Callable[[str], None] | None = None
    ) -> None:
        """Wait for the lock (``timeout`` seconds at most, None: for as long as it takes)."""
        if self.try_acquire():
            return
        holder = self.holder()
        if on_wait is not None:
            on_wait(holder)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.try_acquire():
            if deadline is not None and time.monotonic() >= deadline:
                raise StoreBusyError(
                    f"the collection is being written by {self.holder()}: its {self.what} "
                    f"pass did not end within {timeout:g} s; try again later"
                )
            time.sleep(POLL)

    def release(self) -> None:
        with self._guard:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the only descriptor of the open file lets the flock go

    @contextlib.contextmanager
    def held_for(
        self, timeout: float | None = None, on_wait: Callable[[str], None] | None = None
    ) -> Iterator[None]:
        self.acquire(timeout, on_wait)
        try:
            yield
        finally:
            self.release()
