"""Which class serves a collection: the one table that maps an address to a backend.

:mod:`semfs.ingest.store` declares the interface and imports no implementation; this module is
the composition root that picks one (like ratarmount's ``ARCHIVE_BACKENDS`` table). Every
store and catalog is opened through :data:`BACKENDS`, by the first backend that serves the
:class:`~semfs.ingest.store.address.CollectionAddress`:

* ``server``: :class:`semfs.ingest.store.server_store.ServerStore`, qdrant-client against the
  address's URL (a ``file:`` URL opens qdrant-client's local mode: the stand-in server of the
  tests).
* ``embedded``: :class:`semfs.ingest.store.edge.store.EdgeStore`, Qdrant Edge in this process,
  or, when a process already owns the shard and serves it (``semfs mount``), an
  :class:`semfs.ingest.store.ipc.client.RemoteStore` talking to that owner.

To add a backend: write a :class:`~semfs.ingest.store.Store` subclass in its own module (run the
contract tests in ``tests/contract/test_store_contract.py`` against it) and add one
:class:`Backend` row to :data:`BACKENDS`, before any row that would also serve its addresses,
whose factories import it lazily: qdrant_client costs ~1 s to import and the embedded path
must not pay for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from semfs.ingest.errors import SemfsError, StoreNotFoundError
from semfs.ingest.store import Store, check_collection_name
from semfs.ingest.store.address import CollectionAddress, check_embedded_name
from semfs.ingest.store.catalog import Catalog, missing
from semfs.ingest.store.schema import check_schema


@dataclass(frozen=True)
class Capabilities:
    """What a backend's collections are, declared on its row: callers ask it, and never test
    an address's URL or a store's class to find out."""

    # The collection lives in a folder of this machine (the store folder): paths into it are
    # made absolute before a daemon leaves the working folder, and its own files (watch
    # state, skip memo, tokens, log: CollectionAddress.local_dir) are removed and renamed
    # with it. False: they are kept beside, and go with it by hand.
    in_store_folder: bool
    # A damaged shard can be set aside and rebuilt from the source (`semfs check --rebuild`).
    set_aside: bool


@dataclass(frozen=True)
class Backend:
    """One way to reach collections: which addresses it serves, its two factories and what
    its collections can do."""

    name: str  # also each of its Stores' ``backend`` attribute
    serves: Callable[[CollectionAddress], bool]
    store: Callable[[CollectionAddress], Store]
    catalog: Callable[[CollectionAddress], Catalog]  # the collections where the address is
    can: Capabilities


def _embedded(address: CollectionAddress) -> Store:
    from semfs.ingest.store.edge.catalog import finish_removals
    from semfs.ingest.store.edge.store import EdgeStore
    from semfs.ingest.store.ipc.wire import SOCKET_NAME

    check_embedded_name(address.collection)
    finish_removals(address.store_dir)
    # No socket, no owner: skip importing the ipc client (a mount's start-up pays for it).
    if not (address.local_dir / SOCKET_NAME).exists():
        return EdgeStore(address.store_dir, address.collection)
    from semfs.ingest.store.ipc.client import connect_daemon

    # Ask the owner first: even a failed second load of a live shard rewrites its files.
    remote = connect_daemon(address.local_dir, address.collection)
    if remote is not None:
        return remote
    return EdgeStore(address.store_dir, address.collection)


def _embedded_catalog(address: CollectionAddress) -> Catalog:
    from semfs.ingest.store.edge.catalog import EdgeCatalog, finish_removals

    catalog = EdgeCatalog(address.store_dir)
    finish_removals(catalog.store_dir)
    return catalog


def _server(address: CollectionAddress) -> Store:
    from semfs.ingest.store.server_store import ServerStore

    return ServerStore(address)


def _server_catalog(address: CollectionAddress) -> Catalog:
    from semfs.ingest.store.server_store import ServerCatalog

    return ServerCatalog(address)


# Backend name -> backend, in the order they are asked whether they serve an address.
BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend(
            "server",
            lambda a: a.url is not None,
            _server,
            _server_catalog,
            Capabilities(in_store_folder=False, set_aside=False),
        ),
        Backend(
            "embedded",
            lambda a: a.url is None,
            _embedded,
            _embedded_catalog,
            Capabilities(in_store_folder=True, set_aside=True),
        ),
    )
}


def backend_for(address: CollectionAddress) -> Backend:
    """The first backend of :data:`BACKENDS` that serves ``address``."""
    for backend in BACKENDS.values():
        if backend.serves(address):
            return backend
    raise SemfsError(f"no backend serves {address.where}")  # not reached: embedded serves all


def capabilities(address: CollectionAddress) -> Capabilities:
    """What the collection at ``address`` can do: its backend's row says."""
    return backend_for(address).can


