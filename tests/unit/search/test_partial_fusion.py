"""Hybrid search on a partly embedded store is never worse than keywords (issue 45.1): meaning
weighs by the share of the query's keyword candidates that have a vector, and a chunk without one
has its dense half estimated from its keywords, so the few embedded documents no longer outrank a
better keyword match; with no vector among the candidates it is keyword search itself, with
every one embedded the fused ranking. Real Edge stores; the hash stand-in embeds (its vectors are
planted where the test needs a strong match in meaning)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from semfs.ingest.densepass import embed_missing
from semfs.ingest.embedding.embedder import HashEmbedder
from semfs.ingest.pipeline import ingest
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import FUSION_CANDIDATES, MEANING_FLOOR, Searcher
from semfs.ingest.store import DelegatingStore, SparseQuery, Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.bm25 import bm25_model
from semfs.ingest.store.schema import ChunkRecord, DenseVector, ScoredChunk

QUERY = "rotate the signing key of a webhook"
PLANTED = "webhooks/rotate-signing-key.md"


def _corpus(src: Path) -> None:
    (src / "webhooks").mkdir(parents=True)
    (src / PLANTED).write_text(
        "# Rotate the signing key of a webhook\n\n"
        "To rotate the signing key of a webhook, open the webhook, choose rotate signing key, "
        "and update the key your receiver checks.\n"
    )
    (src / "guides").mkdir()
    for i in range(12):  # embedded first: one word of the query each, and a planted meaning
        (src / "guides" / f"g{i:02d}.md").write_text(
            f"# Guide {i}\n\nHow to rotate the key {i} of themes, colors and fonts.\n"
        )
    for i in range(40):  # neither: only there so BM25 and DBSF have candidates to weigh
        (src / f"n{i:02d}.md").write_text(f"# Note {i}\n\nlayout of page {i} with a sidebar.\n")


def test_a_keyword_only_best_match_ranks_first_in_a_partly_embedded_store(
    tmp_path: Path,
) -> None:
    """Before: the guides' planted vectors (cosine 1 to the query) gave each its dense half on
    top of a weak keyword score, and the page holding every word of the query, not embedded
    yet, fell below them."""
    src = tmp_path / "src"
    _corpus(src)
    embedder = HashEmbedder()
    query_vector = embedder.encode([QUERY])[0]
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        ingest(src, store, model="hash", embedder=embedder, dense=False)
        chunks, _ = store.chunks_without_dense(1000)
        guides = [c for c in chunks if c.path.startswith("guides/")]
        # Near the query in meaning, some more than others (DBSF measures the spread).
        vectors = [
            [
                q + (i % 4) * n
                for q, n in zip(query_vector, embedder.encode([c.text])[0], strict=True)
            ]
            for i, c in enumerate(guides)
        ]
        store.set_dense(
            [DenseVector(c.path, c.gen, c.index, v) for c, v in zip(guides, vectors, strict=True)]
        )
        searcher = Searcher(store, embedder=embedder)
        request = SearchRequest(QUERY, k=3, mode="hybrid")
        keyword = searcher.search(SearchRequest(QUERY, k=3, mode="keyword"))
        assert keyword[0].path == PLANTED
        assert searcher.search(request)[0].path == PLANTED
        searcher.partial_fusion = False  # fused alone, as before: the embedded guides win
        assert searcher.search(request)[0].path.startswith("guides/")
        # Fully embedded, the ranking is the fused one, whichever scheme.
        embed_missing(store, embedder)
        meta = store.read_meta()
        assert meta is not None and not meta.dense_pending
        fused = [h.path for h in searcher.search(request)]
        searcher.partial_fusion = True
        assert [h.path for h in searcher.search(request)] == fused


WORDS = ("rotate", "signing", "key", "webhook", "secret", "receiver", "header", "verify")
LONG_QUERY = "rotate the signing key of a webhook secret and verify the receiver header"


def _graded(src: Path, changelogs: bool) -> None:
    """Guides holding 1-8 of the query's words; with ``changelogs``, entries of dated logs
    holding them too (their scores are lowered by a constant: see semfs.ingest.search.ranking);
    notes holding none of them."""
    (src / "guides").mkdir(parents=True)
    for i in range(1, len(WORDS) + 1):
        text = f"# Guide {i}\n\nHow to {' '.join(WORDS[:i])} today.\n"
        (src / "guides" / f"g{i}.md").write_text(text)
    if changelogs:
        (src / "changelog").mkdir()
        for i in range(1, len(WORDS) + 1):
            text = (
                f"# Changelog {i}\n\n## 2026-0{1 + i % 9}-01\n\n- {' '.join(WORDS[-i:])} fixed.\n"
            )
            (src / "changelog" / f"c{i}.md").write_text(text)
    for i in range(30):
        (src / f"n{i:02d}.md").write_text(f"# Note {i}\n\nlayout of page {i} with a sidebar.\n")


def test_with_no_vector_yet_hybrid_is_keyword_search_exactly(tmp_path: Path) -> None:
    """Before any chunk has its vector, hybrid search gives keyword search's hits in its
    order, with its scores and strengths. Before, every keyword score was doubled (to look
    like a fused one), so the constant by which a changelog's score is lowered weighed half
    as much, and changelog entries rose above the guides keyword search ranks first."""
    src = tmp_path / "src"
    _graded(src, changelogs=True)
    embedder = HashEmbedder()
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        ingest(src, store, model="hash", embedder=embedder, dense=False)
        meta = store.read_meta()
        assert meta is not None and meta.dense_pending
        searcher = Searcher(store, embedder=embedder)
        for query in (LONG_QUERY, "webhook secret", "verify the signing key"):
            keyword = searcher.search(SearchRequest(query, k=10, mode="keyword"))
            hybrid = searcher.search(SearchRequest(query, k=10, mode="hybrid"))
            assert any(h.path.startswith("changelog/") for h in keyword)
            assert [h.path for h in hybrid] == [h.path for h in keyword]
            assert [(h.score, h.strength) for h in hybrid] == [
                (h.score, h.strength) for h in keyword
            ]


def test_where_every_candidate_has_its_vector_the_ranking_is_the_fused_one(
    tmp_path: Path,
) -> None:
    """The weight of meaning follows the embedded share of the query's own candidates, not of
    the collection: once every chunk that holds the query's words has its vector (its folder
    was embedded first), hybrid ranks them as a fully embedded store does, though most of the
    collection has no vector yet. Before, the weight was the collection's share (here about a
    fifth), and the keyword order, doubled, ruled."""
    src = tmp_path / "src"
    _graded(src, changelogs=False)
    embedder = HashEmbedder()
    query_vector = embedder.encode([LONG_QUERY])[0]
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        ingest(src, store, model="hash", embedder=embedder, dense=False)
        chunks, _ = store.chunks_without_dense(1000)
        guides = sorted((c for c in chunks if c.path.startswith("guides/")), key=lambda c: c.path)
        # Meaning ranks the guides the other way round from their keywords: the guide with
        # the fewest of the query's words is nearest.
        vectors = [
            [q + i * n for q, n in zip(query_vector, embedder.encode([c.text])[0], strict=True)]
            for i, c in enumerate(guides)
        ]
        store.set_dense(
            [DenseVector(c.path, c.gen, c.index, v) for c, v in zip(guides, vectors, strict=True)]
        )
        embedded, total = store.embedding_counts()
        assert embedded == len(guides) and total > 4 * embedded
        searcher = Searcher(store, embedder=embedder)
        request = SearchRequest(LONG_QUERY, k=10, mode="hybrid")
        keyword = [h.path for h in searcher.search(SearchRequest(LONG_QUERY, k=10, mode="keyword"))]
        now = [h.path for h in searcher.search(request)]
        searcher.partial_fusion = False  # the fused query alone: every candidate has a vector
        fused = [h.path for h in searcher.search(request)]
        assert fused != keyword  # the planted meaning changes the order
        assert now == fused


class _RecordsRead(DelegatingStore):
    """A real store, counting the chunk records its queries and lookups return (a spy)."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.records = 0

    def query(
        self,
        dense: list[float],
        sparse: SparseQuery,
        mode: str,
        limit: int,
        under: str | None = None,
        similarities: bool = True,
    ) -> list[ScoredChunk]:
        found = self.inner.query(dense, sparse, mode, limit, under, similarities)
        self.records += len(found)
        return found

    def chunks_by_id(self, ids: Sequence[str]) -> dict[str, ChunkRecord]:
        found = self.inner.chunks_by_id(ids)
        self.records += len(found)
        return found


