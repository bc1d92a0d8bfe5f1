"""What a writer keeps true and no other test watched (issue 46's breaks): each vector is its
own model text's and is reused, never recomputed; a document commits only with every chunk
written; the write lock is held for the whole run; a file held open by a writable mount keeps
its stored version. Hash stand-in model, real Qdrant Edge stores on disk."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from semfs.ingest.densepass import embed_missing, mark_embedded, model_text_of
from semfs.ingest.embedding.embedder import HashEmbedder
from semfs.ingest.pipeline import ingest
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Searcher
from semfs.ingest.store import DelegatingStore, Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.schema import ChunkRecord, DocumentRecord
from semfs.ingest.store.writelock import WRITE_LOCK, CollectionLock
from tests.helpers.embedders import CountingEmbedder


def _log(lines: int, word: str = "ok") -> str:
    return "".join(
        f"2026-11-01 12:{i // 60 % 60:02d}:{i % 60:02d} INFO job {i} {word}\n" for i in range(lines)
    )


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def _pending(store: Store) -> list[ChunkRecord]:
    chunks, cursor = store.chunks_without_dense(100_000)
    assert cursor is None
    return chunks


def test_a_repeated_text_is_embedded_once_across_the_dense_pass_windows(
    tmp_path: Path, store_dir: Path
) -> None:
    """Two copies of one log in windows of the second pass far apart: the second copy's
    chunks take the first's stored vectors (looked up by their model text's hash), so the
    model sees each distinct text once."""
    src = tmp_path / "src"
    for folder in ("a", "z"):
        (src / folder).mkdir(parents=True)
        (src / folder / "run.log").write_text(_log(1500))
    with open_store(CollectionAddress(store=store_dir)) as store:
        first = ingest(src, store, model="hash", embedder=CountingEmbedder(), dense=False)
        total = first.chunks_written
        distinct = {c.vhash for c in _pending(store)}
        assert total == 2 * len(distinct) >= 40
        embedder = CountingEmbedder()
        # Windows of 2 x 8 texts: the copies are embedded many windows apart.
        report = embed_missing(store, embedder, batch_size=2)
        assert len(embedder.texts) == len(set(embedder.texts)) == len(distinct)
        assert report.embedded == len(distinct) and report.reused > 0
        assert store.embedding_counts() == (total, total)


def test_each_vector_is_its_own_model_texts(tmp_path: Path, store_dir: Path) -> None:
    """Two files whose chunk texts are equal but whose titles differ have different model
    texts: each chunk gets the vector of its own model text, never the other file's."""
    src = tmp_path / "src"
    src.mkdir()
    body = "The gasket of the second turbine is replaced every spring.\n"
    (src / "turbines.md").write_text(f"# Turbines\n\n{body}")
    (src / "gardens.md").write_text(f"# Gardens\n\n{body}")
    with open_store(CollectionAddress(store=store_dir)) as store:
        ingest(src, store, model="hash", embedder=CountingEmbedder(), dense=False)
        chunks = _pending(store)
        assert {c.path for c in chunks} == {"turbines.md", "gardens.md"}
        embed_missing(store, CountingEmbedder())
        model = HashEmbedder(384)
        got: dict[str, list[float]] = {}
        for c in chunks:
            vector = store.chunk_vectors(c.path, c.gen, [c.index])[c.index]
            (own,) = model.encode([model_text_of(c)])
            assert _cosine(vector, own) > 0.999, c.path
            got[c.path] = vector
        assert _cosine(got["turbines.md"], got["gardens.md"]) < 0.99


