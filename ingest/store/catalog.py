"""The collections of one store: list, remove and rename them (``semfs collections``).

:class:`Catalog` is the interface; :func:`semfs.ingest.store.backends.open_catalog` picks the
implementation (the embedded store's folders, or a Qdrant server's collections).

Rules a caller may rely on:

* :meth:`Catalog.names` lists only semfs collections (sorted): on the embedded store the
  folders holding a shard, on a server the collections holding a semfs meta point. Other
  collections of a shared server are never listed, removed or renamed.
* :meth:`Catalog.remove` and :meth:`Catalog.rename` refuse, with one line saying who, a
  collection a process owns: on the embedded store any process holding its lock (a mount,
  ``semfs mcp``, a watcher, an ingest under way: the message quotes its command line); on a
  server a semfs mount of that collection of that server on this machine
  (:func:`mounted_at`). A watcher of a server collection is the caller's to check (its
  state file is the pipeline's, not the store layer's).
* A missing name is :class:`semfs.ingest.errors.StoreNotFoundError` naming the collections
  there are; a rename onto an existing name is refused, nothing changed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

from semfs.ingest import portable
from semfs.ingest.errors import SemfsError, StoreLockedError, StoreNotFoundError
from semfs.ingest.store import check_collection_name
from semfs.ingest.store.address import CollectionAddress


def mounted_at(source: str, table: Path | None = None) -> list[str]:
    """Mountpoints of the semfs mounts called ``source``
    (:attr:`~semfs.ingest.store.address.CollectionAddress.mount_source`) here; empty
    where the system's list of mounts cannot be read."""
    found = portable.mounts(table) or []
    ours = [m for m in found if m.fstype == portable.FSTYPE]
    return [m.mountpoint for m in ours if source in _each(m.source)]


def _each(source: str) -> list[str]:
    """The collections' sources in a mount's: a mount of several is ``semfs:docs+code`` (a
    collection's name has no ``+``), each collection's own is ``semfs:docs``, ``semfs:code``."""
    names, at, where = source.partition("@")
    prefix, colon, listed = names.partition(":")
    return [f"{prefix}{colon}{name}{at}{where}" for name in listed.split("+")]


def missing(name: str, where: str, names: list[str]) -> StoreNotFoundError:
    """The one-line error for a collection that is not there, naming those that are."""
    if not names:
        return StoreNotFoundError(
            f"no collection {name!r} at {where} (it has none yet): run `semfs ingest DIR` first"
        )
    if name in names:  # made, with nothing committed yet: a first sync is at work, or was cut
        return StoreNotFoundError(
            f"collection {name!r} at {where} holds no documents yet: its first ingest (a "
            "mount's or a watcher's --watch, or `semfs ingest`) has not committed a batch; "
            "ask again in a moment, or ingest into it"
        )
    return StoreNotFoundError(
        f"no collection {name!r} at {where}; its collections: {', '.join(names)}. "
        f"Pick one with -c NAME, or make {name!r} with `semfs ingest DIR -c {name}`"
    )


def refuse_if_mounted(address: CollectionAddress) -> None:
    """A mount of a server collection holds no lock: the kernel's list of mounts tells.
    (The embedded store's lock covers its mounts, with the owner's command line.)"""
    mounts = mounted_at(address.mount_source)
    if mounts:
        raise StoreLockedError(
            f"collection {address.collection!r} is mounted at {', '.join(mounts)}: "
            f"run `semfs umount {mounts[0]}` first"
        )


class Catalog(ABC):
    """The collections of one embedded store folder or one Qdrant server."""

    @property
    @abstractmethod
    def location(self) -> str:
        """The store folder or the server URL, for messages."""

    @abstractmethod
    def names(self) -> list[str]:
        """The semfs collections there, sorted."""

    @abstractmethod
    def remove(self, name: str) -> None:
        """Delete the collection and everything it holds."""

    @abstractmethod
    def rename(self, old: str, new: str) -> None:
        """Give the collection another name (its documents, vectors and meta unchanged)."""

    def close(self) -> None:  # noqa: B027 - optional
        """Release any connection."""

    def require(self, name: str) -> None:
        """Raise :func:`missing` unless ``name`` is a collection here."""
        if name not in self.names():
            raise missing(name, self.location, self.names())

    def check_new_name(self, new: str) -> None:
        check_collection_name(new)
        if new in self.names():
            raise SemfsError(f"collection {new!r} already exists at {self.location}")

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
