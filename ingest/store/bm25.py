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
"""

from __future__ import annotations

from collections.abc import Sequence

import qdrant_edge as qe

from semfs.ingest.store.schema import StoreMeta

# The model's type: ``embed_document(text)`` and ``embed_query(text)`` give a sparse vector
# (``indices``, ``values``).
Bm25 = qe.Bm25


def bm25_average_length(texts: Sequence[str]) -> float | None:
    """The mean length of ``texts`` in BM25's own tokens (after stemming and stop words),
    or None for no texts.

    ``Bm25`` does not expose its token counts, but with ``k=1, b=1, avg_len=1`` a term seen
    once in a text of ``n`` tokens weighs ``2 / (1 + n)``, and weights grow with the count:
    the smallest weight of a text gives ``n``.
    """
    probe = qe.Bm25(qe.Bm25Config(k=1.0, b=1.0, avg_len=1.0))
    lengths = []
    for text in texts:
        weights = probe.embed_document(text).values
        if len(weights):
            lengths.append(2.0 / min(weights) - 1.0)
    return round(sum(lengths) / len(lengths), 2) if lengths else None


def bm25_model(meta: StoreMeta | None = None) -> Bm25:
    """The BM25 document embedder for a store: its recorded average length, else the
    default the store's vectors were written with (and the query model, given no meta)."""
    if meta is None or meta.bm25_avg_len is None:
        return qe.Bm25()
    return qe.Bm25(qe.Bm25Config(avg_len=meta.bm25_avg_len))
