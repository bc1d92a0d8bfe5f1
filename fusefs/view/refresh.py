"""Keeping a mounted tree in step with its store while `semfs ingest` changes it.

The store's meta point carries a generation counter and a ``dirty`` flag that every ingest
run updates, so a change costs one point read to notice. The refresher reads it every
``interval`` seconds (a Qdrant server can be written by anyone, so polling is the only
signal) and at once when woken (the embedded daemon's ipc server calls :meth:`wake` after
an ingest wrote through it). A change means one ``list_documents`` scroll and a new
:class:`Tree`, published only when the records differ.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Set

from semfs.fusefs.view.tree import FileIds, InodeMap, Tree
from semfs.ingest.store import StoreReader
from semfs.ingest.store.manifest import Manifest
from semfs.ingest.store.schema import DirectoryRecord, DocumentRecord, StoreMeta

logger = logging.getLogger(__name__)

DEFAULT_INTERVAL = 1.0


def _warm(tree: Tree | None) -> None:
    try:
        if tree is not None:
            tree.warm()
    except ValueError as exc:  # a column that cannot be decoded: each file's lookup says so
        logger.warning("cannot read the manifest's records: %s", exc)


def _meta_key(meta: StoreMeta | None) -> tuple[int, bool] | None:
    return None if meta is None else (meta.generation, meta.dirty)


class TreeRefresher:
    """Builds trees from ``store`` and hands each new one to ``publish``.

    :meth:`check` is one poll, callable from any thread (calls are serialized); :meth:`start`
    runs it in a daemon thread every ``interval`` seconds until :meth:`stop`.
    """

    def __init__(
        self,
        store: StoreReader,
        inodes: InodeMap,
        ids: FileIds,
        publish: Callable[[Tree], None] | None = None,
        interval: float = DEFAULT_INTERVAL,
        hidden: Callable[[], Set[str]] | None = None,
        views: bool = True,
    ) -> None:
        self.store = store
        # Paths a tree leaves out though the store still lists them (deleted documents that
        # open handles still read: semfs.fusefs.view.pins).
        self.hidden = hidden
        self.views = views  # text views beside their originals (semfs mount --no-views: not)
        self.inodes = inodes
        self.ids = ids
        self.publish = publish
        self.interval = interval
        self.tree: Tree | None = None
        self._records: list[DocumentRecord] | None = None
        self._folders: list[DirectoryRecord] | None = None
        self._seen: tuple[int, bool] | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False
        self._force = False
        # The manifest the first tree came from, if it did (None: from the records).
        self.manifest: Manifest | None = None

    @classmethod
    def as_mounted(
        cls,
        store: StoreReader,
        interval: float = DEFAULT_INTERVAL,
        views: bool = True,
        inodes: InodeMap | None = None,
    ) -> TreeRefresher:
        """The refresher of a tree that this process serves (a mount, the MCP tools): its
        files are the user's who runs it; ``inodes``: shared by several collections' trees."""
        return cls(
            store,
            inodes if inodes is not None else InodeMap(),
            FileIds(os.getuid(), os.getgid()),
            interval=interval,
            views=views,
        )

    def load(self) -> Tree:
        """The first tree, built now (store errors propagate: the mount cannot start).

        From the store's manifest when it has a current one (one read, see
        :mod:`semfs.ingest.store.manifest`; :attr:`manifest` keeps it), else by listing the records.
        A tree from the manifest makes its records as it shows them (:meth:`Tree.from_manifest`);
        the first check that lists the store compares against all of them.
        """
        manifest = self.store.read_manifest()
        if manifest is None:
            self.check(force=True)
            assert self.tree is not None
            return self.tree
        self.manifest = manifest
        with self._lock:
            tree = Tree.from_manifest(manifest, self.inodes, self.ids, self.views)
            self._records, self._folders, self.tree = None, list(manifest.directories), tree
            self._seen = _meta_key(manifest.meta)
        if self.publish is not None:
            self.publish(tree)
        return tree

    def check(self, force: bool = False) -> bool:
        """Rebuild if the store changed since the last check; True when a new tree was published.

        While an ingest run is under way (``dirty``), documents are committed one by one
        without a meta change, so every check lists the documents then.
        """
        with self._lock:
            meta = self.store.read_meta()
            key = _meta_key(meta)
            if not force and key == self._seen and not (meta is not None and meta.dirty):
                return False
            records = sorted(self.store.list_documents(), key=lambda r: r.path)
            hidden = self.hidden() if self.hidden is not None else ()
            if hidden:
                records = [r for r in records if r.path not in hidden]
            folders = sorted(self.store.list_directories(), key=lambda r: r.path)
            self._seen = key
            if self._records is None and self.manifest is not None and self.tree is not None:
                self._records = list(self.manifest.documents)  # what the first tree shows
            if records == self._records and folders == self._folders:
                return False
            tree = Tree.build(records, self.inodes, self.ids, folders, self.views)
            if self._records is not None:
                logger.info(
                    "store changed (generation %s): now %d documents, %d bytes",
                    key[0] if key else "-",
                    tree.files,
                    tree.total_bytes,
                )
            self._records, self._folders, self.tree = records, folders, tree
        if self.publish is not None:
            self.publish(tree)
        return True

    def wake(self, force: bool = False) -> None:
        """Check now rather than at the next interval (the store says it changed).

        ``force`` lists the documents even when the store's generation did not move (a
        deletion the daemon deferred until a file was closed).
        """
        self._force |= force
        self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="semfs-refresh", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(self.interval + 5.0)

    def _run(self) -> None:
        warm = True
        while True:
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            if warm:
                # A tree from the manifest made its first listings without its records; make
                # the rest now, a poll after the mount came up (not in the first ls's way),
                # so that a find or grep does not make them file by file.
                warm = False
                _warm(self.tree)
            force, self._force = self._force, False
            try:
                self.check(force=force)
            except Exception as exc:
                # Keep showing the last tree; say so once per outage, not every second.
                if not self._failing:
                    logger.warning(
                        "cannot check the store for changes: %s",
                        exc,
                        exc_info=logger.isEnabledFor(logging.DEBUG),
                    )
                self._failing = True
            else:
                if self._failing:
                    logger.info("the store answers again")
                self._failing = False
