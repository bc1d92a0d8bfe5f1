"""What kind of process owns a store, read from its command line: the one place it is guessed.

An owner records its command line in ``owner.json`` (:mod:`.edge.shardlock`) and says it in its
socket's hello (:mod:`.ipc.server`); :func:`owner_kind` reads either, for the messages that tell
a user what to stop (:class:`semfs.ingest.errors.StoreOwnedError`,
:class:`.ipc.client.RemoteStore`). A leaf module: it imports nothing of semfs, so every layer
may ask it.
"""

from __future__ import annotations

import os
import sys

MOUNT = "mount"  # `semfs mount`, or the mount helper (mount.semfs)
WATCHER = "watcher"  # `semfs ingest --watch`
MCP = "mcp"  # `semfs mcp`
INGEST = "ingest"  # `semfs ingest` (a run that ends; readers use it meanwhile)
# A holder with no note: it has taken the lock and not yet written its note (starting: its
# store is being checked or loaded), or taken it back and not yet let go (closing).
UNNOTED = "unnoted"


def command_line() -> str:
    """This process's command line as an owner records it: ``semfs ingest ./docs --watch``."""
    return " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]])


def owner_kind(command: str) -> str:
    """What kind of process runs ``command`` (as :func:`command_line` gave it): :data:`MOUNT`,
    :data:`WATCHER`, :data:`MCP`, :data:`INGEST`, or ``""`` when its words do not say (a test,
    a script)."""
    words = command.split()
    if not words:
        return ""
    if "mount" in words[:2] or words[0].startswith("mount."):
        return MOUNT
    if "ingest" in words and ("--watch" in words or "-w" in words):
        return WATCHER
    if "mcp" in words:
        return MCP
    if "ingest" in words[:2]:
        return INGEST
    return ""


def what_to_do(kind: str, pid: int | None = None) -> str:
    """What a user refused a store by an owner of ``kind`` can do about it, in a few words."""
    stop = f"Ctrl-C it, or kill {pid}" if pid is not None else "Ctrl-C it"
    if kind == MOUNT:
        return "unmount it (semfs umount MOUNTPOINT) or wait"
    if kind == INGEST:
        return f"wait for it to finish (or stop it: {stop})"
    if kind in (WATCHER, MCP):
        return f"stop it ({stop}) or wait"
    return "stop it or wait for it to finish"
