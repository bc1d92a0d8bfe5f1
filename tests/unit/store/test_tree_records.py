"""The manifest an ingest writes is built from the records the embedded store wrote, not a
scroll (semfs.ingest.store.tree_records), and is byte for byte the one a scroll builds."""

from __future__ import annotations

import dataclasses
import math
import random
import shutil
from array import array
from pathlib import Path
from typing import Any

import pytest

from semfs.ingest import writer
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.edge import store as edge_store
from semfs.ingest.store.edge.store import MANIFEST_NAME, EdgeStore, stored_float
from semfs.ingest.store.manifest import Manifest
from semfs.ingest.store.qdrant import QdrantStore
from semfs.ingest.store.schema import DirectoryRecord, DocumentRecord, StoreMeta
from semfs.ingest.store.tree_records import TreeRecords
from tests.helpers.mounting import ingest_hash


def _fields(record: Any) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}


def _assert_manifest_is_the_scrolled_one(store_path: Path) -> None:
    with open_store(CollectionAddress(store=store_path)) as store:
        assert isinstance(store, EdgeStore)
        data = (store.dir / MANIFEST_NAME).read_bytes()
        meta = store.read_meta()
        assert meta is not None and not meta.dirty
        scrolled = store._scrolled_manifest(meta)
        if data != scrolled.to_bytes():
            kept = Manifest.from_bytes(data)
            assert kept.meta == scrolled.meta
            assert [_fields(d) for d in kept.directories] == [
                _fields(d) for d in scrolled.directories
            ]
            assert [_fields(d) for d in kept.documents] == [_fields(d) for d in scrolled.documents]
            raise AssertionError("the same records, other bytes")


def _no_scroll(self: QdrantStore, meta: StoreMeta) -> None:
    raise AssertionError("the manifest was built from a scroll")


