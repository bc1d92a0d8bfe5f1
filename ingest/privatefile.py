"""A small state file of this user's, replaced whole: written 0600 beside it and renamed over
it, so a reader sees the old or the new contents, never a part, and a symlink at ``path`` is
replaced, never written through. The watcher's sync state and the readers' note for the
dense pass (:mod:`semfs.ingest.focus`) are written so."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path


def replace_private(path: Path, data: bytes) -> None:
    """Replace the file ``path`` with ``data``, mode 0600 whatever the umask. Raises OSError
    (nothing is left beside it then)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o600)
        try:
            os.fchmod(fd, 0o600)  # a file left by a crash keeps its mode otherwise
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
