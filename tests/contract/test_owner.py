"""The store-owner service (semfs.ingest.store.owner) and the backends table
(semfs.ingest.store.backends)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from semfs.ingest.errors import StoreNotFoundError, StoreOwnedError
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import BACKENDS, backend_for, open_store
from semfs.ingest.store.edge.store import EdgeStore
from semfs.ingest.store.ipc.client import RemoteStore
from semfs.ingest.store.owner import StoreOwner
from semfs.ingest.store.schema import StoreMeta
from semfs.ingest.store.server_store import ServerStore


def test_backends_table_names_each_store_by_its_backend(tmp_path: Path) -> None:
    assert backend_for(CollectionAddress()).name == "embedded"
    assert backend_for(CollectionAddress(url="http://localhost:6333")).name == "server"
    for name, path, url in (
        ("embedded", tmp_path / "e", None),
        ("server", None, f"file://{tmp_path / 'l'}"),
    ):
        store = BACKENDS[name].store(CollectionAddress(store=path, url=url))
        try:
            assert store.backend == name
            assert isinstance(store, EdgeStore if name == "embedded" else ServerStore)
        finally:
            store.close()


def test_owner_refuses_a_missing_collection(store_dir: Path) -> None:
    with pytest.raises(StoreNotFoundError, match="run `semfs ingest DIR` first"):
        StoreOwner.open(CollectionAddress(store=store_dir))
    with StoreOwner.open(CollectionAddress(store=store_dir), must_exist=False) as owner:
        assert not owner.store.exists()


def test_owner_serves_writers_and_refuses_a_second_owner(store_dir: Path) -> None:
    with StoreOwner.open(CollectionAddress(store=store_dir), must_exist=False) as owner:
        owner.store.create(8)
        assert not owner.serving
        changes: list[str] = []
        owner.serve(on_change=lambda: changes.append("changed"))
        assert owner.serving
        # Another opener now gets a proxy that says who owns the store...
        with open_store(CollectionAddress(store=store_dir)) as proxy:
            assert isinstance(proxy, RemoteStore)
            assert (link := proxy.owner_link()) is not None and link.pid == os.getpid()
            proxy.write_meta(StoreMeta("hash:8", 8, generation=3))
        # ...the write went to the owner's store and woke the owner...
        meta = owner.store.read_meta()
        assert meta is not None and meta.generation == 3
        deadline = time.monotonic() + 10  # on_change runs in the server thread, after the reply
        while not changes and time.monotonic() < deadline:
            time.sleep(0.01)
        assert changes == ["changed"]
        # ...and a second owner is refused, naming the first.
        with pytest.raises(StoreOwnedError, match=f"owned by pid {os.getpid()}") as info:
            StoreOwner.open(CollectionAddress(store=store_dir))
        assert info.value.pid == os.getpid()
        owner.stop_serving()
        assert not owner.serving
        assert owner.store.exists()  # stopping the service keeps the store open
    # Closed: the next opener owns the shard itself.
    with StoreOwner.open(CollectionAddress(store=store_dir)) as again:
        assert isinstance(again.store, EdgeStore)
        assert again.store.owner_link() is None


def test_a_server_backend_has_no_writers_to_serve(tmp_path: Path) -> None:
    with StoreOwner.open(
        CollectionAddress(url=f"file://{tmp_path / 'l'}"), must_exist=False
    ) as owner:
        owner.serve()
        assert not owner.serving