def test_the_keyword_pass_gives_a_copy_the_stored_vectors(tmp_path: Path, store_dir: Path) -> None:
    """A copy of an embedded file, ingested without the dense pass, is found by meaning at
    once: its chunks were written with the vectors already stored for their texts."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "run.log").write_text(_log(400, "gasket replaced"))
    with open_store(CollectionAddress(store=store_dir)) as store:
        ingest(src, store, model="hash", embedder=CountingEmbedder())
        (src / "copy").mkdir()
        (src / "copy" / "run.log").write_text(_log(400, "gasket replaced"))
        report = ingest(src, store, model="hash", embedder=CountingEmbedder(), dense=False)
        assert report.added == ["copy/run.log"]
        embedded, total = store.embedding_counts()
        assert embedded == total == 2 * report.chunks_written
        assert store.embedding_counts("copy") == (report.chunks_written, report.chunks_written)
        found = Searcher(store, embedder=HashEmbedder(384)).search(
            SearchRequest("gasket replaced job 7", mode="semantic", k=10)
        )
        assert "copy/run.log" in [h.path for h in found]


def test_the_pending_flag_stays_while_a_chunk_lacks_its_vector(
    tmp_path: Path, store_dir: Path
) -> None:
    """mark_embedded clears the meta's dense_pending only when every chunk has its vector:
    cleared early, the chunks left would never be embedded (nothing looks for them)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("# A\n\nalpha words\n")
    with open_store(CollectionAddress(store=store_dir)) as store:
        ingest(src, store, model="hash", embedder=CountingEmbedder(), dense=False)
        assert store.embedding_counts()[0] == 0
        assert mark_embedded(store) is False
        meta = store.read_meta()
        assert meta is not None and meta.dense_pending
        embed_missing(store, CountingEmbedder())
        meta = store.read_meta()
        assert meta is not None and not meta.dense_pending


class _CommitWatch(DelegatingStore):
    """At every commit, how many of the document's chunks the store holds, and whether the
    collection's write lock could be taken by another writer."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.commits: list[tuple[str, int, int]] = []
        self.lock_free: list[bool] = []

    def put_document(self, record: DocumentRecord) -> None:
        held = self.inner.chunk_texts(record.path, record.gen, range(record.chunks))
        self.commits.append((record.path, len(held), record.chunks))
        other = CollectionLock(self.inner.lock_path(WRITE_LOCK), "first")
        taken = other.try_acquire()
        other.release()
        self.lock_free.append(taken)
        self.inner.put_document(record)


def test_a_document_commits_only_with_every_chunk_written_under_the_write_lock(
    tmp_path: Path, store_dir: Path
) -> None:
    """A document of several windows of chunks (the first pass writes 256 at a time): its
    record comes after its last chunk, never after the first window. All along, another
    writer cannot take the collection's write lock."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("# A\n\nalpha words\n")
    (src / "big.log").write_text(_log(12_000))
    (src / "z.md").write_text("# Z\n\nzeta words\n")
    with open_store(CollectionAddress(store=store_dir)) as inner:
        store = _CommitWatch(inner)
        ingest(src, store, model="hash", embedder=CountingEmbedder(), dense=False)
        assert {p for p, _, _ in store.commits} == {"a.md", "big.log", "z.md"}
        big = next(c for c in store.commits if c[0] == "big.log")
        assert big[2] > 256, big
        for path, written, chunks in store.commits:
            assert written == chunks, (path, written, chunks)
        assert store.lock_free == [False] * len(store.commits)
        # And after the run, the lock is free again.
        after = CollectionLock(inner.lock_path(WRITE_LOCK), "first")
        assert after.try_acquire()
        after.release()


def test_a_file_held_open_keeps_its_stored_version(tmp_path: Path, store_dir: Path) -> None:
    """A file a writable mount holds open for writing is neither read nor deleted by an
    ingest beside it: its stored version stays, listed and readable, until it is closed."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "notes.md").write_text("# Notes\n\nthe first version\n")
    (src / "other.md").write_text("# Other\n\nother words\n")
    with open_store(CollectionAddress(store=store_dir)) as store:
        ingest(src, store, model="hash", embedder=CountingEmbedder(), dense=False)
        (src / "notes.md").write_text("# Notes\n\nhalf writ")
        (src / "other.md").write_text("# Other\n\nnew words\n")
        kwargs: dict[str, Any] = {"held": lambda path: path == "notes.md"}
        report = ingest(
            src, store, model="hash", embedder=CountingEmbedder(), dense=False, **kwargs
        )
        assert report.updated == ["other.md"] and not report.deleted
        docs = {d.path: d for d in store.list_documents()}
        assert set(docs) == {"notes.md", "other.md"}
        kept = docs["notes.md"]
        text = "".join(store.chunk_texts("notes.md", kept.gen, range(kept.chunks)).values())
        assert text == "# Notes\n\nthe first version\n"
