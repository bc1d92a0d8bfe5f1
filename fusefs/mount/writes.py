"""A writable mount (``semfs mount MNT --watch SOURCE --writable``): the source folder, passed
through, with semfs's read-only additions beside it.

:class:`WritableOperations` extends the read-only callbacks of
:mod:`semfs.fusefs.mount.ops`; a mount without ``--writable`` never loads this module.

Rules a caller may rely on:

* **The source is the truth.** Every name the source folder holds is shown with its own
  attributes and read and written in place (:class:`~semfs.ingest.beneath.SourceFolder`:
  beneath the folder's descriptor, no link followed). A reader sees a write at once, from
  the source, before any ingest; a file deleted or renamed through the mount is gone at once.
  A document the store still holds but the source no longer has is not shown.
* **What semfs adds stays read-only.** The search folders, and the text view beside each
  converted original (``report.pdf.md``, from the store, shown while its original is in the
  source): a write to them, or creating, renaming or deleting under a search folder, is EROFS.
  So is any path with a name semfs shows in every folder (``.search``, ``.similar``,
  ``.map.md``: :mod:`semfs.fusefs.view.reserved`) as the file, folder or link a call would
  make, open for writing, truncate, or rename or link to: nobody can plant a fake results
  file for another user to trust.
* **Permissions as on the source.** Every call into the source runs with the caller's
  credentials (:mod:`semfs.fusefs.mount.credentials`), on top of the kernel's own check
  (``default_permissions``): nobody changes through the mount what the source refuses them,
  and what they create is theirs. A daemon that cannot act as the caller answers EACCES.
  Writes to an open file run as the user who opened it, too, so the kernel clears a set-uid
  or set-gid bit as it would for them, and no caller's write uses the daemon's
  ``CAP_SYS_RESOURCE`` (ext4's root-reserved blocks, quotas).
* **Open files are bounded per user** (:mod:`semfs.fusefs.mount.handles`): no user can take
  every descriptor of the daemon; past their bound an open fails with EMFILE.
* **Nothing kept back.** A write goes to the source file before the call returns (no
  cache in the daemon), so what a writer closed survives a kill -9 of the daemon, and the
  source's errors (ENOSPC, EDQUOT, EIO) are the writer's. ``close()`` also reports a late
  error of the source (``flush``: a descriptor closed, as NFS reports there).
* **Indexed once closed.** While a file is open for writing through the mount, the
  watcher holds its changes back (:meth:`semfs.ingest.watch.SourceWatcher.hold`); the last
  close lets them through, so a file is never indexed half-written by this mount's writers.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from semfs.fusefs.mount.access import Caller
from semfs.fusefs.mount.bindings import FuseOSError, Operations, overrides, request_caller
from semfs.fusefs.mount.credentials import acting_as
from semfs.fusefs.mount.handles import HandleQuota
from semfs.fusefs.mount.ops import SemfsOperations
from semfs.fusefs.view.reserved import reserved_part
from semfs.fusefs.view.searchdir import DEFAULT_NAME
from semfs.fusefs.view.tree import FILE, SYMLINK, Node
from semfs.ingest.beneath import RENAME_EXCHANGE, SourceFolder

logger = logging.getLogger(__name__)

# Inode numbers of source entries: the source's own, with the top bit set, so they never
# meet the small numbers of the tree's nodes (the text views) and search folders.
SOURCE_INO = 1 << 63
# utimensat's "now" and "leave as is", as libfuse hands them over (0 s plus this many ns).
_UTIME_NOW = (1 << 30) - 1
_UTIME_OMIT = (1 << 30) - 2
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND
_SET_ID = stat.S_ISUID | stat.S_ISGID
# Paths that name nothing in the source; any other error of the source is the caller's.
_ABSENT = (errno.ENOENT, errno.ENOTDIR)


class Holds(Protocol):
    """What the watcher offers: keep a path's changes back while it is being written."""

    def hold(self, rel: str) -> None: ...

    def release(self, rel: str) -> None: ...