def test_a_partly_embedded_search_reads_the_records_of_the_chunks_it_keeps_only(
    tmp_path: Path,
) -> None:
    """Its two retrievers weigh 200 candidates each (the fusion's, so that their scores are
    the fused score's halves), but only the best 50 chunks are ranked further: their records
    alone are read. Before, both queries returned every candidate's record (400 here), a third
    of the search's time on the large collection (BENCHMARKS.md section 42)."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(300):  # each holds the query's words, some more often than others
        (src / f"d{i:03d}.md").write_text(
            f"# Page {i}\n\nrotate the signing key {'key ' * (i % 9)}of webhook {i}.\n"
        )
    embedder = HashEmbedder()
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        ingest(src, store, model="hash", embedder=embedder, dense=False)
        chunks, _ = store.chunks_without_dense(1000)
        half = chunks[::2]
        store.set_dense(
            [
                DenseVector(c.path, c.gen, c.index, v)
                for c, v in zip(half, embedder.encode([c.text for c in half]), strict=True)
            ]
        )
        spy = _RecordsRead(store)
        searcher = Searcher(spy, embedder=embedder)
        hits = searcher.search(SearchRequest(QUERY, k=10, mode="hybrid"))
        assert len(hits) == 10
        # The 50 kept and the chunks tied with the 50th (texts alike score alike); before,
        # every candidate of both queries: 350.
        assert 50 <= spy.records < 100
        spy.records = 0
        keyword = searcher.search(SearchRequest(QUERY, k=10, mode="keyword"))
        assert spy.records >= 50  # the fused query reads its 50 as before
        assert keyword


def test_a_few_vectors_among_the_candidates_leave_the_keyword_ranking_as_it_is(
    tmp_path: Path,
) -> None:
    """Below MEANING_FLOOR of the query's keyword candidates with a vector, hybrid is keyword
    search exactly, however near in meaning those few are: one candidate of several, planted
    nearest the query, would otherwise move up by its dense half alone (in a random embedding
    order, such few vectors put hybrid below keyword search; BENCHMARKS.md section 50)."""
    src = tmp_path / "src"
    _graded(src, changelogs=False)
    embedder = HashEmbedder()
    query_vector = embedder.encode([LONG_QUERY])[0]
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        ingest(src, store, model="hash", embedder=embedder, dense=False)
        searcher = Searcher(store, embedder=embedder)
        keyword = searcher.search(SearchRequest(LONG_QUERY, k=10, mode="keyword"))
        last = keyword[-1]  # the weakest keyword match, given the query's own vector
        chunks, _ = store.chunks_without_dense(1000)
        planted = [c for c in chunks if c.path == last.path]
        store.set_dense([DenseVector(c.path, c.gen, c.index, query_vector) for c in planted])
        sv = bm25_model().embed_query(LONG_QUERY)
        sparse = SparseQuery(list(sv.indices), list(sv.values))
        candidates = store.query_ids(query_vector, sparse, "keyword", FUSION_CANDIDATES, None)
        assert 0 < sum(c.embedded for c in candidates) <= MEANING_FLOOR * len(candidates)
        hybrid = searcher.search(SearchRequest(LONG_QUERY, k=10, mode="hybrid"))
        assert [(h.path, h.score) for h in hybrid] == [(h.path, h.score) for h in keyword]
