"""One contract, every backend: embedded Qdrant Edge, qdrant-client local mode (standing in
for a server), the owner's proxy (an Edge store served on its socket, called through
:class:`RemoteStore`) and, when QDRANT_URL is set, a real Qdrant server."""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import qdrant_edge as qe

from semfs.ingest.embedding.embedder import HashEmbedder
from semfs.ingest.errors import StoreLockedError, StoreNotFoundError
from semfs.ingest.store import SparseQuery, Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.edge import warming
from semfs.ingest.store.edge.store import EdgeStore
from semfs.ingest.store.ipc.client import RemoteStore
from semfs.ingest.store.schema import (
    BLOB_PART,
    ChunkPoint,
    ChunkRecord,
    DenseVector,
    DirectoryRecord,
    DocumentRecord,
    StoreMeta,
    chunk_id,
    dir_id,
    doc_id,
    manifest_id,
    meta_id,
    vector_hash,
)
from semfs.ingest.store.server_store import ServerStore
from semfs.ingest.store.writelock import EMBED_LOCK, WRITE_LOCK

BACKENDS = ["edge", "local", "proxy", "server"]
# Read at import, before the autouse fixture clears QDRANT_URL for every other test.
SERVER_URL = os.environ.get("QDRANT_URL")
EMB = HashEmbedder(256)
BM25 = qe.Bm25()


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    owner: EdgeStore | None = None
    stop: Callable[[], None] | None = None
    if request.param == "edge":
        s: Store = EdgeStore(tmp_path / "edge", "docs")
    elif request.param == "proxy":
        # The owner of an Edge store serves it on its socket, as a mount does; the test's
        # calls go through the socket to it.
        owner = EdgeStore(tmp_path / "owned", "docs")
        stop = owner.serve_writers()
        s = open_store(CollectionAddress("docs", store=tmp_path / "owned"))
        assert isinstance(s, RemoteStore)
    elif request.param == "local":
        s = ServerStore(CollectionAddress(url=f"file://{tmp_path / 'local'}"))
    else:
        if not SERVER_URL:
            pytest.skip("QDRANT_URL is not set: no real Qdrant server to test against")
        s = ServerStore(
            CollectionAddress(
                f"semfs-test-{uuid.uuid4().hex[:8]}",
                url=SERVER_URL,
                api_key=os.environ.get("QDRANT_API_KEY"),
            )
        )
    try:
        yield s
    finally:
        if isinstance(s, ServerStore) and request.param == "server" and s.exists():
            s.client.delete_collection(s.collection)
        s.close()
        if stop is not None:
            stop()
        if owner is not None:
            owner.close()


def _points(path: str, gen: int, texts: list[str]) -> list[ChunkPoint]:
    out, start = [], 0
    for i, t in enumerate(texts):
        end = start + len(t.encode())
        rec = ChunkRecord(path, gen, i, start, end, i + 1, i + 1, t, "")
        sv = BM25.embed_document(t)
        out.append(ChunkPoint(rec, EMB.encode([t])[0], list(sv.indices), list(sv.values)))
        start = end
    return out


def _commit(store: Store, path: str, gen: int, texts: list[str]) -> DocumentRecord:
    pts = _points(path, gen, texts)
    store.upsert_chunks(pts)
    body = "".join(texts).encode()
    rec = DocumentRecord(
        path, len(body), 1.5, "sha-" + str(gen), len(texts), gen, tuple(p.record.start for p in pts)
    )
    store.put_document(rec)
    store.delete_stale_chunks(path, gen)
    return rec


def _query(store: Store, text: str, mode: str, under: str | None = None) -> list[str]:
    sv = BM25.embed_query(text)
    hits = store.query(
        EMB.encode([text])[0], SparseQuery(list(sv.indices), list(sv.values)), mode, 10, under
    )
    return [h.record.path for h in hits]


def _keyword_points(path: str, gen: int, texts: list[str]) -> list[ChunkPoint]:
    """Chunks as the keyword pass writes them: text, BM25 vector and vhash, no dense vector."""
    return [
        ChunkPoint(
            replace(p.record, vhash=vector_hash(p.record.text)),
            None,
            p.sparse_indices,
            p.sparse_values,
        )
        for p in _points(path, gen, texts)
    ]


