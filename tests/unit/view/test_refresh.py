"""The tree refresher follows a store's changes (the polling the server backend relies on),
driven directly against a real store of each backend."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from semfs.fusefs.view.refresh import TreeRefresher
from semfs.fusefs.view.tree import InodeMap, Tree
from semfs.ingest.pipeline import ingest
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.schema import StoreMeta
from tests.helpers import SAMPLE_CORPUS
from tests.helpers.trees import IDS, at


@pytest.fixture
def small_copy(tmp_path: Path) -> Path:
    """Three files of the sample: qdrant-client's local mode is slow to write."""
    dst = tmp_path / "small"
    for rel in ("index.mdx", "quickstart.mdx", "ai/llmstxt.mdx"):
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(SAMPLE_CORPUS / rel, dst / rel)
    return dst


@pytest.mark.parametrize("backend", ["embedded", "server"])
def test_refresher_follows_the_store(small_copy: Path, tmp_path: Path, backend: str) -> None:
    """The polling path the server backend relies on, driven directly against a real store."""
    sample_copy = small_copy
    url = f"file://{tmp_path / 'qdrant'}" if backend == "server" else None
    store = open_store(CollectionAddress(store=tmp_path / "store", url=url))
    try:
        ingest(sample_copy, store, model="hash")
        trees: list[Tree] = []
        refresher = TreeRefresher(store, InodeMap(), IDS, publish=trees.append)
        first = refresher.load()
        assert trees == [first]
        assert refresher.check() is False  # nothing changed: no listing, no new tree
        ino = at(first, "quickstart.mdx").ino

        (sample_copy / "index.mdx").write_text("changed\n")
        (sample_copy / "ai" / "llmstxt.mdx").unlink()
        (sample_copy / "new" / "deep").mkdir(parents=True)
        (sample_copy / "new" / "deep" / "file.md").write_text("# New\n\nhello\n")
        ingest(sample_copy, store, model="hash")
        assert refresher.check() is True
        tree = trees[-1]
        assert at(tree, "index.mdx").attrs["st_size"] == len("changed\n")
        assert tree.lookup("ai/llmstxt.mdx") is None
        assert tree.lookup("new/deep/file.md") is not None
        assert at(tree, "quickstart.mdx").ino == ino
        assert refresher.check() is False

        # A run under way (dirty) commits documents one by one: every check lists them.
        meta = store.read_meta()
        assert meta is not None
        store.write_meta(StoreMeta(meta.model, meta.dimension, meta.generation + 1, dirty=True))
        assert refresher.check() is False  # same records: no new tree
        store.delete_documents(["index.mdx"])
        assert refresher.check() is True
        assert trees[-1].lookup("index.mdx") is None
    finally:
        store.close()
