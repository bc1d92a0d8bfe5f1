"""A private folder stays private at every moment of an ingest (issue 46.1).

Folder records (their modes) were written only at an ingest's end, and a folder without one
is served 0555: through a root ``allow_other`` mount, user nobody read a file inside a 0700
folder while a first ingest ran, for as long as a later one ran, and for good after a
``kill -9``. The ingest here is the real command, paused in its keyword pass once the
private folder's document is committed (tests/helpers/pausedingest.py), so what nobody
tries does not race the ingest's speed. Real mounts, a real other user (``setpriv``): root
only.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers import NOBODY, pausedingest
from tests.helpers.mounting import mounted, semfs, stop_process, wait_until

pytestmark = [
    pytest.mark.mount,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user"),
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) missing"),
]

AS_NOBODY = ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups")
HANG = 120.0  # only catches a hang: a loaded machine is slow, never this slow
MARK = "pauseword"  # the ingest pauses when it chunks the text holding it
SECRET = "priv/secret.md"
# A first ingest commits nothing before its BM25 sample (2,048 chunks) is in: the private
# file is bigger, so it is committed when the pause comes. A later one commits each window.
FIRST_CHUNKS, LATER_CHUNKS = 2200, 300


def _private_folder(src: Path, paragraphs: int) -> None:
    priv = src / "priv"
    priv.mkdir()
    filler = " ".join(f"w{i}" for i in range(120))
    text = "\n\n".join(f"secret paragraph {n}: {filler}" for n in range(paragraphs))
    (priv / "secret.md").write_text(f"# Secret\n\n{text}\n")
    (priv / "secret.md").chmod(0o644)  # readable by all: only its folder keeps it private
    priv.chmod(0o700)
    # Sorted after the private folder: the ingest pauses here.
    (src / "zz-last.md").write_text(f"# Last\n\n{MARK} the file the ingest pauses at\n")


def _nobody_reads(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AS_NOBODY, "head", "-c", "100", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _closed_to_nobody(mnt: Path) -> None:
    """Root sees the committed private file; nobody can neither read it nor list its folder."""
    wait_until((mnt / SECRET).exists, HANG, "the private file shown to root")
    read = _nobody_reads(mnt / SECRET)
    assert read.returncode != 0 and "secret" not in read.stdout, read
    assert (mnt / "priv").stat().st_mode & 0o777 == 0o500  # 0700, less write


@contextmanager
def _paused_ingest(src: Path, store: Path, gate: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`semfs ingest SRC` paused at :data:`MARK` (its keyword pass), stopped at the end."""
    gate.mkdir()
    command = ["semfs", "ingest", str(src), "--store", str(store), "-m", "hash", "--jobs", "1"]
    ingest = pausedingest.spawn(gate, command, at=MARK, capture=True)
    try:
        wait_until(lambda: (gate / "paused").exists() or ingest.poll() is not None, HANG, "pause")
        assert ingest.poll() is None, ingest.communicate()[0]
        yield ingest
    finally:
        (gate / "go").touch()
        stop_process(ingest)


def test_a_first_ingest_and_its_kill_keep_a_private_folder_closed(open_tmp: Path) -> None:
    src, store = open_tmp / "src", open_tmp / "store"
    src.mkdir()
    # Sorted before the private folder: in the first window with it, so committed by the
    # pause (a file after it waits in the window the kill throws away).
    (src / "a-pub.md").write_text("# Public\n\nanyone may read this\n")
    _private_folder(src, FIRST_CHUNKS)
    where = ("--store", str(store))
    with _paused_ingest(src, store, open_tmp / "gate") as ingest:
        # Mid-ingest, through a shared mount beside it (its client).
        with mounted(open_tmp / "mnt", *where, "-o", "allow_other") as m:
            _closed_to_nobody(m.path)
        ingest.send_signal(signal.SIGKILL)  # unmounted first: no client sees the owner die
        ingest.wait()
    # Killed mid-way: the folder's record is in, and the store says so.
    assert semfs("check", *where).returncode == 0
    with mounted(open_tmp / "mnt2", *where, "-o", "allow_other") as m:
        _closed_to_nobody(m.path)
        assert (m.path / SECRET).read_text().startswith("# Secret")
        assert _nobody_reads(m.path / "a-pub.md").returncode == 0


def test_a_later_ingest_keeps_a_new_private_folder_closed(open_tmp: Path) -> None:
    src, store = open_tmp / "src", open_tmp / "store"
    src.mkdir()
    (src / "pub.md").write_text("# Public\n\nanyone may read this\n")
    where = ("--store", str(store))
    semfs("ingest", str(src), *where, "-m", "hash")
    with mounted(open_tmp / "mnt", *where, "-o", "allow_other") as m:
        assert _nobody_reads(m.path / "pub.md").returncode == 0
        _private_folder(src, LATER_CHUNKS)
        with _paused_ingest(src, store, open_tmp / "gate") as ingest:
            _closed_to_nobody(m.path)  # the ingest writes through the mount, paused
            (open_tmp / "gate" / "go").touch()
            assert ingest.wait(HANG) == 0, ingest.communicate()[0]
        wait_until((m.path / "zz-last.md").exists, HANG, "the ingest's last file shown")
        _closed_to_nobody(m.path)
