"""Opening an embedded shard without dying with it: a damaged store is one line, not a crash.

Qdrant Edge is native code. A damaged file can make it panic (a Python exception, with a
Rust backtrace on stderr), abort the process (an allocation of tens of GB read from a
garbled length: exit 134) or fault (SIGBUS): the last two cannot be caught in the process
that opens the shard. So, rules a caller may rely on:

* When the shard's files are not as semfs left them at its last clean close (a process was
  killed, a file was edited, truncated or replaced), :func:`probe` opens the shard in a
  child process first. If the child dies or the engine fails there, the store is reported
  in one line (:class:`StoreDamagedError`, or :class:`DiskFullError` for a SIGBUS on a
  full disk), and this process never lets the engine near the files.
* The fingerprint of a clean close (size and mtime of every file of the shard) is kept in
  ``COLLECTION/clean.json``: an unchanged store opens without a probe. A probe costs about
  one more open in a fresh interpreter (0.3-0.6 s), paid only after something went wrong.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

from semfs.ingest.errors import (
    DiskFullError,
    StoreDamagedError,
    StoreLockedError,
    StoreUnavailableError,
)
from semfs.ingest.store.diskspace import MB, allocated_bytes, free_bytes

logger = logging.getLogger(__name__)

CLEAN_FILE = "clean.json"
PROBE_TIMEOUT = 600.0
# A SIGBUS with less free space than this is taken for a full disk, not damage.
_LOW_SPACE = 64 * MB
_MIN_PROBE_HEAP = 2 << 30
# Runs in the child: open, touch the basics, close. One line on stdout says what failed.
_PROBE = """
import resource, sys
# A garbled length can make the engine allocate without end: fail (abort) instead.
resource.setrlimit(resource.RLIMIT_DATA, (int(sys.argv[2]), int(sys.argv[2])))
try:
    import qdrant_edge as qe
    shard = qe.EdgeShard.load(sys.argv[1])
    shard.info()
    shard.count(qe.CountRequest(exact=True))
    shard.close()
except BaseException as exc:
    text = (str(exc).strip().splitlines() or [""])[0][:300]
    sys.stdout.write(type(exc).__name__ + ": " + text)
    sys.exit(3)
"""


def fingerprint(shard_dir: Path) -> str:
    """A digest of every file's path, size and mtime under the shard."""
    entries = []
    for root, _dirs, names in os.walk(shard_dir):
        for name in names:
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            entries.append(f"{os.path.relpath(path, shard_dir)}\0{st.st_size}\0{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(sorted(entries)).encode("utf-8", "surrogateescape")).hexdigest()


def mark_clean(coll_dir: Path, shard_dir: Path) -> None:
    """Record the shard as semfs leaves it, after a clean close."""
    path = coll_dir / CLEAN_FILE
    tmp = path.with_suffix(".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"fingerprint": fingerprint(shard_dir)}, f)
        os.replace(tmp, path)
    except OSError as exc:  # the next open probes, that is all
        logger.info("cannot record a clean close of %s: %s", coll_dir, exc)


def needs_probe(coll_dir: Path, shard_dir: Path) -> bool:
    try:
        recorded = json.loads((coll_dir / CLEAN_FILE).read_text())["fingerprint"]
    except (OSError, ValueError, KeyError, TypeError):
        return True
    return bool(recorded != fingerprint(shard_dir))


def probe(shard_dir: Path, location: str) -> None:
    """Open the shard in a child process; raise, in one line, when that fails or crashes."""
    logger.info("%s was not closed cleanly or changed since: opening it in a child first", location)
    try:
        proc = subprocess.run(
            [sys.executable, "-I", "-c", _PROBE, str(shard_dir), str(_memory_limit(shard_dir))],
            capture_output=True,
            check=False,
            text=True,
            timeout=PROBE_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        msg = f"cannot check store {location} before opening it: {exc}"
        raise StoreUnavailableError(msg) from exc
    if proc.returncode == 0:
        return
    if proc.returncode == 3:
        what = proc.stdout.strip()
        if "WouldBlock" in what:
            raise StoreLockedError(f"store {location} is in use by another process")
        if "Permission denied" in what:
            raise StoreUnavailableError(f"cannot open store {location}: {what}")
        if "No space left" in what:
            raise DiskFullError(f"store disk full: cannot open {location} ({what})")
        raise StoreDamagedError(_damaged(location, f"the engine fails to open it ({what})"))
    if proc.returncode < 0:
        sig = -proc.returncode
        name = signal.Signals(sig).name if sig in signal.valid_signals() else f"signal {sig}"
        free = free_bytes(shard_dir)
        if sig == signal.SIGBUS and free < _LOW_SPACE:
            raise DiskFullError(
                f"store disk full: {free // MB} MB free; opening {location} crashed the engine "
                "(SIGBUS); free some space and retry"
            )
        raise StoreDamagedError(_damaged(location, f"opening it crashes the engine ({name})"))
    last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
    raise StoreDamagedError(_damaged(location, f"opening it crashes the engine ({last[:200]})"))


def _memory_limit(shard_dir: Path) -> int:
    """Heap the probe may use: four times the shard's size, at least 2 GiB, at most half the
    machine's memory (a damaged store once made the engine allocate 45 GB)."""
    allocated = allocated_bytes(shard_dir)
    try:
        half_ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (OSError, ValueError):
        half_ram = 8 << 30
    return int(min(half_ram, max(_MIN_PROBE_HEAP, 4 * allocated)))


def _damaged(location: str, what: str) -> str:
    return (
        f"store {location} is damaged: {what}; it must be rebuilt: `semfs check --rebuild "
        "SOURCE` sets the shard aside and ingests SOURCE afresh"
    )
