"""The benchmark's small harness: timing, commands, and mounts (``semfs mount``, always unmounted).

The mount primitives (stale, alive, forced unmount) are :mod:`semfs.fusefs.mount.unmount`'s, shared
with
``tests/helpers/mounting.py``."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from semfs.fusefs.mount.unmount import force_unmount, process_alive
from semfs.ingest import portable

REPO = Path(__file__).resolve().parents[2]
logger = logging.getLogger("bench")
T = TypeVar("T")

# The shared data sits beside the checkout (or beside the worktree folder holding it).
SHARED = next(
    (p / "shared" for p in REPO.parents if (p / "shared" / "corpora").is_dir()),
    REPO.parent / "shared",
)
SHARED_CORPUS = SHARED / "corpora" / "mintlify-docs"
SAMPLE_CORPUS = REPO / "tests" / "corpus" / "mintlify-sample"
SEMFS = shutil.which("semfs", path=str(Path(sys.executable).parent)) or shutil.which("semfs")
SECTIONS = ("ingest", "mount", "reading", "search", "memory", "store", "backends", "answers")
SKIPPED = "skipped"  # the status of a figure that could not be measured, with the reason
MOUNT_TIMEOUT = 120.0  # seconds for `semfs mount` to return; the real model is not loaded then
XATTR_PID = "user.semfs.pid"
QUOTED = (
    "for comparison, not measured here: ChromaFs quotes ~100 ms, and 46 s for a sandbox git clone"
)


# -- helpers -----------------------------------------------------------------------------


class CannotMeasure(Exception):
    """A measurement that cannot run on this checkout yet; the message says why."""


def require_linux(script: str) -> None:
    """Stop in one line where the figures cannot be taken: the benchmarks read peak memory, CPU
    time and the page cache through Linux's /proc (semfs itself runs on macOS too)."""
    if not portable.is_linux():
        raise SystemExit(
            f"{script}: the benchmarks measure through Linux's /proc (peak memory, CPU time, "
            "page cache): run them on Linux"
        )


def timed(fn: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[float, T]:
    """``(seconds, result)`` of one call, wall clock."""
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def median(xs: Sequence[float]) -> float:
    return percentile(xs, 50)


def percentile(xs: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not xs:
        raise ValueError("no samples")
    s = sorted(xs)
    k = (len(s) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def repeat(fn: Callable[[], object], n: int) -> list[float]:
    """Seconds of ``n`` calls of ``fn``."""
    return [timed(fn)[0] for _ in range(n)]


def run(cmd: Sequence[str], cwd: Path | None = None, timeout: float = 600) -> float:
    """Seconds one command takes, output discarded; a failure raises (grep: exit > 1)."""
    start = time.perf_counter()
    proc = subprocess.run(
        list(cmd),
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=timeout,
        check=False,
    )
    took = time.perf_counter() - start
    if proc.returncode not in ((0, 1) if cmd[0] == "grep" else (0,)):  # grep: 1 = no match
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-300:]!r}")
    return took


def drop_caches() -> bool:
    """Drop the page cache (root only); False when not allowed."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    return True


def tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def allocated_bytes(root: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


# -- mounting ------------------------------------------------------------------------------

_DAEMONS: dict[int, Path] = {}  # pid -> mountpoint of every daemon this run started
LOG_PROBLEMS: dict[str, str] = {}  # a WARNING/ERROR line of a daemon log (timestamp cut) -> log
_BAD_LOG_LINE = re.compile(r"\b(WARNING|ERROR|CRITICAL)\b|Traceback")


@dataclass
class Mounted:
    path: Path
    pid: int | None
    ready_s: float
    log: Path


def find_daemon(mnt: Path) -> int | None:
    """The daemon serving ``mnt``: its root xattr, else a /proc scan of command lines."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return int(os.getxattr(mnt, XATTR_PID))
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if b"mount" in argv and str(mnt).encode() in argv and int(proc.name) != os.getpid():
                return int(proc.name)
    return None


def unmount_and_stop(mnt: Path, pid: int | None) -> None:
    """Unmount by every means, then wait for the daemon, then TERM, then KILL it."""
    force_unmount(mnt)
    if pid is not None:
        stop_pid(pid)
        _DAEMONS.pop(pid, None)


def stop_pid(pid: int, wait: float = 10.0) -> None:
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if not process_alive(pid):
            return


_COMPILED: list[bool] = []


def byte_compile() -> None:
    """Byte-compile semfs's own modules once, as pip does when it installs a package.

    A development checkout run with PYTHONDONTWRITEBYTECODE (as on the benchmark machine)
    keeps no .pyc files, so every `semfs mount` would compile its ~60 modules from source
    first: ~50 ms that an installed semfs never pays. compileall writes them whatever that
    variable says.
    """
    if not _COMPILED:
        _COMPILED.append(True)
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(REPO / "ingest"), str(REPO / "fusefs")],
            stdout=subprocess.DEVNULL,
            check=False,
        )


