"""A mount's log file (issue 46.10): ``--log-file`` never writes through a symlink or into
another user's file (docs/cli.md's example is ``/tmp/semfs.log``), and a ``.search`` name
with a newline cannot forge a log line."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import NOBODY, SEMFS
from tests.helpers.mounting import force_unmount, ingested_one, mounted

pytestmark = pytest.mark.mount

FORGED = "2026-01-01 00:00:00,000 1 ERROR semfs: forged by a folder name"


def _mount(mnt: Path, store: Path, log: Path) -> subprocess.CompletedProcess[str]:
    """A mount that must refuse to start (before the fix it ran, so it is stopped here)."""
    mnt.mkdir(exist_ok=True)
    try:
        return subprocess.run(
            [SEMFS, "mount", "-f", str(mnt), "--store", str(store), "--log-file", str(log)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        if os.path.ismount(mnt):
            force_unmount(mnt)


def _sample(tmp: Path) -> Path:
    return ingested_one(tmp, "a.md", "# A\n\nalpha\n")


def test_a_log_file_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    store = _sample(tmp_path)
    victim = tmp_path / "victim.conf"
    victim.write_text("root's own settings\n")
    victim.chmod(0o644)
    (tmp_path / "semfs.log").symlink_to(victim)
    run = _mount(tmp_path / "mnt", store, tmp_path / "semfs.log")
    assert run.returncode != 0
    assert f"log file {tmp_path / 'semfs.log'} is a symlink" in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert victim.read_text() == "root's own settings\n"
    assert victim.stat().st_mode & 0o777 == 0o644
    assert not os.path.ismount(tmp_path / "mnt")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) missing")
def test_a_log_file_another_user_made_is_refused(open_tmp: Path) -> None:
    store = _sample(open_tmp)
    shared = open_tmp / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: the kernel's protected_regular does not step in
    log = shared / "semfs.log"
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    subprocess.run([*as_nobody, "sh", "-c", f"umask 0; : > {log}"], check=True)
    run = _mount(open_tmp / "mnt", store, log)
    assert run.returncode != 0
    assert f"log file {log} is not a file of yours (user {NOBODY})" in run.stderr, run.stderr
    assert log.read_text() == ""  # nothing of root's mount told to nobody


def test_a_search_name_with_a_newline_forges_no_log_line(tmp_path: Path) -> None:
    store = _sample(tmp_path)
    with mounted(tmp_path / "mnt", "--store", str(store), expect_log=["not found"]) as m:
        name = f"@nosuch=1\n{FORGED}"
        assert not (m.path / ".search" / name).exists()
        log = m.log_text()
    assert "not found" in log, log
    assert not any(line.startswith(FORGED) for line in log.splitlines()), log
    assert "@nosuch=1\\n2026-01-01" in log
