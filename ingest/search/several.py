"""Search several collections as one: ``semfs search -c docs -c code``.

Each collection keeps its own store and model: each is searched by its own
:class:`~semfs.ingest.search.Searcher` with the same request, and the hits are merged on match
strength (:func:`~semfs.ingest.search.match_strength`), ties keeping each collection's own
order (its rank), then the order the collections were named in, so the first hit of a
collection is never put behind its own second one. Strength alone is not fair across
collections: it comes from a DBSF score, which measures a chunk against its own collection's
candidates, so a collection that holds nothing on the question still has a strong-looking best
(BENCHMARKS.md, "Several collections in one mount": hit@1 0.15-0.28 below each searched alone
on three corpora). So the first place goes by each collection's
:class:`~semfs.ingest.search.Standing`, measured on a scale they share: the nearest
collection's first hit (its nearness: the cosines of its nearest chunk and nearest documents,
absolutes); where no collection has one (a keyword search), the collection whose best keyword
match scores highest by BM25 with the IDF of all the collections together, as one collection
of them all would score it. Each collection's own IDF is not comparable: a word rare in one
collection weighs more there than in another that explains it on every page (BENCHMARKS.md
section 44).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Hit, Searcher, Standing
from semfs.ingest.search.results import link_names, results_file, with_status_line
from semfs.ingest.store import KeywordStats


def merge_hits(
    each: Mapping[str, Sequence[Hit]],
    k: int,
    standing: Mapping[str, Standing | None] | None = None,
) -> list[tuple[str, Hit]]:
    """The ``k`` best of each collection's hits (collection name -> its hits, best first),
    best first, each with the name of its collection, ranked anew from 1. ``standing``
    (collection name -> :meth:`~semfs.ingest.search.Searcher.standing`): the first place goes
    to the first hit of the collection :func:`first_collection` names; the others follow on
    strength."""
    found: list[tuple[float, int, int, str, Hit]] = []
    for order, (name, hits) in enumerate(each.items()):
        found += [(-hit.strength, hit.rank, order, name, hit) for hit in hits]
    found.sort(key=lambda row: row[:3])
    first = first_collection(each, standing or {})
    if first is not None:
        at = next(i for i, row in enumerate(found) if row[3] == first)
        found.insert(0, found.pop(at))
    return [(name, replace(hit, rank=rank)) for rank, (*_, name, hit) in enumerate(found[:k], 1)]


def first_collection(
    each: Mapping[str, Sequence[Hit]], standing: Mapping[str, Standing | None]
) -> str | None:
    """The collection whose first hit goes first, of those with hits: the nearest (the
    highest :meth:`~semfs.ingest.search.Searcher.nearness`); where none has one and every one
    has its keyword statistics, the one whose best keyword match scores highest with the IDF
    of them all (:func:`keyword_scores`); else None (strength decides). Ties: the first named."""
    known = {n: s for n, s in standing.items() if s is not None and each.get(n)}
    near = {n: s.nearness for n, s in known.items() if s.nearness is not None}
    if near:
        return max(near, key=lambda n: near[n])
    stats = {n: s.keywords for n, s in known.items() if s.keywords is not None}
    if not stats or len(stats) < sum(1 for hits in each.values() if hits):
        return None  # a collection that cannot tell would be judged on another scale
    scores = keyword_scores(stats)
    return max(scores, key=lambda n: scores[n])


def keyword_scores(stats: Mapping[str, KeywordStats]) -> dict[str, float]:
    """Each collection's best keyword match (``stats``: collection name -> its
    :class:`~semfs.ingest.store.KeywordStats` of one query) scored by BM25 as one collection of
    them all would score it: each term's weight there times the term's IDF over all their
    chunks, ln(1 + (N - n + 0.5) / (n + 0.5)) with N and n summed (Qdrant's IDF)."""
    chunks = sum(s.chunks for s in stats.values())
    terms = min(len(s.holding) for s in stats.values())
    idf = []
    for t in range(terms):
        held = sum(s.holding[t] for s in stats.values())
        idf.append(math.log(1.0 + (chunks - held + 0.5) / (held + 0.5)))
    return {
        name: sum(w * i for w, i in zip(s.best, idf, strict=False)) for name, s in stats.items()
    }


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
