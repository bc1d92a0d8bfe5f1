"""Give back the pages of a store's memory-mapped files that this process need not keep.

RSS counts every page of a mapped file that the process touched, though the kernel can drop
such a page and read it again on the next touch. Edge reads some of its files whole when it
loads a shard: the appendable segment's mutable payload indexes are page files of 2-32 MiB
(the full-text index's is 32 MiB) that it has already read into its own structures, mostly
holes, so at 100k chunks 48 MB of zeros stayed resident for the life of a mount.
``madvise(MADV_DONTNEED)`` on a shared file mapping unmaps its pages: the file and the page
cache keep them, and a later access maps them again with the same contents (madvise(2)
on Linux; elsewhere nothing is released: see ``portable.drop_pages``). Private mappings are
left alone (there it would discard the process's changes).
"""

from __future__ import annotations

import ctypes
import logging
from pathlib import Path

from semfs.ingest import portable

logger = logging.getLogger(__name__)


def release_pages(under: Path) -> int:
    """Unmap the resident pages of this process's shared mappings of files below ``under``;
    the bytes of address space advised (not all of it was resident). 0 where unsupported."""
    drop = portable.drop_pages()
    if drop is None:
        return 0
    advised = 0
    for start, length, path in portable.shared_file_mappings(str(under).rstrip("/") + "/"):
        if drop(start, length) == 0:
            advised += length
        else:  # e.g. locked pages: harmless, they stay
            logger.debug("madvise %s: errno %d", path, ctypes.get_errno())
    return advised
