"""What kind of process owns a store, and what a refused user is told to do about it."""

from __future__ import annotations

from pathlib import Path

import pytest

from semfs.ingest.errors import StoreLockedError
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.ownerkind import INGEST, MCP, MOUNT, WATCHER, owner_kind, what_to_do
from tests.helpers import SAMPLE_CORPUS
from tests.helpers.mounting import ingest_hash


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("semfs mount /mnt/docs", MOUNT),
        ("mount.semfs docs /mnt/docs -o rw", MOUNT),
        ("semfs ingest ./docs --watch", WATCHER),
        ("semfs mcp --http 8000", MCP),
        ("semfs ingest ./docs --jobs 2", INGEST),
        ("python -m pytest", ""),
    ],
)
def test_the_kind_is_read_from_the_command_line(command: str, kind: str) -> None:
    assert owner_kind(command) == kind


def test_an_ingest_is_waited_for_not_unmounted(tmp_path: Path) -> None:
    # Issue 38: the refusal told a user whose store an ingest held to `semfs umount` it.
    assert "semfs umount" not in what_to_do(INGEST, 12)
    assert "wait for it to finish" in what_to_do(INGEST, 12) and "kill 12" in what_to_do(INGEST, 12)
    assert "semfs umount" in what_to_do(MOUNT)
    store = tmp_path / "store"
    ingest_hash(SAMPLE_CORPUS, store)
    (store / "docs" / "owner.json").write_text('{"pid": 1, "command": "semfs ingest ./docs"}')
    where = CollectionAddress(store=store)
    with open_store(where):  # holds the lock, serves nothing: what an old ingest did
        (store / "docs" / "owner.json").write_text('{"pid": 1, "command": "semfs ingest ./docs"}')
        with pytest.raises(StoreLockedError) as refused:
            open_store(where)
    message = str(refused.value)
    assert "in use by pid 1 (semfs ingest ./docs); wait for it to finish" in message, message
    assert "umount" not in message
