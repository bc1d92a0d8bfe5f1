"""What the kernel caches of a mount, and telling it when that changes.

The kernel keeps each path's lookup (entry) and attributes for the timeouts we give it, and
a file's pages until it is told otherwise. Long timeouts make a warm ``grep -r`` cost one
open and one release per file; they are only correct because every change is invalidated.

Rules a caller may rely on:

* With libfuse 3 (``fuse_invalidate_path``) the timeouts are :data:`LONG_TIMEOUT`; a tree
  swap invalidates exactly the paths whose node changed, plus every search path the kernel
  was shown. The swap comes first, the invalidation after: the kernel discards attribute
  replies to requests sent before an invalidation, so what it keeps afterwards comes from
  the new tree. Without libfuse 3 the timeouts stay :data:`SHORT_TIMEOUT`.
* One version of a file at a time in the kernel: its size and cached pages belong to one
  committed version. A handle of that version reads through the page cache. A handle of any
  other version reads with direct I/O (no page cache, no size clamp), so its bytes are its
  version's whatever the kernel holds: that is a file opened while readers of its previous
  version are still open, or while its invalidation is pending.
* While page-cache handles of a version are open, ``getattr`` shows that version's
  attributes, so the size the kernel clamps their reads to stays theirs; when the last one
  closes after a change, the path is invalidated again.
* Folder listings of the tree are kept by the kernel too (:attr:`KernelCache.cache_listings`):
  a swap invalidates every folder whose entries changed. A listing answered from the old
  tree can still reach the kernel's cache after that (the kernel fills it when the reader
  wakes, not when we reply), so each such folder is invalidated again
  :data:`LISTING_SETTLE` seconds later, and when a folder handle whose listing predates the
  swap is closed (:meth:`KernelCache.listing_closed`): by then its listing is in the cache.
"""

from __future__ import annotations

import errno
import heapq
import itertools
import logging
import math
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping

from semfs.fusefs.mount.bindings import can_invalidate, invalidate_path, session_exited
from semfs.fusefs.view.tree import DIR, Node, Tree

logger = logging.getLogger(__name__)

# Seconds the kernel may keep entries and attributes when every change is invalidated.
LONG_TIMEOUT = 600.0
# ... and when it cannot be (libfuse 2): a change shows within this long.
SHORT_TIMEOUT = 1.0
# Search paths remembered for invalidation: at ~150 bytes each, about 10 MB at most. One
# that falls out keeps its kernel attributes until LONG_TIMEOUT (its reads stay exact).
MAX_VIRTUAL_PATHS = 65536
# Seconds after a swap when changed folders are invalidated a second time: long enough for
# a listing the daemon answered from the old tree to have reached the kernel's cache.
LISTING_SETTLE = 1.0

Version = tuple[int, str]


def version_of(node: Node) -> Version | None:
    return None if node.doc is None else (node.doc.gen, node.doc.sha256)


def changed_nodes(old: Tree, new: Tree) -> list[Node]:
    """Nodes of either tree whose path, kind, attributes, version or target differ, then
    the folders of the new tree whose listing changed (an entry came, went or changed kind)."""
    out = []
    listings: set[str] = set()
    for node in new.nodes():
        before = old.lookup(node.path)
        if before is None or before.kind != node.kind:
            out.append(node)
            if node.path:
                listings.add(node.path.rpartition("/")[0])
        elif (
            before.attrs != node.attrs
            or version_of(before) != version_of(node)
            or before.target != node.target
        ):
            out.append(node)
    for node in old.nodes():
        if new.lookup(node.path) is None:
            out.append(node)
            listings.add(node.path.rpartition("/")[0])
    # A folder whose own attributes changed is in ``out`` already; one that is gone too.
    shown = {node.path for node in out if node.kind == DIR}
    for path in sorted(listings - shown):
        folder = new.lookup(path)
        if folder is not None and folder.kind == DIR:
            out.append(folder)
    return out


class OpenMode:
    """How one open handle reads: through the page cache (``cached``) or direct I/O.

    A plain class with slots, not a frozen dataclass: one is made on every open, and a
    frozen dataclass's ``__init__`` costs four times as much (1.3 against 0.3 µs).
    """

    __slots__ = ("cached", "ino", "keep_cache", "path")

    def __init__(self, ino: int, path: str, cached: bool, keep_cache: bool) -> None:
        self.ino = ino
        self.path = path
        self.cached = cached
        self.keep_cache = keep_cache

    @property
    def direct_io(self) -> bool:
        return not self.cached


