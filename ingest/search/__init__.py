"""Search: a query to ranked documents, shared by ``semfs search`` and the mount's .search dirs.

Qdrant ranks chunks; a document appears once, at the rank of its best chunk. A chunk of a page
of dated entries (a changelog, release notes) has its score lowered unless the query asks
about versions or changes (:mod:`.ranking`): ``Hit.score`` is that score. Chunks of
generations no committed record points to (a re-ingest in flight) are dropped.

Beside the store's owner (a mount, ``semfs mcp``, ``semfs ingest --watch``), a :class:`Searcher`
whose store is the owner's socket lets the owner run the whole search (:func:`query_service`
serves it): one request instead of embedding, querying and looking up each document over the
socket. The owner runs this same code on the same store, so the hits are a local search's.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from semfs.ingest.embedding.embedder import Embedder, load_query_embedder, query_backend
from semfs.ingest.embedding.owner import owner_embedder
from semfs.ingest.errors import SemfsError, StoreUnavailableError, not_text
from semfs.ingest.focus import uses_of
from semfs.ingest.request import DEFAULT_MODE, SearchRequest, normalize_under
from semfs.ingest.search.excerpts import Excerpt, ExcerptPicker, definition_excerpts
from semfs.ingest.search.ranking import lowered
from semfs.ingest.store import (
    FUSION_CANDIDATES,
    MODES,
    KeywordStats,
    OwnerLink,
    QueryService,
    SparseQuery,
    StoreReader,
)
from semfs.ingest.store.bm25 import bm25_model
from semfs.ingest.store.schema import OutlineEntry, ScoredChunk, StoreMeta

logger = logging.getLogger(__name__)

# A query is one short text: a second torch thread barely speeds it up on an idle machine,
# and on a busy one every op waits for it (measured: ~26 ms with one thread, ~500 ms with two).
QUERY_THREADS = 1
# Chunks fetched per wanted document: several chunks of one page often rank together.
CHUNKS_PER_DOC = 5
# A document's first chunks, averaged, stand for it in a "documents like this one" query.
SIMILAR_CHUNKS = 8
# Excerpt characters: each hit's cap, by rank (the last applies to every later rank), and the
# total the hits' lines compete for, each hit's line scores scaled by its rank's weight (so a
# second hit's exact match beats a first hit's tenth-best line). The total is what an agent
# reads beyond the ranked list: chosen with `scripts/answers.py --curve` on the public question
# sets (in-sample), the largest total that keeps the results file within 1.2 kB at p50. A
# smaller one reads a little fewer bytes per answer (cost) but holds fewer answers; a larger
# one holds more answers at more bytes each. ``more`` (the mount's @more) gives about three
# times the lines, the results file of earlier versions. 800 since DEFAULT_K is 3 (issue 28):
# the two list lines fewer pay for it (the caps scaled alike from 700).
EXCERPT_CHARS: tuple[int, ...] = (800, 686, 457, 343, 343, 0)
EXCERPT_TOTAL = 800
MORE_CHARS: tuple[int, ...] = (2600, 1500, 1000, 600, 600, 0)
MORE_TOTAL = 3000
EXCERPT_WEIGHTS: tuple[float, ...] = (1.0, 0.7, 0.5, 0.4, 0.3)
# An anchor line scoring below this share of the best one is not shown: it would add little.
EXCERPT_FLOOR = 0.35
# How strongly a hit matches: the chance that a hit with this fused score is the page that
# answers the query, by a logistic fit per mode (intercept, slope on the DBSF score) to the top
# 10 of the two doc-question sets' 80 questions (right = the expected page or an alternate),
# all-MiniLM-L6-v2 + BM25; scripts/strength_fit.py measures and prints it. Area under the ROC
# curve 0.88-0.93 per set and mode (0.66-0.69 on Cranfield, not fitted: many relevant per query).
# DBSF needs candidates to measure against: with only a few dozen chunks searched no score
# reaches "strong" (the README says so), while the rank stays right.
STRENGTH_FIT = {"hybrid": (-10.42, 4.77), "semantic": (-11.58, 9.99), "keyword": (-10.09, 7.69)}
# Cut points on that chance. Measured (hybrid): 78-87% of "strong" hits were the right page,
# 33-35% of "fair" ones, 3-4% of "weak" ones.
STRONG = 0.5
FAIR = 0.2
# DBSF measures a score against the other candidates' (mean +- 3 standard deviations), so a
# keyword query whose words only a few documents hold has nothing to measure against: a word
# found in one file scored 0.5 whatever the match, rated 0.002 "weak". Where the keyword
# candidates come from at most RARE_DOCS documents, a hit is rated by the share of the
# query's words (BM25 tokens) its best chunk holds, times RARE_STRENGTH: "strong" with every
# word, less with fewer. A rule, not a fit (scripts/strength_fit.py has no such queries).
RARE_DOCS = 3
RARE_STRENGTH = 0.6
# A collection's nearness (who comes first at the root of several, Searcher.nearness) counts
# its nearest chunk and the mean of its nearest documents, as many as a results file lists
# (DEFAULT_K): chosen on fastapi-docs and mem0-docs (any of 3-5 documents, weighed 0.5-1 of the
# nearest chunk, lost the same questions), mintlify-docs held out (BENCHMARKS.md section 44).
NEAR_DOCUMENTS = 3
# How long a count of the chunks still without dense vectors stands for a results file's
# meaning line (s): two counts in the engine, ~0.1 s at 100k chunks, while a pass embeds.
MEANING_TTL = 2.0


# Below this share of a query's keyword candidates with a vector, meaning does not weigh in:
# the few dense scores among them decided close places against keyword search wherever every
# document was partly embedded at once (BENCHMARKS.md section 50).
MEANING_FLOOR = 0.3


def meaning_weight(share: float) -> float:
    """The weight of meaning in a partly embedded store's hybrid scores, from the share of the
    query's keyword candidates that have a vector (``Searcher._partly_embedded``): 0 up to
    :data:`MEANING_FLOOR`, 1 with all, between them the 2/3 power of the share past the floor.
    The power: chosen on the tuned questions (BENCHMARKS.md section 42) among powers 1/2 to 1,
    the one never below keyword search at any share while it rose furthest above it (with the
    square root the few dense scores of 1 % embedded, which DBSF spreads over the full range,
    moved a keyword match down; with the share itself meaning counted too little above half).
    The floor (section 50): with the chunks embedded in a random order, a few vectors among a
    question's candidates still put hybrid 0.002 below keyword search at 5 and 25 % on the
    large collection; at 0.3, no share of any order or corpus measured is below it."""
    if share <= MEANING_FLOOR:
        return 0.0
    return ((share - MEANING_FLOOR) / (1 - MEANING_FLOOR)) ** (2 / 3)


def match_strength(score: float, mode: str, embedded: float = 1.0) -> float:
    """How well a hit matches, 0-1, the same scale across queries and modes: the measured
    chance that a hit with this fused ``score`` (see :meth:`semfs.ingest.store.Store.query`) in
    ``mode`` answers the query. It rises with the score, so it never contradicts the rank.
    ``embedded`` < 1: a hybrid score of a partly embedded store, whose dense half counts that
    much (``Searcher._partly_embedded``): rated between the keyword fit (0, where the score
    is keyword search's) and the hybrid one (1)."""
    row = MODES.get(mode)
    if row is not None and row.definitions:  # an exact name: every hit defines it
        return 1.0 if score > 0 else 0.0
    # A mode not fitted yet is rated on the default mode's scale until strength_fit.py fits it.
    a, b = STRENGTH_FIT.get(mode, STRENGTH_FIT[DEFAULT_MODE])
    if embedded < 1.0 and row is not None and row.fused:
        ka, kb = STRENGTH_FIT["keyword"]
        a, b = ka + embedded * (a - ka), kb + embedded * (b - kb)
    return 1.0 / (1.0 + math.exp(-(a + b * score)))


def strength_label(strength: float) -> str:
    return "strong" if strength >= STRONG else "fair" if strength >= FAIR else "weak"


@dataclass(frozen=True)
class Hit:
    """One document a search found: its best chunk (``start_line``-``end_line``, ``text``,
    ``heading``), its title and description, how strongly it matches (``strength``, 0-1, see
    :func:`match_strength`) and the lines that best answer the query (``excerpts``)."""

    rank: int
    path: str
    score: float
    start_line: int
    end_line: int
    text: str
    heading: str = ""
    title: str = ""
    description: str = ""
    strength: float = 0.0
    excerpts: tuple[Excerpt, ...] = ()
    # Where the best chunk is in a converted document's original: "page 7", "slides 2-3"
    # ("" for a text document). to_json also gives it as a number ("page": 7).
    place: str = ""

    @property
    def strength_label(self) -> str:
        return strength_label(self.strength)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["score"] = round(self.score, 6)
        d["strength"] = round(self.strength, 3)
        d["match"] = self.strength_label
        d.update(place_fields(self.place))
        d["excerpts"] = []
        for e in self.excerpts:
            ex = e.to_json()
            # A view's pages are headings ("## Page 7"): the excerpt's innermost one is its page.
            found = _UNIT_HEADING.match(e.heading.rpartition(" > ")[2])
            if found:
                ex[found.group(1).lower()] = int(found.group(2))
            d["excerpts"].append(ex)
        return d


@dataclass(frozen=True)
class Standing:
    """How well one collection answers a question, on scales several collections can share:
    who comes first at the root of several (:func:`semfs.ingest.search.several.merge_hits`).
    ``nearness``: the cosines of its nearest chunk and documents (:meth:`Searcher.nearness`),
    by its own model (None when the mode reads no dense vectors, or none is embedded yet);
    ``keywords``: BM25's statistics of the question's terms in it and their weights in its
    best keyword match, asked only when it has no nearness (None when the store cannot tell,
    or the mode reads no BM25)."""

    nearness: float | None = None
    keywords: KeywordStats | None = None


def hit_fields(hit: Hit) -> dict[str, Any]:
    """``hit`` as plain values (what an owner sends a client that asked it to search)."""
    return asdict(hit)


def hit_from_fields(fields: dict[str, Any]) -> Hit:
    """The inverse of :func:`hit_fields`; raises KeyError, TypeError or ValueError on bad input."""
    excerpts = tuple(
        Excerpt(
            int(e["start_line"]),
            int(e["end_line"]),
            str(e["heading"]),
            tuple((int(n), str(t)) for n, t in e["lines"]),
            bool(e.get("best", False)),
            OutlineEntry(*e["definition"]) if e.get("definition") else None,
            bool(e.get("lead", False)),
        )
        for e in fields["excerpts"]
    )
    return Hit(**{**fields, "excerpts": excerpts})


_PLACE = re.compile(r"^(page|slide|chapter)s? (\d+)(?:-(\d+))?$")
_PLACES = re.compile(r"^(page|slide|chapter)s (\d+(?:, \d+)+)$")
_SECTION = "section "
_UNIT_HEADING = re.compile(r"^(Page|Slide|Chapter) (\d+)\b")


def excerpt_place(place: str, excerpts: Sequence[Excerpt]) -> str:
    """Where a hit's answering lines are: the best chunk's ``place`` made precise by the
    excerpts shown. A view's pages (slides, chapters) are headings ("## Page 20"), so the
    lines under them name theirs, which may not be the best chunk's (an index page that
    repeats the query's words scores best, the answer sits on page 20): the page of the best
    line, else of every line shown; a section is the best lines' own (a chunk of a short
    document spans several)."""
    if place.startswith(_SECTION):
        if excerpts and excerpts[0].heading:
            return _SECTION + excerpts[0].heading.rpartition(" > ")[2]
        return place
    for e in excerpts:
        found = _UNIT_HEADING.match(e.heading.rpartition(" > ")[2]) if e.best else None
        if found:  # the page of the best line, whichever others are shown
            return f"{found.group(1).lower()} {found.group(2)}"
    numbers: list[int] = []
    unit = ""
    for e in excerpts:
        found = _UNIT_HEADING.match(e.heading.rpartition(" > ")[2])
        if found:
            unit = found.group(1).lower()
            if int(found.group(2)) not in numbers:
                numbers.append(int(found.group(2)))
    if not numbers:
        return place
    numbers.sort()
    if len(numbers) == 1:
        return f"{unit} {numbers[0]}"
    if numbers[-1] - numbers[0] == len(numbers) - 1:
        return f"{unit}s {numbers[0]}-{numbers[-1]}"
    return f"{unit}s " + ", ".join(map(str, numbers))


def place_fields(place: str) -> dict[str, Any]:
    """``"page 7"`` -> ``{"page": 7}``; ``"pages 7-8"`` -> ``{"page": 7, "page_end": 8}``;
    ``"section Setup"`` -> ``{"section": "Setup"}``."""
    if place.startswith(_SECTION):
        return {"section": place[len(_SECTION) :]}
    listed = _PLACES.match(place)
    if listed:  # "pages 3, 20": the pages an answer's lines are on, not a range
        numbers = [int(n) for n in listed.group(2).split(", ")]
        return {listed.group(1): numbers[0], f"{listed.group(1)}s": numbers}
    found = _PLACE.match(place)
    if not found:
        return {}
    unit, first, last = found.group(1), int(found.group(2)), found.group(3)
    out: dict[str, int | str] = {unit: first}
    if last is not None:
        out[f"{unit}_end"] = int(last)
    return out


_QUALIFIER = re.compile(r"::|->|#")


def symbol_names(text: str) -> list[str]:
    """The names a ``symbol`` search looks up: each word of ``text``, written as the chunker
    records names (``Uploader::retry_upload()`` -> ``Uploader.retry_upload``)."""
    names = []
    for word in text.split():
        name = _QUALIFIER.sub(".", word).removesuffix("()").strip(".")
        if name and name not in names:
            names.append(name)
    return names


class Searcher:
    """Runs queries against one store with the store's model; safe to share across threads."""

    def __init__(
        self,
        store: StoreReader,
        model: str | None = None,
        embedder: Embedder | None = None,
        threads: int | None = QUERY_THREADS,
    ):
        self.store = store
        self._model, self._threads = model, threads
        self._lock = threading.Lock()
        # The owner that runs our searches (see the module docstring), while it can.
        owner = store.owner_link() if embedder is None else None
        self._owner = owner if owner is not None and owner.searches else None
        self._embedder = embedder
        if embedder is None and self._owner is None:
            self._embedder = self._load_embedder()
        self._bm25 = bm25_model()
        self._meaning: dict[str | None, tuple[float, int, int]] = {}
        # The last questions' dense vectors: a root search of several collections asks each
        # for its hits, then for its nearness, with the same text (see _dense).
        self._vectors: dict[str, list[float]] = {}
        # Hybrid on a partly embedded store weighs meaning by the share of its candidates that
        # is embedded (see _partly_embedded); False: fused alone, as before issue 45 (a
        # benchmark compares both: scripts/bench_share.py).
        self.partial_fusion = True
        # The excerpt budget in all, by default and with ``more``: attributes so that a
        # measurement (scripts/answers.py --curve) can vary them.
        self.excerpt_chars, self.excerpt_total = EXCERPT_CHARS, EXCERPT_TOTAL
        self.more_chars, self.more_total = MORE_CHARS, MORE_TOTAL
        # The ranking's penalties by document kind (None: .ranking's), varied by a measurement.
        self.penalties: tuple[float, float, float] | None = None

    @property
    def embedder(self) -> Embedder:
        """The query embedder; beside an owner that searches, made on first need (the owner's
        searches need none here, nor a read of the store's meta)."""
        with self._lock:
            if self._embedder is None:
                self._embedder = self._load_embedder()
            return self._embedder

    def _load_embedder(self) -> Embedder:
        meta = self.store.read_meta()
        if meta is None:
            raise SemfsError(f"{self.store.location} is empty: run `semfs ingest DIR` first")
        name, threads = self._model or meta.model, self._threads
        # The store's owner (a mount, semfs mcp, a watcher) embeds with its warm model;
        # else this process does: ONNX Runtime for a torch store once an ingest prepared it.
        return owner_embedder(
            self.store, name, lambda: load_query_embedder(name, threads=threads)
        ) or load_query_embedder(name, threads=threads)

    def meaning_note(
        self, mode: str, under: str | None = None, meta: StoreMeta | None = None
    ) -> str | None:
        """One line for a results file while some chunks of the searched folder have no dense
        vector yet (an ingest's second pass is under way), else None. Hybrid search scores
        those chunks on keywords alone; @semantic finds only the embedded ones. ``meta``: the
        store's, when the caller has just read it (one round trip fewer beside an owner)."""
        row = MODES[mode]
        if not row.partial:  # no dense vectors read: complete at once
            return None
        meta = meta or self.store.read_meta()
        if meta is None or not meta.dense_pending:
            return None  # every chunk has its vector: nothing is counted
        under = normalize_under(under)
        embedded, total = self._embedding_counts(under)
        if not total or embedded >= total:
            return None
        where = f"{under}/" if under else "the collection"
        share = f"meaning: {100 * embedded // total} % of {where} embedded"
        return f"{share}; {row.partial}"

    def nearness(self, request: SearchRequest) -> float | None:
        """How near the collection (below ``request.under``) is to the query, by this
        collection's own model: the cosine of its nearest chunk plus the mean of its
        :data:`NEAR_DOCUMENTS` nearest documents' (each by its nearest chunk, among the
        ``NEAR_DOCUMENTS * CHUNKS_PER_DOC`` nearest chunks, as a search reads them); None when the
        mode reads no vectors or no chunk has one. A mount of several collections puts first
        the first hit of the nearest (:func:`semfs.ingest.search.several.merge_hits`): a match
        strength comes from DBSF, which measures a chunk against its own collection's
        candidates, so every collection's best looks strong, while a cosine is an absolute.
        The documents: one near chunk can be a coincidence of words; a collection the question
        is about holds several pages near it (BENCHMARKS.md section 44)."""
        text, row = request.query.strip(), MODES[request.mode]
        if not text or row.definitions or not row.needs_model:
            return None
        limit = NEAR_DOCUMENTS * CHUNKS_PER_DOC
        found = self.store.query(
            self._dense(text), SparseQuery([], []), "semantic", limit, request.under
        )
        nearest: dict[str, float] = {}
        for sc in found:
            if sc.similarity is not None and sc.similarity > nearest.get(sc.record.path, -2.0):
                nearest[sc.record.path] = sc.similarity
        if not nearest:
            return None
        cosines = sorted(nearest.values(), reverse=True)
        documents = cosines[:NEAR_DOCUMENTS]
        return cosines[0] + sum(documents) / len(documents)

    def standing(self, request: SearchRequest) -> Standing:
        """This collection's :class:`Standing` for ``request``: its :meth:`nearness`, else (a
        keyword search, or nothing embedded yet) BM25's statistics of the query's terms."""
        near = self.nearness(request)
        if near is not None:
            return Standing(near)
        text, row = request.query.strip(), MODES[request.mode]
        if not text or row.definitions or not row.sparse:
            return Standing()
        sv = self._bm25.embed_query(text)
        sparse = SparseQuery(list(sv.indices), list(sv.values))
        return Standing(keywords=self.store.keyword_stats(sparse, request.under))

    def _dense(self, text: str) -> list[float]:
        """The dense vector of the question ``text``. The last few are kept (bounded, cleared
        whole): a search of several collections embeds it once per collection, not once for
        the hits and again for :meth:`nearness` (which was a third of a root search's time)."""
        dense = self._vectors.get(text)
        if dense is None:
            dense = self.embedder.encode([text])[0]
            if len(self._vectors) >= 32:
                self._vectors.clear()
            self._vectors[text] = dense
        return dense

    def warm_up(self) -> None:
        """Load the model now, so that the first query does not wait for it."""
        self.embedder.encode(["warm up"])

    def search(
        self, request: SearchRequest, committed: Callable[[str, int], bool] | None = None
    ) -> list[Hit]:
        """The ``request.k`` best documents for ``request`` (checked when it was made).
        ``committed(path, gen)`` says whether a chunk's version is the visible one; by default
        the store is asked. ``request.more`` gives the hits' excerpts :attr:`more_chars` in
        all instead of :attr:`excerpt_chars`."""
        text, k, mode = request.query.strip(), request.k, request.mode
        if not text:
            return []
        bad = not_text("the query", text)
        if bad is not None:
            raise bad
        if self._owner is not None and committed is None and self._default_budgets():
            served = self._search_in_owner(self._owner, request)
            if served is not None:
                return served
        min_score, more = request.min_score, request.more
        row = MODES[mode]
        if row.definitions:  # a lookup by name: no model, no vectors
            found = self.store.definitions(
                symbol_names(text), max(k * CHUNKS_PER_DOC, 50), request.under
            )
            return self._documents(text, found, k, mode, min_score, committed, more, ())
        # A keyword query needs no model: it must not wait for one to load.
        dense = self._dense(text) if row.needs_model else []
        sv = self._bm25.embed_query(text)
        sparse = SparseQuery(list(sv.indices), list(sv.values))
        limit = max(k * CHUNKS_PER_DOC, 50)
        partly = None
        if row.fused and self.partial_fusion and sparse.indices:
            partly = self._partly_embedded(dense, sparse, limit, request.under)
        chunks, embedded = partly or (
            self.store.query(dense, sparse, mode, limit=limit, under=request.under),
            1.0,
        )
        # Changelogs, tests, type declarations, and prose beside code: see .ranking.
        chunks = lowered(chunks, text, self.penalties)
        hits = self._documents(
            text, chunks, k, mode, min_score, committed, more, sv.indices, embedded
        )
        # Where it searched, and what it found, is embedded first (semfs.ingest.focus).
        uses_of(self.store).searched(request.under, [h.path for h in hits])
        return hits

    def _partly_embedded(
        self, dense: list[float], sparse: SparseQuery, limit: int, under: str | None
    ) -> tuple[list[ScoredChunk], float] | None:
        """Hybrid chunks of a partly embedded store, and the embedded share ``w`` they were
        weighed with; None when every chunk has its vector (the fused query ranks then).

        Fused alone, a chunk without a dense vector got only its keyword half, so the few
        embedded documents outranked better keyword matches everywhere else (issue 45). Here
        each retriever is asked apart over the same candidates the fusion takes (their DBSF
        scores are the fused score's two halves), ``w`` is the share of the keyword
        candidates that have a vector, and a chunk scores its keyword half plus ``w`` times
        its dense half. A chunk without a vector has its dense half estimated: as if meaning
        agreed with its keywords (its keyword half) while few candidates are embedded, the
        mean dense half of the embedded candidates as more are. No vector among the
        candidates (``w`` 0): the keyword ranking itself, scores and all. Every candidate
        embedded (``w`` 1): the fused ranking. Between, it moves from one to the other with
        the share; :func:`meaning_weight` shapes how fast (BENCHMARKS.md section 42)."""
        meta = self.store.read_meta()
        if meta is None or not meta.dense_pending:
            return None
        # Ids and scores only: the records of the few dozen kept are read at the end.
        keyword = self.store.query_ids(dense, sparse, "keyword", FUSION_CANDIDATES, under)
        embedded = [c for c in keyword if c.embedded]
        w = meaning_weight(len(embedded) / len(keyword)) if embedded else 0.0
        if w == 0.0:  # keyword search itself: meaning has too little to weigh in with yet
            return self._records({c.id: c.score for c in keyword[:limit]}, limit), 0.0
        meaning = self.store.query_ids(
            dense, SparseQuery([], []), "semantic", FUSION_CANDIDATES, under
        )
        halves = {c.id: c.score for c in meaning}
        mean = sum(halves.get(c.id, 0.0) for c in embedded) / len(embedded)
        scored: dict[str, float] = {}
        for c in keyword:
            guess = halves.get(c.id, 0.0) if c.embedded else (1 - w) * c.score + w * mean
            scored[c.id] = c.score + w * guess
        for c in meaning:  # near in meaning, not among the keyword candidates
            scored.setdefault(c.id, w * c.score)
        return self._records(scored, limit), w

    def _records(self, scored: dict[str, float], limit: int) -> list[ScoredChunk]:
        """The best ``limit`` of the chunks ``scored`` (point id -> score), as records: ties
        broken by path and chunk, as :meth:`_documents` ranks, so only those at least as
        good as the ``limit``-th are read (a few dozen of the ~400 candidates)."""
        if len(scored) > limit:
            cut = sorted(scored.values(), reverse=True)[limit - 1]
            scored = {i: score for i, score in scored.items() if score >= cut}
        records = self.store.chunks_by_id(list(scored))
        # A chunk gone since the query (a newer version replaced it) is left out, as its
        # uncommitted generation would be.
        ranked = sorted(
            ((score, records[i]) for i, score in scored.items() if i in records),
            key=lambda t: (-t[0], t[1].path, t[1].index),
        )
        return [ScoredChunk(record, score) for score, record in ranked[:limit]]

    def _embedding_counts(self, under: str | None) -> tuple[int, int]:
        """Chunks with a dense vector and all chunks, in ``under``, counted at most every
        :data:`MEANING_TTL` seconds (two counts in the engine)."""
        now = time.monotonic()
        known = self._meaning.get(under)
        if known is None or now - known[0] > MEANING_TTL:
            embedded, total = self.store.embedding_counts(under)
            if len(self._meaning) > 256:
                self._meaning.clear()
            self._meaning[under] = known = (now, embedded, total)
        return known[1], known[2]

    def similar(
        self,
        path: str,
        gen: int,
        request: SearchRequest,
        committed: Callable[[str, int], bool] | None = None,
    ) -> list[Hit]:
        """The ``request.k`` documents nearest to the document ``path`` (version ``gen``),
        itself left out, ``request.under`` a folder: a semantic query by the mean of its first
        chunks' vectors (no model runs; the request's query and mode are not used). Their
        answering lines are those sharing words with its title and description."""
        k = request.k
        uses_of(self.store).documents([path])  # no vectors yet: it has them first
        vectors = list(self.store.chunk_vectors(path, gen, range(SIMILAR_CHUNKS)).values())
        if not vectors:
            return []
        dense = [sum(v[i] for v in vectors) / len(vectors) for i in range(len(vectors[0]))]
        first = self.store.get_chunks(path, gen, [0])
        text = f"{first[0].title} {first[0].description}".strip() if first else ""
        sv = self._bm25.embed_query(text or path)
        found = self.store.query(
            dense,
            SparseQuery([], []),
            "semantic",
            limit=max((k + 1) * CHUNKS_PER_DOC, 50),
            under=request.under,
        )
        chunks = [sc for sc in found if sc.record.path != path]
        return self._documents(
            text or path, chunks, k, "semantic", None, committed, request.more, sv.indices
        )

    def _documents(
        self,
        text: str,
        chunks: list[ScoredChunk],
        k: int,
        mode: str,
        min_score: float | None,
        committed: Callable[[str, int], bool] | None,
        more: bool,
        terms: Any,
        embedded: float = 1.0,
    ) -> list[Hit]:
        """The best ``k`` documents of the ranked ``chunks``, with their answering lines for
        ``text`` (whose BM25 term ids are ``terms``); ``embedded``: the weight of meaning in a
        partly embedded hybrid search's scores (see :func:`match_strength`)."""
        # Qdrant returns tied points (e.g. chunks of equal text) in no fixed order: break ties
        # by path and chunk so a query ranks the same every time (`semfs search` and a .search
        # directory must agree).
        chunks = sorted(chunks, key=lambda sc: (-sc.score, sc.record.path, sc.record.index))
        if committed is None:
            committed = self._store_committed()
        # A document appears once, at the rank of its best chunk; its other chunks that
        # ranked feed its excerpts.
        by_doc: dict[str, list[ScoredChunk]] = {}
        rare = MODES[mode].rare_words and len({sc.record.path for sc in chunks}) <= RARE_DOCS
        floor = None if rare else min_score  # rare words: the floor applies to the new rating
        for sc in chunks:
            rec = sc.record
            if rec.path in by_doc:
                if rec.gen == by_doc[rec.path][0].record.gen:
                    by_doc[rec.path].append(sc)
            elif len(by_doc) == k:
                # Only more chunks of the documents already found: a new one is looked up
                # (a store call each) just to end here at the floor, as below.
                if (
                    floor is not None
                    and match_strength(sc.score, mode, embedded) < floor
                    and committed(rec.path, rec.gen)
                ):
                    break
            elif committed(rec.path, rec.gen):
                if floor is not None and match_strength(sc.score, mode, embedded) < floor:
                    break  # scores come sorted: nothing after this passes the floor either
                by_doc[rec.path] = [sc]
        picker = ExcerptPicker(text, self._bm25)
        docs = list(by_doc.values())
        strengths = [match_strength(d[0].score, mode, embedded) for d in docs]
        if rare:
            strengths = self._rare_word_strengths(
                [d[0].record.text for d in docs], strengths, terms
            )
        caps, total = (
            (self.more_chars, self.more_total) if more else (self.excerpt_chars, self.excerpt_total)
        )
        budgets = [min(caps[min(i, len(caps) - 1)], total) for i in range(len(docs))]
        titles = [d[0].record.title for d in docs]
        if MODES[mode].excerpts == "definitions":  # not the lines that name them
            names = symbol_names(text)
            excerpts = [
                definition_excerpts([sc.record for sc in d], names, budget)
                for d, budget in zip(docs, budgets, strict=True)
            ]
        else:
            excerpts = picker.pick(
                [[sc.record for sc in d] for d in docs],
                budgets,
                titles,
                total=total,
                weights=EXCERPT_WEIGHTS,
                floor=0.0 if more else EXCERPT_FLOOR,
                # A hit after the first and below strong shows the best passage if it is
                # its, no other lines: on the public sets those lines held 0 answers in 46
                # (BENCHMARKS.md section 31, session 3); the first hit's are kept, as they
                # answer long questions that rate weak.
                lead_only=[not more and i > 0 and x < STRONG for i, x in enumerate(strengths)],
            )
        hits: list[Hit] = []
        for rank, (doc, ex, strength) in enumerate(zip(docs, excerpts, strengths, strict=True), 1):
            best = doc[0].record
            place = excerpt_place(best.place, ex)
            hits.append(
                Hit(
                    rank,
                    best.path,
                    doc[0].score,
                    best.start_line,
                    best.end_line,
                    best.text,
                    best.heading,
                    best.title or best.path.rpartition("/")[2],
                    best.description,
                    strength,
                    tuple(ex),
                    place,
                )
            )
        if rare and min_score is not None:  # strengths fall with the rank: the ranks stay 1..n
            hits = [h for h in hits if h.strength >= min_score]
        return hits

    def _default_budgets(self) -> bool:
        """Whether the excerpt budgets are the defaults, the owner's (a measurement varies them)."""
        budgets = (self.excerpt_chars, self.excerpt_total, self.more_chars, self.more_total)
        return budgets == (EXCERPT_CHARS, EXCERPT_TOTAL, MORE_CHARS, MORE_TOTAL)

    def _search_in_owner(self, owner: OwnerLink, request: SearchRequest) -> list[Hit] | None:
        """The owner's hits for this search; None when it cannot search (then this process
        does, from now on; logged once)."""
        try:
            rows = owner.search(request.hit_fields())
            return [hit_from_fields(row) for row in rows]
        except StoreUnavailableError:
            raise  # the connection is gone: a search here would fail the same way
        except (SemfsError, KeyError, TypeError, ValueError) as exc:
            logger.warning(
                "the owner of %s cannot search (%s): searching here", self.store.location, exc
            )
            self._owner = None
            return None

    def _rare_word_strengths(
        self, texts: Sequence[str], strengths: Sequence[float], terms: Any
    ) -> list[float]:
        """The strengths of hits of rare keywords (their best chunks' ``texts``), rated by the
        share of the query's words they hold (see RARE_DOCS), never above the hit ranked
        before them: strength follows the rank."""
        out: list[float] = []
        ceiling = 1.0
        wanted = set(terms)
        for text, strength in zip(texts, strengths, strict=True):
            held = set(self._bm25.embed_document(text).indices) & wanted
            share = len(held) / len(wanted) if wanted else 0.0
            ceiling = min(ceiling, max(strength, RARE_STRENGTH * share))
            out.append(ceiling)
        return out

    def _store_committed(self) -> Callable[[str, int], bool]:
        cache: dict[str, int | None] = {}

        def committed(path: str, gen: int) -> bool:
            if path not in cache:
                rec = self.store.get_document(path)
                cache[path] = rec.gen if rec else None
            return cache[path] == gen

        return committed


def query_service(searcher: Callable[[], Searcher]) -> QueryService:
    """What an owner serves other processes' queries with: ``searcher()`` (made on first need,
    then warm), the one its own searches use: its embedder, and whole searches."""
    return QueryService(
        embed=lambda text: searcher().embedder.encode([text])[0],
        backend=lambda: query_backend(searcher().embedder),
        search=lambda fields: [hit_fields(h) for h in searcher().search(SearchRequest(**fields))],
    )
