"""The tree a mount shows, built from a store's records without the kernel: what it holds,
its inode numbers, its nodes made on demand, guarded folders, unusable paths, folder times."""

from __future__ import annotations

import dataclasses
import logging
import os
import stat
from pathlib import Path

import pytest

from semfs.fusefs.view.tree import DIR, FILE, ROOT_INO, InodeMap, Tree
from semfs.ingest.store import Store
from semfs.ingest.store.schema import DirectoryRecord
from tests.helpers.trees import IDS, at, record, source_files


def test_tree_mirrors_the_records(ro_store: Store, ro_source: Path) -> None:
    tree = Tree.build(ro_store.list_documents(), InodeMap(), IDS)
    files = source_files(ro_source)
    assert tree.files == len(files) == 42
    assert tree.total_bytes == sum(map(len, files.values()))
    for path, data in files.items():
        node = tree.lookup(path)
        assert node is not None and node.kind == FILE
        st = os.stat(ro_source / path)
        assert node.attrs["st_size"] == len(data)
        # The source's permission bits minus write, and its owner (recorded at ingest).
        assert node.attrs["st_mode"] == stat.S_IFREG | (st.st_mode & 0o555)
        assert node.attrs["st_nlink"] == 1
        assert abs(node.attrs["st_mtime"] - st.st_mtime_ns) < 1000
        assert (node.attrs["st_uid"], node.attrs["st_gid"]) == (st.st_uid, st.st_gid)
    source_dirs = {
        "",
        *(p.relative_to(ro_source).as_posix() for p in ro_source.rglob("*") if p.is_dir()),
    }
    for path in source_dirs:
        node = tree.lookup(path)
        assert node is not None and node.kind == DIR
        subdirs = sum(1 for c in node.children.values() if c.kind == DIR)
        assert node.attrs["st_nlink"] == 2 + subdirs
        assert node.attrs["st_mode"] == stat.S_IFDIR | 0o555
        assert list(node.children) == sorted(node.children)
    assert tree.root.ino == ROOT_INO
    assert len({at(tree, p).ino for p in [*files, *source_dirs]}) == len(files) + len(source_dirs)
    assert tree.lookup("nope") is None


def test_inode_numbers_survive_rebuilds() -> None:
    inodes = InodeMap()
    first = Tree.build([record("a/b.md"), record("a/c.md"), record("d.md")], inodes, IDS)
    second = Tree.build([record("a/c.md"), record("e/f.md")], inodes, IDS)
    third = Tree.build([record("a/b.md"), record("a/c.md")], inodes, IDS)
    ino = {p: at(first, p).ino for p in ("a", "a/b.md", "a/c.md", "d.md")}
    assert at(second, "a/c.md").ino == ino["a/c.md"]
    assert at(second, "a").ino == ino["a"]
    assert at(second, "e/f.md").ino not in ino.values()
    assert at(third, "a/b.md").ino == ino["a/b.md"]
    # A path that changes kind gets a new number: the kernel must not mistake one for the other.
    fourth = Tree.build([record("d.md/x")], inodes, IDS)
    assert at(fourth, "d.md").ino != ino["d.md"]


def test_a_tree_makes_its_nodes_on_demand_the_same_in_any_order() -> None:
    """Nodes are made at first lookup or listing; numbers and contents do not depend on
    which comes first, and a node is made once."""
    paths = ["a/b/c.md", "a/d.md", "e.md", "f/g/h/i.md"]
    listed = Tree.build([record(p) for p in paths], InodeMap(), IDS)
    looked_up = Tree.build([record(p) for p in paths], InodeMap(), IDS)
    deep = at(looked_up, "f/g/h/i.md")  # before its folders
    assert at(looked_up, "f/g/h").children["i.md"] is deep
    assert at(looked_up, "a").children["b"] is at(looked_up, "a/b")

    def shape(tree: Tree) -> dict[str, tuple[str, int, dict[str, int], list[str]]]:
        return {n.path: (n.kind, n.ino, dict(n.attrs), list(n.children)) for n in tree.nodes()}

    assert shape(looked_up) == shape(listed)
    assert len(listed) == len(shape(listed)) == 4 + 6
    assert at(listed, "a").attrs["st_nlink"] == 3 and len(at(listed, "a").children) == 2
    assert "b" in at(listed, "a").children and "x" not in at(listed, "a").children


def test_folders_holding_what_others_cannot_read_are_guarded() -> None:
    """readable_by_all: a search there shows owner-only results."""
    private = dataclasses.replace(record("a/b/secret.md"), mode=0o640)
    public = dataclasses.replace(record("c/open.md"), mode=0o644)
    folders = [DirectoryRecord("d", 0o750, 0, 0, 0), DirectoryRecord("c", 0o755, 0, 0, 0)]
    tree = Tree.build([private, public, record("d/x.md"), record("e.md")], InodeMap(), IDS, folders)
    guarded = {n.path for n in tree.nodes() if n.kind == DIR and not tree.readable_by_all(n.path)}
    assert guarded == {"", "a", "a/b", "d"}


def test_unusable_and_clashing_paths_are_left_out(caplog: pytest.LogCaptureFixture) -> None:
    records = [record(p) for p in ("", "a//b", "../x", "/abs", "x/./y", "a", "a/b", "ok.md")]
    with caplog.at_level(logging.WARNING, logger="semfs.fusefs.view.tree"):
        tree = Tree.build(records, InodeMap(), IDS)
    assert list(tree.root.children) == ["a", "ok.md"]
    assert at(tree, "a").kind == DIR
    assert tree.files == 2
    assert len(caplog.records) == 6


def test_directory_mtime_is_its_newest_document() -> None:
    tree = Tree.build([record("a/x", mtime=5.0), record("a/b/y", mtime=9.0)], InodeMap(), IDS)
    assert at(tree, "a").attrs["st_mtime"] == 9 * 10**9
    assert at(tree, "a/b").attrs["st_mtime"] == 9 * 10**9
    empty = Tree.build([], InodeMap(), IDS)
    assert empty.root.attrs["st_mtime"] == 1_000_000 * 10**9
    assert empty.root.attrs["st_nlink"] == 2
