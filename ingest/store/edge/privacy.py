"""Keeping an embedded store owner-only: it holds copies of the user's documents.

Rules a caller may rely on:

* :func:`private_dir` creates a folder 0700, whatever the umask.
* While at least one :func:`owner_only_files` block is open, the process umask is 077, so
  every file and folder created meanwhile (Qdrant Edge's segments and WAL, created from its
  own threads at any time, included) is owner-only. The umask is process-wide; the previous
  one comes back when the last block ends.
* :func:`user_umask` is the umask the process had before (what files made for the user, not
  for the store, should follow).
* :func:`make_private` takes group and other bits off everything under a folder that this
  user owns (what was created before the umask was set).
* :func:`warn_if_exposed` logs one warning per folder and process when a user other than the
  owner could read a file under it (every folder on the way searchable, the file readable).
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

from semfs.ingest import portable

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_holders = 0
_saved_umask = 0
_warned: set[str] = set()
# Read permission of the group and of others: what "another user can read" means here.
_OTHERS_READ = stat.S_IRGRP | stat.S_IROTH


def private_dir(path: Path) -> None:
    """``mkdir -p path`` where every folder it creates (parents too) is 0700, whatever the
    umask; folders that exist already are left as they are."""
    if path.is_dir():
        return
    missing = [path]
    while not missing[-1].parent.exists() and missing[-1].parent != missing[-1]:
        missing.append(missing[-1].parent)
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
            folder.chmod(0o700)  # mkdir's mode is filtered by the umask; this is not


@contextlib.contextmanager
def owner_only_files() -> Iterator[None]:
    """Umask 077 for the block (see the module rules); nests and is thread-safe."""
    hold()
    try:
        yield
    finally:
        release()


def hold() -> None:
    global _holders, _saved_umask
    with _lock:
        if _holders == 0:
            _saved_umask = os.umask(0o077)
        _holders += 1


def release() -> None:
    global _holders
    with _lock:
        if _holders == 0:
            return
        _holders -= 1
        if _holders == 0:
            os.umask(_saved_umask)


def user_umask() -> int:
    """The process's umask outside :func:`owner_only_files` blocks (read without changing
    it where the system tells, else the common 022)."""
    with _lock:
        if _holders:
            return _saved_umask
    umask = portable.process_umask()
    return 0o022 if umask is None else umask


def make_private(top: Path) -> None:
    """chmod go= everything under ``top`` (``top`` included) that this user owns."""
    uid = os.getuid()
    for root, dirs, files in os.walk(top):
        for name in [*dirs, *files]:
            _strip(os.path.join(root, name), uid)
    _strip(str(top), uid)


def _strip(path: str, uid: int) -> None:
    try:
        st = os.lstat(path)
        if st.st_uid == uid and not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o077:
            os.chmod(path, stat.S_IMODE(st.st_mode) & 0o700)
    except OSError as exc:  # vanished, or not ours to change: the check below will tell
        logger.debug("cannot make %s private: %s", path, exc)


def exposed_file(top: Path) -> str | None:
    """A file under ``top`` that a user other than its owner could read, or None."""
    reach = _OTHERS_READ
    for folder in reversed(top.absolute().parents):  # "/" first: every folder on the way
        reach &= _searchable(folder)
    return _walk(str(top), reach) if reach else None


def _searchable(path: Path | str) -> int:
    """The read bits of the classes (group, other) that may search the folder ``path``."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return 0
    return (mode & (stat.S_IXGRP | stat.S_IXOTH)) << 2  # x bit -> the r bit of its class


def _walk(folder: str, reach: int) -> str | None:
    reach &= _searchable(folder)
    if not reach:
        return None
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return None
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                found = _walk(entry.path, reach)
                if found:
                    return found
            elif entry.is_file(follow_symlinks=False) and entry.stat().st_mode & reach:
                return entry.path
        except OSError:
            continue
    return None


def warn_if_exposed(top: Path) -> bool:
    """Warn (once per folder and process) when other users can read files under ``top``."""
    key = str(top.absolute())
    if key in _warned:
        return False
    found = exposed_file(top)
    if found is None:
        return False
    _warned.add(key)
    logger.warning(
        "store %s is readable by other users (for one, %s); it holds copies of your "
        "documents: chmod -R go= %s",
        top,
        found,
        top,
    )
    return True
