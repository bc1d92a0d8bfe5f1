"""Every class that mirrors the Store interface covers all of it, and one encoding carries
every schema type: a Store method added without its proxy fails here, not in a live mount."""

from __future__ import annotations

import inspect
import subprocess
from pathlib import Path
from typing import Any

import pytest

from semfs.ingest.errors import SchemaVersionError
from semfs.ingest.pipeline import ingest
from semfs.ingest.store import DelegatingStore, Store, StoreReader, StoreWriter
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.edge.store import EdgeStore
from semfs.ingest.store.ipc import wire
from semfs.ingest.store.ipc.client import RemoteStore
from semfs.ingest.store.schema import (
    READABLE,
    SCHEMA_VERSION,
    ChunkPoint,
    ChunkRecord,
    DocumentRecord,
    ScoredChunk,
    SparseQuery,
    StoreMeta,
    Vector,
    decode,
    encode,
)
from semfs.ingest.store.server_store import ServerStore
from tests.helpers import SEMFS

# Answered by the proxy itself, never sent: where the store is, who owns it, serving writers,
# and the manifest, which only the owner (a mount) uses.
LOCAL = {"location", "address", "owner_link", "serve_writers", "read_manifest", "lock_path"}
# Not sent as such: split_line_paths, built on chunk_line_spans, is sent whole instead; a
# proxy's chunk_texts is the Store default over get_chunks (only a mount's reader needs the
# text-only fetch, and the proxy's callers, writers, never read files).
NOT_SENT = {"chunk_line_spans", "chunk_texts"}


def _store_methods() -> set[str]:
    return {
        name
        for part in (StoreReader, StoreWriter, Store)  # the interface, split by callers' needs
        for name, value in vars(part).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }


def test_the_proxy_sends_every_store_method_and_nothing_else() -> None:
    sent = _store_methods() - LOCAL - NOT_SENT
    assert wire.READS | wire.WRITES | {"close"} == sent
    assert not wire.READS & wire.WRITES


def _must(cls: type[Store]) -> set[str]:
    """What ``cls`` must define itself: mirrors forward every method, optional ones too."""
    if cls is DelegatingStore:
        return _store_methods()
    if cls is RemoteStore:  # a proxy has no writers of its own to serve
        return _store_methods() - {"serve_writers"} - NOT_SENT
    return set(Store.__abstractmethods__)


def _own(cls: type[Store]) -> dict[str, Any]:
    """What ``cls`` defines itself or inherits from a class below Store (the backends share
    theirs in semfs.ingest.store.qdrant.QdrantStore)."""
    below = cls.__mro__[: cls.__mro__.index(Store)]
    return {name: value for c in reversed(below) for name, value in vars(c).items()}


@pytest.mark.parametrize("cls", [RemoteStore, DelegatingStore, EdgeStore, ServerStore])
def test_mirrors_implement_every_method_with_its_signature(cls: type[Store]) -> None:
    assert not inspect.isabstract(cls)
    must = _must(cls)
    own = _own(cls)
    assert sorted(must - set(own)) == []
    for name in must - {"location", "address"}:  # a property has no signature to compare
        mine = inspect.signature(own[name]).parameters
        assert list(mine) == list(inspect.signature(getattr(Store, name)).parameters), name


def test_one_encoding_round_trips_every_schema_type() -> None:
    rec = ChunkRecord("a/b.md", 3, 1, 10, 20, 2, 4, "text é \udcff", "H")
    values = [
        StoreMeta("hash:8", 8, generation=5, dirty=True),
        DocumentRecord("a/b.md", 20, 1.5, "ab" * 32, 2, 3, (0, 10), mtime_ns=1_500_000_000),
        DocumentRecord("a/b.md", 20, 1.5, "ab" * 32, 2, 3, None),  # not fetched stays None
        DocumentRecord("e.md", 0, 1.5, "ab" * 32, 0, 3, ()),  # no chunks stays ()
        rec,
        ChunkPoint(rec, [0.5, -1.25], [3, 9], [0.5, 1.0]),
        ScoredChunk(rec, 0.75),
        SparseQuery([1, 2], [0.25, 0.5]),
        {("a.md", 1), ("b.md", 2)},
        [None, 1, "x"],
    ]
    for value in values:
        back = decode(encode(value))
        assert back == value
        if isinstance(value, DocumentRecord):  # offsets are not compared by ==
            assert isinstance(back, DocumentRecord)
            assert (back.offsets is None) == (value.offsets is None)
            assert tuple(back.offsets or ()) == tuple(value.offsets or ())
    assert decode(encode(Vector([0.5, 2.0]))) == [0.5, 2.0]
    with pytest.raises(TypeError):
        encode(object())
    with pytest.raises(ValueError, match="unknown value tag"):
        decode({"$": "nope", "v": {}})


def _write_at(store_dir: Path, schema: int) -> None:
    with EdgeStore(store_dir, "docs") as store:
        store.create(8)
        store.write_meta(StoreMeta("hash:8", 8, schema=schema, generation=1))


@pytest.mark.parametrize(
    ("schema", "says"),
    [(min(READABLE) - 1, "from an older semfs"), (SCHEMA_VERSION + 1, "upgrade semfs")],
)
def test_a_store_at_another_schema_version_is_refused_in_one_line(
    store_dir: Path, schema: int, says: str
) -> None:
    _write_at(store_dir, schema)
    with pytest.raises(SchemaVersionError, match=says):
        open_store(CollectionAddress(store=store_dir))
    # The refusal released the store, and the command line says it in one line.
    proc = subprocess.run(
        [SEMFS, "status", "--store", str(store_dir)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"schema version {schema}" in lines[0], proc.stderr
    _write_at(store_dir, SCHEMA_VERSION)  # the shard is free again; the current version opens
    with open_store(CollectionAddress(store=store_dir)) as store:
        assert store.read_meta() == StoreMeta("hash:8", 8, generation=1)


def test_a_version_1_store_is_read_as_it_is_and_stamped_by_the_next_ingest(
    store_dir: Path, tmp_path: Path
) -> None:
    # Version 1 (before converted documents) lacks only blobs and optional fields.
    _write_at(store_dir, 1)
    with open_store(CollectionAddress(store=store_dir)) as store:
        assert store.read_meta() == StoreMeta("hash:8", 8, schema=1, generation=1)
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("# A\n")
    with open_store(CollectionAddress(store=store_dir)) as store:
        ingest(src, store, model="hash:8")
        meta = store.read_meta()
        assert meta is not None and meta.schema == SCHEMA_VERSION
