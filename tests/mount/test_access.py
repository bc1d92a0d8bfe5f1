"""The daemon's own permission check of a new open (semfs.fusefs.mount.access), as the kernel's.

Against real trees; the same check runs, through a real mount and a real other user, in
tests/mount/test_shared_mount.py.
"""

from __future__ import annotations

import os

from semfs.fusefs.mount.access import caller_groups, may_read
from semfs.fusefs.view.tree import FileIds, InodeMap, Tree
from semfs.ingest.store.schema import DirectoryRecord, DocumentRecord

OWNER, GROUP, OTHER, ROOT = (1000, 100, 1), (2000, 100, 1), (3000, 300, 1), (0, 0, 1)


def _doc(path: str, mode: int | None, uid: int = 1000, gid: int = 100) -> DocumentRecord:
    return DocumentRecord(path, 1, 0.0, "0" * 64, 1, 1, mode=mode, uid=uid, gid=gid)


def _tree(*docs: DocumentRecord, folders: tuple[DirectoryRecord, ...] = ()) -> Tree:
    return Tree.build(docs, InodeMap(), FileIds(1000, 100), folders)


def test_owner_group_other_bits_decide_in_that_order() -> None:
    private, group, public = _doc("p.md", 0o600), _doc("g.md", 0o640), _doc("o.md", 0o604)
    tree = _tree(private, group, public)
    assert [may_read(tree, d, OWNER) for d in (private, group, public)] == [True, True, True]
    assert [may_read(tree, d, GROUP) for d in (private, group, public)] == [False, True, False]
    assert [may_read(tree, d, OTHER) for d in (private, group, public)] == [False, False, True]
    assert all(may_read(tree, d, ROOT) for d in (private, group, public))
    assert may_read(tree, private, None)  # no request: nothing to check
    # A record without a mode is served 0444: everyone reads it.
    assert may_read(tree, _doc("old.md", None), OTHER)


def test_every_folder_above_must_grant_search() -> None:
    inner = _doc("a/b/inner.md", 0o644)
    closed = (
        DirectoryRecord("a", 0o755, 1000, 100, 0),
        DirectoryRecord("a/b", 0o700, 1000, 100, 0),
    )
    assert not may_read(_tree(inner, folders=closed), inner, OTHER)
    assert may_read(_tree(inner, folders=closed), inner, OWNER)
    opened = (closed[0], DirectoryRecord("a/b", 0o711, 1000, 100, 0))
    assert may_read(_tree(inner, folders=opened), inner, OTHER)
    # A version whose folder is not in the tree shown now is not opened.
    assert not may_read(_tree(), inner, OTHER)


def test_supplementary_groups_come_from_the_callers_process() -> None:
    mine = caller_groups(os.getpid())
    assert mine == frozenset(os.getgroups())
    if mine:
        gid = next(iter(mine))
        doc = _doc("g.md", 0o640, uid=4242, gid=gid)
        # Primary group elsewhere, a supplementary group matching: the group bits apply.
        assert may_read(_tree(doc), doc, (4243, 4243, os.getpid()))
        assert not may_read(_tree(doc), doc, (4243, 4243, 0))  # pid unknown: primary only
