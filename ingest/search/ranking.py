"""Document-type evidence for ranking: a page of dated entries rarely answers a question.

Release notes, changelogs and version histories hold a line about nearly every feature, so on
a long question one of their chunks often outscores the task page that explains the feature
(FastAPI's 700 kB ``release-notes.md`` ranked first on questions about dependencies; mem0's
``changelog/sdk.mdx`` on questions about upgrades). Such a chunk's fused score is lowered by
:data:`DATED_PENALTY`, unless the query itself asks about versions or changes.

Rules a caller may rely on:

* A chunk is a dated entry when its document's path or title names a log (changelog, release
  notes, what's new), when a heading above it is a version or a date
  (``0.106.0 (2023-12-25)``), or when its own text holds two dates or more (``<Update
  label="2026-08-11">`` entries).
* A query that names a version (``0.100``, ``v2.0.1``), a date, or a log (``changelog``,
  ``release notes``, ``what's new``) is about changes: nothing is lowered.
* Only scores change, by one constant: the ranking of the other documents among themselves
  is untouched, and one Qdrant query still serves a search.
"""

from __future__ import annotations

import re

from semfs.ingest.store.schema import ChunkRecord

# Subtracted from a dated entry's fused (DBSF) score, which runs ~0-2.5 with the right page
# near 2: enough to let the task page pass a changelog chunk that matched as well, not so
# much that a changelog disappears. Measured with scripts/answers.py on fastapi-docs (in-
# sample): hit@1 rose from 0.900 to 0.925 for any value from 0.2 to 0.8; mem0-docs and
# mintlify-docs unchanged or better (see BENCHMARKS.md).
DATED_PENALTY = 0.3
_LOG_NAME = re.compile(r"change-?logs?\b|release[-_ ]?notes?|what'?s[-_ ]?new", re.I)
_VERSION = re.compile(r"(?:^|[\s(v])\d+\.\d+(?:\.\d+)?(?=[\s)]|$)")
_DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b|"
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d{1,2},? \d{4}\b",
    re.I,
)
_YEAR = re.compile(r"\d{4}")


def is_dated_entry(rec: ChunkRecord) -> bool:
    """Whether ``rec`` is a chunk of a page of dated entries (see the module rules)."""
    if _LOG_NAME.search(rec.path) or _LOG_NAME.search(rec.title):
        return True
    heads = rec.heading.split(" > ")[1:]  # the first level is the page's own title
    if any(_VERSION.search(h) or _DATE.search(h) for h in heads):
        return True
    # Two dates hold two runs of four digits (their years). Counting those first rules out
    # most chunks at a fraction of the date pattern's cost (its alternation is tried at every
    # character): a search tests ~50 chunks, and this was a tenth of its time at 100k chunks.
    return len(_YEAR.findall(rec.text)) >= 2 and len(_DATE.findall(rec.text)) >= 2


def asks_about_changes(query: str) -> bool:
    """Whether ``query`` names a version, a date or a log: then dated entries may answer."""
    return bool(_LOG_NAME.search(query) or _VERSION.search(query) or _DATE.search(query))
