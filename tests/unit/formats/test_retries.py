"""A converted file whose extraction failed, extracted again: the run that converts it keeps
the store's counts (issue 46, found by use 1 and attack 10)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from semfs.ingest.formats import worker
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.check import check_store
from tests.helpers.docfixtures import make_bad, make_pdf
from tests.helpers.mounting import ingest_hash

PAGE = (
    b"<html><head><title>Bash</title></head><body><h1>Bash Reference</h1>"
    + b"<p>The shell expands each word of a command line in order.</p>" * 500
    + b"</body></html>"
)


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[worker.WorkerPool]]:
    """The process's extraction pool, swapped: ``pool[0] = WorkerPool(...)`` takes effect."""
    pools: list[worker.WorkerPool] = []

    def current(jobs: int | None = None) -> worker.WorkerPool:
        return pools[-1]

    monkeypatch.setattr(worker, "shared", current)
    yield pools
    for p in pools:
        p.close()


def _store_counts(store_dir: Path) -> tuple[int, int, int | None, int | None]:
    with open_store(CollectionAddress(store=store_dir)) as store:
        docs = store.list_documents()
        meta = store.read_meta()
        assert meta is not None and not meta.dirty
        return len(docs), sum(d.chunks for d in docs), meta.documents, meta.chunks


def _check_ok(store_dir: Path) -> None:
    with open_store(CollectionAddress(store=store_dir)) as store:
        report = check_store(store)
    assert report.ok, [str(p) for p in report.problems]


def test_retry_skipped_converts_a_page_stored_as_it_is_and_keeps_the_counts(
    tmp_path: Path, store_dir: Path, pool: list[worker.WorkerPool]
) -> None:
    """The issue's reproduction: a page whose extraction ran out of time is stored as it is;
    ``--retry-skipped`` converts it. Before, the run crashed with KeyError: 'bash/bash.html.md'
    in ``_counts`` (the view's name was updated, the store held the page's own)."""
    src = tmp_path / "src"
    (src / "bash").mkdir(parents=True)
    (src / "bash" / "bash.html").write_bytes(PAGE)
    (src / "notes.md").write_text("# Notes\n\nA plain note.\n")
    pool.append(worker.WorkerPool(jobs=1, timeout=1e-4))  # less than a child needs to start
    first = ingest_hash(src, store_dir, jobs=1)
    [stuck] = first.unsearched
    assert stuck.path == "bash/bash.html" and "took over" in stuck.reason, stuck
    pool.append(worker.WorkerPool(jobs=1))
    again = ingest_hash(src, store_dir, jobs=1, retry_skipped=True)
    assert again.updated == ["bash/bash.html.md"] and again.deleted == ["bash/bash.html"]
    docs, chunks, meta_docs, meta_chunks = _store_counts(store_dir)
    assert (docs, chunks) == (meta_docs, meta_chunks) and docs == 2 and chunks > 1
    _check_ok(store_dir)


@pytest.mark.parametrize("scoped", [False, True], ids=["full", "scoped"])
@pytest.mark.parametrize("first_good", [False, True], ids=["turns-readable", "turns-corrupt"])
def test_a_pdf_that_turns_readable_or_corrupt_keeps_the_counts(
    tmp_path: Path, store_dir: Path, first_good: bool, scoped: bool
) -> None:
    """Attack 10: a corrupt PDF replaced by a valid one crashed the next ingest with
    KeyError: 'report.pdf.md'; a valid one replaced by a corrupt one is the same flip back."""
    src = tmp_path / "src"
    bad = tmp_path / "bad"
    make_bad(bad)
    good = tmp_path / "good.pdf"
    make_pdf(good)
    src.mkdir()
    (src / "notes.md").write_text("# Notes\n\nA plain note.\n")
    versions = [(bad / "broken.pdf").read_bytes(), good.read_bytes()]
    if first_good:
        versions.reverse()
    (src / "report.pdf").write_bytes(versions[0])
    ingest_hash(src, store_dir)
    (src / "report.pdf").write_bytes(versions[1])
    report = ingest_hash(src, store_dir, paths=["report.pdf"] if scoped else None)
    names = ["report.pdf", "report.pdf.md"] if first_good else ["report.pdf.md", "report.pdf"]
    assert report.updated == [names[0]] and report.deleted == [names[1]]
    docs, chunks, meta_docs, meta_chunks = _store_counts(store_dir)
    assert (docs, chunks) == (meta_docs, meta_chunks) and docs == 2
    _check_ok(store_dir)


def test_a_timeout_is_tried_again_once_at_the_next_run_then_remembered(
    tmp_path: Path, store_dir: Path, pool: list[worker.WorkerPool]
) -> None:
    """Issue 46 attack 8 and use 2: a page whose extraction ran out of time (a busy machine)
    or whose worker died was remembered as refused for good: every later run skipped it
    ("refused before") until --retry-skipped. Now the next run tries it once more by itself;
    only a second failure is remembered, and its reason says how to try again."""
    src = tmp_path / "src"
    (src / "bash").mkdir(parents=True)
    (src / "bash" / "bash.html").write_bytes(PAGE)
    (src / "other.html").write_bytes(PAGE.replace(b"Bash", b"Other"))
    pool.append(worker.WorkerPool(jobs=1, timeout=1e-4))  # less than a child needs to start
    first = {s.path: s.reason for s in ingest_hash(src, store_dir, jobs=1).unsearched}
    assert set(first) == {"bash/bash.html", "other.html"}
    assert (
        "took over" in first["other.html"]
        and "tried again at the next ingest" in (first["other.html"])
    )
    # The next run, on a machine with time to spare: converted, with no flag.
    pool.append(worker.WorkerPool(jobs=1))
    (src / "other.html").touch()  # unchanged bytes: the record alone decides
    second = ingest_hash(src, store_dir, jobs=1)
    assert sorted(second.updated) == ["bash/bash.html.md", "other.html.md"], second
    _check_ok(store_dir)
    # Out of time twice: remembered, and the reason says how to try again.
    (src / "slow.html").write_bytes(PAGE.replace(b"Bash", b"Slow"))
    pool.append(worker.WorkerPool(jobs=1, timeout=1e-4))
    once = ingest_hash(src, store_dir, jobs=1)
    assert [s.path for s in once.unsearched] == ["slow.html"], once
    again = ingest_hash(src, store_dir, jobs=1)
    assert [s.path for s in again.unsearched] == ["slow.html"], again
    reason = again.unsearched[0].reason
    assert "took over" in reason and "next ingest" not in reason, reason
    pool.append(worker.WorkerPool(jobs=1))
    third = ingest_hash(src, store_dir, jobs=1)
    assert "slow.html" in third.unchanged and pool[-1].started == 0  # not extracted again
    retried = ingest_hash(src, store_dir, jobs=1, retry_skipped=True)
    assert retried.updated == ["slow.html.md"]
