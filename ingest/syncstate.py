"""How fresh a followed collection is: the watcher's state, kept in memory and in a file.

A :class:`SyncState` is what ``semfs status`` shows and what a mount answers in its root's
extended attributes and its results files: which folder is followed (by which process, with
which kind of watcher), when the last batch committed, how many changes wait, and which
files failed, with why. The watcher updates it; it writes it (owner-only, 0600, replaced
atomically) to ``watch.json`` in the collection's local folder
(:attr:`~semfs.ingest.store.address.CollectionAddress.local_dir`), so ``semfs status`` can read
it even while the watching process holds the store.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from semfs.ingest.privatefile import replace_private
from semfs.ingest.store.address import CollectionAddress

STATE_NAME = "watch.json"
# Reasons kept per failed file in the state file; status shows them all with --json.
MAX_FAILED = 1000


def state_file(address: CollectionAddress) -> Path:
    """Where the state of a watcher following the collection at ``address`` is kept."""
    return address.local_dir / STATE_NAME


@dataclass
class LastBatch:
    paths: int  # changed paths the batch looked at (0 for a full pass)
    full: bool
    added: int
    updated: int
    deleted: int
    seconds: float


@dataclass
class SyncState:
    """The watcher's view; mutated only by the watcher's thread, read from any thread."""

    source: str
    pid: int = field(default_factory=os.getpid)
    watcher: str = ""  # "inotify", "fsevents", ... or "polling every N s (why)"
    started_at: float = field(default_factory=time.time)
    synced_at: float | None = None  # when the last batch committed
    batches: int = 0
    pending: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    source_problem: str | None = None  # "missing since ...", "unreadable since ..."
    error: str | None = None  # why the last batch could not run (store failure), if it failed
    waiting: str | None = None  # why the pending changes wait now ("for git to finish ...")
    last_batch: LastBatch | None = None
    stopped: bool = False

    @property
    def running(self) -> bool:
        """Whether the process that wrote this state still follows the source."""
        if self.stopped:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def freshness_line(self) -> str:
        """One line for a results file: ``index as of HH:MM:SS, N changes pending``."""
        n = self.pending
        pending = f"{n} change{'' if n == 1 else 's'} pending"
        if self.synced_at is None:
            head = "index not synced yet"
        else:
            head = "index as of " + time.strftime("%H:%M:%S", time.localtime(self.synced_at))
        tail = f"; {self.source_problem}" if self.source_problem else ""
        return f"{head}, {pending}{tail}"

    def xattrs(self) -> dict[str, str]:
        """What a mount's root answers as ``user.semfs.NAME``: ``synced_at`` (ISO 8601,
        once a batch committed), ``pending`` (a count) and ``following`` (the folder)."""
        out = {"following": self.source, "pending": str(self.pending)}
        if self.synced_at is not None:
            local = datetime.fromtimestamp(self.synced_at).astimezone()
            out["synced_at"] = local.isoformat(timespec="seconds")
        return out

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["failed"] = dict(sorted(self.failed.items())[:MAX_FAILED])
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SyncState:
        last = data.pop("last_batch", None)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        state = cls(**known)
        if isinstance(last, dict):
            state.last_batch = LastBatch(**last)
        return state

    def save(self, path: Path) -> None:
        """Replace ``path`` atomically with this state; the file is created 0600."""
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        replace_private(path, json.dumps(self.to_json(), indent=1).encode())


def load_state(path: Path) -> SyncState | None:
    """The state saved at ``path``, or None when there is none (or it is unreadable)."""
    try:
        data = json.loads(path.read_text())
        return SyncState.from_json(data)
    except (OSError, ValueError, TypeError):
        return None