def test_keywords_first_then_dense_vectors_in_place(store: Store) -> None:
    """A chunk written without its dense vector is found by keywords, listed as lacking one,
    and gets it in place; a vector is found again by the hash of its text; a chunk that is
    gone is never made again by a late vector."""
    store.create(256)
    texts = ["rotate the api key\n", "install the cli\n", "rotate the api key\n"]
    store.upsert_chunks(_keyword_points("a.md", 1, texts))
    store.put_document(DocumentRecord("a.md", 52, 1.5, "sha", 3, 1, (0, 19, 35)))
    assert store.embedding_counts() == (0, 3) and store.embedding_counts("nowhere") == (0, 0)
    assert _query(store, "install", "keyword") == ["a.md"]
    assert _query(store, "install", "semantic") == []  # nothing to find by meaning yet
    assert _query(store, "install", "hybrid") == ["a.md"]  # keywords alone score it
    first, cursor = store.chunks_without_dense(2)
    rest, end = store.chunks_without_dense(2, cursor)
    assert cursor is not None and end is None
    missing = [*first, *rest]
    assert sorted(c.index for c in missing) == [0, 1, 2]
    assert {c.vhash for c in missing} == {vector_hash(t) for t in texts}
    assert store.dense_by_hash([vector_hash(texts[0])]) == {}
    with_vectors = [DenseVector("a.md", 1, c.index, EMB.encode([c.text])[0]) for c in missing]
    assert store.set_dense(with_vectors) == 3
    assert store.embedding_counts() == (3, 3)
    assert store.chunks_without_dense(10) == ([], None)
    found = store.dense_by_hash([vector_hash(texts[0]), vector_hash(texts[1]), "nope"])
    assert set(found) == {vector_hash(texts[0]), vector_hash(texts[1])}
    assert found[vector_hash(texts[1])] == pytest.approx(EMB.encode([texts[1]])[0], abs=1e-6)
    assert _query(store, "install", "semantic")[:1] == ["a.md"]
    # A vector for a chunk that no longer exists sets nothing and makes no point.
    store.delete_stale_chunks("a.md", 2)  # every chunk of generation 1
    late = [DenseVector("a.md", 1, 0, EMB.encode(["x"])[0])]
    assert store.set_dense(late) == 0
    assert store.count_chunks() == 0 and store.embedding_counts() == (0, 0)
    # Some there, some gone: the ones there get theirs.
    store.upsert_chunks(_keyword_points("c.md", 1, ["one\n", "two\n"]))
    both = [DenseVector("c.md", 1, i, EMB.encode([t])[0]) for i, t in enumerate(["one", "two"])]
    store.delete_stale_chunks("c.md", 1)  # keeps generation 1: both stay
    assert store.set_dense([*both, DenseVector("c.md", 1, 9, EMB.encode(["z"])[0])]) == 2
    assert store.embedding_counts() == (2, 2)


def test_embedding_counts_while_a_pass_writes_between_its_counts(tmp_path: Path) -> None:
    """The share embedded is two counts; a first pass that commits chunks between them must
    not make it negative (before: the total, then the chunks without a vector, gave
    "embedded: -256" in `semfs status` during a first pass). The writer is the real store,
    made to commit right after the first count."""
    store = EdgeStore(tmp_path / "edge", "docs")
    try:
        store.create(256)
        store.upsert_chunks(_keyword_points("a.md", 1, ["one\n", "two\n"]))
        engine = store._open_engine()
        assert engine is not None
        real_count = engine.count
        counts = 0

        def count_then_a_commit(where: Any) -> int:
            nonlocal counts
            n = real_count(where)
            counts += 1
            if counts == 1:  # another batch of the pass lands between the two counts
                store.upsert_chunks(_keyword_points("b.md", 1, [f"{i}\n" for i in range(5)]))
            return n

        engine.count = count_then_a_commit  # type: ignore[method-assign]
        embedded, total = store.embedding_counts()
        assert counts == 2 and 0 <= embedded <= total, (embedded, total)
    finally:
        store.close()


