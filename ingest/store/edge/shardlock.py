"""Who owns an embedded collection: its lock file, and the note saying who holds it.

Qdrant Edge refuses a second opener of a shard (its WAL is locked), but only after that
opener has rewritten segment files under the live owner. So semfs takes its own lock first,
``COLLECTION/lock`` (an exclusive, non-blocking ``flock``), before Edge sees the shard, and
every operation that must not run beside an owner (setting a shard aside, removing or renaming
a collection) takes the same lock the same way (:func:`lock`, :func:`locked`). The owner writes
``COLLECTION/owner.json`` (pid and command line) so that a refused process can say who holds
it; the note is informational only, the lock is what decides.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from semfs.ingest import portable
from semfs.ingest.errors import StoreFolderError, StoreLockedError
from semfs.ingest.store.edge import privacy
from semfs.ingest.store.ownerkind import UNNOTED, command_line, owner_kind, what_to_do

logger = logging.getLogger(__name__)

LOCK_NAME = "lock"
OWNER_NAME = "owner.json"


def _note(coll_dir: Path) -> tuple[int, str] | None:
    """The holder's pid and command line as its note says, or None (no note, or unreadable)."""
    try:
        info = json.loads((coll_dir / OWNER_NAME).read_text())
        return int(info["pid"]), str(info["command"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_owner(coll_dir: Path) -> str:
    """A description of the process that holds the shard, as far as it told us."""
    note = _note(coll_dir)
    return f"pid {note[0]} ({note[1]})" if note else "another process"


def holder_kind(coll_dir: Path) -> str:
    """The holder's kind (:func:`owner_kind`) as its note says; ``""`` when its note says
    none (a script), :data:`~semfs.ingest.store.ownerkind.UNNOTED` when it has no note (a
    holder has one from just after it takes the lock until just before it lets go)."""
    note = _note(coll_dir)
    return owner_kind(note[1]) if note else UNNOTED


def owner_advice(coll_dir: Path) -> str:
    """What to do about the process that holds the shard, by its kind (as it told us)."""
    note = _note(coll_dir)
    return what_to_do(owner_kind(note[1]), note[0]) if note else what_to_do("")


def lock(coll_dir: Path, refused: Callable[[str], str]) -> int:
    """Take ``coll_dir``'s lock: the descriptor to close to release it. When another process
    holds it, :class:`StoreLockedError` with ``refused(who holds it)`` as its message."""
    fd = privacy.open_private_file(coll_dir / LOCK_NAME)  # no symlink followed
    try:
        taken = portable.lock_file(fd, wait=False)
    except OSError:
        taken = False
    if not taken:
        os.close(fd)
        exc = StoreLockedError(refused(read_owner(coll_dir)))
        exc.kind = holder_kind(coll_dir)
        raise exc
    return fd


@contextlib.contextmanager
def locked(coll_dir: Path, refused: Callable[[str], str]) -> Iterator[None]:
    """:func:`lock` for the length of a ``with`` block."""
    fd = lock(coll_dir, refused)
    try:
        yield
    finally:
        os.close(fd)  # closing the descriptor drops the flock


class ShardLock:
    """This process's ownership of the collection in ``coll_dir``, from :meth:`take` to
    :meth:`release`. While it is held the umask is 077 (:func:`privacy.hold`): whatever Edge
    creates is owner-only, as the store holds copies of the user's documents."""

    def __init__(self, store_dir: Path, coll_dir: Path) -> None:
        self.store_dir = store_dir
        self.coll_dir = coll_dir
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def take(self) -> None:
        privacy.private_dir(self.store_dir)  # refused when another user owns or may write it
        privacy.private_dir(self.coll_dir, top=self.store_dir)
        self._fd = lock(self.coll_dir, self.refusal)
        privacy.hold()

    def refusal(self, owner: str) -> str:
        """The message for a process refused the shard because ``owner`` holds it (this
        process itself: the collection is open twice in it, e.g. two ``open_collection``)."""
        if owner.startswith(f"pid {os.getpid()} ("):
            return (
                f"store {self.coll_dir} is already open in this process: use the collection "
                "already open, or close it first (close(), or open it in a `with` block)"
            )
        return f"store {self.coll_dir} is in use by {owner}; {owner_advice(self.coll_dir)}"

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
            privacy.release()

    def write_owner(self) -> None:
        """Say who we are in ``owner.json``, for the messages of the processes we refuse."""
        info = {"pid": os.getpid(), "command": command_line()[:200]}
        try:
            fd = privacy.open_private_file(self.coll_dir / OWNER_NAME, os.O_WRONLY | os.O_CREAT)
            with os.fdopen(fd, "w") as f:
                f.truncate()
                f.write(json.dumps(info))
        except (OSError, StoreFolderError) as exc:  # informational only
            logger.debug("cannot write owner file: %s", exc)

    def forget_owner(self) -> None:
        """Remove ``owner.json`` if it still names this process (another may own it now)."""
        path = self.coll_dir / OWNER_NAME
        try:
            info = json.loads(path.read_text())
            if info.get("pid") == os.getpid():
                path.unlink()
        except (OSError, ValueError):
            pass
