"""A document's bytes by range from its chunks (the view's reader), against a real store: the
source's bytes exactly, only the chunks a read covers, a bounded cache, damage named."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from semfs.fusefs.view.reader import (
    ChunksMissingError,
    CorruptDocumentError,
    DocumentReader,
    LRUCache,
)
from semfs.ingest.store import Store
from semfs.ingest.store.schema import DocumentRecord
from tests.helpers.trees import CountingStore, record, source_files


def test_reader_ranges_are_the_source_bytes(ro_store: Store, ro_source: Path) -> None:
    reader = DocumentReader(ro_store)
    rnd = random.Random(3)
    for path, data in source_files(ro_source).items():
        doc = reader.document(record(path))
        assert doc is not None and doc.offsets is not None
        assert reader.read(doc, 0, len(data) + 10) == data
        for _ in range(5):
            offset = rnd.randrange(0, len(data) + 5)
            size = rnd.choice([1, 7, 100, 4096, 70000])
            assert reader.read(doc, offset, size) == data[offset : offset + size]
        assert reader.read(doc, len(data), 10) == b""


def test_a_read_fetches_only_the_chunks_it_covers(ro_store: Store, ro_source: Path) -> None:
    counting = CountingStore(ro_store)
    reader = DocumentReader(counting)
    path = "ai/model-context-protocol.mdx"  # the largest sample file: many chunks
    data = (ro_source / path).read_bytes()
    doc = reader.document(record(path))
    assert doc is not None and doc.offsets is not None and doc.chunks > 10
    middle = doc.offsets[5] + 3
    assert reader.read(doc, middle, 10) == data[middle : middle + 10]
    assert counting.chunk_reads == [5]
    span = doc.offsets[8] - doc.offsets[6]
    assert reader.read(doc, doc.offsets[6], span + 1) == data[doc.offsets[6] : doc.offsets[8] + 1]
    assert counting.chunk_reads == [5, 6, 7, 8]
    assert reader.read(doc, middle, 10) == data[middle : middle + 10]  # cached
    assert counting.chunk_reads == [5, 6, 7, 8]


def test_chunk_cache_is_bounded_by_bytes() -> None:
    cache: LRUCache[int, bytes] = LRUCache(max_weight=1000)
    for i in range(10):
        cache.put(i, b"x" * 300, 300)
    assert cache.weight <= 1000 and len(cache) == 3
    assert cache.get(0) is None and cache.get(9) is not None
    cache.put(99, b"y" * 2000, 2000)  # bigger than the bound: not cached at all
    assert cache.get(99) is None and cache.weight <= 1000


def test_reader_reports_a_replaced_version_and_corrupt_offsets(ro_store: Store) -> None:
    reader = DocumentReader(ro_store)
    doc = reader.document(record("index.mdx"))
    assert doc is not None and doc.offsets is not None
    gone = DocumentRecord(
        doc.path, doc.size, doc.mtime, doc.sha256, doc.chunks, doc.gen + 99, doc.offsets
    )
    with pytest.raises(ChunksMissingError):
        reader.read(gone, 0, 10)
    shifted = DocumentRecord(
        doc.path,
        doc.size,
        doc.mtime,
        doc.sha256,
        doc.chunks,
        doc.gen,
        tuple(o + 1 if i else 0 for i, o in enumerate(doc.offsets)),
    )
    with pytest.raises(CorruptDocumentError):
        DocumentReader(ro_store).read(shifted, 0, doc.size)
