"""The collections of an embedded store folder (:class:`EdgeCatalog`): its sub-folders that
hold a shard. Removing or renaming one takes the collection's lock
(:mod:`.shardlock`), so a collection a process has open is refused, naming it.
A removal is a rename to ``.removing-NAME-PID`` and then a delete; one that a crash (kill -9)
cut short is finished by the next command that opens the store (:func:`finish_removals`)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from pathlib import Path

from semfs.ingest.errors import SemfsError
from semfs.ingest.store import check_collection_name
from semfs.ingest.store.address import check_embedded_name
from semfs.ingest.store.catalog import Catalog
from semfs.ingest.store.edge.durable import fsync_dir
from semfs.ingest.store.edge.shardlock import locked
from semfs.ingest.store.edge.store import collection_dir

logger = logging.getLogger(__name__)

REMOVING = ".removing-"


def finish_removals(store_dir: Path) -> list[str]:
    """Delete what removals cut short left in ``store_dir`` (``.removing-NAME-PID`` whose
    process is gone: it still holds the removed collection's text); the names deleted. A
    removal still under way (its process alive) is left to finish; errors are logged."""
    done: list[str] = []
    try:
        entries = [e for e in os.scandir(store_dir) if e.name.startswith(REMOVING)]
    except OSError:
        return done
    for entry in entries:
        pid = entry.name.rsplit("-", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        if os.path.lexists(entry.path):
            logger.warning("cannot finish removing %s", entry.path)
        else:
            logger.info("finished removing %s (a removal cut short)", entry.path)
            done.append(entry.name)
    return done


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's: alive
    return True


def _valid_name(name: str) -> bool:
    try:
        check_collection_name(name)
    except SemfsError:
        return False
    return True


class EdgeCatalog(Catalog):
    """The collections of an embedded store folder: its sub-folders that hold a shard."""

    def __init__(self, store_dir: Path) -> None:
        self.store_dir = store_dir

    @property
    def location(self) -> str:
        return str(self.store_dir)

    def names(self) -> list[str]:
        try:
            entries = sorted(os.scandir(self.store_dir), key=lambda e: e.name)
        except FileNotFoundError:
            return []
        return [
            e.name for e in entries if _valid_name(e.name) and (Path(e.path) / "shard").is_dir()
        ]

    def _locked(self, name: str) -> contextlib.AbstractContextManager[None]:
        """The collection's lock for a ``with`` block, or StoreLockedError naming its owner."""
        self.require(name)
        return locked(
            collection_dir(self.store_dir, name),
            lambda owner: (
                f"collection {name!r} is in use by {owner}: stop it first "
                "(semfs umount, or Ctrl-C the watcher or ingest)"
            ),
        )

    def remove(self, name: str) -> None:
        with self._locked(name):
            # Aside first, in one rename: a crash midway leaves no half-deleted collection.
            doomed = self.store_dir / f"{REMOVING}{name}-{os.getpid()}"
            os.rename(collection_dir(self.store_dir, name), doomed)
            fsync_dir(self.store_dir)
            shutil.rmtree(doomed)

    def rename(self, old: str, new: str) -> None:
        check_embedded_name(new)  # not STORE/servers/, the server collections' files
        self.check_new_name(new)
        with self._locked(old):
            target = collection_dir(self.store_dir, new)
            if target.exists():  # a folder without a shard (a leftover): not ours to replace
                raise SemfsError(f"{target} already exists: remove it or choose another name")
            os.rename(collection_dir(self.store_dir, old), target)
            fsync_dir(self.store_dir)
