"""The source folder of a writable mount, reached only beneath its descriptor.

:class:`SourceFolder` holds a path-only descriptor of the folder (``portable.path_flag``),
opened once at mount, and does every call of a writable mount relative to it: a path is
resolved without following any symbolic link, in a folder or at the end (``openat2`` with
``RESOLVE_BENEATH`` and ``RESOLVE_NO_SYMLINKS``; before Linux 5.6 and on macOS, one
``O_NOFOLLOW`` open per folder from the top, as the ingest walk does). The kernel resolves
the links a user's path meets itself and hands the mount real folders only, so a link found
here was planted or swapped in under the mount's feet: the call fails (ELOOP), it never
leaves the folder.

Rules a caller may rely on:

* Every method takes a relative, '/'-separated path with no '.' or '..' (what FUSE hands
  over) and raises ``OSError`` with the errno the source's filesystem gave.
* The last component is acted on itself, never a link's target: a link is opened with
  ``O_NOFOLLOW`` (ELOOP), stat, chmod, utimens, rename and unlink act on the link.
* Nothing here checks permissions: the caller runs each call with the requesting user's
  credentials (:mod:`semfs.fusefs.mount.credentials`), so the source's filesystem decides.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from semfs.ingest import portable

# openat2(2): its syscall number, None where the system has none (macOS).
_SYS_OPENAT2 = portable.openat2_syscall()
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_RESOLVE = _RESOLVE_NO_MAGICLINKS | _RESOLVE_NO_SYMLINKS | _RESOLVE_BENEATH
_PATH_FLAGS = portable.path_flag() | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
RENAME_NOREPLACE, RENAME_EXCHANGE = portable.RENAME_NOREPLACE, portable.RENAME_EXCHANGE


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_openat2_works: bool | None = None  # learnt on the first call (ENOSYS: an older kernel)


def _openat2(dirfd: int, rel: str, flags: int, mode: int = 0) -> int | None:
    """openat2 beneath ``dirfd`` with no link followed; None where the kernel lacks it."""
    global _openat2_works
    if _openat2_works is False or _SYS_OPENAT2 is None:
        return None
    how = _OpenHow(flags, mode, _RESOLVE)
    fd = _libc.syscall(
        _SYS_OPENAT2,
        ctypes.c_int(dirfd),
        ctypes.c_char_p(os.fsencode(rel)),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd >= 0:
        _openat2_works = True
        return int(fd)
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM) and _openat2_works is None:
        _openat2_works = False  # no openat2 (or a seccomp filter refuses it)
        return None
    if err == errno.EXDEV:  # RESOLVE_BENEATH: '..' or an absolute link would leave
        err = errno.ELOOP
    raise OSError(err, os.strerror(err), rel)


class SourceFolder:
    """The folder a writable mount passes writes to (see the module's rules)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, _PATH_FLAGS & ~os.O_NOFOLLOW)

    def close(self) -> None:
        os.close(self.fd)

    # -- resolving ------------------------------------------------------------------------

    def _open_dir(self, rel: str) -> int:
        """A path-only descriptor of the folder ``rel`` ('' is the source itself)."""
        if not rel:
            return os.dup(self.fd)
        fd = _openat2(self.fd, rel, _PATH_FLAGS)
        if fd is not None:
            return fd
        fd = os.dup(self.fd)
        try:
            for name in rel.split("/"):
                if name in ("", ".", ".."):
                    raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), rel)
                sub = os.open(name, _PATH_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = sub
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextlib.contextmanager
    def parent(self, rel: str) -> Iterator[tuple[int, str]]:
        """(descriptor of ``rel``'s folder, its last name), the descriptor closed after."""
        folder, _, name = rel.rpartition("/")
        if name in ("", ".", ".."):
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), rel)
        fd = self._open_dir(folder)
        try:
            yield fd, name
        finally:
            os.close(fd)

    # -- reading --------------------------------------------------------------------------

    def lstat(self, rel: str) -> os.stat_result:
        if not rel:
            return os.fstat(self.fd)
        with self.parent(rel) as (fd, name):
            return os.stat(name, dir_fd=fd, follow_symlinks=False)

    def listdir(self, rel: str) -> list[os.DirEntry[str]]:
        with self.parent(rel) if rel else contextlib.nullcontext((self.fd, ".")) as (fd, name):
            dfd = os.open(
                name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
            )
        try:
            with os.scandir(dfd) as entries:
                return list(entries)
        finally:
            os.close(dfd)

    def readlink(self, rel: str) -> str:
        with self.parent(rel) as (fd, name):
            return os.readlink(name, dir_fd=fd)

    # -- files ----------------------------------------------------------------------------

    def open(self, rel: str, flags: int, mode: int = 0o666) -> int:
        """A descriptor of the file ``rel`` (``flags`` as open(2); O_CREAT creates it)."""
        with self.parent(rel) as (fd, name):
            return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)

    def truncate(self, rel: str, length: int) -> None:
        fd = self.open(rel, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.ftruncate(fd, length)
        finally:
            os.close(fd)

    def unlink(self, rel: str) -> None:
        with self.parent(rel) as (fd, name):
            os.unlink(name, dir_fd=fd)

    def mkdir(self, rel: str, mode: int) -> None:
        with self.parent(rel) as (fd, name):
            os.mkdir(name, mode, dir_fd=fd)

    def rmdir(self, rel: str) -> None:
        with self.parent(rel) as (fd, name):
            os.rmdir(name, dir_fd=fd)

    def symlink(self, target: str, rel: str) -> None:
        with self.parent(rel) as (fd, name):
            os.symlink(target, name, dir_fd=fd)

    def link(self, existing: str, rel: str) -> None:
        with self.parent(existing) as (ofd, oname), self.parent(rel) as (nfd, nname):
            os.link(oname, nname, src_dir_fd=ofd, dst_dir_fd=nfd, follow_symlinks=False)

    def rename(self, old: str, new: str, flags: int = 0) -> None:
        with self.parent(old) as (ofd, oname), self.parent(new) as (nfd, nname):
            if not flags:
                os.rename(oname, nname, src_dir_fd=ofd, dst_dir_fd=nfd)
                return
            portable.rename_at(ofd, oname, nfd, nname, flags)

    # -- attributes -----------------------------------------------------------------------

    def chmod(self, rel: str, mode: int) -> None:
        with self._pinned(rel) as fd:
            portable.fchmod(fd, stat.S_IMODE(mode))

    def chown(self, rel: str, uid: int, gid: int) -> None:
        if not rel:  # the source itself (tar x into the mount's root sets its owner)
            portable.fchown(self.fd, uid, gid)
            return
        with self.parent(rel) as (fd, name):
            os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)

    def utimens(self, rel: str, times: tuple[int, int] | None) -> None:
        """Set (atime, mtime) in ns; None: now."""
        if not rel:
            portable.futimens(self.fd, times)
            return
        with self.parent(rel) as (fd, name):
            if times is None:
                os.utime(name, dir_fd=fd, follow_symlinks=False)
            else:
                os.utime(name, ns=times, dir_fd=fd, follow_symlinks=False)

    @contextlib.contextmanager
    def _pinned(self, rel: str) -> Iterator[int]:
        """A path-only descriptor of ``rel`` itself (a link refused: chmod has no meaning
        for one on Linux), for the calls that have no no-follow form."""
        if not rel:
            yield self.fd
            return
        with self.parent(rel) as (dfd, name):
            fd = os.open(name, portable.path_flag() | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        try:
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP), rel)
            yield fd
        finally:
            os.close(fd)

    def statvfs(self) -> os.statvfs_result:
        return os.fstatvfs(self.fd)


__all__ = ["RENAME_EXCHANGE", "RENAME_NOREPLACE", "SourceFolder"]
