"""Document-type evidence: a page of dated entries does not win on breadth.

Real chunks, the real BM25 tokenizer and a real Edge store (hash embedder, keyword mode where
the order must not depend on the stand-in model): nothing is mocked.
"""

from __future__ import annotations

from pathlib import Path

import qdrant_edge as qe

from semfs.ingest.pipeline import ingest
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Searcher
from semfs.ingest.search.ranking import (
    DATED_PENALTY,
    PROSE_BESIDE_CODE,
    SECONDARY_PENALTY,
    asks_about_changes,
    is_dated_entry,
    is_secondary,
    lowered,
)
from semfs.ingest.store import SparseQuery
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.schema import ChunkRecord, ScoredChunk

CHANGELOG = """\
# Changelog

## 2026-05-01

- Webhook retries: webhook retries now back off; configure webhook retries per endpoint.

## 2026-04-02

- Faster search.
"""
GUIDE = """\
# Webhooks

Webhooks send an event to your endpoint when something changes.

## Retries

A failed delivery is retried five times. To configure retries, open the endpoint's
settings and set the retry count; deliveries that still fail are listed under Failed.
"""


def _record(path: str, text: str, heading: str = "", title: str = "") -> ChunkRecord:
    return ChunkRecord(path, 1, 0, 0, len(text), 1, 1, text, heading, title)


def test_dated_entries_are_recognised_by_name_heading_or_dates() -> None:
    assert is_dated_entry(_record("release-notes.md", "Fixes."))
    assert is_dated_entry(_record("changelog/sdk.mdx", "A fix."))
    assert is_dated_entry(_record("news.md", "x", "Release Notes > 0.106.0 (2023-12-25) > Fixes"))
    updates = '<Update label="2026-08-11">\nA.\n</Update>\n<Update label="2026-08-05">\nB.\n'
    assert is_dated_entry(_record("updates.mdx", updates))
    # A task page that mentions one date, or a version in its own title, is not a log.
    assert not is_dated_entry(_record("guides/webhooks.md", "Since 2026-05-01 retries back off."))
    assert not is_dated_entry(_record("py.md", "x", "Python 3.11 > Install"))
    assert not is_dated_entry(_record("guides/history.md", "Memory history API."))
    # Dates in words count too; four-digit numbers that are no dates do not.
    assert is_dated_entry(_record("news.md", "Jan 5, 2024: A.\nMarch 3, 2025: B."))
    assert not is_dated_entry(_record("ports.md", "Port 8080, then 8443; 2048-bit keys; 1234."))


def test_a_query_about_versions_or_logs_keeps_dated_entries() -> None:
    assert asks_about_changes("what changed in 0.100.0")
    assert asks_about_changes("webhook retries in the changelog")
    assert asks_about_changes("release notes for the sdk")
    assert not asks_about_changes("how do I configure webhook retries")


def test_the_task_page_outranks_a_changelog_that_matches_better(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "changelog.md").write_text(CHANGELOG)
    (src / "guides").mkdir()
    (src / "guides" / "webhooks.md").write_text(GUIDE)
    query = "configure webhook retries"
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        ingest(src, store, model="hash")
        sv = qe.Bm25().embed_query(query)
        raw = store.query([], SparseQuery(list(sv.indices), list(sv.values)), "keyword", 10)
        raw.sort(key=lambda sc: -sc.score)
        searcher = Searcher(store)
        hits = searcher.search(SearchRequest(query, k=2, mode="keyword"))
        asked = searcher.search(SearchRequest(query + " changelog", k=2, mode="keyword"))
    # The changelog's entry holds the words more often: Qdrant ranks it first.
    assert raw[0].record.path == "changelog.md"
    assert [h.path for h in hits] == ["guides/webhooks.md", "changelog.md"]
    by_path = {sc.record.path: sc.score for sc in reversed(raw)}
    assert abs(hits[1].score - (by_path["changelog.md"] - DATED_PENALTY)) < 1e-6
    assert hits[0].strength >= hits[1].strength  # the strength follows the new order
    # Asked about the changelog, nothing is lowered.
    assert asked[0].path == "changelog.md"


def test_a_source_trees_log_is_known_by_its_capitalised_name() -> None:
    assert is_dated_entry(_record("NEWS.rst", "Features\n--------\n- A thing."))
    assert is_dated_entry(_record("pkg/CHANGES", "x"))
    assert not is_dated_entry(_record("guides/news.md", "How to post news to the feed."))


def test_tests_and_type_declarations_are_secondary_files() -> None:
    for path in (
        "src/twisted/web/test/test_http.py",
        "tests/backoff.test.js",
        "lib/__tests__/a.js",
        "net/http/server_test.go",
        "types/index.d.ts",
        "stubs/os.pyi",
        "spec/models/user_spec.rb",
        "conftest.py",
    ):
        assert is_secondary(path), path
    for path in ("src/twisted/web/http.py", "lib/testing-library.md", "contest.py", "a.ts"):
        assert not is_secondary(path), path


def test_a_test_helper_program_is_lowered_as_a_test_is() -> None:
    """A program's test helper (a module named ``testing``, a fixtures, mocks or fakes folder,
    Go's ``testdata``) repeats the implementation's words: lowered as a test; a guide in prose
    named ``testing.md`` is no helper."""
    helpers = [
        "src/twisted/internet/testing.py",
        "pkg/testutil.go",
        "lib/fixtures/users.js",
        "app/mocks/clock.py",
        "internal/fakes/fs.go",
        "go/parser/testdata/issue.go",
    ]
    chunks = [_scored(p, 1.0, "python") for p in ["src/twisted/internet/tcp.py", *helpers]]
    chunks.append(_scored("docs/core/howto/testing.md", 1.0))
    got = {sc.record.path: sc.score for sc in lowered(chunks, "how is a port opened")}
    assert got.pop("src/twisted/internet/tcp.py") == 1.0
    assert got.pop("docs/core/howto/testing.md") == 1.0 - PROSE_BESIDE_CODE
    assert got == dict.fromkeys(helpers, 1.0 - SECONDARY_PENALTY)
    # Asked about tests or fakes, helpers are what is asked for.
    asked = lowered(chunks, "where is the fake clock")
    assert {sc.record.path: sc.score for sc in asked if sc.record.path in helpers} == dict.fromkeys(
        helpers, 1.0
    )


def _scored(path: str, score: float, syntax: str = "") -> ScoredChunk:
    rec = ChunkRecord(path, 1, 0, 0, 1, 1, 1, "x", syntax=syntax)
    return ScoredChunk(rec, score)


def test_prose_is_lowered_beside_code_only() -> None:
    code, doc = _scored("lib/a.py", 1.0, "python"), _scored("docs/howto.rst", 1.0)
    test = _scored("lib/test/test_a.py", 1.0, "python")
    got = {sc.record.path: sc.score for sc in lowered([code, doc, test], "how is it done")}
    assert got == {
        "lib/a.py": 1.0,
        "docs/howto.rst": 1.0 - PROSE_BESIDE_CODE,
        "lib/test/test_a.py": 1.0 - SECONDARY_PENALTY,
    }
    # A collection of prose (no code among the candidates): nothing is lowered, nor beside
    # a configuration file (a docs site's docs.json is read by a grammar, yet no program).
    alone = lowered([doc, _scored("guide.md", 0.5), _scored("docs.json", 0.4, "json")], "how")
    assert [sc.score for sc in alone] == [1.0, 0.5, 0.4]
    # Asked about tests, the test keeps its score.
    asked = lowered([code, test], "which test covers it")
    assert [sc.score for sc in asked] == [1.0, 1.0]
