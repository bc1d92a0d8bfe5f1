"""Give back the pages of a store's memory-mapped files that this process need not keep.

RSS counts every page of a mapped file that the process touched, though the kernel can drop
such a page and read it again on the next touch. Edge reads some of its files whole when it
loads a shard: the appendable segment's mutable payload indexes are page files of 2-32 MiB
(the full-text index's is 32 MiB) that it has already read into its own structures, mostly
holes, so at 100k chunks 48 MB of zeros stayed resident for the life of a mount.
``madvise(MADV_DONTNEED)`` on a shared file mapping unmaps its pages: the file and the page
cache keep them, and a later access maps them again with the same contents (Linux
madvise(2)). Private mappings are left alone (there it would discard the process's changes).
"""

from __future__ import annotations

import ctypes
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

logger = logging.getLogger(__name__)

_MADV_DONTNEED = 4


def _madvise() -> Callable[[int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    fn = ctypes.CDLL(None, use_errno=True).madvise
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return cast(Callable[[int, int, int], int], fn)


def release_pages(under: Path) -> int:
    """Unmap the resident pages of this process's shared mappings of files below ``under``;
    the bytes of address space advised (not all of it was resident). 0 where unsupported."""
    madvise = _madvise()
    if madvise is None:
        return 0
    prefix = str(under).rstrip("/") + "/"
    advised = 0
    try:
        with open("/proc/self/maps") as maps:
            lines = maps.readlines()
    except OSError:
        return 0
    for line in lines:
        parts = line.split(maxsplit=5)
        if len(parts) < 6 or not parts[5].startswith(prefix) or parts[1][3] != "s":
            continue
        start, end = (int(x, 16) for x in parts[0].split("-"))
        if madvise(start, end - start, _MADV_DONTNEED) == 0:
            advised += end - start
        else:  # e.g. locked pages: harmless, they stay
            logger.debug("madvise %s: errno %d", parts[5].strip(), ctypes.get_errno())
    return advised
