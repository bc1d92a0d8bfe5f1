"""A live index: `semfs mount --watch` and `semfs ingest --watch`, through real mounts and
real file operations (edit, create, delete, renames, atomic saves, bursts, a source that
goes away, bad files, kill -9 in a batch). The stand-in model keeps them fast; one test
uses the real model.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.syncstate import SyncState, load_state, state_file
from tests.helpers import SEMFS
from tests.helpers.mounting import Mount, force_unmount, mounted, semfs, stop_process, wait_until

pytestmark = pytest.mark.mount

SYNC_TIMEOUT = 30.0
BAD_FILE_LOG = [r"cannot ingest"]


def state(store: Path) -> SyncState:
    got = load_state(state_file(CollectionAddress("docs", store=store)))
    assert got is not None, "no watch state saved"
    return got


def listed(mnt: Path) -> set[str]:
    """Files under ``mnt``; a folder that vanishes while walked (a rename) is skipped."""
    return {
        os.path.relpath(os.path.join(root, name), mnt).replace(os.sep, "/")
        for root, _dirs, names in os.walk(mnt)
        for name in names
    }


def settled(store: Path, batches: int = 0, pid: int | None = None) -> bool:
    """The watcher (of process ``pid``, when given) committed more than ``batches`` batches
    and nothing waits."""
    s = load_state(state_file(CollectionAddress("docs", store=store)))
    if s is None or (pid is not None and s.pid != pid):
        return False
    return s.batches > batches and s.pending == 0


def make_source(root: Path) -> Path:
    src = root / "src"
    (src / "guide").mkdir(parents=True)
    (src / "intro.md").write_text("# Intro\n\nsemfs shows documents as files.\n")
    (src / "guide" / "setup.md").write_text("# Setup\n\nInstall the package, then mount.\n")
    (src / "guide" / "usage.md").write_text("# Usage\n\nSearch with folders named as questions.\n")
    return src


def watch_mount(
    tmp_path: Path, src: Path, *args: str, expect_log: list[str] | None = None
) -> contextlib.AbstractContextManager[Mount]:
    """`semfs mount --watch SRC` with the stand-in model, its store in tmp_path/store."""
    store = tmp_path / "store"
    return mounted(
        tmp_path / "mnt",
        "--store",
        str(store),
        "--watch",
        str(src),
        "--model",
        "hash",
        *args,
        expect_log=expect_log or [],
    )


def keyword_hits(mnt: Path, word: str) -> list[str]:
    """The documents a keyword search for ``word`` links to, best first; none while a batch
    lands between the listing and the readlinks (the links are renamed: callers ask again)."""
    qdir = mnt / ".search" / "@keyword" / word
    try:
        return sorted(
            os.readlink(qdir / n).split("../")[-1]
            for n in os.listdir(qdir)
            if not n.endswith("-results.md")
        )
    except FileNotFoundError:
        return []


def test_edit_create_delete_show_in_the_mount(tmp_path: Path) -> None:
    src = make_source(tmp_path)
    store = tmp_path / "store"
    with watch_mount(tmp_path, src) as m:
        wait_until(lambda: listed(m.path) == listed(src), SYNC_TIMEOUT, "the first pass")
        assert (m.path / "intro.md").read_text() == (src / "intro.md").read_text()

        (src / "intro.md").write_text("# Intro\n\nNow about zeppelins.\n")
        wait_until(
            lambda: "zeppelins" in (m.path / "intro.md").read_text(), SYNC_TIMEOUT, "the edit"
        )
        # (A file's content can be newer than the tree a search runs against for a moment.)
        wait_until(
            lambda: keyword_hits(m.path, "zeppelins") == ["intro.md"], SYNC_TIMEOUT, "searchable"
        )

        (src / "guide" / "new.md").write_text("# New\n\nA new page on gondolas.\n")
        wait_until(lambda: "guide/new.md" in listed(m.path), SYNC_TIMEOUT, "the new file")
        wait_until(
            lambda: keyword_hits(m.path, "gondolas") == ["guide/new.md"], SYNC_TIMEOUT, "search"
        )

        (src / "guide" / "usage.md").unlink()
        wait_until(lambda: "guide/usage.md" not in listed(m.path), SYNC_TIMEOUT, "the deletion")
        assert listed(m.path) == listed(src)
        wait_until(lambda: settled(store), SYNC_TIMEOUT, "the state file")
        s = state(store)
        assert s.running and s.watcher == "inotify" and s.source == str(src)
        assert os.getxattr(m.path, "user.semfs.pending") == b"0"
        synced = os.getxattr(m.path, "user.semfs.synced_at").decode()
        assert synced.startswith(time.strftime("%Y-%m-%dT"))
        results = (m.path / ".search" / "gondolas" / "00-results.md").read_text().splitlines()
        assert results[2].startswith("index as of ") and results[2].endswith(", 0 changes pending")


def test_renames_moves_and_atomic_saves(tmp_path: Path) -> None:
    src = make_source(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    store = tmp_path / "store"
    with watch_mount(tmp_path, src) as m:
        wait_until(lambda: listed(m.path) == listed(src), SYNC_TIMEOUT, "the first pass")
        (src / "intro.md").rename(src / "start.md")
        (src / "guide").rename(src / "manual")
        wait_until(lambda: listed(m.path) == listed(src), SYNC_TIMEOUT, "the renames")
        assert sorted(listed(m.path)) == ["manual/setup.md", "manual/usage.md", "start.md"]
        # (The kernel may hold the old name for its entry timeout.)
        wait_until(lambda: not (m.path / "guide").exists(), SYNC_TIMEOUT, "the old folder gone")

        # Moved out of the source: gone; moved in (a folder with a file): there.
        (src / "start.md").rename(outside / "start.md")
        (outside / "extra").mkdir()
        (outside / "extra" / "e.md").write_text("extra page\n")
        (outside / "extra").rename(src / "extra")
        wait_until(lambda: listed(m.path) == listed(src), SYNC_TIMEOUT, "the moves")
        assert "extra/e.md" in listed(m.path) and "start.md" not in listed(m.path)

        # An editor's save: write a temporary file, then rename it over the document.
        wait_until(lambda: settled(store), SYNC_TIMEOUT, "a quiet watcher")
        before = state(store).batches
        tmp = src / "manual" / ".setup.md.swp"
        tmp.write_text("# Setup\n\nSaved atomically: albatross.\n")
        os.replace(tmp, src / "manual" / "setup.md")
        wait_until(
            lambda: "albatross" in (m.path / "manual" / "setup.md").read_text(),
            SYNC_TIMEOUT,
            "the atomic save",
        )
        wait_until(lambda: settled(store, before), SYNC_TIMEOUT, "the batch")
        assert listed(m.path) == listed(src)  # the temporary file never stays
        last = state(store).last_batch
        assert last is not None and last.updated == 1 and last.added == 0


def test_a_burst_is_few_batches_and_nothing_unchanged_is_re_embedded(tmp_path: Path) -> None:
    src = make_source(tmp_path)
    store = tmp_path / "store"
    with watch_mount(tmp_path, src) as m:
        wait_until(lambda: settled(store), SYNC_TIMEOUT, "the first pass")
        before = state(store).batches
        burst = src / "burst"
        burst.mkdir()
        for i in range(300):
            (burst / f"f{i:03d}.md").write_text(f"# File {i}\n\nburst file number {i}\n")
        wait_until(lambda: len(listed(m.path)) == 303, SYNC_TIMEOUT, "the burst")
        wait_until(lambda: settled(store, before), SYNC_TIMEOUT, "the burst's batches")
        s = state(store)
        assert s.batches - before <= 2, f"{s.batches - before} batches for one burst"
        assert s.last_batch is not None and s.last_batch.updated == 0
        # Touching files without changing them embeds nothing.
        before = s.batches
        for p in list(burst.iterdir())[:50]:
            os.utime(p)
        wait_until(lambda: settled(store, before), SYNC_TIMEOUT, "the touch batch")
        last = state(store).last_batch
        assert last is not None and (last.added, last.updated, last.deleted) == (0, 0, 0)


def test_source_removal_keeps_the_index_and_recovers(tmp_path: Path) -> None:
    src = make_source(tmp_path)
    store = tmp_path / "store"
    aside = tmp_path / "aside"
    expect = [r"source folder missing", r"is back"]
    with watch_mount(tmp_path, src, expect_log=expect) as m:
        wait_until(lambda: settled(store), SYNC_TIMEOUT, "the first pass")
        files = listed(m.path)
        src.rename(aside)
        wait_until(
            lambda: (state(store).source_problem or "").startswith("source folder missing"),
            SYNC_TIMEOUT,
            "the missing source noticed",
        )
        assert listed(m.path) == files  # the last good index stays
        status = semfs("status", "--store", str(store)).stdout
        assert "source folder missing since" in status
        (aside / "returned.md").write_text("written while away\n")
        aside.rename(src)
        wait_until(lambda: "returned.md" in listed(m.path), SYNC_TIMEOUT, "the catch-up")
        assert state(store).source_problem is None

        # Removed outright (rm -rf), then restored: the same.
        shutil.rmtree(src)
        wait_until(lambda: state(store).source_problem is not None, SYNC_TIMEOUT, "rm -rf seen")
        assert listed(m.path) == files | {"returned.md"}
        make_source(tmp_path)
        wait_until(lambda: "returned.md" not in listed(m.path), SYNC_TIMEOUT, "the restore")
        assert listed(m.path) == files


def test_a_bad_file_keeps_its_previous_version(tmp_path: Path) -> None:
    src = make_source(tmp_path)
    store = tmp_path / "store"
    with watch_mount(tmp_path, src, expect_log=BAD_FILE_LOG) as m:
        wait_until(lambda: settled(store), SYNC_TIMEOUT, "the first pass")
        good = (src / "intro.md").read_text()
        (src / "intro.md").write_bytes(b"\x00\x01binary now")
        (src / "image.md").write_bytes(b"\x89PNG\x00\x00")
        wait_until(lambda: "intro.md" in state(store).failed, SYNC_TIMEOUT, "the failure")
        wait_until(lambda: "image.md" in listed(m.path), SYNC_TIMEOUT, "the new binary file")
        s = state(store)
        assert s.failed["intro.md"].startswith("binary file (contains NUL bytes)")
        assert (m.path / "intro.md").read_text() == good  # the previous version stays
        # A new file that is no text is no failure: stored as it is, served, not searched.
        assert "image.md" not in s.failed
        assert (m.path / "image.md").read_bytes() == b"\x89PNG\x00\x00"
        status = semfs("status", "--store", str(store)).stdout
        assert "intro.md: binary file (contains NUL bytes) (kept the ingested version)" in status
        (src / "intro.md").write_text("# Intro\n\nfixed\n")
        wait_until(lambda: "intro.md" not in state(store).failed, SYNC_TIMEOUT, "the fix")
        assert (m.path / "intro.md").read_text() == "# Intro\n\nfixed\n"
    assert "cannot ingest intro.md: binary file (contains NUL bytes)" in m.log_text()


def test_include_and_exclude_are_honoured(tmp_path: Path) -> None:
    src = make_source(tmp_path)
    store = tmp_path / "store"
    with watch_mount(tmp_path, src, "--include", "*.md", "--exclude", "drafts/") as m:
        wait_until(lambda: settled(store), SYNC_TIMEOUT, "the first pass")
        (src / "drafts").mkdir()
        (src / "drafts" / "wip.md").write_text("not yet\n")
        (src / "notes.txt").write_text("not markdown\n")
        (src / "ok.md").write_text("fine\n")
        wait_until(lambda: "ok.md" in listed(m.path), SYNC_TIMEOUT, "the included file")
        wait_until(lambda: settled(store), SYNC_TIMEOUT, "quiet")
        assert "drafts/wip.md" not in listed(m.path) and "notes.txt" not in listed(m.path)


def chunks_are_consistent(store: Path) -> None:
    """Every committed document has exactly its chunks; no chunk of a killed batch is left."""
    with open_store(CollectionAddress(store=store)) as s:
        meta = s.read_meta()
        assert meta is not None and not meta.dirty
        docs = {d.path: d for d in s.list_documents()}
        assert s.chunk_versions() == {(d.path, d.gen) for d in docs.values()}
        assert s.count_chunks() == sum(d.chunks for d in docs.values())


def test_kill_9_in_a_batch_then_restart(tmp_path: Path) -> None:
    src = make_source(tmp_path)
    store = tmp_path / "store"
    mnt = tmp_path / "mnt"
    words = " ".join(f"word{i}" for i in range(400))
    with watch_mount(tmp_path, src) as m:
        wait_until(lambda: settled(store), SYNC_TIMEOUT, "the first pass")
        bulk = src / "bulk"
        bulk.mkdir()
        for i in range(600):
            (bulk / f"b{i:04d}.md").write_text(f"# Bulk {i}\n\n" + (words + "\n\n") * 4)
        # Kill as soon as the batch has committed some documents but not all.
        wait_until(lambda: len(listed(mnt)) > 3, SYNC_TIMEOUT, "the batch under way")
        os.kill(m.pid, signal.SIGKILL)
        m.proc.wait(10)
        force_unmount(mnt)
    with open_store(
        CollectionAddress(store=store)
    ) as s:  # killed in the middle: the run is marked interrupted
        meta = s.read_meta()
        assert meta is not None and meta.dirty
        assert 0 < len(s.list_documents()) < 603
    # A second daemon: its first pass cleans up the killed batch and finishes the work.
    with watch_mount(tmp_path, src) as m:
        wait_until(lambda: len(listed(m.path)) == 603, 120, "the catch-up")
        wait_until(lambda: settled(store, pid=m.pid), SYNC_TIMEOUT, "quiet")
        assert (m.path / "bulk" / "b0042.md").read_text() == (bulk / "b0042.md").read_text()
    chunks_are_consistent(store)


def test_ingest_watch_in_the_foreground(tmp_path: Path) -> None:
    src = make_source(tmp_path)
    store = tmp_path / "store"
    proc = subprocess.Popen(
        [SEMFS, "ingest", str(src), "--store", str(store), "--watch", "-m", "hash"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until(lambda: settled(store), SYNC_TIMEOUT, "the first pass")
        (src / "later.md").write_text("added later\n")
        wait_until(lambda: settled(store, 1), SYNC_TIMEOUT, "the second batch")
        status = json.loads(semfs("status", "--store", str(store), "--json").stdout)
        assert status["watch"]["running"] and status["watch"]["pending"] == 0
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        stop_process(proc)  # type: ignore[arg-type]
    assert proc.returncode == 0, out
    assert "Following" in out and "added 1" in out and "Stopped following" in out
    assert state(store).stopped
    with open_store(CollectionAddress(store=store)) as s:
        assert {d.path for d in s.list_documents()} == listed(src)


def test_watch_errors_are_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    empty = tmp_path / "mnt"
    empty.mkdir()
    for args in (
        ["ingest", str(missing), "--watch"],
        ["mount", str(empty), "--watch", str(missing)],
    ):
        proc = semfs(*args, check=False)
        assert proc.returncode == 1
        assert proc.stderr.strip().count("\n") == 0 and "does not exist" in proc.stderr


@pytest.mark.model
def test_edit_is_searchable_with_the_real_model(tmp_path: Path) -> None:
    src = make_source(tmp_path)
    store = tmp_path / "store"
    with mounted(tmp_path / "mnt", "--store", str(store), "--watch", str(src)) as m:
        wait_until(lambda: settled(store), 120, "the first pass")
        (src / "guide" / "usage.md").write_text(
            "# Cooking\n\nHow to bake sourdough bread: flour, water, salt and a starter.\n"
        )
        query = m.path / ".search" / "@semantic" / "@k=1" / "baking a loaf of bread"

        def top() -> str:
            names = [n for n in os.listdir(query) if not n.endswith("-results.md")]
            try:
                return os.readlink(query / names[0]) if names else ""
            except FileNotFoundError:  # the batch landed between listing and reading: ask again
                return ""

        wait_until(lambda: top().endswith("guide/usage.md"), SYNC_TIMEOUT, "the edit ranked")


def test_watch_with_a_server_backend(tmp_path: Path) -> None:
    """The daemon runs the watcher against a server store too (qdrant-client local mode)."""
    src = make_source(tmp_path)
    url = f"file://{tmp_path / 'qdrant'}"
    args = ["--url", url, "--watch", str(src), "--model", "hash"]
    with mounted(tmp_path / "mnt", *args) as m:
        wait_until(lambda: listed(m.path) == listed(src), SYNC_TIMEOUT, "the first pass")
        (src / "intro.md").write_text("# Intro\n\nserver side edit\n")
        wait_until(
            lambda: "server side" in (m.path / "intro.md").read_text(), SYNC_TIMEOUT, "the edit"
        )

        def saved_batches() -> int:
            saved = load_state(state_file(CollectionAddress("docs", url=url)))
            return saved.batches if saved is not None and saved.pid == m.pid else 0

        # (The tree can show a document before its batch's state is saved.)
        wait_until(lambda: saved_batches() >= 2, SYNC_TIMEOUT, "the state under servers/")
