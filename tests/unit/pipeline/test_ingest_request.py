"""One ingest run is one value (issue 49): :class:`IngestRequest` carries how the source is read
(:class:`SourceOptions`) and what the run does; the command line, the watcher, the follower and
the Python API pass it whole, and fields by name build the same request."""

from __future__ import annotations

from pathlib import Path

import pytest

import semfs
from semfs.ingest.pipeline import ingest
from semfs.ingest.sources import IngestRequest, SourceOptions
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store


def test_fields_by_name_build_the_same_request() -> None:
    by_name = IngestRequest.of(model="hash", include=["*.md"], dry_run=True, paths=["a.md"])
    assert by_name == IngestRequest(
        SourceOptions(model="hash", include=("*.md",)), paths=frozenset({"a.md"}), dry_run=True
    )
    with pytest.raises(TypeError):
        IngestRequest.of(modle="hash")  # a typo is refused, not ignored


def test_ingest_takes_the_request(sample_copy: Path, tmp_path: Path) -> None:
    address = CollectionAddress("docs", store=tmp_path / "store")
    request = IngestRequest(SourceOptions(model="hash", include=("deploy/*",)), dry_run=True)
    with open_store(address) as store:
        planned = ingest(sample_copy, store, request)
        assert planned.added and all(p.startswith("deploy/") for p in planned.added)
        assert store.read_meta() is None  # a dry run writes nothing
        with pytest.raises(TypeError):
            ingest(sample_copy, store, request, dry_run=False)  # one way or the other
        done = ingest(sample_copy, store, IngestRequest(request.options))
        assert sorted(done.added) == sorted(planned.added)
    with semfs.open_collection(address) as docs:  # the API takes one too
        again = docs.ingest(sample_copy, IngestRequest(request.options))
        assert again.added == [] and sorted(again.unchanged) == sorted(planned.added)
