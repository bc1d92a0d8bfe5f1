"""Merging several collections' hits (semfs.ingest.search.several): on match strength, the one
scale they share, each collection's own order kept, ranked anew."""

from __future__ import annotations

from semfs.ingest.search import Hit
from semfs.ingest.search.several import merge_hits


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
