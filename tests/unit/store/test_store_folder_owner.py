"""A store in a folder other users can write (issue 46.2): a store folder another user made
is refused, a lock file is never opened through a symlink, and a lock file someone else
holds (under whatever name they wrote into it) does not make root wait.

Real stores, real `semfs ingest`, a real other user (nobody, through ``setpriv``) where we
are root.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from semfs.ingest.store.writelock import WRITE_LOCK, CollectionLock
from tests.helpers import NOBODY, SEMFS
from tests.helpers.mounting import stop_process, wait_until

AS_NOBODY = ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups")
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
needs_setpriv = pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv missing")
needs_flock = pytest.mark.skipif(shutil.which("flock") is None, reason="flock missing")


def _source(base: Path) -> Path:
    src = base / "src"
    src.mkdir()
    (src / "a.md").write_text("# A\n\nroot's plans\n")
    return src


def _ingest(src: Path, store: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SEMFS, "ingest", str(src), "--store", str(store), "-m", "hash"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _victim(base: Path) -> Path:
    victim = base / "victim.conf"
    victim.write_text("root's own settings\n")
    victim.chmod(0o644)
    return victim


def _untouched(victim: Path) -> None:
    assert victim.read_text() == "root's own settings\n"
    assert victim.stat().st_mode & 0o777 == 0o644


@as_root
@needs_setpriv
def test_a_store_folder_another_user_made_first_is_refused(open_tmp: Path) -> None:
    shared = open_tmp / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    victim = _victim(open_tmp)
    # nobody makes the store's folders first, and plants links for its lock files.
    store = shared / "store"
    for cmd in (
        ["mkdir", "-p", str(store / "docs")],
        ["chmod", "-R", "777", str(store)],
        ["ln", "-s", str(victim), str(store / "docs" / WRITE_LOCK)],
        ["ln", "-s", str(victim), str(store / "docs" / "embed.lock")],
    ):
        subprocess.run([*AS_NOBODY, *cmd], check=True)
    run = _ingest(_source(open_tmp), store)
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert f"store folder {store} belongs to user {NOBODY}" in lines[0]
    assert "--store" in lines[0]  # what to do
    _untouched(victim)
    assert not (store / "docs" / "shard").exists()


def test_a_store_folder_others_may_write_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "docs").mkdir(parents=True)
    store.chmod(0o777)
    run = _ingest(_source(tmp_path), store)
    assert run.returncode != 0
    assert f"store folder {store} may be written by other users (mode 0777)" in run.stderr
    store.chmod(0o700)
    (store / "docs").chmod(0o733)
    run = _ingest(tmp_path / "src", store)
    assert f"store folder {store / 'docs'} may be written by other users" in run.stderr
    (store / "docs").chmod(0o700)
    assert _ingest(tmp_path / "src", store).returncode == 0


@pytest.mark.parametrize("name", [WRITE_LOCK, "embed.lock", "lock"])
def test_a_lock_file_is_never_opened_through_a_symlink(tmp_path: Path, name: str) -> None:
    src, store = _source(tmp_path), tmp_path / "store"
    victim = _victim(tmp_path)
    (store / "docs").mkdir(parents=True, mode=0o700)
    store.chmod(0o700)
    (store / "docs" / name).symlink_to(victim)  # left by whoever could write here before
    run = _ingest(src, store)
    assert run.returncode != 0
    assert f"{store / 'docs' / name} is a symlink" in run.stderr, run.stderr
    _untouched(victim)


@as_root
@needs_setpriv
@needs_flock
def test_a_lock_file_another_user_holds_is_refused_not_waited_for(open_tmp: Path) -> None:
    src, store = _source(open_tmp), open_tmp / "store"
    assert _ingest(src, store).returncode == 0
    lock = store / "docs" / WRITE_LOCK
    # nobody's lock file in root's folder (an older semfs let nobody make the folders),
    # held by nobody, under a forged note.
    os.chown(lock, NOBODY, NOBODY)
    lock.write_text('{"pid": 1, "command": "systemd --system"}')
    for folder in (store, store / "docs"):
        folder.chmod(0o711)  # for nobody to open it, then back: nobody keeps the lock
    holder = subprocess.Popen([*AS_NOBODY, "flock", str(lock), "sleep", "600"])
    try:
        wait_until(lambda: _held(lock), 60, "nobody's flock")
        for folder in (store, store / "docs"):
            folder.chmod(0o700)
        run = _ingest(src, store)  # before: waited for "pid 1 (systemd --system)" forever
        assert run.returncode != 0
        assert f"{lock} is not a file of yours (user {NOBODY})" in run.stderr, run.stderr
    finally:
        stop_process(holder)


@needs_flock
def test_the_holder_named_is_the_one_the_kernel_says_holds_the_lock(tmp_path: Path) -> None:
    lock = tmp_path / WRITE_LOCK
    lock.write_text('{"pid": 1, "command": "systemd --system"}')  # a forged note
    holder = subprocess.Popen(["flock", str(lock), "sleep", "600"])
    try:
        wait_until(lambda: _held(lock), 60, "the flock")
        named = CollectionLock(lock, "keyword").holder()
        assert named.startswith(f"pid {holder.pid} (flock "), named
        assert "systemd" not in named
    finally:
        stop_process(holder)


def _held(lock: Path) -> bool:
    """Whether some process holds ``lock``'s flock now."""
    fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also lets go of the lock taken
    return False
