"""Keywords first (issue 38): a document commits with its text and BM25 vectors, searchable by
keywords at once; its dense vectors follow in a second pass that never embeds what is in, and
resumes after any stop (a real kill -9 at five points, the model's calls counted)."""

from __future__ import annotations

import gc
import json
import re
import signal
import subprocess
import sys
import textwrap
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from semfs.ingest import chunkworkers, densepass, pipeline, writer
from semfs.ingest.densepass import DenseService, embed_missing
from semfs.ingest.embedding.embedder import HashEmbedder
from semfs.ingest.pipeline import ingest
from semfs.ingest.report import IngestReport
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Searcher
from semfs.ingest.sources import Document
from semfs.ingest.store import DelegatingStore, Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.check import check_store
from semfs.ingest.store.schema import DocumentRecord, vector_hash
from tests.helpers import REPO, SEMFS
from tests.helpers.embedders import CountingEmbedder
from tests.helpers.mounting import semfs


def _ingest(src: Path, store: Store, **kwargs: Any) -> tuple[IngestReport, list[str]]:
    embedder = CountingEmbedder()
    report = ingest(src, store, model="hash", embedder=embedder, **kwargs)
    return report, embedder.texts


def _log(lines: int) -> str:
    return "".join(
        f"2026-11-01 12:{i // 60 % 60:02d}:{i % 60:02d} INFO job {i} ok\n" for i in range(lines)
    )


def test_documents_commit_with_keywords_before_their_meaning(
    sample_copy: Path, store_dir: Path
) -> None:
    """dense=False stops after the first pass: every document is listed, readable and found by
    keywords; nothing is found by meaning; the results say so in one line; the next run
    embeds each chunk's text once and the line goes."""
    with open_store(CollectionAddress(store=store_dir)) as store:
        first, texts = _ingest(sample_copy, store, dense=False)
        assert texts == [] and first.chunks_embedded == 0
        assert first.committed == len(first.added) == 42
        assert store.embedding_counts() == (0, first.chunks_written)
        meta = store.read_meta()
        assert meta is not None and meta.dense_pending and not meta.dirty
        assert first.dense_pending == first.chunks_written
        searcher = Searcher(store, embedder=HashEmbedder())
        assert searcher.search(SearchRequest("custom domain", mode="keyword"))
        assert searcher.search(SearchRequest("custom domain", mode="semantic")) == []
        hybrid = searcher.search(SearchRequest("custom domain", mode="hybrid"))
        assert [h.path for h in hybrid] == [
            h.path for h in searcher.search(SearchRequest("custom domain", mode="keyword"))
        ]
        assert searcher.meaning_note("hybrid") == (
            "meaning: 0 % of the collection embedded; keyword scores for the rest"
        )
        assert "@semantic searched only that part" in (searcher.meaning_note("semantic") or "")
        assert searcher.meaning_note("keyword") is None
    out = semfs("search", "custom domain", "--store", str(store_dir)).stdout.splitlines()
    # Under the title, where a watched mount says how fresh it is.
    assert out[2] == "meaning: 0 % of the collection embedded; keyword scores for the rest"
    status = json.loads(semfs("status", "--store", str(store_dir), "--json").stdout)
    assert status["embedding"] == {"embedded": 0, "chunks": first.chunks_written, "by": None}
    assert "0 % (0 of " in semfs("status", "--store", str(store_dir)).stdout
    with open_store(CollectionAddress(store=store_dir)) as store:
        second, texts = _ingest(sample_copy, store)
        assert second.unchanged and not second.added and second.chunks_written == 0
        assert len(texts) == len(set(texts)) == second.chunks_embedded
        assert second.chunks_embedded + second.vectors_reused == first.chunks_written
        assert store.embedding_counts() == (first.chunks_written, first.chunks_written)
        meta = store.read_meta()
        assert meta is not None and not meta.dense_pending
        assert store.read_manifest() is not None  # stored again for the new meta
        searcher = Searcher(store, embedder=HashEmbedder())
        assert searcher.meaning_note("hybrid") is None
        assert searcher.search(SearchRequest("custom domain", mode="semantic"))
        third, texts = _ingest(sample_copy, store)
        assert texts == [] and third.chunks_embedded == third.chunks_written == 0
    assert semfs("check", "--store", str(store_dir)).stdout.startswith("ok: ")
    out = semfs("search", "custom domain", "--store", str(store_dir)).stdout.splitlines()
    assert not any(line.startswith("meaning:") for line in out)


