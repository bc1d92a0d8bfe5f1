"""The mount's lifecycle: start-up checks, daemonizing, the ready signal, unmounting.

``semfs mount`` checks the mountpoint, then (unless ``--foreground``) forks. The child
opens the store, builds the first tree and runs the FUSE loop in the foreground of its own
session; the parent waits on a pipe until the child's ``init()`` says the kernel is
connected (exit 0) or reports why it could not start (one line, exit 1), like sshfs.
Threads (the tree refresher, the ipc server that lets `semfs ingest` write through the
daemon) start in ``init()``, after the fork. libfuse turns SIGINT, SIGTERM and SIGHUP into
a clean unmount; the store is closed after the loop ends.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import logging.handlers
import os
import re
import select
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semfs.fusefs.mount.bindings import (
    FUSE,
    can_invalidate,
    fuse_exit,
    fuse_major_version,
    request_caller,
)
from semfs.fusefs.mount.kernelcache import LONG_TIMEOUT, SHORT_TIMEOUT, KernelCache
from semfs.fusefs.mount.ops import XATTR_PREFIX, SemfsOperations
from semfs.fusefs.view.pins import GenerationPins
from semfs.fusefs.view.reader import DocumentReader
from semfs.fusefs.view.refresh import DEFAULT_INTERVAL, TreeRefresher
from semfs.fusefs.view.searchdir import DEFAULT_NAME, SearchDirectories, SearchOptions
from semfs.fusefs.view.tree import InodeMap, Ownership
from semfs.ingest.errors import MountError, SemfsError, StoreOwnedError
from semfs.ingest.logs import MOUNT_LOG
from semfs.ingest.sources import SourceOptions, check_source
from semfs.ingest.store import (
    DEFAULT_COLLECTION,
    DEFAULT_K,
    QueryService,
    Store,
    default_store_path,
)
from semfs.ingest.store.catalog import mount_source
from semfs.ingest.store.check import require_counts
from semfs.ingest.store.manifest import collector_paused
from semfs.ingest.store.owner import StoreOwner

if TYPE_CHECKING:  # imported where used: the first listing needs neither (see MountDaemon.run)
    from semfs.ingest.embedding.embedder import Embedder
    from semfs.ingest.search import Hit, Searcher
    from semfs.ingest.watch import SourceWatcher

logger = logging.getLogger(__name__)

# Seconds after the mount answers before a store that had no current manifest gets one
# (listing its records holds the GIL a while, which would stall the first listings).
MANIFEST_DELAY = 1.0
# Seconds after the mount answers before the search model starts loading (torch holds the
# GIL for much of its seconds-long import): the first listings come first.
WARM_UP_DELAY = 0.2
# How long the parent waits for the child to mount, beyond the store's connect timeout.
START_GRACE = 60.0
Ready = Callable[[str | None], None]


@dataclass
class MountConfig:
    mountpoint: Path
    store_path: Path | None = None
    url: str | None = None
    api_key: str | None = None
    collection: str = DEFAULT_COLLECTION
    options: dict[str, str | bool] = field(default_factory=dict)
    foreground: bool = False
    log_file: Path | None = None
    connect_timeout: float = 10.0
    poll_interval: float = DEFAULT_INTERVAL
    search_dir: str = DEFAULT_NAME
    search: SearchOptions = field(default_factory=SearchOptions)  # defaults for queries
    watch: Path | None = None  # a source folder the daemon follows (--watch)
    views: bool = True  # text views beside converted documents (--no-views: originals only)
    source: SourceOptions = field(default_factory=SourceOptions)  # how it is read


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
    if "rw" in user:
        raise MountError("semfs mounts are read-only: drop -o rw")
    timeout = LONG_TIMEOUT if can_invalidate() else SHORT_TIMEOUT
    opts: dict[str, Any] = {
        "ro": True,
        "use_ino": True,
        "default_permissions": True,
        "fsname": mount_source(cfg.collection, cfg.url),  # `collections rm` looks for it
        "entry_timeout": timeout,
        "attr_timeout": timeout,
    }
    if sys.platform.startswith("linux"):
        opts["subtype"] = "semfs"  # the type shows as fuse.semfs in /proc/mounts
    elif sys.platform == "darwin":
        opts["volname"] = cfg.collection
    # We check emptiness ourselves; libfuse 2 also refuses unless told, libfuse 3 never does.
    if user.pop("nonempty", False) and fuse_major_version() == 2:
        opts["nonempty"] = True
    opts.update(user)
    return opts


def check_mountpoint(path: Path, allow_nonempty: bool = False) -> None:
    """Refuse, with one clear line, a mountpoint that cannot take a mount now."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise MountError(f"mountpoint {path} does not exist: create it first (mkdir -p)") from None
    except OSError as exc:
        if exc.errno == errno.ENOTCONN:
            raise MountError(
                f"{path} is a stale mount (Transport endpoint is not connected): "
                f"run `semfs umount {path}` (or fusermount -u {path}) first"
            ) from None
        raise MountError(f"cannot use mountpoint {path}: {exc.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise MountError(f"mountpoint {path} is not a directory")
    if is_stale(path):  # stat came from the kernel's cache
        raise MountError(
            f"{path} is a stale mount (Transport endpoint is not connected): "
            f"run `semfs umount {path}` (or fusermount -u {path}) first"
        )
    if os.path.ismount(path):
        raise MountError(f"{path} is already a mount point: `semfs umount {path}` first")
    if not allow_nonempty and any(os.scandir(path)):
        raise MountError(
            f"mountpoint {path} is not empty (use -o nonempty to mount over its contents)"
        )


def open_mount_store(cfg: MountConfig) -> StoreOwner:
    """The store the mount reads, owned by this process; never a proxy to another daemon."""
    try:
        return StoreOwner.open(
            cfg.store_path,
            url=cfg.url,
            collection=cfg.collection,
            api_key=cfg.api_key,
            timeout=cfg.connect_timeout,
            must_exist=cfg.watch is None,  # --watch creates it
        )
    except StoreOwnedError as exc:  # another daemon owns the shard: never stack on it
        if exc.is_mount:
            raise MountError(
                f"collection {cfg.collection!r} at {cfg.store_path} is already mounted by "
                f"{exc.holder}: `semfs umount` it first"
            ) from None
        if exc.by_watcher:  # one process follows and mounts: `semfs mount --watch`
            raise MountError(
                f"collection {cfg.collection!r} at {cfg.store_path} is followed by `semfs "
                f"ingest --watch` (pid {exc.pid}): stop it (Ctrl-C, or kill {exc.pid}), then "
                "`semfs mount MOUNTPOINT --watch SOURCE` follows the folder and mounts it"
            ) from None
        raise MountError(
            f"collection {cfg.collection!r} at {cfg.store_path} is held by {exc.holder}, "
            "which serves it to readers but not to a mount: stop it first"
        ) from None


class MountDaemon:
    """One mount: its store, tree refresher, ipc server and FUSE loop, in this process."""

    def __init__(self, cfg: MountConfig, ready: Ready | None = None) -> None:
        self.cfg = cfg
        self.ready = ready
        self.started = False
        self.error: str | None = None
        self._services: list[Callable[[], None]] = []  # stop functions, run in reverse
        self._began = time.monotonic()
        self._watcher: SourceWatcher | None = None

    def _follow(self, store: Store, embedder: Embedder, refresher: TreeRefresher) -> SourceWatcher:
        """The watcher of ``--watch``: it writes into the daemon's own store with the store's
        document model (torch for a torch store, loaded only when something must be embedded;
        queries may run on ONNX Runtime) and shows each batch at once by waking the
        refresher. It starts in init(), after the fork."""
        from semfs.ingest.syncstate import state_file
        from semfs.ingest.watch import SourceWatcher

        assert self.cfg.watch is not None
        return SourceWatcher(
            self.cfg.watch,
            store,
            self.cfg.source,
            embedder=embedder,
            state_file=state_file(self.cfg.store_path, self.cfg.url, self.cfg.collection),
            on_batch=lambda _report, _state: refresher.wake(),
        )

    def run(self) -> None:
        """Mount and serve until unmounted; raises MountError when the mount never came up."""
        self._began = time.monotonic()
        owner = open_mount_store(self.cfg)
        self._services.append(owner.close)
        store = owner.store
        try:
            embedder = documents = None
            if self.cfg.watch is not None:
                from semfs.ingest.embedding.embedder import load_embedder
                from semfs.ingest.origin import claim_source
                from semfs.ingest.pipeline import resolve_model

                model = resolve_model(store, self.cfg.source.model)  # another model: fail now
                # Another folder than the collection's: fail now, not once per batch.
                claim_source(store.read_meta(), self.cfg.watch, self.cfg.collection)
                documents = load_embedder(model)
                if not store.exists():
                    # The first pass creates the collection: mount (empty) at once, without
                    # waiting for the model to say its dimension.
                    embedder = documents
            refresher = TreeRefresher(
                store,
                InodeMap(),
                Ownership(os.getuid(), os.getgid()),
                interval=self.cfg.poll_interval,
                views=self.cfg.views,
            )
            # Not around the store's open: a server client's own threads run meanwhile (the
            # manifest's decode pauses the collector itself).
            with collector_paused():
                tree = refresher.load()
            # Never a silently empty mount of a damaged store. A manifest is only kept while
            # the shard is as its last clean close left it (else it has been dropped), so its
            # own count stands in for the shard's, which would wait for the shard to load.
            manifest = refresher.manifest
            chunks = None if manifest is None else sum(d.chunks for d in manifest.documents)
            require_counts(store, tree.files, chunks)
            # The store's model (or --watch's, for a new collection); loads nothing yet.
            searcher = _OnDemandSearcher(store, embedder)
            compactor = _Compactor(store)
            self._services.append(compactor.close)
            pins = GenerationPins(
                store,
                on_change=lambda: refresher.wake(force=True),
                on_settled=compactor.request,
            )
            refresher.hidden = pins.deleted
            self._services.append(pins.close)
            ops = SemfsOperations(
                tree,
                DocumentReader(store),
                on_init=lambda: self._started(owner, refresher, searcher, pins),
                kernel=KernelCache(),
                pins=pins,
            )
            searches = SearchDirectories(searcher.search, self.cfg.search_dir, self.cfg.search)
            searches.caller = _caller_uid
            # ops.tree is read per call: a search always runs against the tree shown now.
            ops.resolvers.append(lambda rel: searches.resolve(ops.tree, rel))
            # `semfs guide MOUNTPOINT` names the search folder this mount answers.
            ops.root_xattrs.append(lambda: {"search_dir": searches.folder})
            refresher.publish = ops.set_tree
            if self.cfg.watch is not None:
                # Its deletions wait for open files too.
                assert documents is not None
                self._watcher = self._follow(pins.guard(), documents, refresher)
                ops.root_xattrs.append(self._watcher.state.xattrs)
                searches.status_line = self._watcher.state.freshness_line
            logger.debug(
                "mounting %s (%d documents) at %s", store.location, tree.files, self.cfg.mountpoint
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

    def _started(
        self,
        owner: StoreOwner,
        refresher: TreeRefresher,
        searcher: _OnDemandSearcher,
        pins: GenerationPins,
    ) -> None:
        """FUSE init(): the kernel is connected. Start the threads, then report."""
        store = owner.store
        try:
            refresher.start()
            self._services.append(refresher.stop)
            # The ingest's deletions wait for the handles still reading what they delete.
            # A `semfs search` beside the mount embeds its query with our warm model.
            owner.serve(on_change=refresher.wake, served=pins.guard(), queries=searcher.queries())
            self._services.append(owner.stop_serving)
        except Exception as exc:
            self.error = f"cannot serve {store.location} to `semfs ingest`: {exc}"
            self.report(self.error)
            fuse_exit()
            return
        if self._watcher is not None:
            self._watcher.start()
            self._services.append(self._watcher.stop)
        self.started = True
        logger.info(
            "mounted %s at %s in %.0f ms",
            store.location,
            self.cfg.mountpoint,
            (time.monotonic() - self._began) * 1000,
        )
        self.report(None)
        # After the report, and each a moment later: both hold the GIL for long stretches
        # (imports, the model, listing records), which would slow the report and the first
        # listings. A search before then loads the model itself. An embedded shard opened
        # from its manifest loads on first need only (a read or a search): the engine holds
        # the GIL while it loads (0.2 s at 2k chunks, longer at 100k), which stalled every
        # callback when it loaded on a timer, and listings, stat, find and du never need it.
        threading.Thread(target=_warm_up, args=(searcher,), name="semfs-model", daemon=True).start()
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
    SIGTERM now (a supervisor stopping us right after `fusermount -u`) would kill the process
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


class _OnDemandSearcher:
    """The mount's :class:`semfs.ingest.search.Searcher`, made at first use: by the warm-up thread
    that init() starts, or by a search that comes first. Its module imports the engine and
    the excerpt picker, which the first listing does not need. Thread-safe."""

    def __init__(self, store: Store, embedder: Embedder | None) -> None:
        self._store = store
        self._embedder = embedder
        self._searcher: Searcher | None = None
        self._lock = threading.Lock()

    def get(self) -> Searcher:
        with self._lock:
            if self._searcher is None:
                from semfs.ingest.search import Searcher

                self._searcher = Searcher(self._store, embedder=self._embedder)
            return self._searcher

    def queries(self) -> QueryService:
        """Other processes' queries, embedded with this searcher's model (made on the first)."""
        from semfs.ingest.embedding.embedder import query_backend

        return QueryService(
            embed=lambda text: self.get().embedder.encode([text])[0],
            backend=lambda: query_backend(self.get().embedder),
        )

    def search(
        self,
        query: str,
        k: int = DEFAULT_K,
        mode: str = "hybrid",
        under: str | None = None,
        min_score: float | None = None,
        committed: Callable[[str, int], bool] | None = None,
        more: bool = False,
    ) -> list[Hit]:
        return self.get().search(query, k, mode, under, min_score, committed, more)


def _warm_up(on_demand: _OnDemandSearcher) -> None:
    time.sleep(WARM_UP_DELAY)
    started = time.monotonic()
    try:
        searcher = on_demand.get()
    except Exception as exc:  # searches fail one by one (EIO) with the same error
        logger.warning("cannot prepare searches: %s", exc)
        return
    try:
        searcher.warm_up()
    except Exception as exc:
        # Searches retry the load and fail one by one (EIO) if it cannot be done.
        logger.warning(
            "cannot load the embedding model %s: %s",
            searcher.embedder.name,
            exc,
            exc_info=logger.isEnabledFor(logging.DEBUG),
        )
        return
    logger.info(
        "embedding model %s ready in %.1f s", searcher.embedder.name, time.monotonic() - started
    )


# -- background mode ---------------------------------------------------------------------


class _PipeReady:
    """The child's side of the start-up pipe: one line, ``ok`` or ``error: ...``, then EOF.

    On ``ok`` the child also lets go of the terminal: stdin from /dev/null, stdout and
    stderr (where libfuse writes) to the log file, else /dev/null.
    """

    def __init__(self, fd: int, log_file: Path | None) -> None:
        self.fd = fd
        self.log_file = log_file

    def __call__(self, error: str | None) -> None:
        line = "ok" if error is None else "error: " + " ".join(error.split())
        try:
            os.write(self.fd, line.encode("utf-8", "replace") + b"\n")
        finally:
            os.close(self.fd)
        if error is None:
            self._detach_stdio()

    def _detach_stdio(self) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        devnull = os.open(os.devnull, os.O_RDWR)
        out = devnull
        if self.log_file is not None:
            with contextlib.suppress(OSError):
                out = os.open(self.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)


def _absolute(cfg: MountConfig) -> MountConfig:
    """The config with every path absolute: the daemon runs from /, like any daemon."""
    cfg.mountpoint = cfg.mountpoint.absolute()
    if cfg.url is None:
        cfg.store_path = (cfg.store_path or default_store_path()).expanduser().absolute()
    if cfg.log_file is not None:
        cfg.log_file = cfg.log_file.absolute()
    if cfg.watch is not None:
        cfg.watch = cfg.watch.absolute()
    return cfg


def mount(cfg: MountConfig) -> None:
    """Mount as configured: return once the mount answers (background) or is unmounted (-f)."""
    cfg = _absolute(cfg)
    check_mountpoint(cfg.mountpoint, allow_nonempty=bool(cfg.options.get("nonempty")))
    fuse_options(cfg)  # option errors now, not in the child
    if cfg.watch is not None:
        check_source(cfg.watch)
    if cfg.foreground:
        MountDaemon(cfg).run()
        return
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; tests see it through the mount
        os.close(read_fd)
        os._exit(_child(cfg, write_fd))
    os.close(write_fd)
    _await_child(pid, read_fd, cfg.connect_timeout + START_GRACE)


def _child(cfg: MountConfig, write_fd: int) -> int:
    ready = _PipeReady(write_fd, cfg.log_file)
    daemon = MountDaemon(cfg, ready)
    try:
        os.setsid()  # out of the shell's process group: its Ctrl-C is not for us
        os.chdir("/")
        daemon.run()
        return 0
    except BaseException as exc:
        message = str(exc) if isinstance(exc, SemfsError) else f"{type(exc).__name__}: {exc}"
        # The parent prints the message; the log (when it is a file) keeps it too.
        level = logging.ERROR if cfg.log_file is not None else logging.DEBUG
        logger.log(level, "%s", message, exc_info=logger.isEnabledFor(logging.DEBUG))
        with contextlib.suppress(OSError):
            daemon.report(message)
        return 1
    finally:
        logging.shutdown()


def _await_child(pid: int, fd: int, timeout: float) -> None:
    """Wait for the child's start-up line; raise MountError with its reason on failure."""
    deadline = time.monotonic() + timeout
    data = b""
    try:
        while b"\n" not in data:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
                raise MountError(f"the mount did not come up within {timeout:.0f} s; stopped it")
            if not select.select([fd], [], [], remaining)[0]:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    except KeyboardInterrupt:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
        raise
    finally:
        os.close(fd)
    line = data.decode("utf-8", "replace").strip()
    if line == "ok":
        return
    if line.startswith("error: "):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        raise MountError(line.removeprefix("error: "))
    _, status = os.waitpid(pid, 0)
    raise MountError(
        f"the mount daemon exited (status {os.waitstatus_to_exitcode(status)}) before the "
        "mount was ready; run with --foreground or --log-file to see why"
    )


# -- unmounting --------------------------------------------------------------------------


def is_stale(path: Path) -> bool:
    """A FUSE mount whose daemon is gone: stat or opening the root fails with ENOTCONN.

    stat alone is not enough: the kernel answers it from its attribute cache (for minutes
    on a semfs mount), while opening a directory always asks the daemon.
    """
    try:
        os.stat(path)
        if os.path.ismount(path):
            os.close(os.open(path, os.O_RDONLY | os.O_DIRECTORY))
    except OSError as exc:
        return exc.errno == errno.ENOTCONN
    return False


def force_unmount(mountpoint: Path) -> None:
    """Unmount whatever is at ``mountpoint`` by every means, quietly: each tool, then lazily,
    then ``umount -l``. For harnesses (tests, benchmarks) that must never leave a mount behind."""

    def busy() -> bool:
        return os.path.ismount(mountpoint) or is_stale(mountpoint)

    for lazy in (False, True):
        for command in unmount_commands(mountpoint, lazy):
            if not busy():
                return
            with contextlib.suppress(OSError):
                subprocess.run(command, capture_output=True, check=False)
    if busy():
        with contextlib.suppress(OSError):
            subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True, check=False)


def unmount_commands(mountpoint: Path, lazy: bool = False) -> list[list[str]]:
    """Commands to try in order: fusermount3/fusermount on Linux, umount elsewhere."""
    import shutil  # unmounting only: not on a mount's way up

    mnt = str(mountpoint)
    if sys.platform == "darwin":
        return [["diskutil", "unmount", "force", mnt]] if lazy else [["umount", mnt]]
    commands = [
        [exe, "-u", *(["-z"] if lazy else []), mnt]
        for exe in filter(None, (shutil.which("fusermount3"), shutil.which("fusermount")))
    ]
    return commands or [["umount", *(["-l"] if lazy else []), mnt]]


def daemon_pid(mountpoint: Path) -> int | None:
    """The pid of the semfs daemon serving ``mountpoint``, as its root xattr says."""
    getxattr = getattr(os, "getxattr", None)  # Linux only
    if getxattr is None:
        return None
    try:
        return int(getxattr(mountpoint, XATTR_PREFIX + "pid"))
    except (OSError, ValueError):
        return None


def mount_search_dir(mountpoint: Path) -> str | None:
    """The search folder the semfs mount at ``mountpoint`` answers, as its root xattr says
    (None from a mount that does not say: an older daemon, or no xattrs here)."""
    getxattr = getattr(os, "getxattr", None)  # Linux only
    if getxattr is None:
        return None
    try:
        return getxattr(mountpoint, XATTR_PREFIX + "search_dir").decode()
    except (OSError, UnicodeDecodeError):
        return None


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return fields[0] != "Z"  # a zombie has exited
    return True


# What the kernel calls a semfs mount: FUSE with our subtype (see fuse_options).
FSTYPE = "fuse.semfs"
MOUNTINFO = Path("/proc/self/mountinfo")
# How long `umount --lazy` waits before saying the daemon is still serving open files.
LAZY_WAIT = 1.0


def _unescape_mountinfo(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_fstype(path: Path, mountinfo: Path = MOUNTINFO) -> str | None:
    """The filesystem type mounted at ``path`` (the topmost mount), None when none is.

    Raises FileNotFoundError where there is no mountinfo (not Linux).
    """
    target = os.path.realpath(path) if not is_stale(path) else os.path.abspath(path)
    fstype = None
    for line in mountinfo.read_text(errors="surrogateescape").splitlines():
        fields = line.split(" ")
        if len(fields) < 7 or "-" not in fields[6:]:
            continue
        if _unescape_mountinfo(fields[4]) == target:
            fstype = fields[fields.index("-", 6) + 1]  # later lines are mounted on top
    return fstype


def check_semfs_mount(mnt: Path) -> None:
    """Refuse, with one line, a mountpoint that is not a semfs mount."""
    try:
        fstype = mount_fstype(mnt)
    except FileNotFoundError:  # no mountinfo (macOS): our root answers the pid xattr
        if is_stale(mnt) or daemon_pid(mnt) is not None:
            return
        fstype = "another" if os.path.ismount(mnt) else None
    if fstype is None:
        raise MountError(f"{mnt} is not mounted")
    if fstype != FSTYPE:
        raise MountError(
            f"{mnt} is a {fstype} mount, not semfs: not unmounting it (--force to do it anyway)"
        )


def unmount(
    mountpoint: Path, lazy: bool = False, force: bool = False, wait: float = 10.0
) -> str | None:
    """Unmount a semfs mount, then wait (up to ``wait`` s) for its daemon to exit.

    Refuses anything but a semfs mount unless ``force``. Returns a line to tell the user
    when the daemon is still running afterwards (a lazy detach leaves it serving the files
    still open), else None.
    """
    mnt = mountpoint.absolute()
    stale = is_stale(mnt)
    if force:
        if not stale and not os.path.ismount(mnt):
            raise MountError(f"{mnt} is not mounted")
    else:
        check_semfs_mount(mnt)
    pid = None if stale else daemon_pid(mnt)
    errors = []
    for command in unmount_commands(mnt, lazy):
        try:
            proc = subprocess.run(command, capture_output=True, text=True, check=False)
        except OSError as exc:
            errors.append(f"{command[0]}: {exc.strerror}")
            continue
        if proc.returncode == 0:
            break
        errors.append((proc.stderr or proc.stdout).strip() or f"{command[0]} failed")
    else:
        raise MountError(f"cannot unmount {mnt}: {errors[-1] if errors else 'no unmount tool'}")
    if pid is None:
        return None
    # A lazy detach returns at once and the daemon serves open files until they close:
    # waiting the full time would only hide that.
    deadline = time.monotonic() + (min(wait, LAZY_WAIT) if lazy else wait)
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not process_alive(pid):
        return None
    if lazy:
        return (
            f"detached {mnt}; its daemon (pid {pid}) keeps serving the files still open "
            "there and exits when the last one is closed"
        )
    return f"unmounted {mnt}, but its daemon (pid {pid}) is still running after {wait:.0f} s"


# A log file is cut at this size and kept with one older part (``.1``): a mount that runs for
# months logs a line per store change, and a bad store can log one per read.
LOG_MAX_BYTES = 4 * 1024 * 1024


class _OwnerOnlyLog(logging.handlers.RotatingFileHandler):
    """A bounded log file (:data:`LOG_MAX_BYTES`, one older part) created 0600 whatever the
    umask, its rotated parts too: it quotes paths, queries and errors."""

    def _open(self) -> Any:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)


def default_log_file(cfg_store: Path | None, url: str | None, collection: str) -> Path | None:
    """Where a background mount logs without --log-file: ``STORE/COLLECTION/mount.log`` for
    an embedded store whose collection folder exists (owner-only, like the store); None
    for a server, whose collection has no folder here."""
    if url is not None:
        return None
    folder = (cfg_store or default_store_path()).expanduser() / collection
    return folder / MOUNT_LOG if folder.is_dir() else None


def configure_logging(log_file: Path | None, verbose: int, foreground: bool = False) -> None:
    """Send the log to ``log_file`` only (INFO by default there), else leave it on stderr,
    where a foreground mount (-f) shows semfs's own INFO lines too (mounted, unmounted, a
    bad search parameter): its help promises a log there, and -f printed nothing without -v.
    """
    if log_file is None:
        if foreground and verbose <= 0:
            # semfs's loggers only: libraries' INFO (an HTTP line per request) stays out.
            logging.getLogger("semfs").setLevel(logging.INFO)
        return
    root = logging.getLogger()
    for handler in root.handlers[:]:
        root.removeHandler(handler)
    handler = _OwnerOnlyLog(log_file, maxBytes=LOG_MAX_BYTES, backupCount=1)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    )
    root.addHandler(handler)
    if verbose <= 0:
        root.setLevel(logging.INFO)
