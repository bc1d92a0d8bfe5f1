"""One mount, wired: its store, tree, search folders, threads and FUSE loop, in this process.

:class:`MountDaemon` opens the store as its owner, builds the first tree and runs the FUSE
loop in the foreground. Threads (the tree refresher, the ipc server that lets `semfs
ingest` write through the daemon, the watcher of ``--watch``, the model warm-up, the
compactor, the manifest writer) start in ``init()``, after any fork. libfuse turns SIGINT,
SIGTERM and SIGHUP into a clean unmount; the store is closed after the loop ends.

Beside it: :mod:`~semfs.fusefs.mount.start` (the start-up checks, the fork and the ready
pipe), :mod:`~semfs.fusefs.mount.unmount` (unmounting, mountinfo) and
:mod:`~semfs.fusefs.mount.logfile` (the log file).
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from semfs.fusefs.mount.bindings import (
    FUSE,
    can_invalidate,
    fuse_exit,
    fuse_major_version,
    request_caller,
)
from semfs.fusefs.mount.kernelcache import LONG_TIMEOUT, SHORT_TIMEOUT, KernelCache
from semfs.fusefs.mount.ops import SemfsOperations, Serving
from semfs.fusefs.view.foldermap import FolderMaps
from semfs.fusefs.view.forest import Forest, ForestSearch, Member
from semfs.fusefs.view.pins import GenerationPins
from semfs.fusefs.view.reader import DocumentReader
from semfs.fusefs.view.refresh import DEFAULT_INTERVAL, TreeRefresher
from semfs.fusefs.view.searchdir import DEFAULT_NAME, SearchDirectories
from semfs.fusefs.view.similardir import SimilarDirectories
from semfs.fusefs.view.tree import FileIds, Node, Tree
from semfs.ingest import portable
from semfs.ingest.errors import MountError, StoreOwnedError
from semfs.ingest.focus import UseLog, uses_of
from semfs.ingest.opened import Opened, open_resident
from semfs.ingest.request import SearchRequest
from semfs.ingest.resident import LazySearcher, ResidentStore
from semfs.ingest.store import Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.check import require_counts
from semfs.ingest.store.manifest import collector_paused

if TYPE_CHECKING:  # imported where used: the first listing needs neither (see MountDaemon.run)
    from semfs.fusefs.mount.writes import WritableOperations
    from semfs.ingest.embedding.embedder import Embedder
    from semfs.ingest.report import IngestReport
    from semfs.ingest.sources import SourceOptions
    from semfs.ingest.syncstate import SyncState
    from semfs.ingest.watch import SourceWatcher

logger = logging.getLogger(__name__)

# Seconds after the mount answers before a store that had no current manifest gets one
# (listing its records holds the GIL a while, which would stall the first listings).
MANIFEST_DELAY = 1.0
# Seconds after the mount answers before the search model starts loading (torch holds the
# GIL for much of its seconds-long import): the first listings come first.
WARM_UP_DELAY = 0.2
Ready = Callable[[str | None], None]


@dataclass
class MountConfig:
    mountpoint: Path
    address: CollectionAddress = field(default_factory=CollectionAddress)
    options: dict[str, str | bool] = field(default_factory=dict)
    foreground: bool = False
    log_file: Path | None = None
    poll_interval: float = DEFAULT_INTERVAL
    search_dir: str = DEFAULT_NAME
    search: SearchRequest = field(default_factory=SearchRequest)  # defaults for queries
    watch: Path | None = None  # a source folder the daemon follows (--watch)
    views: bool = True  # text views beside converted documents (--no-views: originals only)
    # How --watch reads its folder; None: `semfs ingest`'s defaults. A plain mount makes none,
    # so its start imports no reading machinery (sources, the formats, zipfile).
    source: SourceOptions | None = None
    writable: bool = False  # writes pass through to ``watch`` (--writable)
    # A mount of collections as folders (--collections, --all): each a top-level folder, in
    # this order; ``address`` is the first. Empty: ``address`` alone, at the root.
    collections: tuple[CollectionAddress, ...] = ()

    @property
    def addresses(self) -> tuple[CollectionAddress, ...]:
        """The collections mounted: ``collections``, else ``address``."""
        return self.collections or (self.address,)

    @property
    def mount_source(self) -> str:
        """The mount's name in the system's list of mounts: its collection's
        (:attr:`CollectionAddress.mount_source`), or for several, their names joined by
        ``+`` (``semfs:docs+code``; a comma would end the FUSE option), which ``semfs
        collections rm`` reads."""
        return self.address.named("+".join(a.collection for a in self.addresses)).mount_source


def parse_options(values: Iterable[str]) -> dict[str, str | bool]:
    """``-o`` values, each comma-separated ``key`` or ``key=value``, later ones winning."""
    opts: dict[str, str | bool] = {}
    for value in values:
        for item in value.split(","):
            key, sep, val = item.strip().partition("=")
            if key:
                opts[key] = val if sep else True
    return opts


def fuse_options(cfg: MountConfig) -> dict[str, Any]:
    """The options handed to libfuse: read-only, stable inodes, kernel cache timeouts, -o.

    The timeouts are long where every change is invalidated (libfuse 3), else short: see
    :mod:`semfs.fusefs.mount.kernelcache`.
    """
    user = dict(cfg.options)
    if cfg.collections and cfg.watch is not None:
        raise MountError(
            "--watch follows one collection's folder: mount that collection alone (-c NAME)"
        )
    if cfg.writable and cfg.watch is None:
        raise MountError("--writable needs --watch SOURCE: writes go to that folder")
    if "rw" in user and not cfg.writable:
        raise MountError("semfs mounts are read-only: drop -o rw, or mount --watch DIR --writable")
    user.pop("rw", None)
    # A writable mount's files also change outside the tree (through the mount, or in the
    # source beside it): the kernel asks again after a second.
    timeout = LONG_TIMEOUT if can_invalidate() and not cfg.writable else SHORT_TIMEOUT
    opts: dict[str, Any] = {
        "ro": not cfg.writable,
        "use_ino": True,
        "default_permissions": True,
        "fsname": cfg.mount_source,  # `collections rm` looks for it
        "entry_timeout": timeout,
        "attr_timeout": timeout,
    }
    opts.update(portable.mount_options(cfg.address.collection))  # Linux: the type reads fuse.semfs
    # We check emptiness ourselves; libfuse 2 also refuses unless told, libfuse 3 never does.
    if user.pop("nonempty", False) and fuse_major_version() == 2:
        opts["nonempty"] = True
    opts.update(user)
    return opts


def open_mount_store(cfg: MountConfig) -> Opened:
    """The store the mount reads, owned by this process; never a proxy to another resident
    owner. A `semfs ingest` under way is the one owner a mount goes through: it shows what the
    ingest has committed, and takes the store over when the ingest ends (the hand-over of
    :mod:`semfs.ingest.resident`)."""
    opening = functools.partial(
        open_resident,
        cfg.address,
        must_exist=cfg.watch is None,  # --watch creates it
    )
    try:
        return opening(through_owner=False)
    except StoreOwnedError as exc:  # another daemon owns the shard: never stack on it
        if exc.by_ingest:  # readable while it runs; ours once it ends
            return opening()
        collection, where = cfg.address.collection, cfg.address.where
        if exc.is_mount:
            raise MountError(
                f"collection {collection!r} at {where} is already mounted by "
                f"{exc.holder}: `semfs umount` it first"
            ) from None
        if exc.by_watcher:  # one process follows and mounts: `semfs mount --watch`
            raise MountError(
                f"collection {collection!r} at {where} is followed by `semfs "
                f"ingest --watch` (pid {exc.pid}): stop it (Ctrl-C, or kill {exc.pid}), then "
                "`semfs mount MOUNTPOINT --watch SOURCE` follows the folder and mounts it"
            ) from None
        raise MountError(
            f"collection {collection!r} at {where} is held by {exc.holder}, "
            "which serves it to readers but not to a mount: stop it first"
        ) from None


@dataclass
class _Shown:
    """One collection as the mount shows it: its Opened (store owned here, its one
    searcher), its tree's refresher, reader and pins (a mount of several has one each)."""

    opened: Opened
    refresher: TreeRefresher
    pins: GenerationPins
    reader: DocumentReader

    @property
    def address(self) -> CollectionAddress:
        return self.opened.address

    @property
    def store(self) -> Store:
        return self.opened.store

    @property
    def searcher(self) -> LazySearcher:
        return self.opened.searcher

    @property
    def resident(self) -> ResidentStore:
        assert self.opened.resident is not None  # open_resident's
        return self.opened.resident