def test_chunks_without_dense_in_a_folder_or_of_documents(store: Store) -> None:
    """The dense pass asks for what readers use first (semfs.ingest.focus): the chunks
    lacking a vector below one folder, or of some documents, and no others."""
    store.create(256)
    for path in ["x/a.md", "x/y/b.md", "xy/c.md", "d.md"]:
        store.upsert_chunks(_keyword_points(path, 1, [f"{path} one\n", f"{path} two\n"]))
    first = [DenseVector("x/a.md", 1, 0, EMB.encode(["x/a.md one"])[0])]
    assert store.set_dense(first) == 1

    def paths(chunks: list[ChunkRecord]) -> list[tuple[str, int]]:
        return sorted((c.path, c.index) for c in chunks)

    below_x, end = store.chunks_without_dense(10, under="x")
    assert paths(below_x) == [("x/a.md", 1), ("x/y/b.md", 0), ("x/y/b.md", 1)] and end is None
    of_docs, _ = store.chunks_without_dense(10, paths=["d.md", "xy/c.md", "gone.md"])
    assert paths(of_docs) == [("d.md", 0), ("d.md", 1), ("xy/c.md", 0), ("xy/c.md", 1)]
    assert store.chunks_without_dense(10, under="x", paths=["d.md"]) == ([], None)
    assert store.chunks_without_dense(10, paths=[]) == ([], None)
    page, cursor = store.chunks_without_dense(2, under="x")
    rest, _ = store.chunks_without_dense(2, cursor, under="x")
    assert paths([*page, *rest]) == paths(below_x)


def test_the_writers_lock_file_is_the_collections_own(store: Store, tmp_path: Path) -> None:
    a = store.lock_path(WRITE_LOCK)
    assert a is not None and a.name == WRITE_LOCK
    assert store.lock_path(EMBED_LOCK) == a.with_name(EMBED_LOCK)


def test_empty_store_reads_as_empty(store: Store) -> None:
    assert not store.exists()
    assert store.read_meta() is None
    assert store.list_documents() == []
    assert store.get_document("a.md") is None
    assert store.count_chunks() == 0


def test_meta_roundtrip(store: Store) -> None:
    store.create(256)
    store.write_meta(StoreMeta("hash:256", 256, generation=3, dirty=True))
    assert store.read_meta() == StoreMeta("hash:256", 256, generation=3, dirty=True)


def test_documents_and_chunks(store: Store) -> None:
    store.create(256)
    rec = _commit(store, "guide/a.md", 1, ["# Rotate keys\n\n", "Rotate the api key often.\n"])
    _commit(store, "b.md", 1, ["install the cli\n"])
    assert {d.path for d in store.list_documents()} == {"guide/a.md", "b.md"}
    listed = next(d for d in store.list_documents() if d.path == "guide/a.md")
    # Listings carry the offsets: the mount opens a file without asking the store.
    assert listed == rec and tuple(listed.offsets or ()) == (0, len(b"# Rotate keys\n\n"))
    full = store.get_document("guide/a.md")
    assert full is not None and tuple(full.offsets or ()) == (0, len(b"# Rotate keys\n\n"))
    chunks = store.get_chunks("guide/a.md", 1, [1, 0])
    assert [c.index for c in chunks] == [1, 0]
    assert chunks[1].text == "# Rotate keys\n\n"
    # What a file read fetches: the text alone, by index.
    assert store.chunk_texts("guide/a.md", 1, [1, 0]) == {
        0: "# Rotate keys\n\n",
        1: "Rotate the api key often.\n",
    }
    assert store.count_chunks() == 3
    assert store.chunk_versions() == {("guide/a.md", 1), ("b.md", 1)}


