"""The FUSE callbacks: a thin translation from paths and handles to the tree and the reader.

Every path goes through :meth:`SemfsOperations._lookup`, which returns a :class:`Node`
(or raises ENOENT); what a callback does then depends on the node's kind. Paths the tree
does not hold are offered to ``resolvers`` in order, which is where virtual nodes (such as
search directories) plug in without touching the callbacks.

Errors are precise: a missing path is ENOENT, every mutation EROFS, a missing xattr
ENODATA (ENOATTR on macOS), an unknown or outdated handle ESTALE, and a store failure is
logged and becomes EIO.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from semfs.fusefs.mount.access import may_read
from semfs.fusefs.mount.bindings import (
    ENOATTR,
    FuseOSError,
    Operations,
    current_fuse,
    overrides,
    request_caller,
)
from semfs.fusefs.mount.kernelcache import KernelCache, OpenMode
from semfs.fusefs.view.pins import GenerationPins
from semfs.fusefs.view.reader import ChunksMissingError, DocumentReader, ServedHash
from semfs.fusefs.view.tree import (
    DIR,
    FILE,
    NAME_MAX,
    SYMLINK,
    Node,
    Tree,
    document_attrs,
    name_too_long,
)
from semfs.ingest.store.schema import DocumentRecord

logger = logging.getLogger(__name__)

XATTR_PREFIX = "user.semfs."
BLOCK_SIZE = 4096

Resolver = Callable[[str], "Node | None"]
# What serves a file node's document: the tree its path is checked against, its reader and
# its pins. A mount's own, or in a mount of several collections the node's collection's
# (semfs.fusefs.view.forest).
Serving = tuple[Tree, DocumentReader, GenerationPins]


class Handle(Protocol):
    """An open file: what ``read`` serves from until ``release``."""

    def read(self, offset: int, size: int) -> bytes: ...


# Makes a handle's ServedHash on its first read (two reads may come at once).
_first_read = threading.Lock()


class DocumentHandle:
    """One committed version of a document, pinned at open so reads never mix versions."""

    __slots__ = ("attrs", "doc", "mode", "pins", "reader", "served")

    def __init__(
        self,
        reader: DocumentReader,
        doc: DocumentRecord,
        mode: OpenMode,
        attrs: Mapping[str, int],
        pins: GenerationPins,
    ) -> None:
        self.reader = reader
        self.pins = pins  # released on close
        self.doc = doc
        self.mode = mode
        # This version's stat, for a getattr on the handle once the tree no longer shows
        # its path (deleted while open: the kernel asks before reading past its cache).
        self.attrs = attrs
        # Made on the first read: a warm grep reads through the page cache, so most
        # handles never read here (a hash object and its lock cost ~0.5 µs an open).
        self.served: ServedHash | None = None

    def read(self, offset: int, size: int) -> bytes:
        data = self.reader.read(self.doc, offset, size)
        served = self.served
        if served is None:
            with _first_read:
                if self.served is None:
                    self.served = ServedHash(self.doc)
                served = self.served
        served.update(offset, data)
        return data


class BytesHandle:
    """A virtual file's bytes, fixed at open (a search results file)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, offset: int, size: int) -> bytes:
        return self.data[offset : offset + size]


class _StoreErrors:
    """``with`` block turning store failures into errno values (see ``_store_errors``).

    A class rather than a @contextmanager: it runs on every open and release, and the
    generator machinery cost more than the rest of a warm open.
    """

    __slots__ = ("path", "what")

    def __init__(self, what: str, path: str) -> None:
        self.what = what
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        # Never returns True: an exception is re-raised as an errno, never swallowed.
        if exc is not None:
            failure = _store_failure(self.what, self.path, exc)
            if failure is not None:
                raise failure from exc


def _store_failure(what: str, path: str, exc: BaseException) -> FuseOSError | None:
    """The errno a store failure becomes (logged); None when ``exc`` is not one (re-raise)."""
    if isinstance(exc, FuseOSError):
        return None
    if not isinstance(exc, Exception):
        if type(exc).__name__ != "PanicException":  # Qdrant Edge's Rust panics (pyo3)
            return None
        logger.error("%s %s: the store engine failed: %s", what, path, exc)
        return FuseOSError(errno.EIO)
    if isinstance(exc, ChunksMissingError):
        logger.info("%s %s: %s (re-ingested while open)", what, path, exc)
        return FuseOSError(errno.ESTALE)
    logger.error(
        "%s %s failed: %s: %s",
        what,
        path,
        type(exc).__name__,
        exc,
        exc_info=logger.isEnabledFor(logging.DEBUG),
    )
    return FuseOSError(errno.EIO)


