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
* ``replace`` writes a temporary file beside the target and renames it over (a reader sees
  the old text or the new, never half); ``append`` adds to the end (creating the file).
  Either way the bytes are on disk (fsync) before the file is indexed.
* Who may call it is the server's decision (:mod:`semfs.fusefs.agent.mcp`); the write runs
  as the server's user, so the source's permissions for that user apply.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from semfs.ingest import formats
from semfs.ingest.beneath import SourceFolder
from semfs.ingest.embedding.embedder import Embedder
from semfs.ingest.errors import PathError, SemfsError, ToolInputError
from semfs.ingest.sources import DEFAULT_MAX_BYTES, VCS_DIRS
from semfs.ingest.store import Store

MODES = ("append", "replace")


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
    one write at a time (an append and its ingest are not interleaved with another)."""

    def __init__(self, store: Store, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.store = store
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._embedder: Embedder | None = None

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
        parts = rel.split("/")
        if any(part in VCS_DIRS for part in parts):
            raise PathError(f"{rel!r} is inside a version-control folder: not written")
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
        data = text.encode("utf-8", "surrogatepass")
        with self._lock:
            source = self.source()
            folder = SourceFolder(source)
            try:
                size = self._write(folder, rel, data, mode)
            except OSError as exc:
                raise SemfsError(f"cannot write {rel}: {exc.strerror or exc}") from exc
            finally:
                folder.close()
            return self._index(source, rel, mode, len(data), size)

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
            fd = folder.open(rel, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                _write_all(fd, data)
                os.fsync(fd)
                return os.fstat(fd).st_size
            finally:
                os.close(fd)
        folder_rel, _, name = rel.rpartition("/")
        tmp = "/".join(p for p in (folder_rel, f".{name}.semfs-{secrets.token_hex(4)}") if p)
        perms = stat.S_IMODE(old.st_mode) if old is not None else 0o644
        fd = folder.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, perms)
        try:
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            folder.rename(tmp, rel)
        except BaseException:
            folder.unlink(tmp)
            raise
        return len(data)

    def _index(self, source: Path, rel: str, mode: str, written: int, size: int) -> Written:
        from semfs.ingest.embedding.embedder import load_embedder
        from semfs.ingest.pipeline import ingest, resolve_model

        if self._embedder is None:
            self._embedder = load_embedder(resolve_model(self.store, None))
        report = ingest(source, self.store, embedder=self._embedder, paths=[rel], keep_failed=True)
        skipped = next((s.reason for s in report.skipped if s.path == rel), "")
        return Written(rel, mode, written, size, not skipped, skipped)


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


__all__ = ["MODES", "SourceWriter", "Written"]
