"""Collection.read (the Python API) returns a document's exact bytes or says it could not:
never a short document. Real Qdrant Edge store on disk, the hash stand-in model."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from semfs.ingest.collection import open_collection
from semfs.ingest.errors import SemfsError
from semfs.ingest.pipeline import ingest
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.schema import ChunkPoint


def test_read_refuses_a_document_whose_chunks_do_not_add_up_to_its_size(
    tmp_path: Path, store_dir: Path
) -> None:
    """A chunk whose stored text is shorter than its span (a version written beside the
    read, a damaged point): every chunk is there, but the bytes are not the document's."""
    src = tmp_path / "src"
    src.mkdir()
    text = "# Notes\n\n" + "".join(f"line {i} of the notes\n" for i in range(400))
    (src / "notes.md").write_text(text)
    address = CollectionAddress(store=store_dir)
    with open_store(address) as store:
        ingest(src, store, model="hash")
    with open_collection(address) as collection:
        assert collection.read("notes.md") == text.encode()
    with open_store(address) as store:
        record = store.get_document("notes.md")
        assert record is not None and record.chunks >= 2
        (first,) = store.get_chunks("notes.md", record.gen, [0])
        short = dataclasses.replace(first, text=first.text[:-10])
        store.upsert_chunks([ChunkPoint(short, None, [], [])])
        store.flush()
    with open_collection(address) as collection, pytest.raises(SemfsError, match="read it again"):
        collection.read("notes.md")