class SemfsOperations(Operations):
    """The read-only filesystem over one :class:`Tree`, swapped whole by :meth:`set_tree`.

    ``on_init`` runs in ``init()``, once the kernel has connected: the place to start
    threads (never before daemonizing) and to tell a waiting parent the mount is up.
    ``kernel`` decides how each handle reads and invalidates what a new tree changes
    (:mod:`semfs.fusefs.mount.kernelcache`); ``pins`` keeps each open handle's version readable
    (:mod:`semfs.fusefs.view.pins`). ``serving`` says which tree, reader and pins serve a
    file node (default: ``tree``'s, ``reader`` and ``pins``; a mount of several collections:
    the node's collection's).
    """

    use_ns = True

    def __init__(
        self,
        tree: Tree,
        reader: DocumentReader,
        on_init: Callable[[], None] | None = None,
        kernel: KernelCache | None = None,
        pins: GenerationPins | None = None,
        serving: Callable[[Node], Serving] | None = None,
    ) -> None:
        self.tree = tree
        self.reader = reader
        self.serving = serving or self._own
        self.resolvers: list[Resolver] = []
        # More extended attributes of the root, asked per call (``user.semfs.`` + name).
        self.root_xattrs: list[Callable[[], Mapping[str, str]]] = []
        # Told the path of each document opened (cheap, never raising: in the FUSE thread).
        self.opened: list[Callable[[str], None]] = []
        self.on_init = on_init
        self.kernel = kernel or KernelCache(invalidate=False)
        self.pins = pins or GenerationPins(reader.store)
        self._handles: dict[int, Handle] = {}
        # Open folder handles whose listing the kernel caches -> (folder, ``kernel.published``
        # when the listing was made, -1 before that).
        self._listings: dict[int, tuple[str, int]] = {}
        self._fh = itertools.count(1)

    def set_tree(self, tree: Tree) -> None:
        """Show a new snapshot, then invalidate what changed; running callbacks finish on
        the old one."""

        def publish() -> None:
            self.tree = tree

        self.kernel.swap(self.tree, tree, publish)

    def _lookup(self, path: str) -> Node:
        rel = path.lstrip("/")
        # FUSE lets names up to 1024 bytes through; statfs promises NAME_MAX, so keep it.
        # (A character is at most 4 bytes: short paths skip the check.)
        if len(rel) * 4 > NAME_MAX and any(name_too_long(part) for part in rel.split("/")):
            raise FuseOSError(errno.ENAMETOOLONG)
        node = self.tree.lookup(rel)
        if node is None and self.resolvers:
            # A resolver may run a search (a query directory's entries): a failure is EIO.
            with self._store_errors("lookup", path):
                node = next((n for n in (r(rel) for r in self.resolvers) if n is not None), None)
            if node is not None:  # its attributes change with the collection, not the tree
                self.kernel.shown_virtual(rel)
        if node is None:
            raise FuseOSError(errno.ENOENT)
        return node

    def _own(self, node: Node) -> Serving:
        return self.tree, self.reader, self.pins

    def _store_errors(self, what: str, path: str) -> _StoreErrors:
        """Store failures become EIO (logged); an outdated version becomes ESTALE."""
        return _StoreErrors(what, path)

    # -- lifecycle ------------------------------------------------------------------------

    @overrides(Operations)
    def init(self, path: str) -> None:
        self.kernel.attach(current_fuse())
        if self.on_init is not None:
            self.on_init()

    @overrides(Operations)
    def destroy(self, path: str) -> None:
        self.kernel.detach()

    # -- reading --------------------------------------------------------------------------

    @overrides(Operations)
    def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
        try:
            return dict(self.kernel.attrs(self._lookup(path)))
        except FuseOSError:
            handle = self._handles.get(fh.fh) if fh is not None else None
            if type(handle) is DocumentHandle:  # an open file whose document was deleted
                return dict(handle.attrs)
            raise

    @overrides(Operations)
    def access(self, path: str, amode: int) -> int:
        node = self._lookup(path)
        if amode & os.W_OK:
            raise FuseOSError(errno.EROFS)
        if amode & os.X_OK and node.kind != DIR:
            raise FuseOSError(errno.EACCES)
        return 0

    @overrides(Operations)
    def readlink(self, path: str) -> str:
        node = self._lookup(path)
        if node.kind != SYMLINK:
            raise FuseOSError(errno.EINVAL)
        return node.target

    @overrides(Operations)
    def opendir(self, path: str, fi: Any = None) -> int:
        node = self._lookup(path)
        if node.kind != DIR:
            raise FuseOSError(errno.ENOTDIR)
        # A folder of the tree: the kernel keeps its listing until a swap invalidates it. A
        # search folder's listing changes with every search: never cached.
        if fi is None or not self.kernel.cache_listings or self.tree.lookup(node.path) is not node:
            return 0
        fi.cache_readdir = 1
        fi.keep_cache = 1  # else every opendir drops the cached listing
        fh = next(self._fh)
        self._listings[fh] = (node.path, -1)
        return fh

    @overrides(Operations)
    def readdir(self, path: str, fh: int) -> list[str | tuple[str, dict[str, int], int]]:
        published = self.kernel.published  # before the lookup: see releasedir
        node = self._lookup(path)
        if node.kind != DIR:
            raise FuseOSError(errno.ENOTDIR)
        listing = self._listings.get(fh)
        if listing is not None and listing[1] == -1:
            self._listings[fh] = (listing[0], published)
        parent = self.tree.lookup(node.path.rpartition("/")[0]) or node
        # With use_ino the inode numbers are ours; glibc hides entries whose inode is 0.
        entries: list[str | tuple[str, dict[str, int], int]] = [
            (".", {"st_mode": node.attrs["st_mode"], "st_ino": node.ino}, 0),
            ("..", {"st_mode": parent.attrs["st_mode"], "st_ino": parent.ino}, 0),
        ]
        with self._store_errors("readdir", path):  # a query directory searches on listing
            entries.extend(
                (name, {"st_mode": child.attrs["st_mode"], "st_ino": child.ino}, 0)
                for name, child in node.children.items()
            )
        return entries

    @overrides(Operations)
    def releasedir(self, path: str, fh: int) -> int:
        listing = self._listings.pop(fh, None)
        if listing is not None and listing[1] != -1:
            # A cached listing: the kernel may hold it from an older tree.
            self.kernel.listing_closed(*listing)
        return 0

    @overrides(Operations)
    def open(self, path: str, fi: Any) -> int:
        swaps = self.kernel.swaps  # before the lookup: a swap after it forces direct I/O
        node = self._lookup(path)
        if fi.flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC):
            raise FuseOSError(errno.EROFS)
        if node.kind == DIR:
            raise FuseOSError(errno.EISDIR)
        if node.kind == FILE and node.data is not None:
            fi.fh = next(self._fh)
            self._handles[fi.fh] = BytesHandle(node.data)
            # Its size may change with the collection: never through the page cache.
            fi.direct_io = 1
            return 0
        if node.kind != FILE or node.doc is None:
            raise FuseOSError(errno.EOPNOTSUPP)
        tree, reader, pins = self.serving(node)
        try:  # not `with self._store_errors(...)`: this runs per file of a grep
            doc = pins.hold(reader, node.doc)
        except BaseException as exc:
            failure = _store_failure("open", path, exc)
            if failure is None:
                raise
            raise failure from exc
        if doc is None:  # deleted since the tree was built
            raise FuseOSError(errno.ENOENT)
        # The kernel checked the attributes it holds, which may be an older version's (see
        # semfs.fusefs.mount.access): check the caller against the version served, now.
        if not may_read(tree, doc, request_caller()):
            pins.release(doc.path, doc.gen)
            raise FuseOSError(errno.EACCES)
        mode = self.kernel.opened(node, (doc.gen, doc.sha256), swaps)
        fi.fh = next(self._fh)
        attrs = node.attrs if doc is node.doc else document_attrs(node.ino, doc, tree.ids)
        self._handles[fi.fh] = DocumentHandle(reader, doc, mode, attrs, pins)
        for opened in self.opened:
            opened(node.path)
        fi.keep_cache = int(mode.keep_cache)
        fi.direct_io = int(mode.direct_io)
        return 0

    @overrides(Operations)
    def read(self, path: str, size: int, offset: int, fh: Any) -> bytes:
        handle = self._handles.get(fh.fh)
        if handle is None:
            raise FuseOSError(errno.ESTALE)
        with self._store_errors("read", path):
            return handle.read(offset, size)

    @overrides(Operations)
    def release(self, path: str, fh: Any) -> int:
        handle = self._handles.pop(fh.fh, None)
        if type(handle) is DocumentHandle:
            self.kernel.released(handle.mode)
            doc = handle.doc
            try:  # as in open: no context manager on the per-file path
                handle.pins.release(doc.path, doc.gen)
            except BaseException as exc:
                failure = _store_failure("release", path, exc)
                if failure is None:
                    raise
                raise failure from exc
        return 0

    @overrides(Operations)
    def statfs(self, path: str) -> dict[str, int]:
        tree = self.tree
        return {
            "f_bsize": BLOCK_SIZE,
            "f_frsize": BLOCK_SIZE,
            "f_blocks": -(-tree.total_bytes // BLOCK_SIZE),
            "f_bfree": 0,
            "f_bavail": 0,
            "f_files": len(tree),
            "f_ffree": 0,
            "f_favail": 0,
            "f_namemax": NAME_MAX,
        }

    def _xattrs(self, node: Node) -> dict[str, bytes]:
        if node.doc is not None:
            return {
                XATTR_PREFIX + "sha256": node.doc.sha256.encode(),
                XATTR_PREFIX + "generation": str(node.doc.gen).encode(),
                XATTR_PREFIX + "chunks": str(node.doc.chunks).encode(),
            }
        if node.path == "":
            # Lets `semfs umount` wait for this daemon to exit (and release the store).
            attrs = {XATTR_PREFIX + "pid": str(os.getpid()).encode()}
            for extra in self.root_xattrs:
                attrs.update({XATTR_PREFIX + k: v.encode() for k, v in extra().items()})
            return attrs
        return {}

    @overrides(Operations)
    def getxattr(self, path: str, name: str, position: int = 0) -> bytes:
        value = self._xattrs(self._lookup(path)).get(name)
        if value is None:
            raise FuseOSError(ENOATTR)
        return value

    @overrides(Operations)
    def listxattr(self, path: str) -> list[str]:
        return list(self._xattrs(self._lookup(path)))

    # -- every mutation: EROFS, nothing changes -------------------------------------------

    @overrides(Operations)
    def chmod(self, path: str, mode: int) -> int:
        raise FuseOSError(errno.EROFS)

    @overrides(Operations)
    def chown(self, path: str, uid: int, gid: int) -> int:
        raise FuseOSError(errno.EROFS)

    @overrides(Operations)
    def create(self, path: str, mode: int, fi: Any = None) -> int:
        raise FuseOSError(errno.EROFS)

    @overrides(Operations)
    def fallocate(self, path: str, mode: int, offset: int, size: int, fh: Any) -> int:
        raise FuseOSError(errno.EROFS)

    @overrides(Operations)
    def link(self, target: str, source: str) -> int:
        raise FuseOSError(errno.EROFS)

    @overrides(Operations)
    def mkdir(self, path: str, mode: int) -> int:
        raise FuseOSError(errno.EROFS)

    @overrides(Operations)
    def mknod(self, path: str, mode: int, dev: int) -> int:
        raise FuseOSError(errno.EROFS)

    @overrides(Operations)
    def removexattr(self, path: str, name: str) -> int:
        raise FuseOSError(errno.EROFS)

    @overrides(Operations)
    def rename(self, old: str, new: str) -> int:
        raise FuseOSError(errno.EROFS)

    @overrides(Operations)
    def rmdir(self, path: str) -> int:
        raise FuseOSError(errno.EROFS)

    @overrides(Operations)
    def setxattr(self, path: str, name: str, value: bytes, options: int, position: int = 0) -> int:
        raise FuseOSError(errno.EROFS)

    @overrides(Operations)
    def symlink(self, target: str, source: str) -> int:
        raise FuseOSError(errno.EROFS)

    @overrides(Operations)
    def truncate(self, path: str, length: int, fh: Any = None) -> int:
        raise FuseOSError(errno.EROFS)

    @overrides(Operations)
    def unlink(self, path: str) -> int:
        raise FuseOSError(errno.EROFS)

    @overrides(Operations)
    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        raise FuseOSError(errno.EROFS)

    @overrides(Operations)
    def write(self, path: str, data: bytes, offset: int, fh: Any) -> int:
        raise FuseOSError(errno.EROFS)
