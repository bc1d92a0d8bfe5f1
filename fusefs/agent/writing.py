"""The agents' write tool: a text file into the collection's source folder, then indexed.

:class:`SourceWriter` writes where the collection's documents come from (the source folder
its store records), never into the store: the file is then ingested like any other, so a
search finds it as soon as the call returns, and a writable mount or a watcher of the same
folder sees it as a file of the folder.

Rules a caller may rely on:

* The path is relative to the collection root and is resolved beneath the source folder's
  descriptor with no link followed (:class:`semfs.ingest.beneath.SourceFolder`); missing
  folders are made.
* Only text: a converted format (``.pdf``, ``.docx``, ...), a text view's name
  (``report.pdf.md`` beside ``report.pdf``), a version-control folder (``.git/``) and a file
  past the ingest size cap are refused, in one line.
* A name semfs shows in every folder (``.search``, ``.similar``, ``.map.md``:
  :mod:`semfs.fusefs.view.reserved`) is refused anywhere in the path.
* ``replace`` writes a temporary file beside the target and renames it over (a reader sees
  the old text or the new, never half); ``append`` adds to the end (creating the file).
  Either way the bytes are on disk (fsync) before the file is indexed.
* Who may call it is the server's decision (:mod:`semfs.fusefs.agent.mcp`); the write runs
  as the server's user, so the source's permissions for that user apply.
* **Modes and owners.** A write never leaves a set-uid, set-gid or sticky bit, and never
  gives a file another owner or group, so text an agent was given (or steered into writing)
  never becomes a privileged program. A new file is the server's user's, ``0644`` (a new
  folder ``0755``) less the umask the server started with (not the store's 077).
  ``replace`` gives the new file the old one's owner, group and permission bits, less
  those three; a server that cannot (not root, and the file is another user's or of a group
  it is not in) refuses in one line and leaves the file as it was. ``append`` leaves the
  owner as it is and clears the three bits. Only a regular file is written (never a FIFO,
  device or link: refused without blocking).
* The file is indexed for keywords before the call returns (the ingest's first pass, taking
  its turn with the collection's other writers for at most :data:`WRITE_WAIT` seconds, counted
  from the request's arrival: a write queued behind this server's others counts that wait); its
  dense vectors follow from the store owner's dense pass (``on_indexed`` tells it), so a
  write never waits for the model.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from semfs.fusefs.view.reserved import reserved_part
from semfs.ingest import formats
from semfs.ingest.beneath import SourceFolder
from semfs.ingest.embedding.embedder import Embedder
from semfs.ingest.errors import PathError, SemfsError, StoreBusyError, ToolInputError, not_text
from semfs.ingest.sources import DEFAULT_MAX_BYTES, VCS_DIRS
from semfs.ingest.store import Store
from semfs.ingest.store.backends import user_umask

MODES = ("append", "replace")
# Set-uid, set-gid and sticky: never left on a file this tool wrote.
_SPECIAL = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX
# How long a write waits for another writer of the collection (a first ingest's keyword pass
# may take minutes) before it answers that the file is written but not indexed yet.
WRITE_WAIT = 30.0


@dataclass(frozen=True)
class Written:
    path: str
    mode: str
    bytes_written: int
    size: int  # the file's size after the write
    indexed: bool  # searchable now (False: the ingest skipped it; ``reason`` says why)
    reason: str = ""


class SourceWriter:
    """Writes text files into ``store``'s source folder and ingests each one. Thread-safe:
    one file written at a time; the ingests take their turns on the collection's write lock
    (each reads the file as it is then: the last one indexes every write before it)."""

    def __init__(self, store: Store, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.store = store
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._embedder: Embedder | None = None
        # Told after each file is indexed: its chunks want dense vectors (ResidentStore.changed).
        self.on_indexed: Callable[[], None] | None = None

    def source(self) -> Path:
        meta = self.store.read_meta()
        if meta is None or meta.source is None:
            raise SemfsError(
                "the collection records no source folder to write into: `semfs ingest DIR` "
                "it from a folder first"
            )
        return Path(meta.source)

    def check(self, rel: str) -> None:
        """Refuse, in one line, a path the write tool does not write."""
        if not rel:
            raise PathError("give the file to write, e.g. notes/today.md")
        if "\x00" in rel:
            raise PathError(f"{rel!r} holds a NUL character, which no file name can")
        parts = rel.split("/")
        if any(part in VCS_DIRS for part in parts):
            raise PathError(f"{rel!r} is inside a version-control folder: not written")
        reserved = reserved_part(rel)
        if reserved is not None:
            raise PathError(
                f"{rel!r}: {reserved} is a name semfs shows in every folder of a mount "
                "(search folders, folder maps): choose another name"
            )
        if formats.view_path(rel) is not None:
            raise PathError(f"{rel!r} is a converted format: the write tool writes text files")
        if rel.endswith(formats.VIEW_SUFFIX):
            original = rel[: -len(formats.VIEW_SUFFIX)]
            if formats.view_path(original) == rel:
                raise PathError(
                    f"{rel!r} is the name of {original}'s text view: choose another name"
                )

    def write(self, rel: str, text: str, mode: str) -> Written:
        if mode not in MODES:
            raise ToolInputError(f"mode {mode!r}: use append or replace")
        self.check(rel)
        bad = not_text("the text", text)
        if bad is not None:
            raise bad
        data = text.encode("utf-8")
        # The bound holds per request, from its arrival: the files are written one at a
        # time, then each ingest takes its turn on the collection's write lock with what is
        # left of its own bound. Before, a write's ingest ran under this lock, each with 30 s
        # of its own: 5 concurrent writes answered at 30, 60, ... 150 s.
        deadline = time.monotonic() + WRITE_WAIT
        if not self._lock.acquire(timeout=WRITE_WAIT):
            raise StoreBusyError(
                f"{rel} not written: this server's other writes held it for {WRITE_WAIT:g} s; "
                "try again later"
            )
        try:
            source = self.source()
            folder = SourceFolder(source)
            try:
                size = self._write(folder, rel, data, mode)
            except OSError as exc:
                raise SemfsError(f"cannot write {rel}: {exc.strerror or exc}") from exc
            finally:
                folder.close()
            self._load_embedder()
        finally:
            self._lock.release()
        return self._index(source, rel, mode, len(data), size, deadline)

    def _load_embedder(self) -> None:
        from semfs.ingest.embedding.embedder import load_embedder
        from semfs.ingest.pipeline import resolve_model

        if self._embedder is None:
            self._embedder = load_embedder(resolve_model(self.store, None))

    def _write(self, folder: SourceFolder, rel: str, data: bytes, mode: str) -> int:
        _make_folders(folder, rel.rpartition("/")[0])
        try:
            old = folder.lstat(rel)
        except FileNotFoundError:
            old = None
        if old is not None and not stat.S_ISREG(old.st_mode):
            raise OSError(errno.EISDIR if stat.S_ISDIR(old.st_mode) else errno.EINVAL, "not a file")
        size = (old.st_size if old is not None and mode == "append" else 0) + len(data)
        if size > self.max_bytes:
            raise SemfsError(
                f"{rel} would be {size} bytes, over the {self.max_bytes}-byte ingest cap: "
                "write a new file"
            )
        if mode == "append":
            # O_NONBLOCK: a FIFO swapped in after the lstat fails (ENXIO) instead of blocking.
            fd = folder.open(rel, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o600)
            try:
                _regular(fd, rel)
                if old is None:
                    _new_file_mode(fd)
                _clear_special(fd, rel)
                _write_all(fd, data)
                os.fsync(fd)
                _clear_special(fd, rel)  # in case the owner set one again meanwhile
                return os.fstat(fd).st_size
            finally:
                os.close(fd)
        folder_rel, _, name = rel.rpartition("/")
        tmp = "/".join(p for p in (folder_rel, f".{name}.semfs-{secrets.token_hex(4)}") if p)
        fd = folder.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            try:
                if old is None:
                    _new_file_mode(fd)
                else:
                    _take_over(fd, old, rel)
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            folder.rename(tmp, rel)
        except BaseException:
            folder.unlink(tmp)
            raise
        return len(data)

    def _index(
        self, source: Path, rel: str, mode: str, written: int, size: int, deadline: float
    ) -> Written:
        from semfs.ingest.pipeline import ingest

        try:
            report = ingest(
                source,
                self.store,
                embedder=self._embedder,
                paths=[rel],
                keep_failed=True,
                dense=False,  # the owner's dense pass embeds it: no write waits for the model
                lock_timeout=max(0.0, deadline - time.monotonic()),
            )
        except StoreBusyError as exc:
            why = f"{exc}; the next ingest (or a watcher of the folder) indexes it"
            return Written(rel, mode, written, size, False, why)
        if self.on_indexed is not None:
            self.on_indexed()
        skipped = next((s.reason for s in report.skipped if s.path == rel), "")
        return Written(rel, mode, written, size, not skipped, skipped)


def _new_file_mode(fd: int) -> None:
    """A new file's mode: 0644 less the user's umask (not the store's 077)."""
    os.fchmod(fd, 0o644 & ~user_umask())


def _regular(fd: int, rel: str) -> None:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise SemfsError(f"cannot write {rel}: not a regular file")


def _clear_special(fd: int, rel: str) -> None:
    """Clear set-uid, set-gid and sticky (the owner is left as it is)."""
    mode = stat.S_IMODE(os.fstat(fd).st_mode)
    if mode & _SPECIAL:
        try:
            os.fchmod(fd, mode & ~_SPECIAL)
        except PermissionError:
            raise SemfsError(
                f"cannot append to {rel}: it has a set-uid, set-gid or sticky bit and belongs "
                "to another user, so it cannot be cleared: write a new file"
            ) from None


def _take_over(fd: int, old: os.stat_result, rel: str) -> None:
    """Give the new file ``fd`` the replaced file's owner, group and permission bits, less
    set-uid, set-gid and sticky; refuse when the owner or group cannot be kept."""
    new = os.fstat(fd)
    if (new.st_uid, new.st_gid) != (old.st_uid, old.st_gid):
        try:
            os.fchown(fd, old.st_uid, old.st_gid)
        except PermissionError:
            whose = f"user {old.st_uid}" if new.st_uid != old.st_uid else f"group {old.st_gid}"
            raise SemfsError(
                f"cannot replace {rel}: it belongs to {whose}, and this server cannot give its "
                "new text the same owner (the write tool never changes a file's owner): "
                "append to it, or write a new file"
            ) from None
    os.fchmod(fd, stat.S_IMODE(old.st_mode) & ~_SPECIAL)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _make_folders(folder: SourceFolder, rel: str) -> None:
    """``mkdir -p`` beneath the source."""
    done = []
    for part in rel.split("/") if rel else ():
        done.append(part)
        try:
            folder.mkdir("/".join(done), 0o755)
        except FileExistsError:
            continue
        folder.chmod("/".join(done), 0o755 & ~user_umask())  # not the store's umask (077)


__all__ = ["MODES", "SourceWriter", "Written"]
