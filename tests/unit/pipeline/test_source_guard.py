"""A collection knows its source folder: another folder is refused (nothing deleted, exit
status 1, one line saying what to do), --replace takes it, a folder that moved is followed."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from semfs.ingest.pipeline import ingest
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from tests.helpers import SEMFS


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def _semfs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SEMFS, *args], capture_output=True, text=True, timeout=300)


def _paths(store_dir: Path, collection: str = "docs") -> list[str]:
    with open_store(CollectionAddress(collection, store=store_dir)) as store:
        return sorted(d.path for d in store.list_documents())


def test_ingest_of_another_folder_deletes_nothing_and_fails(
    tmp_path: Path, store_dir: Path
) -> None:
    a = _tree(tmp_path / "deployment", {"index.md": "# Deploy\n", "cloud.md": "# Cloud\n"})
    b = _tree(tmp_path / "about", {"index.md": "# About\n"})
    first = _semfs("ingest", str(a), "--model", "hash")
    assert first.returncode == 0, first.stderr
    second = _semfs("ingest", str(b))
    assert second.returncode == 1
    assert _paths(store_dir) == ["cloud.md", "index.md"]
    with open_store(CollectionAddress(store=store_dir)) as store:
        rec = store.get_document("index.md")
        assert rec is not None and rec.size == len("# Deploy\n")  # not "updated" from about/
    line = second.stderr.strip()
    assert line.count("\n") == 0 and "Traceback" not in line
    assert "'docs'" in line and str(a) in line and str(b) in line
    assert f"`semfs ingest {b} --replace`" in line and "-c NAME" in line
    assert "deleted" not in second.stdout
    other = _semfs("ingest", str(a), "--model", "hash", "-c", "acme")
    assert other.returncode == 0, other.stderr
    refused = _semfs("ingest", str(b), "-c", "acme")
    assert refused.returncode == 1 and f"`semfs ingest {b} -c acme --replace`" in refused.stderr


def test_replace_mirrors_the_new_folder(tmp_path: Path, store_dir: Path) -> None:
    a = _tree(tmp_path / "a", {"one.md": "one\n", "two.md": "two\n"})
    b = _tree(tmp_path / "b", {"three.md": "three\n"})
    assert _semfs("ingest", str(a), "--model", "hash").returncode == 0
    r = _semfs("ingest", str(b), "--replace", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["deleted_paths"] == ["one.md", "two.md"] and report["added_paths"] == ["three.md"]
    assert _paths(store_dir) == ["three.md"]
    # b is the source now: a is the other folder.
    assert _semfs("ingest", str(a)).returncode == 1
    assert _semfs("ingest", str(b)).returncode == 0


def test_another_collection_takes_the_other_folder(tmp_path: Path, store_dir: Path) -> None:
    a = _tree(tmp_path / "a", {"one.md": "one\n"})
    b = _tree(tmp_path / "b", {"two.md": "two\n"})
    assert _semfs("ingest", str(a), "--model", "hash").returncode == 0
    assert _semfs("ingest", str(b), "--model", "hash", "-c", "other").returncode == 0
    assert _paths(store_dir) == ["one.md"] and _paths(store_dir, "other") == ["two.md"]


def test_a_moved_folder_is_followed_with_a_note(tmp_path: Path, store_dir: Path) -> None:
    old = _tree(tmp_path / "old", {"one.md": "one\n", "sub/two.md": "two\n"})
    with open_store(CollectionAddress(store=store_dir)) as store:
        ingest(old, store, model="hash")
        ino = store.read_meta().source_ino  # type: ignore[union-attr]
    new = tmp_path / "new"
    old.rename(new)
    r = _semfs("ingest", str(new))
    assert r.returncode == 0, r.stderr
    assert f"moved from {old} to {new}" in r.stderr and "deleted 0" in r.stdout
    assert "unchanged 2" in r.stdout
    with open_store(CollectionAddress(store=store_dir)) as store:
        meta = store.read_meta()
        assert meta is not None and meta.source == str(new) and meta.source_ino == ino
        # The record was rewritten without a new generation: the manifest is current again.
        manifest = store.read_manifest()
        assert manifest is not None and manifest.meta == meta
    # The old path is another folder now.
    _tree(old, {"other.md": "other\n"})
    assert _semfs("ingest", str(old)).returncode == 1
    assert _paths(store_dir) == ["one.md", "sub/two.md"]


def test_a_symlink_to_the_source_is_the_same_source(tmp_path: Path, store_dir: Path) -> None:
    real = _tree(tmp_path / "real", {"one.md": "one\n"})
    link = tmp_path / "link"
    link.symlink_to(real)
    with open_store(CollectionAddress(store=store_dir)) as store:
        ingest(real, store, model="hash")
        report = ingest(link, store)
        meta = store.read_meta()
    assert report.notes == [] and report.unchanged == ["one.md"]
    assert meta is not None and meta.source == str(real)  # still the path first named


def test_the_first_ingest_records_the_folder_and_when(
    tmp_path: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _tree(tmp_path / "src", {"one.md": "one\n"})
    # A relative path is recorded absolute. Back where it was after (a later test of this
    # worker would otherwise run, and start its servers, in this owner-only folder).
    monkeypatch.chdir(tmp_path)
    with open_store(CollectionAddress(store=store_dir)) as store:
        before, began = time.time(), time.perf_counter()
        ingest(Path("src"), store, model="hash")
        took, after = time.perf_counter() - began, time.time()
        meta = store.read_meta()
    st = src.stat()
    assert meta is not None and meta.source == str(src)
    assert (meta.source_dev, meta.source_ino) == (st.st_dev, st.st_ino)
    assert meta.ingested_at is not None and meta.ingest_seconds is not None
    # When it ended, and how long it took: within the call's own span (the duration is kept
    # to the millisecond; opening a store and writing a document takes more than one).
    assert before <= meta.ingested_at <= after
    assert 0 < meta.ingest_seconds <= took + 0.001


def test_a_store_without_a_record_adopts_its_next_source(tmp_path: Path, store_dir: Path) -> None:
    """Stores written before sources were recorded: the next ingest records its folder."""
    from dataclasses import replace

    src = _tree(tmp_path / "src", {"one.md": "one\n"})
    with open_store(CollectionAddress(store=store_dir)) as store:
        ingest(src, store, model="hash")
        meta = store.read_meta()
        assert meta is not None
        store.write_meta(replace(meta, source=None, source_dev=None, source_ino=None))
        store.flush()
        assert ingest(src, store).unchanged == ["one.md"]
        again = store.read_meta()
    assert again is not None and again.source == str(src)


def test_watch_refuses_another_folder_at_once(tmp_path: Path, store_dir: Path) -> None:
    a = _tree(tmp_path / "a", {"one.md": "one\n"})
    b = _tree(tmp_path / "b", {"two.md": "two\n"})
    assert _semfs("ingest", str(a), "--model", "hash").returncode == 0
    r = _semfs("ingest", str(b), "--watch")  # returns: it never starts following
    assert r.returncode == 1 and "--replace" in r.stderr
    assert _paths(store_dir) == ["one.md"]


def test_check_prune_keeps_the_source_record(tmp_path: Path, store_dir: Path) -> None:
    """`semfs check --prune` rewrote the meta from scratch: the source and BM25's average
    chunk length were lost (the next ingest then weighed terms differently)."""
    from semfs.fusefs.cli.maintenance import _prune

    src = _tree(tmp_path / "src", {"one.md": "one two three\n", "two.md": "four five\n"})
    with open_store(CollectionAddress(store=store_dir)) as store:
        ingest(src, store, model="hash")
        before = store.read_meta()
        _prune(store, ["one.md"])
        after = store.read_meta()
    assert before is not None and after is not None and before.bm25_avg_len is not None
    assert after.source == str(src) and after.bm25_avg_len == before.bm25_avg_len
    assert after.documents == 1 and after.generation == before.generation + 1


@pytest.mark.mount
def test_mount_watch_of_another_folder_fails_at_once(tmp_path: Path, store_dir: Path) -> None:
    a = _tree(tmp_path / "a", {"one.md": "one\n"})
    b = _tree(tmp_path / "b", {"two.md": "two\n"})
    assert _semfs("ingest", str(a), "--model", "hash").returncode == 0
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = _semfs("mount", str(mnt), "--watch", str(b))
    assert r.returncode == 1 and "--replace" in r.stderr and str(a) in r.stderr, r.stderr
    assert not os.path.ismount(mnt) and _paths(store_dir) == ["one.md"]
