"""The logging set-up every command shares, apart from click, so that `semfs mount`'s
click-free start (:mod:`semfs.fusefs.cli.fastmount`) sets it up the same way."""

from __future__ import annotations

import logging

# A background mount of an embedded store logs to this file in its collection folder
# (fusefs.daemon writes it; `semfs status` shows where it is).
MOUNT_LOG = "mount.log"


def configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
