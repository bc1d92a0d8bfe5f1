"""scripts/setup.sh's macOS branch, run here with `uname` answering Darwin: it asks Homebrew
for FUSE-T (never apt) and, without Homebrew, stops with one line. What Homebrew then does on
a Mac is not run here."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.helpers import REPO

SETUP = str(REPO / "scripts" / "setup.sh")


def _bin(tmp_path: Path, **scripts: str) -> dict[str, str]:
    folder = tmp_path / "bin"
    folder.mkdir()
    for name, body in scripts.items():
        exe = folder / name
        exe.write_text("#!/bin/sh\n" + body + "\n")
        exe.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}:/usr/bin:/bin"}


def test_setup_on_macos_without_homebrew_says_so_in_one_line(tmp_path: Path) -> None:
    env = _bin(tmp_path, uname="echo Darwin")
    done = subprocess.run([SETUP, "test"], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "setup: cannot proceed: install Homebrew (https://brew.sh), then run scripts/setup.sh again"
    )
    assert "apt" not in done.stderr


def test_setup_on_macos_asks_homebrew_for_fuse_t(tmp_path: Path) -> None:
    log = tmp_path / "brew.log"
    # A Homebrew that records what it is asked and fails: setup stops there (set -e).
    env = _bin(tmp_path, uname="echo Darwin", brew=f'echo "$@" >> {log}; exit 1')
    done = subprocess.run([SETUP], capture_output=True, text=True, env=env, check=False)
    assert done.returncode != 0
    assert log.read_text().splitlines() == ["tap macos-fuse-t/homebrew-cask"]
    assert "installing FUSE-T with Homebrew" in done.stderr
    assert "apt" not in done.stderr
