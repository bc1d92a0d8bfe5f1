"""The logging set-up every command shares, apart from click, so that `semfs mount`'s
click-free start (:mod:`semfs.fusefs.cli.fastmount`) sets it up the same way."""

from __future__ import annotations

import logging

# A background mount of an embedded store logs to this file in its collection folder
# (fusefs.daemon writes it; `semfs status` shows where it is).
MOUNT_LOG = "mount.log"


# Control characters in a message (a newline in a `.search` folder's name, a path, a query)
# are written escaped: one record is one line, so nobody forges a line of their choosing.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F)} | {
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\t",
}


class OneLineFormatter(logging.Formatter):
    """A formatter whose message is one line whatever it quotes (control characters escaped,
    ``\\n``, ``\\x1b``); a traceback still follows on its own lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = record.message.translate(_CONTROLS)
        return super().formatMessage(record)


def configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.setFormatter(
            OneLineFormatter(handler.formatter._fmt if handler.formatter else None)
        )