def test_every_kind_of_run_writes_the_scrolled_manifest_without_scrolling(
    sample_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    src = sample_copy
    (src / "empty" / "deeper").mkdir(parents=True)
    files = sorted(p for p in src.rglob("*") if p.is_file())
    rel = [f.relative_to(src).as_posix() for f in files]
    new = src / "new" / "n.md"
    # Each change, and what the run says it did (added, updated, deleted), so that each run
    # is the kind it is meant to be (before, the check was true of any run).
    runs = [
        (lambda: None, (rel, [], [])),  # a new store
        (lambda: files[0].write_text(files[0].read_text() + "\nmore\n"), ([], rel[:1], [])),
        (files[1].unlink, ([], [], rel[1:2])),  # deleted
        (lambda: new.parent.mkdir() or new.write_text("# N\n"), (["new/n.md"], [], [])),
        (lambda: files[2].chmod(0o600), ([], [], [])),  # same text: only the record's mode
        (lambda: shutil.rmtree(src / "empty"), ([], [], [])),  # folder records deleted only
    ]
    for change, (added, updated, deleted) in runs:
        change()
        with monkeypatch.context() as m:
            m.setattr(QdrantStore, "_scrolled_manifest", _no_scroll)
            report = ingest_hash(src, store)
        assert (sorted(report.added), report.updated, report.deleted) == (
            added,
            updated,
            deleted,
        )
        _assert_manifest_is_the_scrolled_one(store)
    with open_store(CollectionAddress(store=store)) as opened:
        record = opened.get_document(rel[2])
        assert record is not None and record.mode & 0o777 == 0o600  # the chmod run wrote it
    # A watcher's batch: only some paths, the rest of the records from the last manifest.
    (src / "new" / "m.md").write_text("# M\n\nwords\n")
    with monkeypatch.context() as m:
        m.setattr(QdrantStore, "_scrolled_manifest", _no_scroll)
        ingest_hash(src, store, paths=["new/m.md"])
    _assert_manifest_is_the_scrolled_one(store)


def test_a_session_without_a_current_manifest_scrolls(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path, "docs")
    store.create(256)
    store.write_meta(StoreMeta("hash:256", 256, generation=1, dirty=True))
    store.put_document(DocumentRecord("a.md", 0, 1.5, "sha", 0, 1, array("Q"), mode=0o644))
    store.close()  # killed before the manifest: the next session cannot know the records
    again = EdgeStore(tmp_path, "docs")
    try:
        again.write_meta(StoreMeta("hash:256", 256, generation=2, dirty=True))
        assert again.read_manifest() is None and not again.tree.known
        again.put_directories([DirectoryRecord("", 0o755, 0, 0, 1)])
        again.write_meta(StoreMeta("hash:256", 256, generation=2))
        again.write_manifest(2)
        manifest = again.read_manifest()
        assert manifest is not None and [d.path for d in manifest.documents] == ["a.md"]
        assert [d.path for d in manifest.directories] == [""]
    finally:
        again.close()


def test_a_write_that_fails_leaves_the_records_unknown() -> None:
    tree = TreeRecords()
    tree.put_documents([DocumentRecord("a.md", 0, 1.5, "sha", 0, 1, array("Q"))])
    assert tree.snapshot() is None  # never started: nothing is assumed
    tree.start((), ())
    with tree.change():
        tree.put_directories([DirectoryRecord("d", 0o755, 0, 0, 1)])
    snapshot = tree.snapshot()
    assert snapshot is not None and [d.path for d in snapshot[1]] == ["d"]
    with pytest.raises(OSError), tree.change():
        raise OSError("the engine refused the write, or took it and then failed")
    assert tree.snapshot() is None


def test_a_float_is_kept_as_edge_hands_it_back(tmp_path: Path) -> None:
    """stored_float is Edge's parse of a float payload: the same for every kind of float."""
    rng = random.Random(5)
    values = [1796166345.2752373, 0.1, 1 / 3, 0.0, -0.0, -1.5, 1e16, 1e22, 1e23, 5e-324]
    values += [1.7976931348623157e308, 1e-300, 123e-30, 2.5]
    values += [rng.uniform(1.6e9, 1.9e9) for _ in range(1500)]  # mtimes
    values += [math.ldexp(rng.random(), rng.randint(-1070, 1020)) for _ in range(500)]
    store = EdgeStore(tmp_path, "docs")
    try:
        store.create(256)
        for i, v in enumerate(values):
            store.put_document(DocumentRecord(f"{i}", 0, v, "sha", 0, 1, array("Q")))
        back = {d.path: d.mtime for d in store.list_documents()}
    finally:
        store.close()
    assert sum(back[f"{i}"] != v for i, v in enumerate(values)) > 100  # what it is for
    wrong = [(v, back[f"{i}"]) for i, v in enumerate(values) if back[f"{i}"] != stored_float(v)]
    assert not wrong
    assert all(math.copysign(1, back[f"{i}"]) == math.copysign(1, v) for i, v in enumerate(values))


def test_a_segment_is_sealed_at_the_size_segments_merge_to() -> None:
    # Sealed segments under the merge cap would be rewritten into one again at every
    # compaction: 13.5 s at the end of a 300k-chunk ingest (BENCHMARKS.md section 19).
    assert edge_store.SEGMENT_CHUNKS == writer.COMPACT_EVERY_CHUNKS


def test_a_manifest_whose_records_cannot_be_made_means_a_scroll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A manifest's document columns are decoded when first needed; one that cannot be is no
    start for the records (and no failed write): the next manifest is scrolled."""
    store = EdgeStore(tmp_path, "docs")
    store.create(256)
    store.write_meta(StoreMeta("hash:256", 256, generation=1, dirty=True))
    store.put_document(DocumentRecord("a.md", 0, 1.5, "sha", 0, 1, array("Q")))
    store.write_meta(StoreMeta("hash:256", 256, generation=1))
    store.write_manifest(1)
    store.close()

    def undecodable(self: Manifest) -> None:
        raise ValueError("a column that cannot be decoded")

    again = EdgeStore(tmp_path, "docs")
    try:
        with monkeypatch.context() as m:
            m.setattr(Manifest, "documents", property(undecodable))
            again.write_meta(StoreMeta("hash:256", 256, generation=2, dirty=True))
        assert not again.tree.known
        again.put_document(DocumentRecord("b.md", 0, 1.5, "sha", 0, 2, array("Q")))
        again.write_meta(StoreMeta("hash:256", 256, generation=2))
        again.write_manifest(2)
        manifest = again.read_manifest()
        assert manifest is not None and list(manifest.paths) == ["a.md", "b.md"]
    finally:
        again.close()
