"""The embedded store's tree manifest: a file beside the shard, ``COLLECTION/manifest.json.gz``.

A file, not a point, so that a mount reads its tree (and the meta) without the engine
loading the shard, which takes ~0.1 s for 2k chunks and seconds at 100k (and holds the GIL
meanwhile). Rules (see :mod:`semfs.ingest.store.manifest` for the format):

* Every write first deletes the file (:meth:`ManifestFile.drop`, the folder synced), and
  ingest writes a new one last (:meth:`ManifestFile.write`, atomically).
* A manifest built while a write of this process was under way is not written: it could
  describe records that write changed.
* A file that cannot be read or decoded, or that says the store was dirty, reads as none:
  the reader lists the records instead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from semfs.ingest.errors import StoreUnavailableError
from semfs.ingest.store.edge.durable import fsync_dir, replace_file
from semfs.ingest.store.manifest import Manifest
from semfs.ingest.store.schema import StoreMeta

logger = logging.getLogger(__name__)

# The name is format 4's (one gzip stream), kept so that an upgrade replaces that file rather
# than leaving it beside the new one; the bytes are format 5's (semfs.ingest.store.manifest).
MANIFEST_NAME = "manifest.json.gz"


class ManifestFile:
    """The manifest file of the collection in ``coll_dir``, for the process that owns it."""

    def __init__(self, coll_dir: Path) -> None:
        self.coll_dir = coll_dir
        self.path = coll_dir / MANIFEST_NAME
        # Guards the file and the three fields below.
        self._lock = threading.Lock()
        self._writes = 0  # writes started by this process: a manifest built across one is stale
        self._on_disk = True  # unknown until the first write deletes it
        # The meta of the manifest on disk, if known (it was read at open, or written here).
        self.on_disk_meta: StoreMeta | None = None

    def read(self) -> Manifest | None:
        """The manifest on disk, unless there is none, it cannot be used, or its store was
        dirty. Not checked against the store's meta: the caller does that when it can."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.warning("cannot read %s: %s", self.path, exc)
            return None
        manifest = Manifest.decode(data, str(self.path))
        return None if manifest is None or manifest.meta.dirty else manifest

    @property
    def may_exist(self) -> bool:
        """False once this process has deleted the file (until it writes one)."""
        return self._on_disk

    def drop(self) -> None:
        """Before every write: no manifest may describe records this write changes."""
        with self._lock:
            self._writes += 1
            self.on_disk_meta = None
            if not self._on_disk:
                return
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise StoreUnavailableError(f"cannot remove {self.path}: {exc}") from exc
            else:
                fsync_dir(self.coll_dir)
            self._on_disk = False

    def write(self, meta: StoreMeta, build: Callable[[], bytes]) -> bool:
        """Replace the file with ``build()``, the manifest of ``meta`` (a clean meta), unless
        the file on disk is that one already or a write started meanwhile. True when the
        file on disk is now the manifest of ``meta``."""
        with self._lock:
            if self.on_disk_meta == meta:
                return True  # the file on disk is current
            writes = self._writes
        data = build()
        with self._lock:
            if self._writes != writes:
                return False  # something was written meanwhile: this one could be stale
            try:
                replace_file(self.path, data)
            except OSError as exc:  # the mount falls back to listing the records
                logger.warning("cannot write %s: %s", self.path, exc)
                return False
            self._on_disk, self.on_disk_meta = True, meta
            return True
