"""Errors raised through the Python API name the API's way out, not a command line's
(issue 46, found by use: a second run of docs/python-api.md was told to run `semfs ingest ...
--replace`; a collection opened twice in one process was "in use by pid <its own pid>")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from semfs.ingest.collection import open_collection
from semfs.ingest.errors import SourceMismatchError, StoreLockedError, StoreNotFoundError
from semfs.ingest.store.address import CollectionAddress


def _folder(root: Path, word: str) -> Path:
    root.mkdir(parents=True)
    (root / "a.md").write_text(f"# A\n\n{word}\n")
    return root


def test_a_second_source_is_refused_with_the_apis_way_out(tmp_path: Path, store_dir: Path) -> None:
    first, second = _folder(tmp_path / "one", "alpha"), _folder(tmp_path / "two", "beta")
    address = CollectionAddress("handbook", store=store_dir)
    with open_collection(address) as docs:
        docs.ingest(first, model="hash")
        with pytest.raises(SourceMismatchError) as refused:
            docs.ingest(second)
        message = str(refused.value)
        assert f"mirrors {first}, not {second}" in message
        assert f"ingest({str(second)!r}, replace_source=True)" in message
        assert "semfs ingest" not in message and "--replace" not in message
        assert (refused.value.mirrors, refused.value.source) == (str(first), str(second))
        # The way out it names works.
        report = docs.ingest(second, replace_source=True)
        assert report.added == ["a.md"] or report.updated == ["a.md"]
        assert docs.status()["source"] == str(second)


def test_a_missing_collection_says_to_ingest_through_the_api(store_dir: Path) -> None:
    docs = open_collection(CollectionAddress("nothing", store=store_dir))
    try:
        with pytest.raises(StoreNotFoundError) as missing:
            docs.search("anything")
    finally:
        docs.close()
    assert "collection.ingest(DIR)" in str(missing.value)
    assert "semfs ingest" not in str(missing.value)


def test_a_collection_open_twice_in_one_process_says_so(tmp_path: Path, store_dir: Path) -> None:
    address = CollectionAddress("handbook", store=store_dir)
    with open_collection(address) as docs:
        docs.ingest(_folder(tmp_path / "one", "alpha"), model="hash")
        with pytest.raises(StoreLockedError) as refused:
            open_collection(address)
        message = str(refused.value)
        assert "already open in this process" in message
        assert f"pid {os.getpid()}" not in message
        assert docs.search("alpha", mode="keyword")  # the first is untouched
    with open_collection(address) as again:  # closed: open again
        assert again.search("alpha", mode="keyword")