class SourceHandle:
    """An open file of the source: its descriptor, its path while open for writing, and who
    opened it (writes through it run as them)."""

    __slots__ = ("fd", "opener", "rel", "uid", "writing")

    def __init__(self, fd: int, rel: str, writing: bool, opener: Caller | None, uid: int) -> None:
        self.fd = fd
        self.rel = rel
        self.writing = writing
        # The opener's ids, no pid: a write needs no groups (the open was checked).
        self.opener = None if opener is None else (opener[0], opener[1], 0)
        self.uid = uid  # counted in the quota under this user

    def read(self, offset: int, size: int) -> bytes:
        return os.pread(self.fd, size, offset)


def _attrs(st: os.stat_result) -> dict[str, int]:
    return {
        "st_mode": st.st_mode,
        "st_ino": st.st_ino | SOURCE_INO,
        "st_nlink": st.st_nlink,
        "st_uid": st.st_uid,
        "st_gid": st.st_gid,
        "st_size": st.st_size,
        "st_blocks": st.st_blocks,
        "st_atime": st.st_atime_ns,
        "st_mtime": st.st_mtime_ns,
        "st_ctime": st.st_ctime_ns,
    }


def _errno(exc: OSError) -> FuseOSError:
    return FuseOSError(exc.errno or errno.EIO)


