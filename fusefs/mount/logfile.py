"""A mount's log file: where a background mount logs, bounded and owner-only."""

from __future__ import annotations

import errno
import logging
import logging.handlers
import os
import stat
from pathlib import Path
from typing import Any

from semfs.ingest.errors import MountError
from semfs.ingest.logs import MOUNT_LOG, OneLineFormatter
from semfs.ingest.store.address import CollectionAddress

# A log file is cut at this size and kept with one older part (``.1``): a mount that runs for
# months logs a line per store change, and a bad store can log one per read.
LOG_MAX_BYTES = 4 * 1024 * 1024


class _OwnerOnlyLog(logging.handlers.RotatingFileHandler):
    """A bounded log file (:data:`LOG_MAX_BYTES`, one older part) created 0600 whatever the
    umask, its rotated parts too: it quotes paths, queries and errors."""

    def _open(self) -> Any:
        path = self.baseFilename
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # --log-file /tmp/semfs.log, a link another planted
                raise MountError(
                    f"log file {path} is a symlink: semfs does not log through one; "
                    "give the file itself, or remove the link"
                ) from exc
            raise
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            os.close(fd)
            raise MountError(
                f"log file {path} is not a file of yours (user {st.st_uid}): semfs does not "
                "log into it; give another --log-file, or remove it"
            )
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)


def default_log_file(address: CollectionAddress, creating: bool = False) -> Path | None:
    """Where a background mount logs without --log-file: ``mount.log`` in the collection's
    local folder (:attr:`~semfs.ingest.store.address.CollectionAddress.local_dir`) when it
    exists (owner-only, like the store), or when the mount is ``creating`` the collection
    (``--watch`` makes it: the folder is made now, 0700, so that its first sync logs too);
    None before anything made it."""
    folder = address.local_dir
    if creating:
        from semfs.ingest.store.backends import make_collection_dir

        make_collection_dir(address)
    return folder / MOUNT_LOG if folder.is_dir() else None


def configure_logging(log_file: Path | None, verbose: int, foreground: bool = False) -> None:
    """Send the log to ``log_file`` only (INFO by default there), else leave it on stderr,
    where a foreground mount (-f) shows semfs's own INFO lines too (mounted, unmounted, a
    bad search parameter): its help promises a log there, and -f printed nothing without -v.
    """
    if log_file is None:
        if foreground and verbose <= 0:
            # semfs's loggers only: libraries' INFO (an HTTP line per request) stays out.
            logging.getLogger("semfs").setLevel(logging.INFO)
        return
    root = logging.getLogger()
    for handler in root.handlers[:]:
        root.removeHandler(handler)
    handler = _OwnerOnlyLog(log_file, maxBytes=LOG_MAX_BYTES, backupCount=1)
    handler.setFormatter(
        OneLineFormatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    )
    root.addHandler(handler)
    if verbose <= 0:
        root.setLevel(logging.INFO)
