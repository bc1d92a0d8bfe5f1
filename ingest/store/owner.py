"""Owning a store: open it for this process, and serve other processes' writes to it.

A long-running reader (the ``semfs mount`` daemon, ``semfs mcp``, a watcher) that opens the
embedded store holds Qdrant Edge's lock for as long as it runs, so an ingest started beside
it could not write. :class:`StoreOwner` is the one place that handles this; reuse it rather
than looking at the store's class. A front end does not call it directly but through
:class:`semfs.ingest.resident.ResidentStore`, which also goes through the owner's socket when
another process owns the store, and serves searches::

    from semfs.ingest.store.owner import StoreOwner

    owner = StoreOwner.open(address)  # StoreOwnedError when another process owns it
    try:
        owner.serve(on_change=refresh)          # start serving writers (after any fork)
        ...  # read (and write) through owner.store
    finally:
        owner.close()                           # stop serving, then close the store

Rules a caller may rely on:

* ``open`` never returns a proxy: when another process already owns and serves the store,
  it raises :class:`StoreOwnedError`, whose ``pid`` and ``holder`` say who (stack nothing on
  a live owner).
* ``serve`` starts threads (the socket's accept loop): call it after daemonizing. It is a
  no-op for a server backend, which takes every writer itself. ``on_change`` runs in a
  server thread after another process committed a change; keep it short (wake a refresher).
* ``stop_serving`` ends the service and keeps the store open (stop it before whatever
  ``on_change`` wakes); ``close`` is idempotent and stops the service before closing the store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from semfs.ingest.errors import StoreOwnedError
from semfs.ingest.store import OwnerLink, QueryService, Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import missing_collection, open_store
from semfs.ingest.store.ownerkind import owner_kind

logger = logging.getLogger(__name__)


def holder(owner: OwnerLink) -> tuple[str, str]:
    """How the process that owns a store describes itself (the command it runs, as its hello
    said), and what kind it is; just the pid when it said no command."""
    if not owner.command:
        return f"pid {owner.pid}", ""
    return f"pid {owner.pid} ({owner.command})", owner_kind(owner.command)


class StoreOwner:
    """This process's store, and the service that lets other processes write to it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._stop: Callable[[], None] | None = None
        self._closed = False

    @classmethod
    def open(cls, address: CollectionAddress, must_exist: bool = True) -> StoreOwner:
        """Open the collection owned by this process; with ``must_exist``, ingested already."""
        store = open_store(address)
        link = store.owner_link()
        if link is not None:
            who, kind = holder(link)
            store.close()
            raise StoreOwnedError(
                f"collection {address.collection!r} at {address.where} is owned by {who}",
                link.pid,
                who,
                kind,
            )
        if must_exist and not store.exists():
            store.close()
            raise missing_collection(address)
        return cls(store)

    @property
    def serving(self) -> bool:
        """Whether other processes can write through this one now."""
        return self._stop is not None

    def serve(
        self,
        on_change: Callable[[], None] | None = None,
        served: Store | None = None,
        queries: QueryService | None = None,
        embeds: bool = False,
        held: Callable[[], Collection[str]] | None = None,
    ) -> None:
        """Start serving writers (embedded store); raises SemfsError when it cannot.

        ``served`` is what their calls reach, a view of ``store`` (default: the store itself;
        the mount passes one that defers deletions an open file still needs). ``queries``:
        embed other processes' search queries with this process's model (a `semfs search`
        then needs no model of its own). ``embeds``: this process embeds the chunks they
        write (they leave the dense pass to it). ``held()``: the files our writable mount
        holds open for writing (an ingest beside it leaves them as they are until closed).
        """
        if self._stop is None and not self._closed:
            self._stop = self.store.serve_writers(on_change, served, queries, embeds, held)

    def stop_serving(self) -> None:
        """Stop taking writes from other processes (waits for calls under way); keep the store."""
        stop, self._stop = self._stop, None
        if stop is not None:
            stop()

    def close(self) -> None:
        """Stop serving, then close the store. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        try:
            self.stop_serving()
        finally:
            self.store.close()

    def __enter__(self) -> StoreOwner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