class _HashLookups(DelegatingStore):
    """Counts the lookups of stored vectors by text hash, passing each on to the real store."""

    lookups = 0

    def dense_by_hash(self, hashes: Sequence[str]) -> dict[str, list[float]]:
        self.lookups += 1
        return self.inner.dense_by_hash(hashes)


def test_a_first_pass_into_an_empty_store_looks_up_no_vectors(
    tmp_path: Path, store_dir: Path
) -> None:
    """A store that held no chunk when the run began has no vector to reuse: the keyword pass
    looks none up (a filtered scroll per window, issue 45.4). The next run, over a copy of a
    file, still finds every vector by its text's hash."""
    src = tmp_path / "src"
    src.mkdir()
    lines = _log(600)
    (src / "run.log").write_text(lines)
    with open_store(CollectionAddress(store=store_dir)) as inner:
        store = _HashLookups(inner)
        first, texts = _ingest(src, store, dense=False)
        assert first.chunks_written >= 10 and store.lookups == 0 and texts == []
        embed_missing(store, HashEmbedder())
        (src / "copy").mkdir()
        (src / "copy" / "run.log").write_text(lines)
        again, texts = _ingest(src, store, dense=False)
        assert store.lookups > 0 and texts == []
        assert again.vectors_reused == again.chunks_written == first.chunks_written


def test_a_one_line_edit_re_embeds_one_or_two_chunks(tmp_path: Path, store_dir: Path) -> None:
    """Before: the chunker's greedy fill moved every later boundary of a file of even lines,
    and each changed document was embedded whole (a one-line edit in a 62-chunk file took all
    62 through the model). Now unchanged chunks keep their text and their stored vector."""
    src = tmp_path / "src"
    src.mkdir()
    lines = _log(3000).splitlines(keepends=True)
    (src / "run.log").write_text("".join(lines))
    with open_store(CollectionAddress(store=store_dir)) as store:
        first, texts = _ingest(src, store)
        n = first.chunks_written
        assert n >= 100 and len(texts) == n
        # The same text under another name: every vector is found by its text's hash (the
        # context line holds the file's title, here its name: a copy under the same name).
        (src / "copy").mkdir()
        (src / "copy" / "run.log").write_text("".join(lines))
        report, texts = _ingest(src, store)
        assert report.added == ["copy/run.log"] and texts == []
        assert report.vectors_reused == report.chunks_written == n
        for change in ("edit", "insert", "delete", "append"):
            mid = len(lines) // 2
            if change == "edit":
                lines[mid] = lines[mid].replace("ok", "FAILED")
            elif change == "insert":
                lines.insert(mid, "2026-11-01 12:30:00 WARN a line that was not there\n")
            elif change == "delete":
                del lines[mid + 7]
            else:
                lines.append("2026-11-01 13:00:00 INFO the last line\n")
            (src / "run.log").write_text("".join(lines))
            report, texts = _ingest(src, store)
            assert report.updated == ["run.log"], change
            assert 1 <= len(texts) <= 2, (change, len(texts))
            assert report.vectors_reused >= report.chunks_written - 2, change
    assert semfs("check", "--store", str(store_dir)).stdout.startswith("ok: ")


