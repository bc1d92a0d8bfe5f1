"""`semfs mount` where no FUSE library loads: one line saying what to install, no traceback.

Linux's line is checked here by pointing mfusepy at a library that is not there; macOS's
(macFUSE or FUSE-T) is the portable module's and is checked in tests/unit/test_portable.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from semfs.ingest import portable
from tests.helpers import SEMFS


@pytest.mark.mount  # it runs `semfs mount`, though nothing can be mounted without the library
def test_mount_without_a_fuse_library_says_what_to_install(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    env = {**os.environ, "FUSE_LIBRARY_PATH": str(tmp_path / "absent" / "libfuse.so")}
    done = subprocess.run(
        [SEMFS, "mount", str(mnt), "--store", str(tmp_path / "store")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip() == f"Error: {portable.LINUX_INSTALL}"
    assert not os.path.ismount(mnt)
