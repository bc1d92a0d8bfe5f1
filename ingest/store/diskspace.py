"""Free space on an embedded store's disk, checked before Edge touches it.

Qdrant Edge keeps its data in memory-mapped files that it creates at full size but sparse:
a block is allocated when a page is first written. On a full disk that write raises SIGBUS
and kills the process, with no error to catch. So semfs checks free space (statvfs) first:

* before each batch of chunks is written, for about what the batch will add (its WAL entry,
  vectors, payload), plus :data:`RESERVE` for the small writes that follow (records, deletes,
  the meta point, index pages), plus what opening the store will need (below);
* before Edge opens a shard, for what the open needs. Edge rewrites its config file at every
  open, so a disk full to the last block could not open the store even to read it: each
  store keeps a reserve in ``COLLECTION/space.reserve`` (the next open's need, below, plus
  :data:`RESERVE_FILE_BYTES`), of which an open that finds too little free space releases
  what it lacks; taken again when the store closes with room.

On a memory-backed filesystem (tmpfs, ramfs) even *reading* a hole in a shared mapping
allocates it, and Edge reads its payload index files whole when it opens a shard: about 25
MiB per appendable segment, whatever the data. :func:`open_need` is the holes in those files
there, and 0 on disk filesystems, where a read of a hole allocates nothing.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from semfs.ingest import portable
from semfs.ingest.errors import DiskFullError
from semfs.ingest.store.schema import ChunkPoint

logger = logging.getLogger(__name__)

MB = 1024 * 1024
# Slack for the writes that are not checked one by one: document records, deletes, the meta
# point, payload index pages and the flush at close. Measured growth of these per ingest run
# is under 1 MiB on the sample corpora; 8 MiB leaves room for the pages they first touch.
RESERVE = 8 * MB
# Bytes a chunk adds, per byte of text and per vector element: WAL entry + payload (text is
# stored twice, escaped) and the dense vector in the WAL and the vector file. Measured on
# the shared corpora at 5.6 KiB per chunk of 1.1 KiB text and 384 dimensions; this
# estimate gives 8.8 KiB, for pages partly filled.
_PER_TEXT_BYTE = 3
_PER_DENSE_ELEMENT = 12
_PER_SPARSE_ELEMENT = 16
_PER_CHUNK = 2048
# The payload index files Edge reads whole at open (measured: their holes fill at the first
# open on tmpfs; bitmask.dat and the deleted flags of vector storages stay sparse).
_POPULATED = re.compile(r"^(page_\d+|tracker|flags_\w+)\.dat$")
_MEMORY_FS = frozenset({"tmpfs", "ramfs", "shmem"})
# What an open writes besides filling holes: the config file, rewritten whole; WAL bookkeeping.
OPEN_WRITES = 256 * 1024
RESERVE_FILE = "space.reserve"
RESERVE_FILE_BYTES = 1024 * 1024
# Recompute the open need at most this often (seconds): it walks the shard's files.
_OPEN_NEED_TTL = 1.0


def allocated_bytes(path: Path) -> int:
    """Bytes allocated under ``path``: Edge preallocates sparse files of 32 MiB and more, so
    apparent sizes overstate what a store takes on disk."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return total


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still use on the filesystem holding ``path``."""
    st = os.statvfs(_existing(path))
    return st.f_bavail * st.f_frsize


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def filesystem_type(path: Path) -> str | None:
    """The type of the filesystem holding ``path`` (``tmpfs``, ``ext4``, ...), None if unknown."""
    table = portable.mounts()
    if table is None:
        return None
    target = os.path.realpath(_existing(path))
    best, best_type = -1, None
    for _source, mnt, fstype, _device in table:
        inside = target == mnt or target.startswith(mnt.rstrip("/") + "/")
        if inside and len(mnt) >= best:  # a later mount on the same point is on top
            best, best_type = len(mnt), fstype
    return best_type


def _holes(files: Iterable[Path]) -> int:
    total = 0
    for f in files:
        try:
            st = os.lstat(f)
        except OSError:
            continue
        total += max(0, st.st_size - st.st_blocks * 512)
    return total


def open_need(shard_dir: Path) -> int:
    """Bytes that opening the shard will allocate: 0 except on a memory-backed filesystem."""
    if filesystem_type(shard_dir) not in _MEMORY_FS:
        return 0
    files = [
        Path(root) / name
        for root, _dirs, names in os.walk(shard_dir / "segments")
        if "payload_index" in root
        for name in names
        if _POPULATED.match(name)
    ]
    return _holes(files)


def chunk_bytes(points: Sequence[ChunkPoint]) -> int:
    """About what writing ``points`` adds to the store's files."""
    return sum(
        _PER_CHUNK
        + _PER_TEXT_BYTE * len(p.record.text.encode("utf-8", "surrogatepass"))
        + _PER_DENSE_ELEMENT * len(p.dense or ())
        + _PER_SPARSE_ELEMENT * len(p.sparse_indices)
        for p in points
    )