class MountDaemon:
    """One mount: its store, tree refresher, ipc server and FUSE loop, in this process (a
    mount of several collections: a store, refresher and ipc server for each)."""

    def __init__(self, cfg: MountConfig, ready: Ready | None = None) -> None:
        self.cfg = cfg
        self.ready = ready
        self.started = False
        self.error: str | None = None
        self._services: list[Callable[[], None]] = []  # stop functions, run in reverse
        self._began = time.monotonic()
        self._watcher: SourceWatcher | None = None
        # Drops cached search results when a dense pass stored vectors (set in run()).
        self._vectors_changed: Callable[[], None] | None = None
        self._publishing = threading.Lock()  # a mount of several: one forest swap at a time

    def _follow(
        self, store: Store, embedder: Embedder, refresher: TreeRefresher, resident: ResidentStore
    ) -> SourceWatcher:
        """The watcher of ``--watch``: it writes into the daemon's own store with the store's
        document model (torch for a torch store, loaded only when something must be embedded;
        queries may run on ONNX Runtime) and shows each batch at once by waking the
        refresher; the resident store's dense pass then embeds it. It starts in init(), after the
        fork."""
        from semfs.ingest.syncstate import state_file
        from semfs.ingest.watch import SourceWatcher

        assert self.cfg.watch is not None

        def batch_done(_report: IngestReport, _state: SyncState) -> None:
            refresher.wake()
            resident.changed()

        return SourceWatcher(
            self.cfg.watch,
            store,
            self._source(),
            embedder=embedder,
            state_file=state_file(self.cfg.address),
            on_batch=batch_done,
        )

    def _source(self) -> SourceOptions:
        from semfs.ingest.sources import SourceOptions

        return self.cfg.source or SourceOptions()

    def _operations(self, *args: Any, **kwargs: Any) -> SemfsOperations:
        """The callbacks: read-only, or passing writes to the source (--writable)."""
        if not self.cfg.writable:
            return SemfsOperations(*args, **kwargs)
        from semfs.fusefs.mount.writes import WritableOperations
        from semfs.ingest.beneath import SourceFolder

        assert self.cfg.watch is not None
        source = SourceFolder(self.cfg.watch)
        self._services.append(source.close)  # after the loop: closed last but the store
        return WritableOperations(*args, source=source, search_dir=self.cfg.search_dir, **kwargs)

    def _show(
        self,
        address: CollectionAddress,
        embedder: Embedder | None = None,
        opened: Opened | None = None,
    ) -> tuple[_Shown, Tree]:
        """One collection for the mount (its store, first tree, searcher and pins), its
        closing added to the services: opened now unless ``opened`` is it; ``embedder``:
        --watch's model of a new collection."""
        if opened is None:
            opened = open_mount_store(replace(self.cfg, address=address))
            self._services.append(opened.close)
        store = opened.store
        refresher = TreeRefresher.as_mounted(
            store, interval=self.cfg.poll_interval, views=self.cfg.views
        )
        # The meta before the tree: an ingest committing meanwhile only adds to the tree
        # (require_counts below).
        meta = store.read_meta()
        # Not around the store's open: a server client's own threads run meanwhile (the
        # manifest's decode pauses the collector itself).
        with collector_paused():
            tree = refresher.load()
        # Never a silently empty mount of a damaged store. A manifest is only kept while
        # the shard is as its last clean close left it (else it has been dropped), so its
        # own count stands in for the shard's, which would wait for the shard to load.
        manifest = refresher.manifest
        chunks = None if manifest is None else manifest.chunk_count  # no records made
        require_counts(store, tree.files, chunks, meta)
        # The store's model (or --watch's, for a new collection); loads nothing yet.
        opened.searcher.reset(embedder)
        compactor = _Compactor(store)
        self._services.append(compactor.close)
        pins = GenerationPins(
            store,
            on_change=lambda: refresher.wake(force=True),
            on_settled=compactor.request,
        )
        refresher.hidden = pins.deleted
        self._services.append(pins.close)
        return _Shown(opened, refresher, pins, DocumentReader(store)), tree

    def run(self) -> None:
        """Mount and serve until unmounted; raises MountError when the mount never came up."""
        self._began = time.monotonic()
        shown: list[_Shown] = []
        try:
            embedder = documents = opened = None
            if self.cfg.watch is not None:  # one collection (MountConfig refuses several)
                from semfs.ingest.embedding.embedder import load_embedder
                from semfs.ingest.origin import claim_source
                from semfs.ingest.pipeline import resolve_model

                opened = open_mount_store(self.cfg)
                self._services.append(opened.close)
                store = opened.store
                model = resolve_model(store, self._source().model)  # another model: fail now
                # Another folder than the collection's: fail now, not once per batch.
                claim_source(store.read_meta(), self.cfg.watch, self.cfg.address.collection)
                documents = load_embedder(model)
                if not store.exists():
                    # The first pass creates the collection: mount (empty) at once, without
                    # waiting for the model to say its dimension.
                    embedder = documents
            trees: dict[str, Tree] = {}
            for address in self.cfg.addresses:
                one, trees[address.collection] = self._show(address, embedder, opened)
                shown.append(one)
            if self.cfg.collections:
                ops, searches, similars = self._several(shown, trees)
            else:
                ops, searches, similars = self._one(shown[0], trees[shown[0].address.collection])
            searches.caller = _caller_uid

            def vectors_changed() -> None:
                searches.cache.clear()
                similars.cache.clear()
                ops.kernel.forget_searches()

            self._vectors_changed = vectors_changed
            # A document read is embedded first (semfs.ingest.focus), in its own collection
            # (a mount of several: the first part of its path names it).
            uses = {one.address.collection: uses_of(one.store) for one in shown}
            ops.opened.append(
                functools.partial(_note_read, uses, several=bool(self.cfg.collections))
            )
            # `semfs guide MOUNTPOINT` names the search folder this mount answers.
            ops.root_xattrs.append(lambda: {"search_dir": searches.folder})
            if self.cfg.collections:  # `semfs guide MOUNTPOINT` names them too
                names = ",".join(a.collection for a in self.cfg.collections)
                ops.root_xattrs.append(lambda: {"collections": names})
            if self.cfg.watch is not None:
                one = shown[0]
                # Its deletions wait for open files too.
                assert documents is not None
                self._watcher = self._follow(
                    one.pins.guard(), documents, one.refresher, one.resident
                )
                ops.root_xattrs.append(self._watcher.state.xattrs)
                if self.cfg.writable:
                    cast(
                        "WritableOperations", ops
                    ).holds = self._watcher  # a file open for writing waits for its close
                searches.status_line = self._watcher.state.freshness_line
            ops.on_init = lambda: self._started(shown, documents)
            logger.debug(
                "mounting %s (%d documents) at %s",
                ", ".join(one.store.location for one in shown),
                ops.tree.files,
                self.cfg.mountpoint,
            )
            try:
                FUSE(
                    ops,
                    str(self.cfg.mountpoint),
                    raw_fi=True,
                    foreground=True,
                    **fuse_options(self.cfg),
                )
            except RuntimeError as exc:  # fuse_main failed; libfuse printed why on stderr
                if not self.started and self.error is None:
                    self.error = f"cannot mount {self.cfg.mountpoint} (libfuse error {exc})"
        finally:
            self._stop()
        if not self.started:
            raise MountError(self.error or f"cannot mount {self.cfg.mountpoint}")
        logger.info("unmounted %s", self.cfg.mountpoint)

    def _one(
        self, one: _Shown, tree: Tree
    ) -> tuple[SemfsOperations, SearchDirectories, SimilarDirectories]:
        """The callbacks and folders of a mount of one collection: its tree at the root."""
        ops = self._operations(tree, one.reader, kernel=KernelCache(), pins=one.pins)
        searches = SearchDirectories(one.searcher.search, self.cfg.search_dir, self.cfg.search)
        # ops.tree is read per call: a search always runs against the tree shown now.
        ops.resolvers.append(lambda rel: searches.resolve(ops.tree, rel))
        # DIR/.map.md: the folder's map, from the tree shown now and the chunks' titles.
        maps = FolderMaps(one.store.get_chunks)
        ops.resolvers.append(lambda rel: maps.resolve(ops.tree, rel))
        # DIR/.similar/PATH/: the documents nearest to DIR/PATH, as a question folder.
        similars = SimilarDirectories(one.searcher.similar, self.cfg.search)
        ops.resolvers.append(lambda rel: similars.resolve(ops.tree, rel))
        # While an ingest's dense pass is under way, results say how much is embedded,
        # and are searched again as its vectors come in.
        searches.meaning = one.opened.meaning_note
        one.refresher.publish = ops.set_tree
        return ops, searches, similars

    def _several(
        self, shown: list[_Shown], trees: dict[str, Tree]
    ) -> tuple[SemfsOperations, SearchDirectories, SimilarDirectories]:
        """The callbacks and folders of a mount of several collections: each a top-level
        folder (:mod:`semfs.fusefs.view.forest`), each file read from its own store."""
        forest = Forest(trees, FileIds(os.getuid(), os.getgid()))
        by_name = {one.address.collection: one for one in shown}

        def serving(node: Node) -> Serving:
            now = cast("Forest", ops.tree)
            name = node.path.partition("/")[0]
            one = by_name[name]
            return now.trees[name], one.reader, one.pins

        ops = SemfsOperations(forest, shown[0].reader, kernel=KernelCache(), serving=serving)
        several = ForestSearch(
            [
                Member(
                    one.address.collection,
                    one.searcher.search,
                    one.searcher.similar,
                    one.store.get_chunks,
                    meaning=one.opened.meaning_note,
                    model=_model(one.store),
                    standing=one.searcher.standing,
                )
                for one in shown
            ]
        )
        searches = SearchDirectories(several.search, self.cfg.search_dir, self.cfg.search)
        searches.meaning = several.meaning
        maps = FolderMaps(several.chunks, about=several.about)  # type: ignore[arg-type]
        similars = SimilarDirectories(several.similar, self.cfg.search)
        for resolver in (searches, maps, similars):
            ops.resolvers.append(functools.partial(_resolve_now, resolver, ops))

        def publisher(name: str) -> Callable[[Tree], None]:
            def publish(tree: Tree) -> None:
                with self._publishing:  # refreshers run in threads of their own
                    ops.set_tree(cast("Forest", ops.tree).replaced(name, tree))

            return publish

        for one in shown:
            one.refresher.publish = publisher(one.address.collection)
        return ops, searches, similars

    def _started(self, shown: list[_Shown], documents: Embedder | None) -> None:
        """FUSE init(): the kernel is connected. Start the threads, then report."""
        for one in shown:
            try:
                one.refresher.start()
                self._services.append(one.refresher.stop)
                # The dense vectors an ingest left to do (and the watcher's batches add), in
                # a thread of their own; the model loads only if there is anything to embed.
                one.resident.embed(
                    (lambda: documents) if documents is not None else None,
                    one.pins.guard(),
                    on_vectors=self._vectors_changed,
                )
                # The ingest's deletions wait for the handles still reading what they delete.
                # A `semfs search` beside the mount runs on our searcher and warm model.
                # A plain `semfs ingest` beside a writable mount leaves the files it holds
                # open for writing as they are, as the watcher does (it indexes them once
                # closed).
                held = self._watcher.held_paths if self._watcher is not None else None
                one.resident.serve(
                    on_change=one.refresher.wake,
                    served=one.pins.guard(),
                    searcher=one.searcher,
                    held=held,
                )
                self._services.append(one.resident.stop_serving)
            except Exception as exc:
                self.error = f"cannot serve {one.store.location} to `semfs ingest`: {exc}"
                self.report(self.error)
                fuse_exit()
                return
        if self._watcher is not None:
            self._watcher.start()
            self._services.append(self._watcher.stop)
        self.started = True
        logger.info(
            "mounted %s at %s in %.0f ms",
            ", ".join(one.store.location for one in shown),
            self.cfg.mountpoint,
            (time.monotonic() - self._began) * 1000,
        )
        self.report(None)
        for one in shown:
            self._later(one)

    def _later(self, one: _Shown) -> None:
        """After the report, and each a moment later: both hold the GIL for long stretches
        (imports, the model, listing records), which would slow the report and the first
        listings. A search before then loads the model itself. An embedded shard opened
        from its manifest loads on first need only (a read or a search): the engine holds
        the GIL while it loads (0.2 s at 2k chunks, longer at 100k), which stalled every
        callback when it loaded on a timer, and listings, stat, find and du never need it."""
        store = one.store
        one.resident.warm(one.searcher, delay=WARM_UP_DELAY)
        # Stopped before the store closes: a write racing the close failed with the engine's
        # "Shard is not initialized" when a mount ended within MANIFEST_DELAY.
        stopping = threading.Event()
        writer = threading.Thread(
            target=_write_missing_manifest,
            args=(store, stopping),
            name="semfs-manifest",
            daemon=True,
        )
        writer.start()

        def stop_writer() -> None:
            stopping.set()
            writer.join()

        self._services.append(stop_writer)

    def report(self, error: str | None) -> None:
        if self.ready is not None:
            self.ready(error)
            self.ready = None

    def _stop(self) -> None:
        _ignore_stop_signals()
        while self._services:
            stop = self._services.pop()
            try:
                stop()
            except Exception as exc:
                logger.error("shutting down: %s", exc, exc_info=logger.isEnabledFor(logging.DEBUG))


