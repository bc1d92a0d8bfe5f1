"""The store does not only grow: replaced and deleted chunks are reclaimed (real Edge stores)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from tests.helpers.mounting import ingest_hash, mounted, semfs


def disk_bytes(store: Path) -> int:
    with open_store(CollectionAddress(store=store)) as s:
        n = s.disk_bytes()
    assert n is not None
    return n


def revise(src: Path, revision: int) -> None:
    for f in sorted(src.rglob("*")):
        if f.is_file():
            with open(f, "a") as fh:
                fh.write(f"\nrevision {revision}\n")


def test_ten_reingests_stay_within_one_and_a_half_fresh_stores(
    sample_copy: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    ingest_hash(sample_copy, store)
    sizes = []
    for revision in range(10):
        revise(sample_copy, revision)
        report = ingest_hash(sample_copy, store)
        assert report.updated and not report.added
        sizes.append(disk_bytes(store))
    fresh = tmp_path / "fresh"
    ingest_hash(sample_copy, fresh)
    limit = 1.5 * disk_bytes(fresh)
    assert max(sizes) <= limit, [round(s / limit * 1.5, 2) for s in sizes]


def test_compact_command_reclaims_deleted_documents(sample_copy: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    ingest_hash(sample_copy, store)
    with open_store(CollectionAddress(store=store)) as s:
        docs = sorted(d.path for d in s.list_documents())
        s.delete_documents(docs[: len(docs) * 2 // 3])  # a store API call: no compaction
    before = disk_bytes(store)
    out = semfs("compact", "--store", str(store)).stdout
    assert out.startswith("compacted: ")
    assert disk_bytes(store) < before * 0.8
    with open_store(CollectionAddress(store=store)) as s:
        assert len(s.list_documents()) == len(docs) - len(docs) * 2 // 3
    assert semfs("compact", "--store", str(store)).stdout.startswith("already compact: ")


@pytest.mark.mount
def test_reingests_through_a_mounted_daemon_compact_too(sample_copy: Path, tmp_path: Path) -> None:
    """The daemon's write view (semfs.fusefs.view.pins) must pass compact() on, not answer it
    itself."""
    store = tmp_path / "store"
    ingest_hash(sample_copy, store)
    with mounted(tmp_path / "mnt", "--store", str(store)):
        for revision in range(2):
            revise(sample_copy, revision)
            out = semfs("ingest", str(sample_copy), "--store", str(store), "--json").stdout
            report = json.loads(out)
            assert report["updated"] and report["compacted"], report
