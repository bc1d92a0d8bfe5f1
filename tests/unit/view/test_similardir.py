"""``.similar/PATH/`` without a mount: the nodes the FUSE callbacks would serve.

A real Edge store ingested with the hash embedder (its vectors share dimensions where texts
share words) and the real :class:`semfs.ingest.search.Searcher`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from semfs.fusefs.view.similardir import SimilarDirectories
from semfs.fusefs.view.tree import DIR, FILE, SYMLINK, FileIds, InodeMap, Tree
from semfs.ingest.pipeline import ingest
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Searcher
from semfs.ingest.store import DEFAULT_K, Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store

IDS = FileIds(uid=1234, gid=5678, mounted_at=1_000_000.0)
KEYS = "Rotate the api key: revoke the old api key, then create a new api key for the team."
BREAD = "Bake the bread: knead the dough, let the dough rise, then bake the loaf in the oven."


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    src = tmp_path_factory.mktemp("similar-src")
    (src / "keys").mkdir()
    (src / "kitchen").mkdir()
    (src / "keys" / "rotate.md").write_text(f"# Rotate keys\n\n{KEYS}\n")
    (src / "keys" / "revoke.md").write_text(f"# Revoke keys\n\n{KEYS} Revoke it today.\n")
    (src / "kitchen" / "keys.md").write_text(f"# Keys in the kitchen\n\n{KEYS} Keep it safe.\n")
    (src / "kitchen" / "bread.md").write_text(f"# Bread\n\n{BREAD}\n")
    with open_store(CollectionAddress(store=tmp_path_factory.mktemp("similar-store"))) as s:
        ingest(src, s, model="hash")
        yield s


@pytest.fixture(scope="module")
def tree(store: Store) -> Tree:
    return Tree.build(store.list_documents(), InodeMap(), IDS)


def listing(node: object) -> list[str]:
    assert node is not None and node.kind == DIR  # type: ignore[attr-defined]
    return list(node.children)  # type: ignore[attr-defined]


def test_nearest_documents_first_itself_left_out(store: Store, tree: Tree) -> None:
    dirs = SimilarDirectories(Searcher(store).similar)
    node = dirs.resolve(tree, ".similar/keys/rotate.md")
    names = listing(node)
    assert names[0] == "00-results.md"
    targets = [node.children[n].target for n in names[1:]]  # type: ignore[union-attr]
    assert all(node.children[n].kind == SYMLINK for n in names[1:])  # type: ignore[union-attr]
    assert "../../../keys/rotate.md" not in targets
    assert targets[-1] == "../../../kitchen/bread.md"  # the one that shares no words
    assert set(targets[:2]) == {"../../../keys/revoke.md", "../../../kitchen/keys.md"}
    results = node.children["00-results.md"]  # type: ignore[union-attr]
    assert results.kind == FILE and results.data is not None
    text = results.data.decode()
    head = f"# Similar to: keys/rotate.md\nsemantic · k {DEFAULT_K} · in all · 3 documents"
    assert text.startswith(head)
    assert "1. keys/revoke.md" in text or "1. kitchen/keys.md" in text


def test_scope_and_paths(store: Store, tree: Tree) -> None:
    calls: list[str] = []
    searcher = Searcher(store)

    def similar(path: str, gen: int, request: SearchRequest, **kw: object) -> list:  # type: ignore[type-arg]
        calls.append(path)
        return searcher.similar(path, gen, request, **kw)  # type: ignore[arg-type]

    dirs = SimilarDirectories(similar)
    # Under kitchen/: only its documents; the path is kitchen-relative.
    node = dirs.resolve(tree, "kitchen/.similar/keys.md")
    targets = [node.children[n].target for n in listing(node)[1:]]  # type: ignore[union-attr]
    assert targets == ["../../../kitchen/bread.md"]  # from the mount root
    # The folder and the folders on the way exist and list nothing; no search ran for them.
    assert listing(dirs.resolve(tree, ".similar")) == []
    assert listing(dirs.resolve(tree, ".similar/keys")) == []
    assert calls == ["kitchen/keys.md"]
    for bad in (
        ".similar/nope.md",
        ".similar/keys/nope.md",
        ".similar/keys/rotate.md/02-x/deeper",
        "nowhere/.similar/keys/rotate.md",
        "keys/rotate.md/.similar",
    ):
        assert dirs.resolve(tree, bad) is None, bad
    entry = dirs.resolve(tree, ".similar/keys/rotate.md/00-results.md")
    assert entry is not None and entry.kind == FILE
    assert entry.path == ".similar/keys/rotate.md/00-results.md"
    link = dirs.resolve(tree, ".similar/keys/rotate.md/01-revoke.md") or dirs.resolve(
        tree, ".similar/keys/rotate.md/01-keys.md"
    )
    assert link is not None and link.kind == SYMLINK and link.target.startswith("../../../k")
    assert calls == ["kitchen/keys.md", "keys/rotate.md"]
    dirs.resolve(tree, ".similar/keys/rotate.md")  # cached per tree
    assert len(calls) == 2


def test_contract_of_the_searcher_call(store: Store, tree: Tree, tmp_path: Path) -> None:
    searcher = Searcher(store)
    doc = tree.lookup("keys/rotate.md")
    assert doc is not None and doc.doc is not None
    hits = searcher.similar("keys/rotate.md", doc.doc.gen, SearchRequest(k=1))
    assert len(hits) == 1 and hits[0].path != "keys/rotate.md" and hits[0].rank == 1
    no_such_version = searcher.similar("keys/rotate.md", doc.doc.gen + 1, SearchRequest())
    assert no_such_version == []
