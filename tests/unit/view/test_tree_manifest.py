"""A mount's first tree, indexed on the manifest's columns (Tree.from_manifest): node for node
the tree Tree.build makes of the same records, whatever order nodes are asked for in, and
numbered so that a refresh keeps every path's inode number."""

from __future__ import annotations

import dataclasses
import random
from array import array
from typing import Any

import pytest

from semfs.fusefs.view.tree import DIR, FileIds, InodeMap, Tree
from semfs.ingest.store.manifest import Manifest
from semfs.ingest.store.schema import DirectoryRecord, DocumentRecord, StoreMeta

IDS = FileIds(uid=1234, gid=5678, mounted_at=1_000_000.0)
META = StoreMeta("hash", 8, generation=3)


def doc(path: str, mtime: float = 1.5, mode: int | None = 0o644, **kw: Any) -> DocumentRecord:
    return DocumentRecord(
        path, len(path), mtime, "ab" * 32, 2, 3, array("Q", [0, 4]), mode=mode, **kw
    )


PLAIN = [
    doc("a/b/c.md", 9.0),
    doc("a/b!x.md", 2.0),  # sorts between "a/b" and "a/b/": a sibling, not inside a/b
    doc("a/d.md", 3.0, mode=0o600),
    doc("e.md", 4.0),
    doc("f/g/h/i.md", 5.0, mode=None),
    doc("a \udcff\n.md", 6.0),  # an undecodable name, a newline: any usable path
    *(doc(f"many/{i:03d}.md", float(i)) for i in range(150)),
]
FOLDERS = [
    DirectoryRecord("", 0o755, 0, 0, 5),
    DirectoryRecord("a", 0o750, 1000, 100, 7),
    DirectoryRecord("empty/deeper", 0o700, 1000, 100, 9),  # no documents below
]


def decoded(docs: list[DocumentRecord], folders: list[DirectoryRecord]) -> Manifest:
    """The manifest a mount reads: written, then decoded (its documents as columns)."""
    manifest = Manifest.from_bytes(Manifest.of(META, docs, folders).to_bytes())
    assert manifest.columns is not None
    return manifest


def shape(tree: Tree, order: list[str]) -> dict[str, tuple[Any, ...]]:
    out = {}
    for path in order:
        node = tree.lookup(path)
        assert node is not None, path
        fields = None if node.doc is None else dataclasses.asdict(node.doc)
        readable = tree.readable_by_all(path) if node.kind == DIR else None
        attrs = {k: v for k, v in node.attrs.items() if k != "st_ino"}
        assert node.attrs["st_ino"] == node.ino
        out[path] = (node.kind, node.ino, attrs, fields, list(node.children), readable)
    return out


def same_trees(docs: list[DocumentRecord], folders: list[DirectoryRecord]) -> Tree:
    """The manifest's tree, checked against build()'s node for node (numbers included)."""
    manifest = decoded(docs, folders)
    built = Tree.build(manifest.documents, InodeMap(), IDS, manifest.directories)
    lazy = Tree.from_manifest(decoded(docs, folders), InodeMap(), IDS)
    order = [n.path for n in built.nodes()]
    random.Random(5).shuffle(order)  # before their folders, often
    got, want = shape(lazy, order), shape(built, order)
    # Files are numbered alike; folders get their numbers in another (fixed) order.
    assert {p: g[:1] + g[2:] for p, g in got.items()} == {p: w[:1] + w[2:] for p, w in want.items()}
    assert len({g[1] for g in got.values()}) == len(got)
    assert (lazy.files, lazy.total_bytes, len(lazy)) == (built.files, built.total_bytes, len(built))
    assert dict(lazy.documents_below) == dict(built.documents_below)
    assert lazy.lookup("nope") is None and lazy.lookup("a/b/c.md/x") is None
    return lazy


def test_the_manifest_tree_is_the_built_tree() -> None:
    tree = same_trees(PLAIN, FOLDERS)
    assert type(tree._docs).__name__ == "_SortedDocs", "the plain case is indexed, not built"
    assert list(tree.root.children) == ["a", "a \udcff\n.md", "e.md", "empty", "f", "many"]
    assert list(tree.lookup("a").children) == ["b", "b!x.md", "d.md"]  # type: ignore[union-attr]
    # An unrecorded folder's mtime is its newest document's; a recorded one's its own.
    assert tree.lookup("a/b").attrs["st_mtime"] == 9 * 10**9  # type: ignore[union-attr]
    assert tree.lookup("a").attrs["st_mtime"] == 7  # type: ignore[union-attr]


def test_an_empty_manifest_is_an_empty_root() -> None:
    tree = same_trees([], [])
    assert list(tree.root.children) == [] and tree.root.attrs["st_nlink"] == 2


@pytest.mark.parametrize(
    "extra",
    [
        [doc("x/r.md", original="x/r.pdf", original_size=7, original_sha256="cd" * 32)],
        [doc("pic.png", original="pic.png", original_size=7, original_sha256="cd" * 32)],
        [doc("a"), doc("a/z.md")],  # a file and a folder of one name: the folder wins
        [doc("bad//path.md")],
        [doc("nul\0.md")],
    ],
    ids=["text-view", "as-is", "clash", "unusable", "nul"],
)
def test_what_the_index_does_not_cover_is_built(extra: list[DocumentRecord]) -> None:
    tree = same_trees([*PLAIN, *extra], FOLDERS)
    assert type(tree._docs) is dict


def test_a_recorded_folder_named_like_a_document_is_built() -> None:
    tree = same_trees(PLAIN, [*FOLDERS, DirectoryRecord("e.md", 0o755, 0, 0, 1)])
    assert type(tree._docs) is dict


def test_numbers_do_not_depend_on_the_order_of_lookups_and_survive_a_refresh() -> None:
    manifest = decoded(PLAIN, FOLDERS)
    paths = [n.path for n in Tree.build(manifest.documents, InodeMap(), IDS, FOLDERS).nodes()]
    numbers = []
    for seed in (1, 2):
        inodes = InodeMap()
        tree = Tree.from_manifest(decoded(PLAIN, FOLDERS), inodes, IDS)
        order = list(paths)
        random.Random(seed).shuffle(order)
        numbers.append({p: tree.lookup(p).ino for p in order})  # type: ignore[union-attr]
    assert numbers[0] == numbers[1]
    # A refresh builds from the records: a path keeps its number, looked up before or not.
    inodes = InodeMap()
    first = Tree.from_manifest(manifest, inodes, IDS)
    assert first.lookup("e.md") is not None
    later = Tree.build([*PLAIN[1:], doc("new.md")], inodes, IDS, FOLDERS)
    for path in ("e.md", "a/d.md", "many/007.md", "a", "empty/deeper"):
        assert later.lookup(path).ino == numbers[0][path]  # type: ignore[union-attr]
    assert later.lookup("new.md").ino not in numbers[0].values()  # type: ignore[union-attr]


def test_a_manifest_made_of_records_builds_the_same_tree() -> None:
    # Not decoded (no columns): what a test or a server store's writer holds.
    manifest = Manifest.of(META, PLAIN, FOLDERS)
    assert manifest.columns is None
    tree = Tree.from_manifest(manifest, InodeMap(), IDS)
    built = Tree.build(manifest.documents, InodeMap(), IDS, FOLDERS)
    assert shape(tree, ["", "a/b/c.md"]) == shape(built, ["", "a/b/c.md"])