def test_chunk_vectors_are_the_stored_dense_vectors(store: Store) -> None:
    """What .similar asks with: a document's own vectors, by index; a query by one finds
    its chunk first."""
    store.create(256)
    texts = ["rotate the api key\n", "install the cli tool\n"]
    _commit(store, "a.md", 1, texts)
    _commit(store, "b.md", 1, ["bake bread at home\n"])
    got = store.chunk_vectors("a.md", 1, [1, 0, 7])
    assert sorted(got) == [0, 1]
    for i, text in enumerate(texts):
        want = EMB.encode([text])[0]
        assert len(got[i]) == 256
        assert max(abs(a - b) for a, b in zip(got[i], want, strict=True)) < 1e-6
    assert store.chunk_vectors("a.md", 2, [0]) == {}  # another version: none
    hits = store.query(got[1], SparseQuery([], []), "semantic", 3)
    assert (hits[0].record.path, hits[0].record.index) == ("a.md", 1)
    assert hits[0].similarity == pytest.approx(1.0, abs=1e-5)
    # A ranking that needs no cosine (hybrid on a partly embedded store) does not read the
    # vectors back: the same chunks and scores, no similarity.
    bare = store.query(got[1], SparseQuery([], []), "semantic", 3, similarities=False)
    assert [(h.record, h.score) for h in bare] == [(h.record, h.score) for h in hits]
    assert all(h.similarity is None for h in bare)


@pytest.mark.parametrize("mode", ["hybrid", "semantic", "keyword"])
def test_query_ids_are_the_querys_chunks_without_their_records(store: Store, mode: str) -> None:
    """What a partly embedded hybrid search weighs its candidates with: the query's chunks,
    as point ids, with its scores and whether each has its dense vector; then the records of
    those it keeps, by id (a chunk that is gone, or a point that is no chunk, left out)."""
    store.create(256)
    _commit(store, "a.md", 1, ["rotate the api key\n", "install the cli tool\n"])
    store.upsert_chunks(_keyword_points("b.md", 1, ["rotate a key by hand\n", "bake bread\n"]))
    store.put_document(DocumentRecord("b.md", 32, 1.5, "sha", 2, 1, (0, 21)))
    sv = BM25.embed_query("rotate key")
    dense, sparse = EMB.encode(["rotate key"])[0], SparseQuery(list(sv.indices), list(sv.values))
    found = store.query(dense, sparse, mode, 10)
    ids = store.query_ids(dense, sparse, mode, 10)
    assert found

    def ranked(pairs: list[tuple[str, float]]) -> list[tuple[str, float]]:
        return sorted(pairs, key=lambda p: (-p[1], p[0]))  # tied chunks come in any order

    want = [(chunk_id(h.record.path, h.record.gen, h.record.index), h.score) for h in found]
    assert ranked([(i.id, i.score) for i in ids]) == ranked(want)
    embedded = {i.id: i.embedded for i in ids}
    for h in found:  # b.md was written by a keyword pass: no vector yet
        assert embedded[chunk_id(h.record.path, 1, h.record.index)] == (h.record.path == "a.md")
    gone = chunk_id("a.md", 7, 0)
    records = store.chunks_by_id([i.id for i in ids] + [gone, doc_id("a.md")])
    assert records == {chunk_id(h.record.path, 1, h.record.index): h.record for h in found}
    assert store.chunks_by_id([]) == {}


def test_new_generation_replaces_old(store: Store) -> None:
    store.create(256)
    _commit(store, "a.md", 1, ["old text\n"])
    store.upsert_chunks(_points("a.md", 2, ["new text\n", "more\n"]))
    # Before the commit the old version is the visible one, and its chunks are intact.
    doc = store.get_document("a.md")
    assert doc is not None and doc.gen == 1
    assert [c.text for c in store.get_chunks("a.md", 1, [0])] == ["old text\n"]
    _commit(store, "a.md", 2, ["new text\n", "more\n"])
    assert store.chunk_versions() == {("a.md", 2)}
    assert store.get_chunks("a.md", 1, [0]) == []
    assert store.chunk_texts("a.md", 1, [0]) == {}
    assert store.chunk_texts("a.md", 2, [1, 5]) == {1: "more\n"}


def test_delete_documents(store: Store) -> None:
    store.create(256)
    _commit(store, "a.md", 1, ["alpha\n"])
    _commit(store, "b.md", 1, ["beta\n"])
    store.delete_documents(["a.md"])
    assert [d.path for d in store.list_documents()] == ["b.md"]
    assert store.chunk_versions() == {("b.md", 1)}