class WritableOperations(SemfsOperations):
    """The read-only callbacks, over a source folder that takes writes (see the module)."""

    def __init__(
        self,
        *args: Any,
        source: SourceFolder,
        search_dir: str = DEFAULT_NAME,
        quota: HandleQuota | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.source = source
        self.search_dir = search_dir
        self.quota = quota or HandleQuota(os.geteuid())
        self.holds: Holds | None = None  # the watcher, set before the mount starts
        self.caller: Callable[[], Caller | None] = request_caller
        self._lock = threading.Lock()  # the open-for-writing handles and their paths
        self._writing: dict[int, SourceHandle] = {}

    # -- what a path is -------------------------------------------------------------------

    def _source_stat(self, rel: str) -> os.stat_result | None:
        try:
            return self.source.lstat(rel)
        except OSError as exc:
            if exc.errno in _ABSENT:
                return None
            raise _errno(exc) from None

    def _added(self, path: str) -> Node:
        """A node semfs adds (a text view, a search folder); ENOENT for anything else."""
        node = self._lookup(path)
        if self.tree.lookup(node.path) is node and not self._shown_view(node):
            raise FuseOSError(errno.ENOENT)  # the store's copy of what the source no longer has
        return node

    def _shown_view(self, node: Node) -> bool:
        doc = node.doc
        if node.kind != FILE or doc is None or doc.original is None:
            return False
        return self._source_stat(doc.original) is not None

    def _refused(self, exc: OSError, *paths: str) -> FuseOSError:
        """The errno for a failed change: EROFS where a path (or its folder) is semfs's own."""
        if exc.errno in _ABSENT:
            for path in paths:
                for candidate in (path, path.rpartition("/")[0] or "/"):
                    try:
                        self._added(candidate)
                    except FuseOSError:
                        continue
                    if self._source_stat(candidate.lstrip("/")) is None:
                        return FuseOSError(errno.EROFS)
        return _errno(exc)

    def _not_reserved(self, *paths: str) -> None:
        """EROFS when a path holds a name semfs shows in every folder (see the module)."""
        if any(reserved_part(p.lstrip("/"), self.search_dir) for p in paths):
            raise FuseOSError(errno.EROFS)

    def _counted(self, caller: Caller | None) -> int:
        """Count one more open file of ``caller`` (EMFILE past its bound); its uid."""
        uid = caller[0] if caller is not None else os.geteuid()
        if not self.quota.take(uid):
            raise FuseOSError(errno.EMFILE)
        return uid

    def _change(self, paths: tuple[str, ...], call: Callable[[], object]) -> None:
        """Run one change of the source as the caller; its errno, or EROFS (see _refused)."""
        try:
            with acting_as(self.caller()):
                call()
        except OSError as exc:
            raise self._refused(exc, *paths) from None

    # -- reading --------------------------------------------------------------------------

    @overrides(Operations)
    def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
        handle = self._handles.get(fh.fh) if fh is not None else None
        if type(handle) is SourceHandle:
            return _attrs(os.fstat(handle.fd))
        st = self._source_stat(path.lstrip("/"))
        if st is not None:
            return _attrs(st)
        self._added(path)
        return super().getattr(path, fh)

    @overrides(Operations)
    def access(self, path: str, amode: int) -> int:
        if self._source_stat(path.lstrip("/")) is not None:
            return 0  # default_permissions: the kernel has checked the source's attributes
        self._added(path)
        return super().access(path, amode)

    @overrides(Operations)
    def readlink(self, path: str) -> str:
        rel = path.lstrip("/")
        try:
            return self.source.readlink(rel)
        except OSError as exc:
            if exc.errno not in _ABSENT:
                raise _errno(exc) from None
        self._added(path)
        return super().readlink(path)

    @overrides(Operations)
    def opendir(self, path: str, fi: Any = None) -> int:
        st = self._source_stat(path.lstrip("/"))
        if st is None:
            self._added(path)
            return super().opendir(path, fi)
        if not stat.S_ISDIR(st.st_mode):
            raise FuseOSError(errno.ENOTDIR)
        return 0  # the listing changes with every write: never kept by the kernel

    @overrides(Operations)
    def readdir(self, path: str, fh: int) -> list[str | tuple[str, dict[str, int], int]]:
        rel = path.lstrip("/")
        try:
            entries = self.source.listdir(rel)
        except OSError as exc:
            if exc.errno not in _ABSENT:
                raise _errno(exc) from None
            self._added(path)
            return super().readdir(path, fh)
        # "." and ".." with their inodes: with use_ino, glibc hides an entry whose inode is 0
        # (`ls -a` showed neither).
        here = self._source_stat(rel)
        up = self._source_stat(rel.rpartition("/")[0]) if rel else here
        listing: list[str | tuple[str, dict[str, int], int]] = [
            (name, {"st_mode": stat.S_IFDIR, "st_ino": (st.st_ino if st else 1) | SOURCE_INO}, 0)
            for name, st in ((".", here), ("..", up))
        ]
        for entry in entries:
            try:
                kind = stat.S_IFDIR if entry.is_dir(follow_symlinks=False) else 0
                kind = kind or (stat.S_IFLNK if entry.is_symlink() else stat.S_IFREG)
            except OSError:
                kind = stat.S_IFREG
            listing.append((entry.name, {"st_mode": kind, "st_ino": entry.inode() | SOURCE_INO}, 0))
        # The text views of converted files are not listed here (they stay readable by name, and
        # .search links to them): what a tool copies or commits from a writable mount (`git
        # add .`, `rsync`, `cp -r`) is the source folder's own files, never generated text.
        return listing

    @overrides(Operations)
    def open(self, path: str, fi: Any) -> int:
        rel = path.lstrip("/")
        st = self._source_stat(rel)
        if st is None:
            self._added(path)
            return super().open(path, fi)
        if stat.S_ISDIR(st.st_mode):
            raise FuseOSError(errno.EISDIR)
        flags = fi.flags & ~(os.O_CREAT | os.O_EXCL | os.O_NOCTTY)
        if flags & _WRITE_FLAGS:
            self._not_reserved(path)
        caller = self.caller()
        uid = self._counted(caller)
        try:
            with acting_as(caller):
                fd = self.source.open(rel, flags | os.O_NONBLOCK)
        except OSError as exc:
            self.quota.give_back(uid)
            raise _errno(exc) from None
        self._opened(fi, fd, rel, bool(flags & _WRITE_FLAGS), caller, uid)
        return 0

    def _opened(
        self, fi: Any, fd: int, rel: str, writing: bool, caller: Caller | None, uid: int
    ) -> None:
        handle = SourceHandle(fd, rel, writing, caller, uid)
        fi.fh = next(self._fh)
        # Read from the source at each open (its bytes change under the mount), through
        # the page cache while open (mmap works: git reads its packs so).
        fi.keep_cache = 0
        fi.direct_io = 0
        self._handles[fi.fh] = handle
        if writing:
            with self._lock:
                self._writing[fi.fh] = handle
            if self.holds is not None:
                self.holds.hold(rel)

    @overrides(Operations)
    def read(self, path: str, size: int, offset: int, fh: Any) -> bytes:
        handle = self._handles.get(fh.fh)
        if type(handle) is not SourceHandle:
            return super().read(path, size, offset, fh)
        try:
            return os.pread(handle.fd, size, offset)
        except OSError as exc:
            raise _errno(exc) from None

    @overrides(Operations)
    def release(self, path: str, fh: Any) -> int:
        handle = self._handles.get(fh.fh)
        if type(handle) is not SourceHandle:
            return super().release(path, fh)
        del self._handles[fh.fh]
        with self._lock:
            self._writing.pop(fh.fh, None)
            rel = handle.rel
        try:
            os.close(handle.fd)
        except OSError as exc:  # flush reported it to the writer already
            logger.info("closing %s: %s", rel, exc.strerror)
        finally:
            self.quota.give_back(handle.uid)
        if handle.writing and self.holds is not None:
            self.holds.release(rel)
        return 0

    @overrides(Operations)
    def statfs(self, path: str) -> dict[str, int]:
        sv = self.source.statvfs()  # what df and a writer's free-space check should see
        return {
            key: getattr(sv, key)
            for key in (
                "f_bsize",
                "f_frsize",
                "f_blocks",
                "f_bfree",
                "f_bavail",
                "f_files",
                "f_ffree",
                "f_favail",
                "f_namemax",
            )
        }

    @overrides(Operations)
    def getxattr(self, path: str, name: str, position: int = 0) -> bytes:
        node = self._indexed(path)
        if node is None:
            return super().getxattr(path, name, position)
        value = self._xattrs(node).get(name)
        if value is None:
            from semfs.fusefs.mount.bindings import ENOATTR

            raise FuseOSError(ENOATTR)
        return value

    @overrides(Operations)
    def listxattr(self, path: str) -> list[str]:
        node = self._indexed(path)
        return super().listxattr(path) if node is None else list(self._xattrs(node))

    def _indexed(self, path: str) -> Node | None:
        """The tree's node of a source entry (its indexed version's xattrs), or None for
        what semfs adds; ENOENT when neither."""
        rel = path.lstrip("/")
        if self._source_stat(rel) is None:
            self._added(path)
            return None
        node = self.tree.lookup(rel)
        return node if node is not None else Node(SYMLINK, rel, 0, {})  # no xattrs

    # -- writing --------------------------------------------------------------------------

    @overrides(Operations)
    def create(self, path: str, mode: int, fi: Any = None) -> int:
        rel = path.lstrip("/")
        flags = (fi.flags if fi is not None else os.O_WRONLY) | os.O_CREAT
        self._not_reserved(path)

        def create() -> int:
            try:
                fd = self.source.open(rel, flags | os.O_EXCL | os.O_NONBLOCK, mode)
            except FileExistsError:
                if flags & os.O_EXCL:
                    raise
                # Made meanwhile by another: opened as it is, its mode left alone.
                return self.source.open(rel, flags & ~os.O_CREAT | os.O_NONBLOCK)
            _keep_mode(fd, mode)
            return fd

        caller = self.caller()
        uid = self._counted(caller)
        try:
            with acting_as(caller):
                fd = create()
        except OSError as exc:
            self.quota.give_back(uid)
            raise self._refused(exc, path) from None
        if fi is None:  # pragma: no cover - mfusepy always passes it (raw_fi)
            os.close(fd)
            self.quota.give_back(uid)
            return 0
        self._opened(fi, fd, rel, True, caller, uid)
        return 0

    @overrides(Operations)
    def write(self, path: str, data: bytes, offset: int, fh: Any) -> int:
        handle = self._handles.get(fh.fh)
        if type(handle) is not SourceHandle:
            raise FuseOSError(errno.EBADF)  # a read-only document's handle
        try:
            with acting_as(handle.opener):  # the kernel's rules for them (module doc)
                return os.pwrite(handle.fd, data, offset)
        except OSError as exc:
            raise _errno(exc) from None

    @overrides(Operations)
    def flush(self, path: str, fh: Any) -> int:
        handle = self._handles.get(fh.fh)
        if type(handle) is SourceHandle and handle.writing:
            try:  # a late error of the source (NFS reports ENOSPC at close) reaches close()
                os.close(os.dup(handle.fd))
            except OSError as exc:
                raise _errno(exc) from None
        return 0

    @overrides(Operations)
    def fsync(self, path: str, datasync: int, fh: Any) -> int:
        handle = self._handles.get(fh.fh)
        if type(handle) is not SourceHandle:
            return 0  # a document of the store: nothing to write
        try:
            (os.fdatasync if datasync else os.fsync)(handle.fd)
        except OSError as exc:
            raise _errno(exc) from None
        return 0

    @overrides(Operations)
    def truncate(self, path: str, length: int, fh: Any = None) -> int:
        handle = self._handles.get(fh.fh) if fh is not None else None
        self._not_reserved(path)
        if type(handle) is SourceHandle:
            try:
                with acting_as(handle.opener):
                    os.ftruncate(handle.fd, length)
            except OSError as exc:
                raise _errno(exc) from None
            return 0
        rel = path.lstrip("/")
        self._change((path,), lambda: self.source.truncate(rel, length))
        return 0

    @overrides(Operations)
    def mkdir(self, path: str, mode: int) -> int:
        rel = path.lstrip("/")
        self._not_reserved(path)

        def mkdir() -> None:
            self.source.mkdir(rel, mode)
            st = self.source.lstat(rel)
            if stat.S_IMODE(st.st_mode) & 0o777 != mode & 0o777:  # the daemon's umask
                self.source.chmod(rel, stat.S_IMODE(st.st_mode) & 0o7000 | mode & 0o777)

        self._change((path,), mkdir)
        return 0

    @overrides(Operations)
    def rmdir(self, path: str) -> int:
        self._change((path,), lambda: self.source.rmdir(path.lstrip("/")))
        return 0

    @overrides(Operations)
    def unlink(self, path: str) -> int:
        self._change((path,), lambda: self.source.unlink(path.lstrip("/")))
        return 0

    @overrides(Operations)
    def rename(self, old: str, new: str) -> int:
        return self.rename2(old, new, 0)

    def rename2(self, old: str, new: str, flags: int) -> int:
        """rename with flags (RENAME_NOREPLACE, RENAME_EXCHANGE: ``portable.rename_at``)."""
        src, dst = old.lstrip("/"), new.lstrip("/")
        self._not_reserved(new)
        if flags & RENAME_EXCHANGE:
            self._not_reserved(old)  # an exchange makes both
        self._change((old, new), lambda: self.source.rename(src, dst, flags))
        self._moved(src, dst)
        return 0

    def _moved(self, old: str, new: str) -> None:
        """Files open for writing under ``old`` are now under ``new``: move their holds."""
        moved = []
        with self._lock:
            for handle in self._writing.values():
                if handle.rel == old or handle.rel.startswith(old + "/"):
                    was, handle.rel = handle.rel, new + handle.rel[len(old) :]
                    moved.append((was, handle.rel))
        if self.holds is not None:
            for was, now in moved:
                self.holds.hold(now)
                self.holds.release(was)

    @overrides(Operations)
    def link(self, target: str, source: str) -> int:
        new, existing = target.lstrip("/"), source.lstrip("/")
        self._not_reserved(target)
        self._change((target, source), lambda: self.source.link(existing, new))
        return 0

    @overrides(Operations)
    def symlink(self, target: str, source: str) -> int:
        rel = target.lstrip("/")
        self._not_reserved(target)
        self._change((target,), lambda: self.source.symlink(source, rel))
        return 0

    @overrides(Operations)
    def chmod(self, path: str, mode: int) -> int:
        rel = path.lstrip("/")
        try:
            self._change((path,), lambda: self.source.chmod(rel, mode))
        except FuseOSError as exc:
            if exc.errno != errno.EPERM or not self._clear_set_id(rel, mode):
                raise
        return 0

    def _clear_set_id(self, rel: str, mode: int) -> bool:
        """The kernel's "a write clears set-uid and set-gid" for a writer who does not own
        the file: FUSE asks for it as a chmod by that writer, which the source refuses
        (EPERM), so the write would fail (EIO). Done as the daemon when ``mode`` only clears
        those bits and the caller may open the file for writing; False otherwise."""
        try:
            st = self.source.lstat(rel)
        except OSError:
            return False
        now, wanted = stat.S_IMODE(st.st_mode), stat.S_IMODE(mode)
        if not stat.S_ISREG(st.st_mode) or wanted == now or wanted != now & ~_SET_ID:
            return False
        try:
            with acting_as(self.caller()):
                fd = self.source.open(rel, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return False
        try:
            os.fchmod(fd, wanted)
        finally:
            os.close(fd)
        return True

    @overrides(Operations)
    def chown(self, path: str, uid: int, gid: int) -> int:
        self._change((path,), lambda: self.source.chown(path.lstrip("/"), uid, gid))
        return 0

    @overrides(Operations)
    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        rel = path.lstrip("/")

        def utimens() -> None:
            self.source.utimens(rel, None if times is None else self._times(rel, times))

        self._change((path,), utimens)
        return 0

    def _times(self, rel: str, times: tuple[int, int]) -> tuple[int, int]:
        """(atime, mtime) in ns with libfuse's "now" and "leave as is" made real."""
        if _UTIME_OMIT in times:
            st = self.source.lstat(rel)
            kept = (st.st_atime_ns, st.st_mtime_ns)
        now = time.time_ns()
        out = []
        for i, value in enumerate(times):
            out.append(now if value == _UTIME_NOW else kept[i] if value == _UTIME_OMIT else value)
        return out[0], out[1]

    @overrides(Operations)
    def fallocate(self, path: str, mode: int, offset: int, size: int, fh: Any) -> int:
        raise FuseOSError(errno.EOPNOTSUPP)  # posix_fallocate then writes the range itself

    @overrides(Operations)
    def mknod(self, path: str, mode: int, dev: int) -> int:
        raise FuseOSError(errno.EOPNOTSUPP)

    @overrides(Operations)
    def setxattr(self, path: str, name: str, value: bytes, options: int, position: int = 0) -> int:
        raise FuseOSError(errno.EOPNOTSUPP)

    @overrides(Operations)
    def removexattr(self, path: str, name: str) -> int:
        raise FuseOSError(errno.EOPNOTSUPP)

    @overrides(Operations)
    def destroy(self, path: str) -> None:
        super().destroy(path)
        for handle in list(self._handles.values()):
            if type(handle) is SourceHandle:
                os.close(handle.fd)
                self.quota.give_back(handle.uid)


def _keep_mode(fd: int, mode: int) -> None:
    """The permission bits the caller asked for (the kernel applied their umask; the
    daemon's own would take more away)."""
    st = os.fstat(fd)
    if stat.S_IMODE(st.st_mode) & 0o777 != mode & 0o777:
        os.fchmod(fd, stat.S_IMODE(st.st_mode) & 0o7000 | mode & 0o777)


__all__ = ["SOURCE_INO", "Holds", "SourceHandle", "WritableOperations"]
