"""A working tree followed through `git checkout` and `git rebase` (issue 42): a checkout of
another branch re-ingests only the files that differ, and a rebase is one batch of its end
result, not one re-embed per step. A real watcher (inotify) on a real repository, the
stand-in model; every wait polls with a generous timeout."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from semfs.ingest.report import IngestReport
from semfs.ingest.sources import SourceOptions
from semfs.ingest.store import Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.syncstate import SyncState
from semfs.ingest.watch import SourceWatcher, git_dir
from tests.helpers.mounting import wait_until

TIMEOUT = 60.0
FILES = 240  # a working tree of a few hundred files; the branch changes a handful


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "HOME": str(repo.parent / "home"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout


def module(i: int, variant: str = "") -> str:
    return (
        f'"""Module {i}{variant}."""\n\n\n'
        f"def handler_{i}(request):\n"
        f"    '''Answer request {i}{variant}.'''\n"
        f"    return respond(request, code={i})\n"
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed (scripts/setup.sh installs it)")
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (tmp_path / "home").mkdir()
    git(repo, "init", "-q", "-b", "main")
    for i in range(FILES):
        (repo / "pkg" / f"m{i:03d}.py").write_text(module(i))
    (repo / ".gitignore").write_text("build/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "other")
    for i in (3, 50, 99, 150, 200):
        (repo / "pkg" / f"m{i:03d}.py").write_text(module(i, " on the other branch"))
    (repo / "pkg" / "new_a.py").write_text(module(1000))
    (repo / "pkg" / "new_b.py").write_text(module(1001))
    (repo / "pkg" / "m007.py").unlink()
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "other")
    git(repo, "checkout", "-q", "main")
    return repo


class Batches:
    """The reports of a watcher's batches, as they commit."""

    def __init__(self) -> None:
        self.reports: list[IngestReport] = []
        self.lock = threading.Lock()

    def __call__(self, report: IngestReport, _state: SyncState) -> None:
        with self.lock:
            self.reports.append(report)

    def since(self, n: int) -> list[IngestReport]:
        with self.lock:
            return self.reports[n:]


@contextmanager
def watching(repo: Path, store: Store) -> Iterator[tuple[SourceWatcher, Batches]]:
    batches = Batches()
    watcher = SourceWatcher(repo, store, SourceOptions(model="hash"), on_batch=batches)
    watcher.start()
    try:
        yield watcher, batches
    finally:
        watcher.stop()


def mirrors(store: Store, repo: Path) -> bool:
    """The collection holds exactly the working tree's files (those git does not ignore)."""
    tree = {
        str(p.relative_to(repo)).replace(os.sep, "/")
        for p in repo.rglob("*")
        if p.is_file() and ".git" not in p.parts and "build" not in p.parts
    }
    docs = {d.path: d for d in store.list_documents()}
    if set(docs) != tree:
        return False
    return all(docs[p].size == (repo / p).stat().st_size for p in tree)


def settled(watcher: SourceWatcher, store: Store, repo: Path) -> bool:
    return watcher.state.pending == 0 and mirrors(store, repo)


def test_a_checkout_re_ingests_only_what_changed(repo: Path, tmp_path: Path) -> None:
    with (
        open_store(CollectionAddress(store=tmp_path / "store")) as store,
        watching(repo, store) as (watcher, batches),
    ):
        wait_until(
            lambda: settled(watcher, store, repo) and batches.since(0), TIMEOUT, "first pass"
        )
        first = len(batches.since(0))
        chunks = {d.path: d.chunks for d in store.list_documents()}
        git(repo, "checkout", "-q", "other")
        (repo / "build").mkdir()
        (repo / "build" / "out.py").write_text("x = 1\n")  # ignored: never ingested
        wait_until(lambda: settled(watcher, store, repo), TIMEOUT, "the checkout mirrored")
        after = batches.since(first)
        updated = {p for r in after for p in r.updated}
        added = {p for r in after for p in r.added}
        deleted = {p for r in after for p in r.deleted}
        written = sum(r.chunks_written for r in after)
        new_chunks = {d.path: d.chunks for d in store.list_documents()}
        assert updated == {f"pkg/m{i:03d}.py" for i in (3, 50, 99, 150, 200)}
        assert added == {"pkg/new_a.py", "pkg/new_b.py"}
        assert deleted == {"pkg/m007.py"}
        # Only the files that differ were chunked (and their chunks embedded, by the owner's
        # dense pass after each batch); the rest were not looked at.
        assert written == sum(new_chunks[p] for p in updated | added)
        assert all(len(r.unchanged) < 10 for r in after)
        assert chunks.keys() - new_chunks.keys() == deleted
        assert "build/out.py" not in new_chunks