@pytest.mark.parametrize("mode", ["hybrid", "semantic", "keyword"])
def test_query_modes_and_scope(store: Store, mode: str) -> None:
    store.create(256)
    _commit(store, "keys/rotate.md", 1, ["rotate the api key in the dashboard\n"])
    _commit(store, "install.md", 1, ["install the command line tool with npm\n"])
    _commit(store, "keys/sub/revoke.md", 1, ["revoke an api key that leaked\n"])
    assert _query(store, "rotate api key", mode)[0] == "keys/rotate.md"
    scoped = _query(store, "install npm key", mode, under="keys")
    assert scoped and all(p.startswith("keys/") for p in scoped)
    assert set(_query(store, "api key", mode, under="keys/sub")) <= {"keys/sub/revoke.md"}


def test_keyword_stats_are_bm25s_counts_and_the_best_matchs_weights(store: Store) -> None:
    """What a search of several collections needs to score their best keyword matches with one
    IDF (issue 50): the chunks, how many hold each query term (exact, whatever the backend),
    and the weights of each term in the best match below a folder."""
    store.create(256)
    _commit(
        store,
        "keys/rotate.md",
        1,
        ["rotate the api key\n", "the key rotates every hour of every day of the week\n"],
    )
    _commit(store, "install.md", 1, ["install the tool\n"])
    _commit(store, "keys/sub/revoke.md", 1, ["revoke a leaked api key\n"])
    sv = BM25.embed_query("rotate key zebra")
    sparse = SparseQuery(list(sv.indices), list(sv.values))
    stats = store.keyword_stats(sparse)
    assert stats is not None
    assert stats.chunks == 4
    # "rotate" and "rotates" share a stem; "zebra" is nowhere.
    assert stats.holding == (2, 3, 0)
    best = dict(zip(sv.indices, stats.best, strict=True))
    first = BM25.embed_document("rotate the api key\n")
    weights = dict(zip(first.indices, first.values, strict=True))
    assert best == {i: weights.get(i, 0.0) for i in sv.indices}
    inside = store.keyword_stats(sparse, under="keys/sub")
    assert inside is not None and inside.holding == stats.holding  # the IDF's: everywhere
    assert inside.best[0] == 0.0 and inside.best[1] > 0  # revoke.md: "key", not "rotate"
    assert store.keyword_stats(SparseQuery([], [])) is None


def test_definitions_by_exact_name(store: Store) -> None:
    """A lookup by name (the symbol mode): chunks whose symbols hold one of the names,
    exactly, by path and chunk, within a folder; no vector is needed."""
    store.create(256)
    for path, names in (
        ("src/b.py", ("retry_upload", "Uploader.retry_upload")),
        ("src/a.go", ("RetryUpload", "Uploader.RetryUpload", "retry_upload")),
        ("other/c.py", ("retry_upload",)),
        ("docs.md", ()),
    ):
        point = _points(path, 1, [f"text of {path}\n"])[0]
        rec = replace(point.record, syntax="python" if names else "", symbols=names)
        store.upsert_chunks([replace(point, record=rec)])
    found = store.definitions(["retry_upload"], 10)
    assert [h.record.path for h in found] == ["other/c.py", "src/a.go", "src/b.py"]
    assert all(h.score == 1.0 and h.record.symbols for h in found)
    assert [h.record.path for h in store.definitions(["retry_upload"], 10, "src")] == [
        "src/a.go",
        "src/b.py",
    ]
    assert [h.record.path for h in store.definitions(["Uploader.RetryUpload", "x"], 10)] == [
        "src/a.go"
    ]
    assert store.definitions(["Retry_upload"], 10) == []  # exact: case matters
    assert store.definitions(["retry"], 10) == [] == store.definitions([], 10)
    assert len(store.definitions(["retry_upload"], 2)) == 2
    sv = BM25.embed_query("retry_upload")
    assert store.query([], SparseQuery(list(sv.indices), list(sv.values)), "symbol", 10) == []