class _LiveDocuments(DelegatingStore):
    """Counts, at every commit, the documents read and still held by the run (their texts)."""

    def __init__(self, inner: Store, live: weakref.WeakSet[Document]) -> None:
        super().__init__(inner)
        self.live = live
        self.most = 0
        self.commits = 0

    def put_document(self, record: DocumentRecord) -> None:
        self.commits += 1
        self.most = max(self.most, len(self.live))
        self.inner.put_document(record)


def _most_held(root: Path, store_dir: Path, n: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """The most documents a first ingest of ``n`` one-line notes held at once (a spy on
    what it read: each Document, weakly, until collected), after checking every one is in
    and none is held at the end."""
    src = root / f"src-{n}"
    for d in range(n // 500):
        folder = src / f"f{d:02d}"
        folder.mkdir(parents=True)
        for i in range(500):
            (folder / f"n{i:03d}.txt").write_text(f"note {d} {i} turbine gasket\n")
    live: weakref.WeakSet[Document] = weakref.WeakSet()
    read = pipeline.read_document

    def spy(*args: Any, **kwargs: Any) -> Any:
        doc = read(*args, **kwargs)
        if isinstance(doc, Document):
            live.add(doc)
        return doc

    monkeypatch.setattr(pipeline, "read_document", spy)
    gc.collect()
    with open_store(CollectionAddress(store=store_dir / str(n))) as inner:
        store = _LiveDocuments(inner, live)
        report = ingest(src, store, model="hash", dense=False, jobs=2)
    assert len(report.added) == store.commits == n
    gc.collect()
    assert len(live) == 0
    return store.most


def test_memory_does_not_grow_with_the_number_of_documents(
    tmp_path: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spy on the documents the run holds: 1,500 and then 3,000 documents stream through,
    at most a window of them (and the first ingest's BM25 sample) alive at once, as many for
    twice the documents. Before, ingest() read and extracted every document first and held
    them all. (The BM25 sample is cut to 128 chunks so that a few thousand documents are
    many times the bound: the 2,048 default needed 50k documents and 412 s.)"""
    monkeypatch.setattr(writer, "BM25_SAMPLE_CHUNKS", 128)
    # The sample, a window, the documents read ahead (per reading thread: the chunking
    # children's read-ahead, chunkworkers.AHEAD), and the one in hand.
    bound = 128 + writer.WINDOW_CHUNKS + 2 * chunkworkers.AHEAD + 2
    small = _most_held(tmp_path, store_dir, 1_500, monkeypatch)
    large = _most_held(tmp_path, store_dir, 3_000, monkeypatch)
    assert 0 < small <= bound and 0 < large <= bound, (small, large, bound)
    assert large <= small * 1.1 + 8, (small, large)  # no growth with the number held


# A run that SIGKILLs itself at one point of its two passes, counting the model's texts.
_KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from semfs.ingest.embedding.embedder import HashEmbedder
    from semfs.ingest.pipeline import ingest
    from semfs.ingest.store import DelegatingStore
    from semfs.ingest.store.address import CollectionAddress
    from semfs.ingest.store.backends import open_store

    src, store_dir, point, counts = sys.argv[1:5]

    class Counting(HashEmbedder):
        name = "hash"
        def encode(self, texts, batch_size=32):
            with open(counts, "a") as f:
                f.write(f"{len(texts)}\\n")
            return super().encode(texts, batch_size)

    class KillAt(DelegatingStore):
        calls = {}
        def _at(self, what, n=1):
            self.calls[what] = self.calls.get(what, 0) + 1
            if what == point.split(":")[0] and self.calls[what] == int(point.split(":")[1]):
                os.kill(os.getpid(), signal.SIGKILL)
        def upsert_chunks(self, points):
            self._at("upsert")
            self.inner.upsert_chunks(points)
        def put_document(self, record):
            self.inner.put_document(record)
            self._at("commit")
        def set_dense(self, vectors):
            self._at("dense")
            return self.inner.set_dense(vectors)
        def write_meta(self, meta):
            if not meta.dense_pending and not meta.dirty and meta.generation:
                self._at("embedded")
            self.inner.write_meta(meta)

    with open_store(CollectionAddress(store=store_dir)) as inner:
        ingest(Path(src), KillAt(inner), model="hash", embedder=Counting(384), batch_size=2)
    print("finished")
    """
)
# Where a run dies: before its first chunk, after 10 commits, between the passes (every
# document in, no vector), after two windows of vectors, after the last vector (the meta
# not yet told).
KILL_POINTS = ["upsert:1", "commit:10", "dense:1", "dense:3", "embedded:1"]


@pytest.mark.parametrize("point", KILL_POINTS)
def test_kill_9_in_either_pass_resumes_embedding_each_chunk_once(
    sample_copy: Path, tmp_path: Path, point: str
) -> None:
    store_dir, counts = tmp_path / "store", tmp_path / "counts"
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED, str(sample_copy), str(store_dir), point, str(counts)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    with open_store(CollectionAddress(store=store_dir)) as store:
        docs = store.list_documents()
        committed = {d.path for d in docs}
        # The committed chunks the kill left without a dense vector (a killed run's other
        # chunks belong to no record: the re-run deletes them and writes them anew).
        after_kill = sum(
            d.chunks - len(store.chunk_vectors(d.path, d.gen, range(d.chunks))) for d in docs
        )
        again, texts = _ingest(sample_copy, store)
        report = check_store(store)
        assert report.ok, report.problems
        assert store.chunk_versions() == {(d.path, d.gen) for d in store.list_documents()}
        meta = store.read_meta()
        assert meta is not None and not meta.dirty and not meta.dense_pending
        final_embedded, final_total = store.embedding_counts()
        assert final_embedded == final_total == report.chunks
    # Nothing that was in is read into the model again: the re-run embeds exactly what the
    # kill left without a vector (the chunks it writes anew, for the documents not yet in).
    assert len(texts) == len(set(texts))
    assert len(texts) + again.vectors_reused == after_kill + again.chunks_written
    assert set(again.added) == {d.path for d in _docs(store_dir)} - committed
    assert not again.updated and len(again.unchanged) == len(committed)
    done_before = sum(int(x) for x in counts.read_text().split()) if counts.exists() else 0
    # Each distinct text embedded once in all, but for the one window the kill cut short
    # (batch_size 2: windows of 2 x ENCODE_WINDOW_BATCHES texts).
    window = 2 * densepass.ENCODE_WINDOW_BATCHES
    assert done_before + len(texts) <= report.chunks + window, (done_before, len(texts))


def _docs(store_dir: Path) -> list[DocumentRecord]:
    with open_store(CollectionAddress(store=store_dir)) as store:
        return store.list_documents()


def test_sigterm_stops_an_ingest_as_ctrl_c_does(tmp_path: Path) -> None:
    """Before: SIGTERM stopped an ingest silently; Ctrl-C printed what was kept. The signal
    lands while the second pass is paused in its model (tests.helpers.pausedingest): before,
    it was sent at the second pass's first progress line, which a quick pass printed only
    when it had ended (the run then exited 0)."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(100):
        (src / f"d{i:03d}.md").write_text(f"# D {i}\n\n" + "words of a note. " * 400)
    outs = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        store = tmp_path / f"store-{sig.name}"
        gate = tmp_path / f"gate-{sig.name}"
        gate.mkdir()
        command = [SEMFS, "ingest", str(src), "--store", str(store), "-m", "hash"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.pausedingest", str(gate), *command],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 300
        while not (gate / "paused").exists():  # the second pass: every document is in
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 128 + sig, err
        # The same message, but for how many chunks wait: that depends on when it landed.
        outs[sig] = [
            re.sub(r"\d+", "N", line) for line in err.splitlines() if line.startswith("Interrupted")
        ]
        with open_store(CollectionAddress(store=store)) as s:
            assert len(s.list_documents()) == 100  # kept, as the message says
    assert outs[signal.SIGINT] == outs[signal.SIGTERM] and len(outs[signal.SIGTERM]) == 1
    assert "every document is in and keyword-searchable" in outs[signal.SIGTERM][0]


def test_an_owner_resumes_what_a_killed_run_left(sample_copy: Path, store_dir: Path) -> None:
    """The long-running owner's dense pass (a mount's, semfs mcp's) embeds what a run left."""
    with open_store(CollectionAddress(store=store_dir)) as store:
        _ingest(sample_copy, store, dense=False)
        embedder = CountingEmbedder()
        service = DenseService(store, lambda: embedder)
        service.start()
        try:
            assert service.wait_idle(120)
        finally:
            service.stop()
        embedded, total = store.embedding_counts()
        assert embedded == total and len(embedder.texts) == len(set(embedder.texts))
        meta = store.read_meta()
        assert meta is not None and not meta.dense_pending
        # Nothing left: a second pass loads nothing and embeds nothing.
        again = embed_missing(store, embedder)
        assert again.embedded == again.reused == 0


def test_the_dense_pass_embeds_what_the_first_pass_hashed(tmp_path: Path, store_dir: Path) -> None:
    """The second pass rebuilds each chunk's model text from its record (prose: title and
    heading path; code: the file's path and the definition's label): it must be the text whose
    hash the first pass stored, or a reused vector would be another text's."""
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "guide.md").write_text("# Guide\n\n## Setup\n\nInstall it.\n\n## Use\n\nRun it.\n")
    (src / "pkg" / "upload.py").write_text(
        "class Uploader:\n    def retry_upload(self, n: int) -> int:\n        return n + 1\n\n\n"
        "def shouldRetryRequest(code: int) -> bool:\n    return code >= 500\n"
    )
    (src / "notes.txt").write_text("plain words\n\nmore plain words\n")
    with open_store(CollectionAddress(store=store_dir)) as store:
        _ingest(src, store, dense=False)
        missing, cursor = store.chunks_without_dense(1000)
        assert cursor is None and {c.path for c in missing} == {
            "guide.md",
            "pkg/upload.py",
            "notes.txt",
        }
        assert any(c.syntax for c in missing)  # the code path is taken
        for c in missing:
            text = densepass.model_text_of(c)
            assert c.vhash == vector_hash(text), c.path


def test_a_run_stopped_while_embedding_reports_the_vectors_it_stored(tmp_path: Path) -> None:
    """Before: an ingest stopped in its dense pass (Ctrl-C, SIGTERM) reported 0 chunks
    embedded in 0.0 s, whatever it had stored (a 103k-chunk run stopped at 5,376 vectors:
    its `--json` said "chunks_embedded": 0, "seconds": 0.0)."""

    class CtrlCInSecondWindow(CountingEmbedder):
        def encode(self, texts: Any, batch_size: int = 32) -> list[list[float]]:
            if self.texts:  # the first window is stored; Ctrl-C while the model runs the next
                raise KeyboardInterrupt
            return super().encode(texts, batch_size)

    from semfs.ingest.report import Interrupted

    src = tmp_path / "src"
    src.mkdir()
    for i in range(40):  # one chunk each: two windows of the dense pass (32 + 8)
        (src / f"n{i:03d}.md").write_text(f"# Note {i}\n\nword{i} alpha beta.\n")
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        with pytest.raises(Interrupted) as stopped:
            ingest(src, store, model="hash", embedder=CtrlCInSecondWindow(), batch_size=4)
        embedded, total = store.embedding_counts()
    report = stopped.value.report
    assert stopped.value.phase == "embedding"
    assert 0 < embedded < total == 40
    assert report.chunks_embedded == embedded, report.to_json()
    assert report.dense_pending == total - embedded
    assert report.seconds > 0