def test_a_rebase_is_one_batch_of_its_result(repo: Path, tmp_path: Path) -> None:
    """Each step of a rebase rewrites the same file; steps are slowed (--exec sleep) so that
    a watcher debouncing on quiet alone would embed the states between."""
    git(repo, "checkout", "-q", "-b", "topic")
    target = repo / "pkg" / "m010.py"
    for step in range(6):
        target.write_text(module(10, f" step {step}"))
        git(repo, "commit", "-q", "-am", f"step {step}")
    git(repo, "checkout", "-q", "main")
    (repo / "pkg" / "m011.py").write_text(module(11, " on main"))
    git(repo, "commit", "-q", "-am", "main moves")
    git(repo, "checkout", "-q", "topic")
    assert git_dir(repo) == str(repo / ".git")
    with (
        open_store(CollectionAddress(store=tmp_path / "store")) as store,
        watching(repo, store) as (watcher, batches),
    ):
        wait_until(
            lambda: settled(watcher, store, repo) and batches.since(0), TIMEOUT, "first pass"
        )
        first = len(batches.since(0))
        git(repo, "rebase", "-q", "--exec", "sleep 0.6", "main")
        wait_until(lambda: settled(watcher, store, repo), TIMEOUT, "the rebase mirrored")
        after = batches.since(first)
    # The rebase rewrote m010.py seven times (main's version, then each step), ending as it
    # began: none of the states between was embedded (one at most, should the machine stall
    # longer than GIT_QUIET between two steps); m011.py, which main changed, was.
    touched = [r for r in after if "pkg/m010.py" in r.updated]
    assert len(touched) <= 1, [(r.updated, r.added) for r in after]
    assert {p for r in after for p in r.updated} >= {"pkg/m011.py"}
    assert target.read_text() == module(10, " step 5")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) missing")
def test_another_users_git_folder_in_a_shared_parent_holds_nothing(open_tmp: Path) -> None:
    """Issue 46.6: nobody's .git (with an index.lock) in a 1777 parent is not the source's
    repository: the watcher does not wait for it."""
    shared = open_tmp / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    (shared / "src").mkdir()
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    subprocess.run([*as_nobody, "mkdir", str(shared / ".git")], check=True)
    subprocess.run([*as_nobody, "touch", str(shared / ".git" / "index.lock")], check=True)
    assert git_dir(shared / "src") is None
    # Once the parent is the user's own (and no one else writes it), it is their repository.
    shared.chmod(0o755)
    os.chown(shared / ".git", 0, 0)
    assert git_dir(shared / "src") == str(shared / ".git")


def test_a_git_lock_that_never_goes_holds_a_batch_for_a_bounded_time(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 46.6: an index.lock left behind while files keep changing (every 0.3 s) holds
    a batch GIT_MAX_HOLD at most (3 s here), and the state says why it waits."""
    from semfs.ingest import watch

    monkeypatch.setattr(watch, "GIT_MAX_HOLD", 3.0, raising=False)
    with (
        open_store(CollectionAddress(store=tmp_path / "store")) as store,
        watching(repo, store) as (watcher, batches),
    ):
        wait_until(
            lambda: settled(watcher, store, repo) and batches.since(0), TIMEOUT, "first pass"
        )
        (repo / ".git" / "index.lock").touch()
        stop = threading.Event()

        def keep_writing() -> None:
            n = 0
            while not stop.wait(0.3):
                n += 1
                (repo / "pkg" / "churn.py").write_text(f"x = {n}\n")

        writer = threading.Thread(target=keep_writing, daemon=True)
        writer.start()
        try:
            (repo / "note.md").write_text("# Note\n\nthe quokka memo\n")
            wait_until(
                lambda: store.get_document("note.md") is not None, TIMEOUT, "the note indexed"
            )
            # Each batch of the churn waits its bounded time again, saying why.
            wait_until(lambda: "index.lock" in _waiting(watcher), TIMEOUT, "the reason")
            assert "for git to finish" in _waiting(watcher)
        finally:
            stop.set()
            writer.join()


def _waiting(watcher: SourceWatcher) -> str:
    return getattr(watcher.state, "waiting", None) or ""