def _resolve_now(resolver: Any, ops: SemfsOperations, rel: str) -> Node | None:
    """``resolver``'s node at ``rel`` in the tree shown now (ops.tree is read per call)."""
    node: Node | None = resolver.resolve(ops.tree, rel)
    return node


def _note_read(uses: dict[str, UseLog], path: str, several: bool) -> None:
    """Note the document at mount path ``path`` as read, in its collection's use log."""
    if not several:
        next(iter(uses.values())).documents([path])
        return
    name, _, inner = path.partition("/")
    log = uses.get(name)
    if log is not None:
        log.documents([inner])


def _model(store: Store) -> Callable[[], str | None]:
    def model() -> str | None:
        meta = store.read_meta()
        return None if meta is None else meta.model

    return model


class _Compactor:
    """Compacts the store in a background thread when asked (never in a FUSE callback: a
    compaction rewrites segments), one at a time; requests during a run make one more."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._again = False
        self._stopped = False
        self._thread: threading.Thread | None = None

    def request(self) -> None:
        with self._lock:
            if self._stopped:
                return
            if self._thread is not None:
                self._again = True
                return
            self._thread = threading.Thread(target=self._run, name="semfs-compact", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """No more compactions; wait for one under way (before the store closes)."""
        with self._lock:
            self._stopped = True
            thread = self._thread
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        while True:
            try:
                if self.store.compact():
                    logger.info("compacted %s: versions closed files read", self.store.location)
            except Exception as exc:  # disk full, say: the next ingest compacts
                logger.info("not compacting %s now: %s", self.store.location, exc)
            with self._lock:
                if not self._again or self._stopped:
                    self._thread = None
                    return
                self._again = False


def _caller_uid() -> int | None:
    """The uid whose FUSE request is running (search folders keep recent queries per user)."""
    caller = request_caller()
    return None if caller is None else caller[0]


def _ignore_stop_signals() -> None:
    """Let the close finish: libfuse's handlers are gone once its loop has returned, and a
    SIGTERM now (a supervisor stopping us right after unmounting) would kill the process
    mid-close, leaving a shard that the next open must probe. SIGKILL still stops it."""
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)


def _write_missing_manifest(store: Store, stopping: threading.Event) -> None:
    """Write the store's manifest if it has no current one (dropped after a kill, or of an
    older format): the next mount reads it. A store opened from a current manifest is left
    alone, its shard still unloaded (read_manifest answers from the one it opened with).
    Nothing is written once ``stopping`` is set (the mount is ending)."""
    if stopping.wait(MANIFEST_DELAY):
        return
    try:
        if store.read_manifest() is not None:
            return
        meta = store.read_meta()
        if meta is not None and not meta.dirty:
            store.write_manifest(meta.generation)  # a no-op when the stored one is current
    except Exception as exc:  # reads fail one by one (EIO) with the same error
        logger.warning(
            "cannot write the manifest of %s: %s",
            store.location,
            exc,
            exc_info=logger.isEnabledFor(logging.DEBUG),
        )
