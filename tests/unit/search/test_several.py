"""Merging several collections' hits (semfs.ingest.search.several): on match strength, the one
scale they share, each collection's own order kept, ranked anew."""

from __future__ import annotations

import math
from pathlib import Path

from semfs.ingest.collection import open_collections
from semfs.ingest.embedding.embedder import HashEmbedder
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Hit, Searcher, Standing
from semfs.ingest.search.several import keyword_scores, merge_hits
from semfs.ingest.store import KeywordStats, SparseQuery, Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.bm25 import bm25_model
from tests.helpers.embedders import CountingEmbedder
from tests.helpers.several import KEYWORD_FILES, ingest_tree, keyword_collections


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
    near = {"docs": Standing(0.71), "code": Standing(0.42)}
    merged = merge_hits({"docs": docs, "code": code}, 4, near)
    assert [h.path for _, h in merged] == ["a.md", "x.py", "b.md", "y.py"]
    assert [h.rank for _, h in merged] == [1, 2, 3, 4]
    # Unknown nearness (keyword mode) or a nearest collection without hits: strength alone.
    assert merge_hits({"docs": docs, "code": code}, 1, {"docs": None, "code": None})[0][0] == "code"
    far = {"docs": Standing(0.9), "code": Standing(0.1)}
    assert merge_hits({"docs": [], "code": code}, 1, far)[0][0] == "code"


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


def test_keyword_stats_count_the_chunks_holding_each_term(tmp_path: Path) -> None:
    """Qdrant applies BM25's IDF inside the engine: the counts come back from it exactly."""
    store = keyword_collections(tmp_path)
    with open_store(CollectionAddress("handbook", store=store)) as s:
        searcher = Searcher(s)
        words = ("rollback", "deploy", "printer")
        sv = searcher._bm25.embed_query(" ".join(words))
        standing = searcher.standing(SearchRequest(" ".join(words), mode="keyword"))
        stats = standing.keywords
        assert standing.nearness is None and stats is not None
        # One chunk a page here: a term's count is the pages holding the word.
        pages = KEYWORD_FILES["handbook"].values()
        expected = {w: sum(w in text.lower() for text in pages) for w in words}
        assert stats.chunks == len(pages)
        model = bm25_model()
        by_word = {w: model.embed_query(w).indices[0] for w in words}
        holding = dict(zip(sv.indices, stats.holding, strict=True))
        assert {w: holding.get(by_word[w], 0) for w in words} == expected
        assert expected == {"rollback": 1, "deploy": 9, "printer": 0}
        # The best match holds both words, so both weigh in it.
        best = dict(zip(sv.indices, stats.best, strict=True))
        assert best[by_word["rollback"]] > 0 and best[by_word["deploy"]] > 0
        # The mode that reads vectors says how near instead (its cosine).
        assert searcher.standing(SearchRequest("rollback")).nearness is not None


def test_the_first_place_goes_by_bm25_with_the_idf_of_all_the_collections() -> None:
    # One term: docs's best match weighs it 1.5, code's 1.2; 400 of docs's 1,000 chunks hold
    # it, 1 of code's 10. On each one's own IDF code's match scores 1.2 * 1.99 = 2.39 against
    # docs's 1.5 * 0.92 = 1.37; with the IDF of the 1,010 chunks together (401 hold it) the
    # term weighs the same in both, and docs's match holds it more.
    docs = KeywordStats(1000, (400,), (1.5,))
    code = KeywordStats(10, (1,), (1.2,))
    own = {
        n: s.best[0] * math.log(1 + (s.chunks - s.holding[0] + 0.5) / (s.holding[0] + 0.5))
        for n, s in (("docs", docs), ("code", code))
    }
    assert own["code"] > own["docs"]
    scores = keyword_scores({"docs": docs, "code": code})
    assert scores["docs"] > scores["code"]
    each = {"docs": [_hit(1, "a.md", 0.2)], "code": [_hit(1, "x.py", 0.9)]}
    standing = {"docs": Standing(keywords=docs), "code": Standing(keywords=code)}
    assert [n for n, _ in merge_hits(each, 2, standing)] == ["docs", "code"]
    # A cosine, where any collection has one, decides; a collection that cannot tell its
    # statistics leaves it to strength, as before.
    standing["code"] = Standing(0.3)
    assert merge_hits(each, 1, standing)[0][0] == "code"
    standing["code"] = Standing()
    assert merge_hits(each, 1, standing)[0][0] == "code"


NEAR_QUESTION = "background task sends the welcome email after signup"
# api: three pages about sending mail from background tasks. cli: one page whose words happen
# to be the question's (a signup command), nearer than any page of api by the stand-in's
# cosine, and nothing else near.
NEAR_FILES = {
    "api": {
        "tutorial/background-tasks.md": "# Background tasks\n\nA background task runs after the "
        "response: send an email after signup.\n",
        "tutorial/email.md": "# Email\n\nSend the welcome email from a background task.\n",
        "advanced/tasks.md": "# Tasks\n\nBackground tasks send an email after the response is "
        "sent.\n",
    },
    "cli": {
        "commands.mdx": "# signup\n\nThe signup command sends the welcome email after signup; "
        "run it as a background task.\n",
        "install.mdx": "# Install\n\nInstall the command line tool with npm.\n",
        "deploy.mdx": "# Deploy\n\nDeploy the site from the dashboard.\n",
    },
}


def test_the_collection_with_several_near_pages_comes_before_one_near_chunk(
    tmp_path: Path,
) -> None:
    """Before: the collection of the one nearest chunk came first (cli, 0.76 against api's
    0.62); a collection's nearness now adds its three nearest documents' mean cosine."""
    store = tmp_path / "store"
    for name, files in NEAR_FILES.items():
        ingest_tree(tmp_path, store, name, files, "hash")
    names = list(NEAR_FILES)
    with open_collections([CollectionAddress(n, store=store) for n in names]) as two:
        dense = {n: two[n]._searcher()._dense(NEAR_QUESTION) for n in names}
        nearest = {
            n: two[n].opened.store.query(dense[n], SparseQuery([], []), "semantic", 1)[0].similarity
            for n in names
        }
        assert nearest["cli"] > nearest["api"]  # the premise: cli's one chunk is the nearest
        request = SearchRequest(NEAR_QUESTION)
        near = {n: two[n]._searcher().nearness(request) for n in names}
        assert near["api"] > near["cli"]
        merged = two.search(NEAR_QUESTION, k=2)
        assert [h.path.partition("/")[0] for h in merged] == ["api", "cli"]