def test_same_ranking_on_edge_and_local(tmp_path: Path) -> None:
    """Congruence: the two embedded-capable backends rank the same corpus the same way."""
    words = ["rotate", "keys", "install", "token", "deploy", "domain"]
    words += ["proxy", "cache", "search", "model", "vector", "api"]
    # Distinct lengths, so no two documents tie (tied ranks may come back in either order).
    texts = {f"d{i}.md": " ".join((words[i:] + words[:i])[: i + 1]) + "\n" for i in range(12)}
    results = []
    for s in (
        EdgeStore(tmp_path / "e", "docs"),
        ServerStore(CollectionAddress(url=f"file://{tmp_path / 'l'}")),
    ):
        s.create(256)
        for path, t in texts.items():
            _commit(s, path, 1, [t])
        sv = BM25.embed_query("install keys")
        per_mode = []
        for mode in ("semantic", "keyword", "hybrid"):
            hits = s.query(
                EMB.encode(["install keys"])[0],
                SparseQuery(list(sv.indices), list(sv.values)),
                mode,
                12,
            )
            # Sorted by score, then path: equal scores may come back in either order.
            # The tail holds documents the query shares no word with: all tied, compare the head.
            per_mode.append(sorted((-round(h.score, 4), h.record.path) for h in hits)[:5])
        results.append(per_mode)
        s.close()
    assert results[0] == results[1]


def test_int8_vectors_rank_and_score_like_an_exact_scan(tmp_path: Path) -> None:
    """An immutable Edge segment scans int8 copies of the dense vectors and rescores the best
    with the float ones: semantic and hybrid results, fused scores included, are those of the
    local backend's exact search."""
    rnd = random.Random(11)
    dim, vocab = 64, [f"w{i}" for i in range(200)]
    points = []
    for i in range(2000):  # random vectors: no two tie, so an order difference is a real one
        text = " ".join(rnd.sample(vocab, 6)) + "\n"
        rec = ChunkRecord(f"d{i:04d}.md", 1, 0, 0, len(text), 1, 1, text, "")
        sv = BM25.embed_document(text)
        vec = [rnd.gauss(0, 1) for _ in range(dim)]
        points.append(ChunkPoint(rec, vec, list(sv.indices), list(sv.values)))
    edge = EdgeStore(tmp_path / "e", "docs")
    edge.create(dim)
    edge.upsert_chunks(points)
    edge.close()
    # Ingest's compaction makes a segment immutable past ~6.5k chunks; a low threshold gets
    # this small one there.
    config = qe.EdgeConfig(
        sparse_vectors={"bm25": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=1),
    )
    shard = qe.EdgeShard.load(str(edge.shard_dir), config)
    shard.optimize()
    shard.close()
    assert list(edge.shard_dir.rglob("quantized.data")), "no int8 vectors: nothing tested"
    local = ServerStore(CollectionAddress(url=f"file://{tmp_path / 'l'}"))
    local.create(dim)
    local.upsert_chunks(points)
    edge = EdgeStore(tmp_path / "e", "docs")
    try:
        for _ in range(3):
            dense = [rnd.gauss(0, 1) for _ in range(dim)]
            sv = BM25.embed_query(" ".join(rnd.sample(vocab, 2)))
            sparse = SparseQuery(list(sv.indices), list(sv.values))
            got, want = (s.query(dense, sparse, "semantic", 50) for s in (edge, local))
            assert [h.record.path for h in got] == [h.record.path for h in want]
            assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-4)
            # Hybrid: BM25 ties (same words, same length) may come back in either order, and
            # one of a tie at the limit in either; the fused scores are the same.
            got, want = (s.query(dense, sparse, "hybrid", 50) for s in (edge, local))
            assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-4)
            scores = {h.record.path: h.score for h in want}
            common = [h for h in got if h.record.path in scores]
            assert len(common) > 40
            assert [h.score for h in common] == pytest.approx(
                [scores[h.record.path] for h in common], abs=1e-4
            )
    finally:
        edge.close()
        local.close()