@contextlib.contextmanager
def mounted(store: Path, mnt: Path) -> Iterator[Mounted]:
    """``semfs mount`` (background, as a user runs it) until the block ends; always unmounted.

    ``ready_s`` is from starting the command to the first listing that shows the tree.
    """
    if SEMFS is None:
        raise CannotMeasure("the `semfs` console script is not installed in this environment")
    byte_compile()
    mnt.mkdir(parents=True, exist_ok=True)
    log = mnt.with_name(mnt.name + ".log")
    pid = None
    try:
        start = time.perf_counter()
        proc = subprocess.run(
            [SEMFS, "mount", str(mnt), "--store", str(store), "--log-file", str(log)],
            capture_output=True,
            text=True,
            timeout=MOUNT_TIMEOUT,
            check=False,
        )
        if proc.returncode != 0:
            raise CannotMeasure(
                f"`semfs mount` exited {proc.returncode}: {proc.stderr.strip()[-300:]}"
            )
        deadline = start + 10
        while not (os.path.ismount(mnt) and os.listdir(mnt)):
            if time.perf_counter() > deadline:
                raise CannotMeasure(f"{mnt} showed no files 10 s after `semfs mount` returned")
            time.sleep(0.002)
        ready = time.perf_counter() - start
        pid = find_daemon(mnt)
        if pid is not None:
            _DAEMONS[pid] = mnt
        yield Mounted(mnt, pid, ready, log)
    finally:
        unmount_and_stop(mnt, pid if pid is not None else find_daemon(mnt))
        check_log(log)


BINDFS = shutil.which("bindfs")
NO_BINDFS = (
    "bindfs is not installed (Debian: apt-get install bindfs; `scripts/setup.sh bench` installs "
    "it): the C passthrough baseline is skipped"
)


@contextlib.contextmanager
def bindfs_mounted(source: Path, mnt: Path) -> Iterator[Mounted]:
    """``bindfs -r SOURCE MNT`` (Debian's C libfuse passthrough, its defaults) until the block
    ends; always unmounted. ``ready_s`` is from starting bindfs to the first listing.

    bindfs is GPL: a benchmark tool only, installed by the bench extra, never by default.
    """
    if BINDFS is None:
        raise CannotMeasure(NO_BINDFS)
    mnt.mkdir(parents=True, exist_ok=True)
    try:
        start = time.perf_counter()
        proc = subprocess.run(
            [BINDFS, "-r", str(source), str(mnt)],
            capture_output=True,
            text=True,
            timeout=MOUNT_TIMEOUT,
            check=False,
        )
        if proc.returncode != 0:
            raise CannotMeasure(f"bindfs exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
        deadline = start + 10
        while not (os.path.ismount(mnt) and os.listdir(mnt)):
            if time.perf_counter() > deadline:
                raise CannotMeasure(f"{mnt}: bindfs showed no files within 10 s")
            time.sleep(0.002)
        yield Mounted(mnt, None, time.perf_counter() - start, mnt)
    finally:
        force_unmount(mnt)


def wait_for_model(m: Mounted) -> bool:
    """List one query directory, which waits for the daemon's model: afterwards nothing loads
    in the background to compete with what is measured. False when there is no .search."""
    root = m.path / ".search"
    if not root.is_dir():
        return False
    os.listdir(root / "warm up the model")
    return True


def check_log(log: Path) -> None:
    """Remember the daemon's warnings and errors: the report lists them."""
    with contextlib.suppress(OSError):
        for line in log.read_text(errors="replace").splitlines():
            if _BAD_LOG_LINE.search(line):
                LOG_PROBLEMS.setdefault(re.sub(r"^[\d-]+ [\d:,]+ \d+ ", "", line), str(log))


def cleanup_daemons() -> None:
    for pid, mnt in list(_DAEMONS.items()):
        unmount_and_stop(mnt, pid)


def vm_hwm_mb(pid: int | None) -> float:
    if pid is None:
        raise CannotMeasure(
            "cannot find the mount daemon's pid (no user.semfs.pid xattr, no /proc match)"
        )
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise CannotMeasure(f"/proc/{pid}/status has no VmHWM")
