"""Helpers for tests that mount for real: start a mount, always unmount, check its log.

:func:`mounted` runs ``semfs mount -f`` as a subprocess with ``--log-file``, polls
``os.path.ismount`` every 0.1 s, and in ``finally`` unmounts (``fusermount -u``, then a
lazy ``-uz``), lets the daemon close its store and exit (else SIGTERM, then SIGKILL) and
fails the test when the log holds a WARNING, ERROR or traceback the test did not declare
with ``expect_log``.

Every helper here that starts `semfs mount` fails at once in a test without the ``mount``
marker (tests/conftest.py tells :func:`allow_mounts` which test runs), so that
``pytest -m "not mount"`` never needs FUSE. This module itself loads no FUSE binding.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from semfs.ingest.pipeline import ingest
from semfs.ingest.report import IngestReport
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from tests.helpers import SAMPLE_CORPUS, SEMFS, with_open_files

# Limits that only catch a hang: a loaded shared machine is slow, never this slow.
MOUNT_TIMEOUT = 60.0
COMMAND_TIMEOUT = 300.0
POLL = 0.1
_BAD_LOG_LINE = re.compile(r"\b(WARNING|ERROR|CRITICAL)\b|Traceback")
# Whether the running test carries the `mount` marker; outside a pytest run (a script using
# these helpers) nothing is selected by marker, so mounting is allowed.
_may_mount = True


def allow_mounts(allowed: bool) -> None:
    """Called before each test's setup (tests/conftest.py): whether it is marked ``mount``."""
    global _may_mount
    _may_mount = allowed


def require_mount_marker(what: str) -> None:
    """Fail the running test at once, with the fix, when it is not marked ``mount``."""
    if not _may_mount:
        pytest.fail(
            f"{what} starts a real FUSE mount, but this test is not marked `mount`: add "
            '@pytest.mark.mount (or the module\'s pytestmark), so that `pytest -m "not mount"` '
            "leaves it out where there is no FUSE",
            pytrace=False,
        )


@contextlib.contextmanager
def small_tmpfs(parent: Path, megabytes: int) -> Iterator[Path]:
    """A tmpfs of ``megabytes`` MiB at ``parent/disk``, lazily unmounted after; the test skips
    where it cannot be mounted (not root, no tmpfs)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = parent / "disk"
    disk.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {proc.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@contextlib.contextmanager
def small_ext4(parent: Path, megabytes: int, reserved_percent: int) -> Iterator[Path]:
    """An ext4 of ``megabytes`` MiB (a loop device over a file in ``parent``) with
    ``reserved_percent`` of its blocks reserved for root, at ``parent/ext4``, open to all
    (1777), unmounted after; the test skips where it cannot be mounted (not root, no loop
    device; scripts/setup.sh installs mkfs.ext4)."""
    if os.geteuid() != 0:
        pytest.skip("mounting an ext4 image needs root")
    image, disk = parent / "ext4.img", parent / "ext4"
    with open(image, "wb") as f:
        f.truncate(megabytes << 20)
    disk.mkdir()
    made = subprocess.run(
        ["mkfs.ext4", "-q", "-F", "-m", str(reserved_percent), str(image)],
        capture_output=True,
        text=True,
    )
    if made.returncode == 0:
        made = subprocess.run(["mount", "-o", "loop", str(image), str(disk)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make a small ext4 (no loop device?): {made.stderr!r}")
    try:
        disk.chmod(0o1777)
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=False)
        if os.path.ismount(disk):
            subprocess.run(["umount", "-l", str(disk)], check=False)
        image.unlink()


def ingest_hash(
    source: Path, store: Path | None = None, url: str | None = None, **kwargs: object
) -> IngestReport:
    """Ingest ``source`` with the fast stand-in embedder (library call, this process)."""
    with open_store(CollectionAddress(store=store, url=url)) as s:
        return ingest(source, s, model="hash", **kwargs)  # type: ignore[arg-type]


def ingested_one(root: Path, rel: str, text: str, store: Path | None = None) -> Path:
    """A store (``store``, else ``root/store``) holding one document, ``root/src/REL`` with
    ``text``, ingested with the hash stand-in; returns the store."""
    doc, store = root / "src" / rel, store or root / "store"
    doc.parent.mkdir(parents=True)
    doc.write_text(text)
    ingest_hash(root / "src", store)
    return store


def ingested_sample(root: Path) -> tuple[Path, Path]:
    """The sample corpus copied to ``root/src`` and ingested into ``root/store`` (with the
    stand-in embedder): (source, store)."""
    source = root / "src"
    shutil.copytree(SAMPLE_CORPUS, source)
    ingest_hash(source, root / "store")
    return source, root / "store"


def semfs(
    *args: str, check: bool = True, timeout: float = COMMAND_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """Run the installed ``semfs`` console script."""
    command = next((a for a in args if not a.startswith("-")), None)
    if command == "mount" and "--help" not in args:
        require_mount_marker("semfs mount")
    proc = subprocess.run([SEMFS, *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        pytest.fail(f"semfs {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return proc


def force_unmount(mountpoint: Path) -> None:
    """:func:`semfs.fusefs.mount.unmount.force_unmount`, imported when called: importing this
    module loads no FUSE binding, so tests that only run commands need none."""
    from semfs.fusefs.mount.unmount import force_unmount as unmount

    unmount(mountpoint)


def read_log(log: Path) -> str:
    try:
        return log.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log file)"


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 10.0, grace: float = 0) -> None:
    """Stop ``proc``: after ``grace`` seconds to exit by itself, SIGTERM, then SIGKILL."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(grace)
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def unexpected_log_lines(text: str, expected: Sequence[str] = ()) -> list[str]:
    """WARNING/ERROR/traceback lines not matching any of the ``expected`` regexes."""
    return [
        line
        for line in text.splitlines()
        if _BAD_LOG_LINE.search(line) and not any(re.search(p, line) for p in expected)
    ]


