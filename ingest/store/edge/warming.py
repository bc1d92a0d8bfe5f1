"""Warming an embedded shard's read path into the page cache, when reads start to fault.

What a file read goes through in Edge's layout is the payload and the id tracker. An immutable
segment maps them with random-access advice, so a read that finds them out of the page cache
faults them in one 4 KiB page at a time, one disk round trip each; a cold ``grep -r`` at 100k
chunks did ~1.7 a file. A read that faults (:meth:`ReadPathWarmer.after`) starts one sequential
pass over these files instead, in a thread of its own (its reads release the GIL), at most once
a :data:`WARM_INTERVAL_S`. The page cache only: the process maps pages as reads touch them, as
before.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from semfs.ingest import portable

logger = logging.getLogger(__name__)

READ_PATH = ("segments/*/payload_storage/*", "segments/*/id_tracker.*")
WARM_INTERVAL_S = 60.0
_WARM_PIECE = 1024 * 1024


def _read_through(path: Path, buf: bytearray) -> None:
    """Read ``path``'s data (not its holes) into the page cache, in big sequential reads."""
    fd = os.open(path, os.O_RDONLY)
    try:
        offset = 0
        while True:
            try:
                offset = os.lseek(fd, offset, os.SEEK_DATA)
            except OSError:  # ENXIO: no data past offset
                return
            end = os.lseek(fd, offset, os.SEEK_HOLE)
            while offset < end:
                n = os.preadv(fd, [buf], offset)
                if n <= 0:
                    return
                offset += n
    finally:
        os.close(fd)


class ReadPathWarmer:
    """Warms the read path of the shard in ``shard_dir``; :meth:`stop` before closing it."""

    def __init__(self, shard_dir: Path) -> None:
        self.shard_dir = shard_dir
        self._lock = threading.Lock()  # guards the two fields below
        self._warming = False
        self._warmed_at = float("-inf")
        self._stopped = False

    @property
    def running(self) -> bool:
        return self._warming

    @contextlib.contextmanager
    def after_faults(self) -> Iterator[None]:
        """Around a read: when it faulted (read from disk), :meth:`start` a warm-up."""
        faults = portable.major_faults()
        yield
        if portable.major_faults() != faults:
            self.start()

    def start(self) -> bool:
        """Start reading the read path's files into the page cache unless a warm-up is
        running or ran in the last WARM_INTERVAL_S; True when it started one."""
        with self._lock:
            if self._warming or time.monotonic() - self._warmed_at < WARM_INTERVAL_S:
                return False
            self._warming = True
        threading.Thread(target=self._warm, name="semfs-warm", daemon=True).start()
        return True

    def stop(self) -> None:
        """A warm-up in flight stops at its next file."""
        self._stopped = True

    def _warm(self) -> None:
        buf = bytearray(_WARM_PIECE)
        try:
            for pattern in READ_PATH:
                for path in sorted(self.shard_dir.glob(pattern)):
                    if self._stopped:
                        return
                    _read_through(path, buf)
        except OSError as exc:  # a file a compaction just replaced: only slower reads
            logger.debug("warming %s stopped: %s", self.shard_dir, exc)
        finally:
            with self._lock:
                self._warming = False
                self._warmed_at = time.monotonic()
