"""What a store's holder leaves and says: a SIGTERM'd `semfs mcp` removes its socket and
token, a mount refused by another holder names it, created folders and log files are
owner-only whatever the umask, and a background mount keeps a bounded log by default.

Real processes, real stores, real mounts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers import SEMFS
from tests.helpers.mounting import force_unmount, semfs, stop_process, wait_until


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@contextmanager
def serving_mcp(store: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`semfs mcp --store STORE` on stdio, owning the store, until the block ends."""
    proc = subprocess.Popen(
        [SEMFS, "mcp", "--store", str(store)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until((store / "docs" / "daemon.sock").exists, 30, "the mcp socket")
        yield proc
    finally:
        stop_process(proc)
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.close()
        proc.stderr.close()


def _ingested(base: Path) -> Path:
    src, store = base / "src", base / "store"
    src.mkdir()
    (src / "a.md").write_text("# A\n\nalpha\n")
    semfs("ingest", str(src), "--store", str(store), "--model", "hash")
    return store


def test_sigterm_stops_semfs_mcp_without_leaving_its_socket_and_token(tmp_path: Path) -> None:
    store = _ingested(tmp_path)
    coll = store / "docs"
    with serving_mcp(store) as proc:
        assert (coll / "daemon.token").exists()
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        assert not (coll / "daemon.sock").exists()
        assert not (coll / "daemon.token").exists()
    # The store is free: an ingest opens it itself.
    assert "unchanged" in semfs("ingest", str(tmp_path / "src"), "--store", str(store)).stdout


def test_semfs_mcp_closes_whole_when_its_client_leaves_and_sigterms(tmp_path: Path) -> None:
    """An MCP client's SDK ends a stdio server by closing its stdin, then SIGTERM 2 s later,
    while the store may still be closing. Before, a SIGTERM in the close broke it off and the
    server died with "Error: ValueError: I/O operation on closed file" and "terminate called
    without an active exception" (seen in the agent benchmark); now it closes whole, and a
    SIGTERM before the close stops it as Ctrl-C does."""
    store = _ingested(tmp_path)
    coll = store / "docs"
    with serving_mcp(store) as proc:
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.close()  # the client has left
        # SIGTERM again and again until it is gone: some land while it serves or closes.
        while proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(0.05)
        err = proc.stderr.read().decode()
        assert proc.returncode in (0, 130), (proc.returncode, err)
        assert "Error" not in err and "terminate called" not in err, err
        assert not (coll / "daemon.sock").exists() and not (coll / "daemon.token").exists()
    assert "unchanged" in semfs("ingest", str(tmp_path / "src"), "--store", str(store)).stdout


@pytest.mark.mount
def test_a_mount_refused_by_semfs_mcp_names_it(tmp_path: Path) -> None:
    store = _ingested(tmp_path)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with serving_mcp(store) as proc:
        out = semfs("mount", "-f", str(mnt), "--store", str(store), check=False)
        assert out.returncode == 1 and not os.path.ismount(mnt)
        line = out.stderr.strip()
        assert f"held by pid {proc.pid} (semfs mcp --store {store})" in line, line
        assert "mounted" not in line


@pytest.mark.mount
def test_created_folders_and_log_files_are_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("# A\n\nalpha\n")
    store = tmp_path / "new" / "deeper" / "store"
    mnt, log = tmp_path / "mnt", tmp_path / "given.log"
    mnt.mkdir()
    with umask(0):
        semfs("ingest", str(src), "--store", str(store), "--model", "hash")
        for folder in (tmp_path / "new", tmp_path / "new" / "deeper", store):
            assert _mode(folder) == 0o700, folder
        try:
            semfs("mount", str(mnt), "--store", str(store), "--log-file", str(log))
            assert _mode(log) == 0o600
        finally:
            force_unmount(mnt)
        wait_until(lambda: not (store / "docs" / "daemon.sock").exists(), 30, "the daemon's exit")
        # Without --log-file a background mount logs in its collection folder, owner-only.
        default = store / "docs" / "mount.log"
        assert not default.exists()
        try:
            semfs("mount", str(mnt), "--store", str(store))
            wait_until(lambda: "mounted" in default.read_text(), 10, "the default log")
            assert _mode(default) == 0o600
            # `semfs status` says where it is.
            status = semfs("status", "--store", str(store)).stdout
            assert f"  mount log: {default}" in status, status
        finally:
            force_unmount(mnt)


def test_the_log_file_is_bounded_and_stays_owner_only(tmp_path: Path) -> None:
    from semfs.fusefs.mount.logfile import _OwnerOnlyLog

    log = tmp_path / "mount.log"
    handler = _OwnerOnlyLog(log, maxBytes=10_000, backupCount=1)
    logger = logging.getLogger("semfs.test.bounded")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        with umask(0):
            for i in range(2_000):
                logger.warning("line %d of a long-running mount's log", i)
    finally:
        logger.removeHandler(handler)
        handler.close()
    parts = sorted(tmp_path.glob("mount.log*"))
    assert [p.name for p in parts] == ["mount.log", "mount.log.1"]
    assert all(p.stat().st_size <= 10_000 for p in parts)
    assert {_mode(p) for p in parts} == {0o600}
    assert "line 1999 " in log.read_text()
