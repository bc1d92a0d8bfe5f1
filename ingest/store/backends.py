"""Which class serves a collection: the one place that maps a backend name to a factory.

:mod:`semfs.ingest.store` declares the interface and imports no implementation; this module is the
composition root that picks one (like ratarmount's ``ARCHIVE_BACKENDS`` table):

* ``embedded``: :class:`semfs.ingest.store.edge.store.EdgeStore`, Qdrant Edge in this process, or,
  when a process already owns the shard and serves it (``semfs mount``), an
  :class:`semfs.ingest.store.ipc.client.RemoteStore` talking to that owner.
* ``server``: :class:`semfs.ingest.store.server_store.ServerStore`, qdrant-client against ``--url``
  (a ``file:`` URL opens qdrant-client's local mode: the stand-in server of the tests).

To add a backend: write a :class:`~semfs.ingest.store.Store` subclass in its own module (run the
contract tests in ``tests/contract/test_store_contract.py`` against it), add a factory below that
imports it lazily, and add its name to :data:`BACKENDS` and :func:`backend_for`.
Implementations are imported inside the factories: qdrant_client costs ~1 s to import and
the embedded path must not pay for it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from semfs.ingest.errors import SemfsError, StoreNotFoundError
from semfs.ingest.store import DEFAULT_COLLECTION, Store, check_collection_name, default_store_path
from semfs.ingest.store.catalog import Catalog, missing
from semfs.ingest.store.schema import check_schema


@dataclass(frozen=True)
class StoreAddress:
    """Where a collection is: everything a backend factory may need."""

    collection: str = DEFAULT_COLLECTION
    path: Path | None = None  # the embedded store's folder; None: default_store_path()
    url: str | None = None  # a Qdrant server, or file:PATH for qdrant-client's local mode
    api_key: str | None = None
    timeout: float = 10.0  # seconds to reach a server


def _embedded(address: StoreAddress) -> Store:
    from semfs.ingest.store.edge.catalog import finish_removals
    from semfs.ingest.store.edge.store import EdgeStore, collection_dir
    from semfs.ingest.store.ipc.wire import SOCKET_NAME

    store_dir = address.path or default_store_path()
    coll_dir = collection_dir(store_dir, address.collection)
    finish_removals(store_dir)
    # No socket, no owner: skip importing the ipc client (a mount's start-up pays for it).
    if not (coll_dir / SOCKET_NAME).exists():
        return EdgeStore(store_dir, address.collection)
    from semfs.ingest.store.ipc.client import connect_daemon

    # Ask the owner first: even a failed second load of a live shard rewrites its files.
    remote = connect_daemon(coll_dir, address.collection)
    if remote is not None:
        return remote
    return EdgeStore(store_dir, address.collection)


def _server(address: StoreAddress) -> Store:
    from semfs.ingest.store.server_store import ServerStore

    if address.url is None:
        raise ValueError("the server backend needs a URL")
    return ServerStore(
        address.url, address.collection, api_key=address.api_key, timeout=address.timeout
    )


# Backend name -> factory. The name is also each Store's ``backend`` attribute.
BACKENDS: dict[str, Callable[[StoreAddress], Store]] = {
    "embedded": _embedded,
    "server": _server,
}


def backend_for(address: StoreAddress) -> str:
    """The backend an address names: a URL is a server, anything else the embedded store."""
    return "server" if address.url else "embedded"


def open_catalog(
    store_path: str | os.PathLike[str] | None = None,
    url: str | None = None,
    api_key: str | None = None,
    timeout: float = 10.0,
) -> Catalog:
    """The collections of the embedded store at ``store_path`` (default
    :func:`default_store_path`), or of the Qdrant server at ``url``."""
    if url:
        from semfs.ingest.store.server_store import ServerCatalog

        return ServerCatalog(url, api_key=api_key, timeout=timeout)
    from semfs.ingest.store.edge.catalog import EdgeCatalog, finish_removals

    catalog = EdgeCatalog(Path(store_path) if store_path else default_store_path())
    finish_removals(catalog.store_dir)
    return catalog


def user_umask() -> int:
    """The umask of the user who started this process: the embedded store holds the process
    umask at 077 while it is open (owner-only files), so a file made for the user (the MCP
    write tool's) takes its mode from this instead."""
    from semfs.ingest.store.edge.privacy import user_umask as umask

    return umask()


def set_aside(store_path: str | os.PathLike[str] | None, collection: str) -> Path:
    """Rename an embedded collection's damaged shard aside (``semfs check --rebuild``); the
    new path. Under the collection's lock: refused while a process has it open."""
    from semfs.ingest.store.edge.store import set_aside as edge_set_aside

    return edge_set_aside(Path(store_path) if store_path else default_store_path(), collection)


def open_store(
    store_path: str | os.PathLike[str] | None = None,
    url: str | None = None,
    collection: str = DEFAULT_COLLECTION,
    api_key: str | None = None,
    timeout: float = 10.0,
) -> Store:
    """Open a collection: a Qdrant server at ``url`` if given, else the embedded store.

    A store written at another schema version is refused here, with one line
    (:func:`semfs.ingest.store.schema.check_schema`), before any caller reads or writes it.

    A ``file:`` URL opens qdrant-client's local mode at that path: a stand-in for a server in
    tests (slow; one process at a time). The embedded store proxies to a live owner (a
    ``semfs mount`` daemon) when there is one, so ingesting while mounted works.
    """
    address = StoreAddress(
        collection=check_collection_name(collection),
        path=Path(store_path) if store_path else None,
        url=url,
        api_key=api_key,
        timeout=timeout,
    )
    store = BACKENDS[backend_for(address)](address)
    try:
        meta = store.read_meta()
        if meta is not None:
            check_schema(meta, store.location)
    except BaseException:
        store.close()
        raise
    return store


def missing_collection(
    collection: str,
    store_path: str | os.PathLike[str] | None = None,
    url: str | None = None,
    api_key: str | None = None,
) -> StoreNotFoundError:
    """The error for a collection that does not exist, naming the ones that do."""
    try:
        with open_catalog(store_path, url, api_key) as catalog:
            return missing(collection, catalog.location, catalog.names())
    except SemfsError as exc:  # the server went away meanwhile: say what we know
        return StoreNotFoundError(
            f"no collection {collection!r} ({exc}): run `semfs ingest DIR` first"
        )
