"""Search several collections as one: ``semfs search -c docs -c code``.

Each collection keeps its own store and model: each is searched by its own
:class:`~semfs.ingest.search.Searcher` with the same request, and the hits are merged on match
strength (:func:`~semfs.ingest.search.match_strength`), ties keeping each collection's own
order (its rank), then the order the collections were named in, so the first hit of a
collection is never put behind its own second one. Strength alone is not fair across
collections: it comes from a DBSF score, which measures a chunk against its own collection's
candidates, so a collection that holds nothing on the question still has a strong-looking best
(BENCHMARKS.md, "Several collections in one mount": hit@1 0.15-0.28 below each searched alone
on three corpora). Given each collection's nearness (the cosine of its nearest chunk, an
absolute), the first place goes to the nearest collection's first hit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Hit, Searcher
from semfs.ingest.search.results import link_names, results_file, with_status_line


def merge_hits(
    each: Mapping[str, Sequence[Hit]],
    k: int,
    nearness: Mapping[str, float | None] | None = None,
) -> list[tuple[str, Hit]]:
    """The ``k`` best of each collection's hits (collection name -> its hits, best first),
    best first, each with the name of its collection, ranked anew from 1. ``nearness``
    (collection name -> :meth:`~semfs.ingest.search.Searcher.nearness`): the first place goes
    to the first hit of the nearest collection with hits; the others follow on strength."""
    found: list[tuple[float, int, int, str, Hit]] = []
    for order, (name, hits) in enumerate(each.items()):
        found += [(-hit.strength, hit.rank, order, name, hit) for hit in hits]
    found.sort(key=lambda row: row[:3])
    near = {n: v for n, v in (nearness or {}).items() if v is not None and each.get(n)}
    if near:
        nearest = max(near, key=lambda n: near[n])
        at = next(i for i, row in enumerate(found) if row[3] == nearest)
        found.insert(0, found.pop(at))
    return [(name, replace(hit, rank=rank)) for rank, (*_, name, hit) in enumerate(found[:k], 1)]


def search_collections(
    searchers: Mapping[str, Searcher], request: SearchRequest
) -> list[tuple[str, Hit]]:
    """The ``request.k`` best documents of all ``searchers`` (collection name -> its searcher),
    as :func:`merge_hits` merges them."""
    return merge_hits({name: s.search(request) for name, s in searchers.items()}, request.k)


def prefixed(found: Sequence[tuple[str, Hit]]) -> tuple[Hit, ...]:
    """Each hit with its collection's name before its path, as one mount of several shows it
    (``docs/guide/keys.md``)."""
    return tuple(replace(hit, path=f"{name}/{hit.path}") for name, hit in found)


def several_results(
    request: SearchRequest,
    found: Sequence[tuple[str, Hit]],
    names: Sequence[str],
    notes: Sequence[str] = (),
) -> bytes:
    """The results file of a search of the collections ``names`` (`semfs search -c docs -c
    code`, ``Collections.results_text``): the merged hits ``found``, each path after its
    collection, where it looked, and each collection's ``notes`` (its embedded share while a
    dense pass is under way) under the title."""
    shown = prefixed(found)
    inside = f"{request.under}/" if request.under else ""
    where = ", ".join(f"{name}/{inside}" for name in names)
    text = results_file(request, shown, link_names(shown, request.k), where=where)
    return with_status_line(text, "; ".join(notes) or None)
