"""Merging several collections' hits (semfs.ingest.search.several): on match strength, the one
scale they share, each collection's own order kept, ranked anew."""

from __future__ import annotations

from semfs.ingest.embedding.embedder import HashEmbedder
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Hit, Searcher
from semfs.ingest.search.several import merge_hits
from semfs.ingest.store import Store
from tests.helpers.embedders import CountingEmbedder


def _hit(rank: int, path: str, strength: float) -> Hit:
    return Hit(rank, path, strength, 1, 1, "text", strength=strength)


def test_the_stronger_hit_comes_first_whichever_collection_holds_it() -> None:
    docs = [_hit(1, "a.md", 0.3), _hit(2, "b.md", 0.1)]
    code = [_hit(1, "x.py", 0.8), _hit(2, "y.py", 0.2)]
    merged = merge_hits({"docs": docs, "code": code}, 3)
    assert [(name, h.path, h.rank) for name, h in merged] == [
        ("code", "x.py", 1),
        ("docs", "a.md", 2),
        ("code", "y.py", 3),
    ]


def test_ties_keep_each_collections_order_then_the_order_named() -> None:
    docs = [_hit(1, "a.md", 0.5), _hit(2, "b.md", 0.5)]
    code = [_hit(1, "x.py", 0.5)]
    merged = merge_hits({"docs": docs, "code": code}, 10)
    assert [h.path for _, h in merged] == ["a.md", "x.py", "b.md"]


def test_the_nearest_collections_first_hit_comes_first_the_rest_on_strength() -> None:
    # A collection holding nothing on the question still has a strong-looking best (DBSF
    # measures it against its own candidates): its nearest chunk is farther, so it is second.
    docs = [_hit(1, "a.md", 0.6), _hit(2, "b.md", 0.5)]
    code = [_hit(1, "x.py", 0.9), _hit(2, "y.py", 0.2)]
    merged = merge_hits({"docs": docs, "code": code}, 4, {"docs": 0.71, "code": 0.42})
    assert [h.path for _, h in merged] == ["a.md", "x.py", "b.md", "y.py"]
    assert [h.rank for _, h in merged] == [1, 2, 3, 4]
    # Unknown nearness (keyword mode) or a nearest collection without hits: strength alone.
    assert merge_hits({"docs": docs, "code": code}, 1, {"docs": None, "code": None})[0][0] == "code"
    assert merge_hits({"docs": [], "code": code}, 1, {"docs": 0.9, "code": 0.1})[0][0] == "code"


def test_a_search_then_its_nearness_embed_the_question_once(ro_store: Store) -> None:
    """A root search of several asks each collection for its hits, then its nearness: before,
    each collection embedded the question twice (a third of the search's time)."""
    model = CountingEmbedder()
    searcher = Searcher(ro_store, embedder=model)
    request = SearchRequest("custom domain")
    assert searcher.search(request)
    near = searcher.nearness(request)
    assert model.texts == ["custom domain"]
    # The same cosine as a searcher that embeds it anew.
    assert near is not None and near == Searcher(ro_store, embedder=HashEmbedder()).nearness(
        request
    )
