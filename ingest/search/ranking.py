"""Document-type evidence for ranking: a page of dated entries rarely answers a question, nor
does a test or a type declaration when the code it exercises or declares matches too.

Release notes, changelogs and version histories hold a line about nearly every feature, so on
a long question one of their chunks often outscores the task page that explains the feature
(FastAPI's 700 kB ``release-notes.md`` ranked first on questions about dependencies; mem0's
``changelog/sdk.mdx`` on questions about upgrades). Such a chunk's fused score is lowered by
:data:`DATED_PENALTY`, unless the query itself asks about versions or changes.

Rules a caller may rely on:

* A chunk is a dated entry when its document's path or title names a log (changelog, release
  notes, what's new; a file named ``NEWS``, ``CHANGES`` or ``HISTORY``), when a heading
  above it is a version or a date (``0.106.0 (2023-12-25)``), or when its own text holds two
  dates or more (``<Update label="2026-08-11">`` entries).
* A query that names a version (``0.100``, ``v2.0.1``), a date, or a log (``changelog``,
  ``release notes``, ``what's new``) is about changes: nothing is lowered.
* A chunk of a test (a file under ``test/``, ``tests/``, ``testing/``, ``__tests__/`` or
  ``spec/``, or named ``test_*``, ``*_test.*``, ``*.test.*``, ``*.spec.*``, ``conftest.py``)
  or of a type declaration (``.d.ts``, ``.pyi``) has its score lowered by
  :data:`SECONDARY_PENALTY`, unless the query names tests, specs, types or declarations:
  such files repeat an implementation's words (its names, its options) without doing the
  thing, and on a code question the implementation is the answer. A prior by the file's
  kind, the same for every project; where nothing else matches, they still rank. So is a
  program's chunk that only declares (:func:`is_declaration`): every definition wholly in it
  has no body but its signature, docstring and comments (``pass``, ``...``, ``raise
  NotImplementedError``): an interface (``class IReactorTCP(Interface)``), an abstract base,
  a stub, whatever its file is called. So is a program's chunk of a test helper: a module
  named ``testing``, ``testutil(s)``, ``test_helper(s)``, ``testlib``, ``fixture(s)``,
  ``mock(s)`` or ``fake(s)`` (``twisted/internet/testing.py``), or any file under one such
  folder or ``testdata/``: the fakes a test drives hold the implementation's names and words
  (unless the query names tests, fakes, mocks or fixtures). A document in prose with such a
  name (a guide's ``testing.md``) is not a helper.
* Where a program's chunk (cut by its syntax; not a configuration file's) is among a query's
  candidates, a chunk of a
  document written in prose (Markdown, reStructuredText, plain text) has its score lowered by
  :data:`PROSE_BESIDE_CODE`: in a source tree the code that does the thing answers, the
  how-to that mentions it second. A collection without code (every chunk prose) is untouched.
* Only scores change, by one constant each: the ranking of the other documents among
  themselves is untouched, and one Qdrant query still serves a search.
"""

from __future__ import annotations

import re
from dataclasses import replace

from semfs.ingest.store.schema import ChunkRecord, ScoredChunk
from semfs.ingest.syntax import is_program

# Subtracted from a dated entry's fused (DBSF) score, which runs ~0-2.5 with the right page
# near 2: enough to let the task page pass a changelog chunk that matched as well, not so
# much that a changelog disappears. Measured with scripts/answers.py on fastapi-docs (in-
# sample): hit@1 rose from 0.900 to 0.925 for any value from 0.2 to 0.8; mem0-docs and
# mintlify-docs unchanged or better (see BENCHMARKS.md).
DATED_PENALTY = 0.3
_LOG_NAME = re.compile(r"change-?logs?\b|release[-_ ]?notes?|what'?s[-_ ]?new", re.I)
# A source tree's log by its conventional capitalised name (NEWS.rst, CHANGES, HISTORY.md):
# a task page may be called history.md.
_LOG_FILE = re.compile(r"(?:^|/)(?:NEWS|CHANGES|HISTORY)(?:\.(?:md|rst|txt))?$")
_VERSION = re.compile(r"(?:^|[\s(v])\d+\.\d+(?:\.\d+)?(?=[\s)]|$)")
_DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b|"
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d{1,2},? \d{4}\b",
    re.I,
)
_YEAR = re.compile(r"\d{4}")
# Subtracted from a test's or a type declaration's fused score (see the module rules); tuned
# on the code questions' tuned half (scripts/bench_code.py), checked on the held-out half.
SECONDARY_PENALTY = 0.5
_TEST_PATH = re.compile(
    r"(?:^|/)(?:tests?|testing|__tests__|specs?)/|(?:^|/)(?:test_[^/]*|conftest\.py)$"
    r"|_test\.\w+$|\.(?:test|spec)\.\w+$"
)
# A test helper's module or folder (applies to programs only: see the module rules).
_HELPER_PATH = re.compile(
    r"(?:^|/)(?:testing|testutils?|test_?helpers?|testlib|fixtures?|mocks?|fakes?)(?:\.\w+$|/)"
    r"|(?:^|/)testdata/"
)
# Subtracted from a prose document's chunk where code chunks are candidates too (see the rules).
PROSE_BESIDE_CODE = 0.3
_PROSE = re.compile(r"\.(?:md|mdx|markdown|rst|txt|adoc|asciidoc|org|textile)$", re.I)
_DECLARATION = re.compile(r"\.d\.[mc]?ts$|\.pyi$")
_ASKS_SECONDARY = re.compile(
    r"\b(?:tests?|testing|tested|specs?|types?|typings?|declar\w*|interfaces?|abstract"
    r"|fakes?|mocks?|fixtures?)\b",
    re.I,
)
# A body line that does nothing: a placeholder, a bracket, a "not implemented" raise.
_EMPTY_BODY = re.compile(
    r"\s*(?:pass|\.\.\.|[{}()\[\];,]*|raise NotImplementedError\b.*|throw new Error\(.*)\s*$"
)
_LINE_COMMENT = re.compile(r"\s*(?:#|//|/\*|\*)")
_DOC_QUOTES = re.compile(r'"""|\'\'\'')