class _Cached:
    """The version whose size and pages the kernel holds while ``handles`` read through them."""

    __slots__ = ("attrs", "handles", "stale", "version")

    def __init__(self, version: Version, attrs: Mapping[str, int]) -> None:
        self.version = version
        self.attrs = attrs
        self.handles = 1
        self.stale = False  # the tree has moved on: invalidate when the last handle closes


class KernelCache:
    """Per-inode kernel state of one mount, and the thread that sends invalidations."""

    def __init__(self, invalidate: bool | None = None) -> None:
        self.invalidates = can_invalidate() if invalidate is None else invalidate
        self.timeout = LONG_TIMEOUT if self.invalidates else SHORT_TIMEOUT
        self._lock = threading.Lock()
        self._cached: dict[int, _Cached] = {}
        # ino -> the version whose pages the kernel may hold: one entry per file ever opened.
        self._pages: dict[int, Version] = {}
        # ino -> (token, deadline): until then the kernel may hold an older version's attrs.
        self._unsettled: dict[int, tuple[int, float]] = {}
        self._tokens = itertools.count(1)
        self._virtual: OrderedDict[str, None] = OrderedDict()
        self._fuse: int | None = None
        self._fuse_lock = threading.Lock()
        self._queue: queue.SimpleQueue[tuple[str, int, int] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self.invalidations = 0
        self.swaps = 0  # read before a lookup, handed to opened(): was there a swap between?
        # Trees published so far: a folder handle remembers it when its listing is made.
        self.published = 0
        # Whether the kernel may keep the tree's folder listings (every change invalidated).
        self.cache_listings = self.invalidates

    # -- lifecycle --------------------------------------------------------------------------

    def attach(self, fuse_ptr: int | None) -> None:
        """Start invalidating through the running mount (from its ``init``)."""
        if not self.invalidates or fuse_ptr is None:
            self.invalidates = self.cache_listings = False
            return
        with self._fuse_lock:
            self._fuse = fuse_ptr
        self._thread = threading.Thread(target=self._run, name="semfs-invalidate", daemon=True)
        self._thread.start()

    def detach(self) -> None:
        """Stop calling into libfuse (the mount is going away)."""
        with self._fuse_lock:
            self._fuse = None
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(5.0)
            self._thread = None

    # -- handles ----------------------------------------------------------------------------

    def opened(self, node: Node, version: Version, swaps: int) -> OpenMode:
        """How a new handle of ``version`` reads; ``node`` is from the tree shown when
        :attr:`swaps` was ``swaps``."""
        ino = node.ino
        with self._lock:
            cached = self._cached.get(ino)
            if cached is not None:
                if cached.version == version:
                    cached.handles += 1
                    return OpenMode(ino, node.path, cached=True, keep_cache=True)
                return OpenMode(ino, node.path, cached=False, keep_cache=True)
            unsettled = self._unsettled.get(ino)
            if (
                version != version_of(node)
                or swaps != self.swaps
                or (unsettled is not None and unsettled[1] > time.monotonic())
            ):
                return OpenMode(ino, node.path, cached=False, keep_cache=True)
            self._cached[ino] = _Cached(version, node.attrs)
            keep = self._pages.get(ino) == version
            self._pages[ino] = version
            return OpenMode(ino, node.path, cached=True, keep_cache=keep)

    def released(self, mode: OpenMode) -> None:
        if not mode.cached:
            return
        with self._lock:
            cached = self._cached[mode.ino]
            cached.handles -= 1
            if cached.handles > 0:
                return
            del self._cached[mode.ino]
            if cached.stale:
                # The kernel holds this version's size; the tree shows another by now.
                self._settle_later([(mode.path, mode.ino)])

    def attrs(self, node: Node) -> Mapping[str, int]:
        """What ``getattr`` returns: the attributes of the version open handles read."""
        cached = self._cached.get(node.ino)  # one dict read; no lock on the hot path
        return node.attrs if cached is None else cached.attrs

    def shown_virtual(self, path: str) -> None:
        """Remember a search path the kernel was shown, to invalidate it on the next change."""
        if not self.invalidates:
            return
        with self._lock:
            self._virtual[path] = None
            self._virtual.move_to_end(path)
            if len(self._virtual) > MAX_VIRTUAL_PATHS:
                self._virtual.popitem(last=False)

    def forget_searches(self) -> None:
        """Search results changed without a tree swap (a dense pass stored vectors): every
        search path the kernel was shown is invalidated."""
        with self._lock:
            virtual = list(self._virtual)
            self._virtual.clear()
        if self.invalidates:
            for path in virtual:
                self._queue.put((path, 0, 0))

    # -- tree swaps -------------------------------------------------------------------------

    def swap(self, old: Tree, new: Tree, publish: Callable[[], None]) -> int:
        """Mark what changed, ``publish()`` the new tree, then invalidate it; the count."""
        changed = changed_nodes(old, new)
        with self._lock:
            now = time.monotonic()
            for ino in [i for i, (_t, d) in self._unsettled.items() if d <= now]:
                del self._unsettled[ino]  # settled by time (no invalidation here)
            entries = []
            for node in changed:
                cached = self._cached.get(node.ino)
                if cached is not None:
                    cached.stale = True
                entries.append((node.path, node.ino))
            virtual = list(self._virtual) if changed else []
            self._virtual.clear()
            tokens = self._mark(entries)
            self.swaps += 1
        publish()
        self.published += 1
        if self.invalidates:
            for (path, ino), token in zip(entries, tokens, strict=True):
                self._queue.put((path, ino, token))
            for path in virtual:
                self._queue.put((path, 0, 0))
            if self.cache_listings:
                due = time.monotonic_ns() + round(LISTING_SETTLE * 1e9)
                for node in changed:
                    if node.kind == DIR and new.lookup(node.path) is node:
                        self._queue.put((node.path, -1, due))
        return len(changed)

    def listing_closed(self, path: str, published: int) -> None:
        """A cached folder handle whose listing was made when :attr:`published` was
        ``published`` is closed: if a tree was published since, its listing may have filled
        the kernel's cache after the swap's invalidation, so invalidate the folder again."""
        if published != self.published and self.cache_listings:
            self._queue.put((path, 0, 0))

    def _settle_later(self, entries: list[tuple[str, int]]) -> None:
        tokens = self._mark(entries)
        if self.invalidates:
            for (path, ino), token in zip(entries, tokens, strict=True):
                self._queue.put((path, ino, token))

    def _mark(self, entries: list[tuple[str, int]]) -> list[int]:
        """Under the lock: these inodes are unsettled until invalidated (or the timeout)."""
        deadline = math.inf if self.invalidates else time.monotonic() + self.timeout
        tokens = []
        for _path, ino in entries:
            token = next(self._tokens)
            self._unsettled[ino] = (token, deadline)
            tokens.append(token)
        return tokens

    def _next(self, later: list[tuple[int, str]]) -> tuple[str, int, int] | None:
        """The next invalidation to send: queued ones first, then delayed ones when due.

        A delayed one is queued as ``(path, -1, due)`` (monotonic ns) and waits in ``later``.
        """
        while True:
            timeout = None if not later else max(0, later[0][0] - time.monotonic_ns()) / 1e9
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                return (heapq.heappop(later)[1], 0, 0)
            if item is None or item[1] != -1:
                return item
            heapq.heappush(later, (item[2], item[0]))

    def _run(self) -> None:
        failing = False
        later: list[tuple[int, str]] = []
        while (item := self._next(later)) is not None:
            path, ino, token = item
            rc = self._invalidate(path)
            ok = rc in (0, -errno.ENOENT)  # ENOENT: the kernel holds nothing of it
            if not ok and not failing:
                reason = errno.errorcode.get(-rc, str(rc))
                logger.warning("cannot invalidate %s in the kernel: %s", path, reason)
            failing = not ok
            with self._lock:
                if ino and self._unsettled.get(ino, (0, 0.0))[0] == token:
                    if ok:
                        del self._unsettled[ino]
                    else:  # settled only once the kernel's own timeout has run out
                        self._unsettled[ino] = (token, time.monotonic() + self.timeout)

    def _invalidate(self, path: str) -> int:
        with self._fuse_lock:
            # libfuse frees its path table right after the loop ends, before any callback
            # tells us: check the session first (the loop ends long before the free).
            if self._fuse is None or session_exited(self._fuse):
                return 0
            self.invalidations += 1
            rc = invalidate_path(self._fuse, "/" + path)
        # EBADF, ENOTCONN: the kernel's connection is gone (an unmount under way: /dev/fuse was
        # closed before the session says it has exited). Nothing is left to invalidate.
        return 0 if rc in (-errno.EBADF, -errno.ENOTCONN) else rc