def test_edge_store_has_one_owner(tmp_path: Path) -> None:
    first = EdgeStore(tmp_path, "docs")
    first.create(256)
    _commit(first, "a.md", 1, ["alpha\n"])
    first.flush()
    try:
        for _ in range(2):
            # In one process the refusal names no pid (it would be the caller's own);
            # another process's refusal names the holder (tests/unit/pipeline/test_ingest.py).
            with pytest.raises(StoreLockedError, match=r"already open in this process"):
                EdgeStore(tmp_path, "docs")
        # The refused openers left the owner's shard intact (Edge alone would not).
        _commit(first, "b.md", 1, ["beta\n"])
        first.flush()
        assert {d.path for d in first.list_documents()} == {"a.md", "b.md"}
    finally:
        first.close()
    EdgeStore(tmp_path, "docs").close()  # released on close


def _bytes_read() -> int:
    return next(int(line.split()[1]) for line in open("/proc/self/io") if line.startswith("rchar"))


def test_edge_warms_the_read_path_once_an_interval(tmp_path: Path) -> None:
    """What a read that faulted starts: one pass reading the payload and id-tracker files
    through the page cache, in a thread; another is not started within WARM_INTERVAL_S."""
    s = EdgeStore(tmp_path, "docs")
    s.create(256)
    text = os.urandom(20_000).hex() + "\n"  # incompressible: the payload holds it in full
    _commit(s, "a.md", 1, [text])
    s.flush()
    assert any(s.shard_dir.glob(warming.READ_PATH[0]))
    before = _bytes_read()
    try:
        assert s.warmer.start()
        deadline = time.monotonic() + 10
        while s.warmer.running and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not s.warmer.running
        assert _bytes_read() - before >= len(text) // 2
        assert not s.warmer.start()
        assert s.chunk_texts("a.md", 1, [0]) == {0: text}
    finally:
        s.close()


def test_missing_collection_is_a_clear_error(tmp_path: Path) -> None:
    s = open_store(CollectionAddress("nothing", store=tmp_path))
    with pytest.raises(StoreNotFoundError, match="semfs ingest"):
        s.get_chunks("a.md", 1, [0])
    s.close()


# The ids' namespace since the first store: stores on disk address their points by these ids.
_NAMESPACE = uuid.UUID("6f1d3a52-9a53-4c5e-8f0e-5e6d2b1c9a10")


def test_point_ids_stay_the_uuid5_of_their_keys() -> None:
    # A faster formula (no uuid objects, no uuid import) must give the same ids.
    for path in ("a.md", "guide/é ü/b c.md", "x" * 300):
        assert doc_id(path) == str(uuid.uuid5(_NAMESPACE, "doc\0" + path))
        assert dir_id(path) == str(uuid.uuid5(_NAMESPACE, "dir\0" + path))
        assert chunk_id(path, 7, 12) == str(uuid.uuid5(_NAMESPACE, f"chunk\0{path}\0{7}\0{12}"))
    assert meta_id() == str(uuid.uuid5(_NAMESPACE, "meta"))
    assert manifest_id(3) == str(uuid.uuid5(_NAMESPACE, "manifest\0" + "3"))