def open_catalog(address: CollectionAddress) -> Catalog:
    """The collections where ``address`` is (its collection name is not used)."""
    return backend_for(address).catalog(address)


def user_umask() -> int:
    """The umask of the user who started this process: the embedded store holds the process
    umask at 077 while it is open (owner-only files), so a file made for the user (the MCP
    write tool's) takes its mode from this instead."""
    from semfs.ingest.store.edge.privacy import user_umask as umask

    return umask()


def make_collection_dir(address: CollectionAddress) -> Path:
    """The collection's local folder (:attr:`CollectionAddress.local_dir`), made owner-only
    (parents too) when missing: where a mount whose --watch makes the collection logs from
    its start (``mount.log``)."""
    from semfs.ingest.store.edge.privacy import private_dir

    private_dir(address.local_dir, top=address.store_dir)
    return address.local_dir


def private_folder(path: Path) -> None:
    """``mkdir -p path``, every folder it makes owner-only (0700) whatever the umask: where a
    collection's local files go before its store exists (the writers' lock, made first).
    A folder another user owns or may write is refused (:class:`StoreFolderError`)."""
    from semfs.ingest.store.edge.privacy import private_dir

    private_dir(path)


def open_private_file(path: Path) -> int:
    """Open (or make, 0600) a file semfs keeps in a store folder, for writing: never through
    a symlink, and only this user's regular file (else :class:`StoreFolderError`)."""
    from semfs.ingest.store.edge.privacy import open_private_file as private_open

    return private_open(path)


def set_aside(address: CollectionAddress) -> Path:
    """Rename an embedded collection's damaged shard aside (``semfs check --rebuild``); the
    new path. Under the collection's lock: refused while a process has it open."""
    from semfs.ingest.store.edge.store import set_aside as edge_set_aside

    if not capabilities(address).set_aside:
        raise SemfsError("only an embedded store's shard can be set aside: rebuild it instead")
    return edge_set_aside(address.store_dir, check_collection_name(address.collection))


def open_store(address: CollectionAddress) -> Store:
    """Open the collection at ``address``, through the backend that serves it.

    A store written at another schema version is refused here, with one line
    (:func:`semfs.ingest.store.schema.check_schema`), before any caller reads or writes it.

    A ``file:`` URL opens qdrant-client's local mode at that path: a stand-in for a server in
    tests (slow; one process at a time). The embedded store proxies to a live owner (a
    ``semfs mount`` daemon) when there is one, so ingesting while mounted works.
    """
    check_collection_name(address.collection)
    store = backend_for(address).store(address)
    try:
        meta = store.read_meta()
        if meta is not None:
            check_schema(meta, store.location)
    except BaseException:
        store.close()
        raise
    return store


def missing_collection(address: CollectionAddress) -> StoreNotFoundError:
    """The error for a collection that does not exist, naming the ones that do."""
    try:
        with open_catalog(address) as catalog:
            return missing(address.collection, catalog.location, catalog.names())
    except SemfsError as exc:  # the server went away meanwhile: say what we know
        return StoreNotFoundError(
            f"no collection {address.collection!r} ({exc}): run `semfs ingest DIR` first"
        )