def dense_bytes(vectors: int, dimension: int) -> int:
    """About what giving ``vectors`` stored chunks their dense vector adds (keywords first:
    :meth:`semfs.ingest.store.Store.set_dense`)."""
    return vectors * _PER_DENSE_ELEMENT * dimension


def _mb(n: int) -> int:
    return -(-n // MB)


class SpaceGuard:
    """Refuses writes (and opens) the free space on a store's disk cannot take."""

    def __init__(self, shard_dir: Path, location: str) -> None:
        self.shard_dir = shard_dir
        self.location = location
        self.reserve = shard_dir.parent / RESERVE_FILE
        self._lock = threading.Lock()
        self._open_need = 0
        self._open_need_at = -_OPEN_NEED_TTL

    def open_need(self) -> int:
        with self._lock:
            now = time.monotonic()
            if now - self._open_need_at >= _OPEN_NEED_TTL:
                self._open_need = open_need(self.shard_dir)
                self._open_need_at = now
            return self._open_need

    def check(self, need: int, what: str = "") -> None:
        """Raise DiskFullError unless ``need`` bytes are free."""
        free = free_bytes(self.shard_dir)
        if free < need:
            raise DiskFullError(
                f"store disk full: {free // MB} MB free, need about {_mb(need)} MB"
                f"{' ' + what if what else ''} ({self.location}); free some space and retry"
            )

    def check_open(self) -> None:
        """Make room for Edge to open the shard (releasing the reserve if needed), or raise."""
        need = self.open_need() + OPEN_WRITES
        short = need - free_bytes(self.shard_dir)
        if short > 0 and self.reserve.exists():
            # Only what is missing: the rest stays reserved for the opens after this one.
            logger.info("%s: disk nearly full; releasing its space reserve", self.location)
            try:
                have = self.reserve.lstat().st_size
                if have > short:
                    os.truncate(self.reserve, have - short)
                else:
                    self.reserve.unlink()
            except OSError as exc:
                logger.info("cannot release the space reserve of %s: %s", self.location, exc)
        self.check(need, "to open it")

    def keep_reserve(self) -> None:
        """Take the reserve again, sized to what the next open needs plus
        :data:`RESERVE_FILE_BYTES`, when the disk has room for it and a megabyte more. On a
        memory-backed filesystem the next open fills the holes an ingest left (~25 MiB a
        segment): a 1 MiB reserve left `semfs search` refusing a full disk (issue 46)."""
        try:
            want = open_need(self.shard_dir) + RESERVE_FILE_BYTES
            have = self.reserve.lstat().st_size if self.reserve.exists() else 0
            if have >= want or free_bytes(self.shard_dir) < want - have + RESERVE_FILE_BYTES:
                return
            # Written, not truncated to size: a sparse file would reserve nothing. Grown in
            # place, so growing it needs only the difference.
            fd = os.open(self.reserve, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(fd, "ab") as f:
                for at in range(have, want, MB):
                    f.write(b"\0" * min(MB, want - at))
        except OSError as exc:
            logger.info("cannot keep a space reserve for %s: %s", self.location, exc)

    def check_write(self, nbytes: int) -> None:
        self.check(nbytes + RESERVE + self.open_need())
