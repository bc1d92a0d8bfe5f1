"""Search several collections as one: ``semfs search -c docs -c code``.

Each collection keeps its own store and model: each is searched by its own
:class:`~semfs.ingest.search.Searcher` with the same request, and the hits are merged on one
scale, their match strength (:func:`~semfs.ingest.search.match_strength`: the measured chance
that a hit answers the query, comparable across queries, modes and so across collections; a raw
fused score is not, DBSF measures it against its own collection's candidates). Ties keep each
collection's own order (its rank), then the order the collections were named in, so the first
hit of a collection is never put behind its own second one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Hit, Searcher


def merge_hits(each: Mapping[str, Sequence[Hit]], k: int) -> list[tuple[str, Hit]]:
    """The ``k`` best of each collection's hits (collection name -> its hits, best first),
    best first, each with the name of its collection, ranked anew from 1."""
    found: list[tuple[float, int, int, str, Hit]] = []
    for order, (name, hits) in enumerate(each.items()):
        found += [(-hit.strength, hit.rank, order, name, hit) for hit in hits]
    found.sort(key=lambda row: row[:3])
    return [(name, replace(hit, rank=rank)) for rank, (*_, name, hit) in enumerate(found[:k], 1)]


def search_collections(
    searchers: Mapping[str, Searcher], request: SearchRequest
) -> list[tuple[str, Hit]]:
    """The ``request.k`` best documents of all ``searchers`` (collection name -> its searcher),
    as :func:`merge_hits` merges them."""
    return merge_hits({name: s.search(request) for name, s in searchers.items()}, request.k)