def test_blobs_are_stored_in_parts_and_deleted_like_chunks(store: Store) -> None:
    store.create(EMB.dimension)
    data = bytes(range(256)) * (BLOB_PART // 256) + b"tail"  # two parts, the second short
    store.put_blob("a/report.pdf", 3, data)
    store.put_blob("a/report.pdf", 4, b"newer")
    store.put_blob("empty.pdf", 1, b"")
    parts = store.read_blob("a/report.pdf", 3, [0, 1, 2])
    assert parts == {0: data[:BLOB_PART], 1: b"tail"}
    assert store.read_blob("empty.pdf", 1, [0]) == {0: b""}
    assert {("a/report.pdf", 3), ("a/report.pdf", 4)} <= store.chunk_versions()
    assert store.count_chunks() == 0  # blob parts are not chunks
    _commit(store, "a/report.pdf.md", 4, ["view\n"])
    store.delete_stale_chunks("a/report.pdf", 4)  # the old version's parts go, not the doc's
    assert store.read_blob("a/report.pdf", 3, [0, 1]) == {}
    assert store.read_blob("a/report.pdf", 4, [0]) == {0: b"newer"}
    assert store.get_document("a/report.pdf.md") is not None
    store.delete_stale_chunks("a/report.pdf", None)
    assert store.chunk_versions() == {("a/report.pdf.md", 4), ("empty.pdf", 1)}


def test_directories(store: Store) -> None:
    store.create(256)
    assert store.list_directories() == []
    records = [DirectoryRecord(p, 0o750, 1000, 1000, 1_700_000_000_000_000_000) for p in ("", "a")]
    store.put_directories(records)
    store.put_directories([DirectoryRecord("a/b", 0o700, 1000, 100, 5)])
    store.put_directories([DirectoryRecord("a", 0o755, 1000, 1000, 7)])  # replaces a's record
    got = sorted(store.list_directories(), key=lambda d: d.path)
    assert got == [
        records[0],
        DirectoryRecord("a", 0o755, 1000, 1000, 7),
        DirectoryRecord("a/b", 0o700, 1000, 100, 5),
    ]
    store.delete_directories(["a", "nothing"])
    assert sorted(d.path for d in store.list_directories()) == ["", "a/b"]
    assert store.list_documents() == []  # folders are not documents


def test_text_filters_find_the_paths_to_grep(store: Store) -> None:
    store.create(256)
    _commit(store, "keys/rotate.md", 1, ["Rotate the API key\n", "then deploy it.\n"])
    _commit(store, "install.md", 1, ["install, then rotate\n"])
    assert store.chunk_paths_matching(["API key"], []) == ["keys/rotate.md"]
    assert store.chunk_paths_matching(["api key"], []) == []  # substrings are case-sensitive
    # Words are whole words, in any case, all in one chunk.
    assert store.chunk_paths_matching([], ["rotate"]) == ["install.md", "keys/rotate.md"]
    assert store.chunk_paths_matching([], ["rotate"], under="keys") == ["keys/rotate.md"]
    # Several folders, or some documents: the filter a scoped token's grep runs in the engine.
    _commit(store, "ops/run.md", 1, ["rotate nightly\n"])
    assert store.chunk_paths_matching([], ["rotate"], under=("keys", "ops")) == [
        "keys/rotate.md",
        "ops/run.md",
    ]
    assert store.chunk_paths_matching([], ["rotate"], under=("ops",)) == ["ops/run.md"]
    assert store.chunk_paths_matching([], ["rotate"], under=("nothing",)) == []
    assert store.chunk_paths_matching([], ["rotate"], paths=["install.md"]) == ["install.md"]
    assert store.chunk_paths_matching([], ["rotate"], "keys", ["install.md"]) == []
    store.delete_documents(["ops/run.md"])
    assert store.chunk_paths_matching([], ["rot"]) == []
    assert store.chunk_paths_matching(["deploy"], ["rotate"]) == []
    assert store.chunk_paths_matching(["deploy"], ["then"]) == ["keys/rotate.md"]
    # Any generation: an uncommitted one is found too (the grep checks committed text).
    store.upsert_chunks(_points("install.md", 2, ["nothing to deploy\n"]))
    assert store.chunk_paths_matching(["deploy"], []) == ["install.md", "keys/rotate.md"]


def test_split_lines_are_found(store: Store) -> None:
    """A chunk that ends inside a line (the next starts on the same line) marks its path."""
    store.create(256)
    _commit(store, "whole.md", 1, ["one\n", "two\n"])
    points = _points("long.md", 1, ["a very long line, cut here ", "and ended here\n"])
    first, second = (p.record for p in points)
    points[1] = ChunkPoint(
        ChunkRecord(second.path, 1, 1, second.start, second.end, 1, 1, second.text, ""),
        points[1].dense,
        points[1].sparse_indices,
        points[1].sparse_values,
    )
    assert first.start_line == first.end_line == 1
    store.upsert_chunks(points)
    assert store.split_line_paths() == ["long.md"]
    assert store.split_line_paths(under="elsewhere") == []
