"""Meaning where it is used first (issue 45.2): the dense pass embeds first the chunks of the
folder a search was scoped to and of the document read, then the rest; the note it reads is a
hint that hostile files (a symlink, another user's file, a FIFO, a huge or garbled one) cannot
turn into a write elsewhere, a hang or a failure. Real Edge stores; the hash stand-in embeds."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from semfs.ingest import focus
from semfs.ingest.collection import open_collection
from semfs.ingest.densepass import embed_missing
from semfs.ingest.embedding.embedder import HashEmbedder
from semfs.ingest.focus import FOCUS_FILE, Focus, Use, UseLog, read_uses, uses_of, write_uses
from semfs.ingest.pipeline import ingest
from semfs.ingest.request import SearchRequest
from semfs.ingest.store import DelegatingStore, Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.schema import DenseVector

FOLDERS = ("alpha", "bravo", "charlie", "delta")
DOCS = 12  # per folder, a few chunks each: several windows of 32 chunks


def _corpus(src: Path) -> None:
    for folder in FOLDERS:
        (src / folder).mkdir(parents=True)
        for i in range(DOCS):
            sections = "".join(
                f"## {folder} part {j}\n\n"
                + f"The {folder} setting number {i}.{j} is here. " * 40
                + "\n\n"
                for j in range(3)
            )
            (src / folder / f"doc{i:02d}.md").write_text(f"# {folder} {i}\n\n{sections}")


class _Windows(DelegatingStore):
    """The store, telling which documents each window of the dense pass gave vectors to."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.windows: list[list[str]] = []

    def set_dense(self, vectors: Sequence[DenseVector]) -> int:
        self.windows.append([v.path for v in vectors])
        return super().set_dense(vectors)


