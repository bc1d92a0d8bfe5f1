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
* :func:`private_dir` (and :func:`require_private`) refuse, with
  :class:`~semfs.ingest.errors.StoreFolderError`, a folder that another user owns or may
  write (or a symlink to one, or one another user made a symlink): such a user could plant
  links for the store's files, hold its locks, or read what it keeps. From ``top`` down
  when given (the store's folder and the collection's), else the folder itself.
* :func:`open_private_file` opens a file in such a folder for writing without following a
  link, and refuses one that is not this user's regular file.
* :func:`warn_if_exposed` logs one warning per folder and process when a user other than the
  owner could read a file under it (every folder on the way searchable, the file readable).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

from semfs.ingest import portable
from semfs.ingest.errors import StoreFolderError

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_holders = 0
_saved_umask = 0
_warned: set[str] = set()
# Read permission of the group and of others: what "another user can read" means here.
_OTHERS_READ = stat.S_IRGRP | stat.S_IROTH


def private_dir(path: Path, top: Path | None = None) -> None:
    """``mkdir -p path`` where every folder it creates (parents too) is 0700, whatever the
    umask; folders that exist already are left as they are, but refused when another user
    owns or may write them (:func:`require_private`, from ``top`` down when given)."""
    if not path.is_dir():
        missing = [path]
        while not missing[-1].parent.exists() and missing[-1].parent != missing[-1]:
            missing.append(missing[-1].parent)
        for folder in reversed(missing):
            with contextlib.suppress(FileExistsError):
                folder.mkdir(mode=0o700)
                folder.chmod(0o700)  # mkdir's mode is filtered by the umask; this is not
    require_private(path, top)


def require_private(path: Path, top: Path | None = None) -> None:
    """Raise :class:`StoreFolderError` unless the folder ``path`` (and each one from ``top``
    down to it) is this user's, and no other user may write it."""
    folders = [path]
    if top is not None and top != path and top in path.parents:
        folders = [top, *reversed([p for p in path.parents if top in p.parents]), path]
    for folder in folders:
        why = _not_private(folder)
        if why:
            raise StoreFolderError(
                f"store folder {folder} {why}: semfs keeps copies of your documents there and "
                "takes its locks there; use a folder of your own (--store DIR), or remove "
                "this one and run again"
            )


def _not_private(folder: Path) -> str | None:
    uid = os.geteuid()
    try:
        st = os.lstat(folder)
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid not in (uid, 0):
                return f"is a symlink made by user {st.st_uid}"
            st = os.stat(folder)
    except FileNotFoundError:
        return None  # not made yet: whoever makes it is checked then
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    if st.st_uid != uid:
        return f"belongs to user {st.st_uid}, not to you (user {uid})"
    if st.st_mode & stat.S_IWOTH or (st.st_mode & stat.S_IWGRP and not _own_group(st.st_gid)):
        return f"may be written by other users (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _own_group(gid: int) -> bool:
    """Whether the group ``gid`` is this user's own (a user private group: no other member)."""
    import grp
    import pwd

    try:
        name = pwd.getpwuid(os.geteuid()).pw_name
        return gid == os.getegid() and set(grp.getgrgid(gid).gr_mem) <= {name}
    except KeyError:
        return False


def open_private_file(path: Path, flags: int = os.O_RDWR | os.O_CREAT) -> int:
    """``os.open(path)`` for writing a file semfs keeps in a store folder, 0600: never through
    a symlink (``O_NOFOLLOW``), and refused (:class:`StoreFolderError`) when what is there is
    not this user's regular file."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StoreFolderError(
                f"{path} is a symlink: semfs never writes through one in a store folder; "
                "remove it and run again"
            ) from exc
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise StoreFolderError(
                f"{path} is not a file of yours (user {st.st_uid}): semfs does not write to "
                "it; remove it and run again"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


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
