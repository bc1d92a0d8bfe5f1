"""The BM25 model whose sparse vectors every collection stores: Qdrant Edge's, for every backend.

The sparse vector of a chunk (``bm25`` in :mod:`semfs.ingest.store.schema`) is made here, in
this process, by Qdrant Edge's ``Bm25`` (its tokenizer, stemmer and stop words): on the embedded
store and on a Qdrant server alike, which stores the vectors as given and applies the IDF
modifier itself. A query's sparse vector must come from the same model, so the pipeline (which
writes them), search and the excerpt picker (which read them) all take it from here; nothing
else of semfs names ``qdrant_edge`` outside the embedded engine's own folder (``store/edge/``;
``tests/test_structure.py`` checks).

Rules a caller may rely on:

* :func:`bm25_model` with a store's meta is the document model its vectors were written with
  (its recorded average length, else Bm25's default); without one, the default, which is also
  the query model (a query's weights do not depend on the average length).
* :func:`bm25_average_length` measures texts in BM25's own tokens, after stemming and stop words.
* A chunk of source code is keyword-indexed by :func:`code_keyword_text`: its text, then the
  parts of its joined identifiers (``parseConfigFile`` -> ``parse Config File``), so that a
  question's plain words find the identifier while the whole name still matches itself
  (the tokenizer splits ``snake_case`` and ``kebab-case`` at ``_`` and ``-`` already, never
  ``camelCase``). Only documents change: a query is embedded as written.
* A word (a run of letters and digits: the tokenizer's unit) longer than :data:`MAX_WORD_CHARS`
  is cut to its first :data:`MAX_WORD_CHARS` characters, in documents and queries alike
  (:func:`cut_long_words`), so the same long word still matches itself; the model's
  ``words_cut`` counts the words cut in the documents it embedded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import qdrant_edge as qe

from semfs.ingest.store.schema import StoreMeta

# Qdrant Edge's Bm25 takes time quadratic in a word's length (its stemmer; 64 KiB of "y": 0.2 s,
# 256 KiB: 2 s, 3 MiB: minutes), holding the GIL all along (issue 39.3). No real word, hash or
# identifier part is longer than this: a sha512 in hex is 128 characters, split nowhere, and is
# still found by its first 64.
MAX_WORD_CHARS = 64
# One of the tokenizer's words: letters and digits ("_" and "-" separate words, as it does).
_LONG_WORD = re.compile(rf"[^\W_]{{{MAX_WORD_CHARS + 1},}}")


# A word joined from words by capitals (camelCase, PascalCase with an inner capital,
# HTTPServer); its parts: runs of capitals before a capitalised word, words, digits.
_JOINED = re.compile(r"[A-Za-z][a-z0-9]+[A-Z][A-Za-z0-9]*|[A-Z]{2,}[a-z][A-Za-z0-9]*")
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def identifier_parts(text: str) -> list[str]:
    """The parts of every joined identifier in ``text``, one list entry per part per
    occurrence (a name used five times counts five times, as its whole form does)."""
    out: list[str] = []
    cache: dict[str, list[str]] = {}
    for name in _JOINED.findall(text):
        parts = cache.get(name)
        if parts is None:
            parts = cache[name] = _PART.findall(name)
        out += parts
    return out


def code_keyword_text(text: str) -> str:
    """What BM25 indexes of a chunk of source code: ``text``, then the parts of its joined
    identifiers on a line of their own (see the module rules)."""
    parts = identifier_parts(text)
    return f"{text}\n{' '.join(parts)}" if parts else text


def cut_long_words(text: str) -> tuple[str, int]:
    """``text`` with every word past :data:`MAX_WORD_CHARS` characters cut to that many, and
    how many were cut."""
    # No whitespace-separated run is that long, so no word is: the regex's scan, which tries
    # each word at every position, cost a third of BM25's time per chunk (issue 45.4).
    if max(map(len, text.split()), default=0) <= MAX_WORD_CHARS:
        return text, 0
    cut = 0

    def first(m: re.Match[str]) -> str:
        nonlocal cut
        cut += 1
        return m.group()[:MAX_WORD_CHARS]

    return _LONG_WORD.sub(first, text), cut


class Bm25:
    """Qdrant Edge's ``Bm25`` on texts whose long words are cut (:func:`cut_long_words`):
    ``embed_document(text)`` and ``embed_query(text)`` give a sparse vector (``indices``,
    ``values``). ``words_cut``: the words cut in the documents embedded so far."""

    def __init__(self, config: qe.Bm25Config | None = None) -> None:
        self._model = qe.Bm25(config) if config is not None else qe.Bm25()
        self.words_cut = 0

    def embed_document(self, text: str) -> qe.SparseVector:
        text, cut = cut_long_words(text)
        self.words_cut += cut
        return self._model.embed_document(text)

    def embed_query(self, text: str) -> qe.SparseVector:
        return self._model.embed_query(cut_long_words(text)[0])


def bm25_average_length(texts: Sequence[str]) -> float | None:
    """The mean length of ``texts`` in BM25's own tokens (after stemming and stop words),
    or None for no texts.

    ``Bm25`` does not expose its token counts, but with ``k=1, b=1, avg_len=1`` a term seen
    once in a text of ``n`` tokens weighs ``2 / (1 + n)``, and weights grow with the count:
    the smallest weight of a text gives ``n``.
    """
    probe = Bm25(qe.Bm25Config(k=1.0, b=1.0, avg_len=1.0))
    lengths = []
    for text in texts:
        weights = probe.embed_document(text).values
        if len(weights):
            lengths.append(2.0 / min(weights) - 1.0)
    return round(sum(lengths) / len(lengths), 2) if lengths else None


def bm25_model(meta: StoreMeta | None = None) -> Bm25:
    """The BM25 document embedder for a store: its recorded average length, else the
    default the store's vectors were written with (and the query model, given no meta)."""
    return bm25_for(meta.bm25_avg_len if meta is not None else None)


def bm25_for(avg_len: float | None) -> Bm25:
    """The BM25 document embedder for chunks of ``avg_len`` BM25 tokens on average (None:
    Bm25's default)."""
    return Bm25() if avg_len is None else Bm25(qe.Bm25Config(avg_len=avg_len))