@pytest.fixture(scope="module")
def keywords_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store whose every chunk lacks its dense vector, ingested once for the module."""
    top = tmp_path_factory.mktemp("embed-first")
    _corpus(top / "src")
    with open_store(CollectionAddress(store=top / "store")) as store:
        ingest(top / "src", store, model="hash", embedder=HashEmbedder(), dense=False)
        assert store.embedding_counts()[0] == 0
    return top / "store"


@pytest.fixture
def address(keywords_only: Path, tmp_path: Path) -> CollectionAddress:
    shutil.copytree(keywords_only, tmp_path / "store", symlinks=True)
    return CollectionAddress(store=tmp_path / "store")


def _first_embedded(store: Store, n: int) -> list[str]:
    """Run the dense pass (windows of 32 chunks); the documents of its first ``n`` chunks."""
    windows = _Windows(store)
    embed_missing(windows, HashEmbedder(), batch_size=4)
    order = [path for window in windows.windows for path in window]
    assert len(order) == store.embedding_counts()[1] > n  # and everything else after them
    return order[:n]


def test_the_folder_searched_and_the_document_read_are_embedded_first(
    address: CollectionAddress,
) -> None:
    """Before: the pass went in store order, and charlie's chunks and delta/doc07's were
    spread over all its windows."""
    read = "delta/doc07.md"
    with open_collection(address) as coll:
        hits = coll.search(SearchRequest("charlie setting", k=3, mode="keyword", under="charlie"))
        assert hits and all(h.path.startswith("charlie/") for h in hits)
        coll.read(read)
        note = coll.store.lock_path(FOCUS_FILE)
        # The read came within a second of the search: written a moment later, together.
        deadline = time.monotonic() + 60
        while read not in [u.path for u in read_uses(note)] and time.monotonic() < deadline:
            time.sleep(0.1)
        uses = read_uses(note)
        assert [(u.kind, u.path) for u in uses][:1] == [("document", read)]
        assert ("folder", "charlie") in [(u.kind, u.path) for u in uses]
        in_read = coll.store.embedding_counts()[1] // (len(FOLDERS) * DOCS)
        in_folder = coll.store.embedding_counts("charlie")[1]
        assert in_folder == DOCS * in_read
        first = _first_embedded(coll.store, in_read + in_folder)
    assert first[:in_read] == [read] * in_read  # the most recent first
    assert all(p.startswith("charlie/") for p in first[in_read:])
    assert len(set(first[in_read:])) == DOCS


def test_nothing_noted_means_store_order(address: CollectionAddress) -> None:
    """The same pass, untouched: no folder comes first (the comparison the test above needs)."""
    with open_store(address) as store:
        first = _first_embedded(store, store.embedding_counts("charlie")[1])
    assert len({p.split("/")[0] for p in first}) > 1


def test_a_hostile_note_is_ignored_and_never_written_through(
    address: CollectionAddress, tmp_path: Path
) -> None:
    with open_store(address) as store:
        note = store.lock_path(FOCUS_FILE)
        assert note is not None

        def ignored() -> bool:
            return read_uses(note) == [] and Focus(store).next_chunks(32) == []

        elsewhere = tmp_path / "elsewhere.json"
        write_uses(elsewhere, [Use("folder", "bravo", time.time())])
        before = elsewhere.read_bytes()
        # A symlink to a note of ours: not followed.
        note.symlink_to(elsewhere)
        assert ignored()
        # A reader's note replaces the link; the file it pointed to is as it was.
        log = UseLog(store, note)
        umask = os.umask(0)  # 0600 whatever the umask lets through
        try:
            log.documents(["alpha/doc01.md"])
        finally:
            os.umask(umask)
        assert not note.is_symlink() and elsewhere.read_bytes() == before
        assert [u.path for u in read_uses(note)] == ["alpha/doc01.md"]
        assert note.stat().st_mode & 0o777 == 0o600
        # Another user's file (only root can make one here): ignored.
        if os.geteuid() == 0:
            os.chown(note, 65534, 65534)
            assert ignored()
        note.unlink()
        # A FIFO: not waited on.
        os.mkfifo(note, 0o600)
        assert ignored()
        note.unlink()
        # Too large, garbled, or holding what no reader writes: nothing.
        note.write_bytes(b"[" + b" " * focus.MAX_FILE_BYTES + b"]")
        assert ignored()
        note.write_text('[{"kind": "folder", "path": "alpha", "at": 1}, {"kind": 1}, 3, [')
        assert ignored()
        rows = [{"kind": "folder", "path": "alpha", "at": "now"}, {"kind": "x", "path": "a"}]
        rows += [{"kind": "folder", "path": "", "at": 1}, {"kind": "folder", "path": "a"}]
        note.write_text(json.dumps(rows)[:-1] + ', {"kind": "folder", "path": "b", "at": 1e400}]')
        assert ignored()
        note.write_text("[" * 100_000)  # deeper than the parser goes
        assert ignored()
        # The pass beside such a note embeds every chunk, in store order.
        embed_missing(store, HashEmbedder())
        embedded, total = store.embedding_counts()
        assert embedded == total > 0


def test_the_note_is_bounded_and_a_reader_that_cannot_write_goes_on(
    address: CollectionAddress, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Longer than the machine has been up, whatever its uptime: the first note is still
    # written at once (it was held back while time.monotonic() < WRITE_EVERY).
    monkeypatch.setattr(focus, "WRITE_EVERY", time.monotonic() + 3600.0)
    with open_store(address) as store:
        note = store.lock_path(FOCUS_FILE)
        assert note is not None
        log = UseLog(store, note)
        log.documents([f"many/{i}.md" for i in range(1000)] + ["x" * 5000])
        rows = json.loads(note.read_bytes())
        assert len(rows) == focus.MAX_ENTRIES and rows[0]["path"] == "many/999.md"
        assert note.stat().st_size <= focus.MAX_FILE_BYTES
        # Written at most every WRITE_EVERY seconds: what comes meanwhile waits for the next.
        log.documents(["alpha/doc03.md"])
        assert json.loads(note.read_bytes()) == rows
        log.flush()
        assert [u.path for u in read_uses(note)][:2] == ["alpha/doc03.md", "many/999.md"]
        # A folder it cannot write (here: gone): the read goes on, nothing is raised.
        UseLog(store, tmp_path / "gone" / FOCUS_FILE).documents(["alpha/doc01.md"])
        # A store whose every chunk has its vector: nothing is noted.
        embed_missing(store, HashEmbedder())
        note.unlink()
        later = UseLog(store, note)
        later.documents(["alpha/doc02.md"])
        assert not note.exists()
        assert uses_of(store) is uses_of(store)


def test_a_collection_opened_again_in_the_process_is_noted(
    address: CollectionAddress, keywords_only: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process's note of a collection asks the store open now whether it embeds, not
    one closed since (whose last answer was: all embedded, so nothing was noted)."""
    monkeypatch.setattr(focus, "PENDING_TTL", 0.0)  # asked at each note
    with open_store(address) as store:
        embed_missing(store, HashEmbedder())
        uses_of(store).documents(["alpha/doc01.md"])
        note = store.lock_path(FOCUS_FILE)
    assert note is not None and not note.exists()
    shutil.rmtree(address.store)  # the collection written again, keywords first
    shutil.copytree(keywords_only, address.store, symlinks=True)
    with open_store(address) as store:
        uses_of(store).documents(["alpha/doc02.md"])
    assert [u.path for u in read_uses(note)] == ["alpha/doc02.md"]