def is_dated_entry(rec: ChunkRecord) -> bool:
    """Whether ``rec`` is a chunk of a page of dated entries (see the module rules)."""
    if _LOG_NAME.search(rec.path) or _LOG_NAME.search(rec.title) or _LOG_FILE.search(rec.path):
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


def is_secondary(path: str) -> bool:
    """Whether ``path`` is a test or a type declaration (see the module rules)."""
    return bool(_TEST_PATH.search(path) or _DECLARATION.search(path))


def is_test_helper(rec: ChunkRecord) -> bool:
    """Whether ``rec`` is a program's chunk of a test helper (see the module rules)."""
    return is_program(rec.syntax) and bool(_HELPER_PATH.search(rec.path))


def is_declaration(rec: ChunkRecord) -> bool:
    """Whether ``rec`` is a program's chunk that only declares (see the module rules): it
    holds a whole definition, and no definition wholly in it (not holding another) has a
    line past its signature but docstrings, comments and placeholders."""
    if not is_program(rec.syntax):
        return False
    whole = [
        e for e in rec.outline if rec.start_line <= e.start_line and e.end_line <= rec.end_line
    ]
    leaves = [
        e
        for e in whole
        if not any(
            o != e and e.start_line <= o.start_line and o.end_line <= e.end_line for o in whole
        )
    ]
    if not leaves:
        return False
    lines = rec.text.split("\n")
    return all(
        _bodiless(lines[e.line - rec.start_line : e.end_line - rec.start_line + 1]) for e in leaves
    )


def _bodiless(lines: list[str]) -> bool:
    """Whether a definition's lines (from its signature on) hold nothing past the signature
    but docstrings, comments and placeholders."""
    # The signature may run over lines: it ends where the body opens.
    opened = next((i for i, t in enumerate(lines) if t.rstrip().endswith((":", "{"))), None)
    if opened is None:
        return False  # a one-line definition (``func f() { return 1 }``): not told apart
    inside = False
    for text in lines[opened + 1 :]:
        quotes = len(_DOC_QUOTES.findall(text))
        doc = inside or quotes > 0
        if quotes % 2:
            inside = not inside
        if not (doc or _LINE_COMMENT.match(text) or _EMPTY_BODY.fullmatch(text)):
            return False
    return True


def asks_about_secondary(query: str) -> bool:
    """Whether ``query`` names tests, specs, types, declarations, interfaces, fakes, mocks or
    fixtures: then they may answer."""
    return bool(_ASKS_SECONDARY.search(query))


def lowered(
    chunks: list[ScoredChunk], query: str, penalties: tuple[float, float, float] | None = None
) -> list[ScoredChunk]:
    """``chunks`` with the scores the module rules lower lowered (their order is the
    caller's to sort). ``penalties``: (dated, secondary, prose beside code), by default the
    module's constants (a measurement varies them)."""
    dated, secondary, prose = penalties or (DATED_PENALTY, SECONDARY_PENALTY, PROSE_BESIDE_CODE)
    changes, tests = asks_about_changes(query), asks_about_secondary(query)
    code = any(is_program(sc.record.syntax) for sc in chunks)
    out = []
    for sc in chunks:
        rec = sc.record
        cut = 0.0
        if not changes and is_dated_entry(rec):
            cut += dated
        if not tests and (is_secondary(rec.path) or is_test_helper(rec) or is_declaration(rec)):
            cut += secondary
        if code and not rec.syntax and _PROSE.search(rec.path):
            cut += prose
        out.append(replace(sc, score=sc.score - cut) if cut else sc)
    return out