@dataclass
class Mount:
    path: Path
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_text(self) -> str:
        return read_log(self.log)


def wait_mounted(
    path: Path, proc: subprocess.Popen[bytes] | None, log: Path, timeout: float = MOUNT_TIMEOUT
) -> None:
    require_mount_marker("wait_mounted")
    deadline = time.monotonic() + timeout
    while not os.path.ismount(path):
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"semfs mount exited {proc.returncode} before mounting:\n{read_log(log)}")
        if time.monotonic() > deadline:
            pytest.fail(f"{path} not mounted after {timeout} s:\n{read_log(log)}")
        time.sleep(POLL)


def wait_until(predicate: Callable[[], object], timeout: float, what: str) -> float:
    """Poll ``predicate()`` every 0.05 s; the seconds it took, or fail the test."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            pytest.fail(f"{what} not within {timeout} s")
        time.sleep(0.05)
    return time.monotonic() - start


@contextlib.contextmanager
def mounted(
    mountpoint: Path,
    *args: str,
    expect_log: Sequence[str] = (),
    env: dict[str, str] | None = None,
    open_files: int | None = None,
) -> Iterator[Mount]:
    """``semfs mount -f MOUNTPOINT ARGS...`` for the duration of the block; always unmounted.
    ``open_files``: the daemon's RLIMIT_NOFILE."""
    require_mount_marker("mounted")
    mountpoint.mkdir(parents=True, exist_ok=True)
    log = mountpoint.with_name(mountpoint.name + ".log")
    with open(log, "ab") as err:
        proc = subprocess.Popen(
            [
                *with_open_files(open_files),
                *(SEMFS, "mount", "-f", str(mountpoint), "--log-file", str(log), *args),
            ],
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
            env=env,
        )
    failed, came_up = True, False
    try:
        wait_mounted(mountpoint, proc, log)
        came_up = True
        yield Mount(mountpoint, proc, log)
        failed = False
    finally:
        force_unmount(mountpoint)
        # Unmounted, the daemon closes its store and exits: a signal now would interrupt the
        # close (the shard left unclean, probed at the next open). Never up, or still
        # mounted: stop it at once.
        unmounted = came_up and not os.path.ismount(mountpoint)
        stop_process(proc, grace=MOUNT_TIMEOUT if unmounted else 0)
        bad = unexpected_log_lines(read_log(log), expect_log)
    assert not os.path.ismount(mountpoint)
    if bad and not failed:
        pytest.fail("unexpected lines in the mount log:\n" + "\n".join(bad))


def fuse_mounts() -> list[str]:
    with open("/proc/mounts") as f:
        return [line for line in f if " fuse" in line]
