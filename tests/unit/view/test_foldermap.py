"""Folder maps without a mount: ``D/.map.md`` as the FUSE callbacks would serve it.

Real Edge stores ingested with the hash embedder; the titles and descriptions are the ones
the ingest recorded on the chunks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from semfs.fusefs.agent.toolbox import Toolbox
from semfs.fusefs.view.foldermap import MAP_BYTES, FolderMaps, page_name, parse_page
from semfs.fusefs.view.tree import DIR, FILE, FileIds, InodeMap, Tree
from semfs.ingest.errors import ToolInputError
from semfs.ingest.opened import Opened
from semfs.ingest.pipeline import ingest
from semfs.ingest.store import Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from tests.helpers import SAMPLE_CORPUS
from tests.helpers.docfixtures import make_pdf

IDS = FileIds(uid=1234, gid=5678, mounted_at=1_000_000.0)


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    with open_store(CollectionAddress(store=tmp_path_factory.mktemp("map-sample"))) as s:
        ingest(SAMPLE_CORPUS, s, model="hash")
        yield s


def tree_of(store: Store) -> Tree:
    return Tree.build(store.list_documents(), InodeMap(), IDS)


def entries(text: str) -> list[str]:
    """The names a map lists: folders (ending in /) and documents."""
    return re.findall(r"^- (\S+)", text, flags=re.M)


def test_root_map_names_every_folder_with_its_count(sample: Store) -> None:
    tree = tree_of(sample)
    maps = FolderMaps(sample.get_chunks)
    data = maps.page(tree, "")
    assert data is not None and len(data) <= MAP_BYTES
    text = data.decode()
    top = list(tree.root.children.values())
    folders = [n for n in top if n.kind == DIR]
    for folder in folders:
        below = sum(1 for p in SAMPLE_CORPUS.joinpath(folder.path).rglob("*") if p.is_file())
        assert f"- {folder.name}/ ({below})" in text, text
    for doc in (n for n in top if n.kind == FILE):
        assert f"- {doc.name}" in text
    total = sum(1 for p in SAMPLE_CORPUS.rglob("*") if p.is_file())
    assert text.startswith(f"# / — {total} documents, {len(folders)} folders\n")
    # Titles and descriptions are the recorded ones (front matter of the sample's pages).
    quick = sample.get_chunks("quickstart.mdx", tree.lookup("quickstart.mdx").doc.gen, [0])[0]  # type: ignore[union-attr]
    assert quick.title and f"- quickstart.mdx — {quick.title}" in text
    assert "More:" not in text and "FOLDER/.map.md" in text  # the footer: subfolders' maps


def test_a_folder_map_lists_its_documents_with_titles(sample: Store) -> None:
    tree = tree_of(sample)
    text = FolderMaps(sample.get_chunks).text(tree, "deploy")
    assert text is not None
    shown = entries(text)
    assert shown == sorted(n for n in tree.lookup("deploy").children)  # type: ignore[union-attr]
    line = next(x for x in text.splitlines() if x.startswith("- github.mdx"))
    assert " — " in line and ": " in line  # a title, then a description


@pytest.fixture
def big_folder(tmp_path: Path) -> Iterator[tuple[Path, Store]]:
    src = tmp_path / "src"
    flat = src / "ref"
    flat.mkdir(parents=True)
    for i in range(60):
        (flat / f"page{i:02d}.md").write_text(
            f"---\ntitle: Reference page {i}\ndescription: What setting {i} does, "
            f"in a sentence long enough to be cut somewhere along the way {'x' * 80}\n---\n\n"
            f"Body {i}.\n"
        )
    (src / "guide").mkdir()
    (src / "guide" / "intro.md").write_text("# Introduction\n\nWhere to start.\n")
    make_pdf(src / "guide" / "manual.pdf")
    with open_store(CollectionAddress(store=tmp_path / "store")) as s:
        ingest(src, s, model="hash")
        yield src, s


def test_pages_cover_a_big_folder_each_within_the_budget(
    big_folder: tuple[Path, Store],
) -> None:
    _, store = big_folder
    tree = tree_of(store)
    maps = FolderMaps(store.get_chunks)
    seen: list[str] = []
    page = 1
    while (data := maps.page(tree, "ref", page)) is not None:
        assert len(data) <= MAP_BYTES
        text = data.decode()
        seen += entries(text)
        if f"More: ref/{page_name(page + 1)}" not in text:
            break
        page += 1
    assert seen == [f"page{i:02d}.md" for i in range(60)]
    assert page > 2  # 60 documents do not fit in one page
    assert maps.page(tree, "ref", page + 1) is None
    assert all(len(x.encode()) <= 150 for x in text.splitlines())


def test_a_converted_document_is_one_entry_and_counts_once(
    big_folder: tuple[Path, Store],
) -> None:
    _, store = big_folder
    tree = tree_of(store)
    assert tree.lookup("guide/manual.pdf") is not None
    assert tree.lookup("guide/manual.pdf.md") is not None
    text = FolderMaps(store.get_chunks).text(tree, "guide")
    assert text is not None
    assert entries(text) == ["intro.md", "manual.pdf.md"]
    assert "- intro.md — Introduction: Where to start." in text
    root = FolderMaps(store.get_chunks).text(tree, "")
    assert root is not None and "- guide/ (2)" in root and "- ref/ (60)" in root


def test_the_map_follows_the_collection(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "a" / "one.md").write_text("# One\n\nFirst.\n")
    with open_store(CollectionAddress(store=tmp_path / "store")) as s:
        ingest(src, s, model="hash")
        maps = FolderMaps(s.get_chunks)
        before = maps.text(tree_of(s), "a")
        assert before is not None and entries(before) == ["one.md"]
        (src / "a" / "two.md").write_text("# Two\n\nSecond.\n")
        (src / "a" / "one.md").write_text("# One, renamed\n\nFirst.\n")
        ingest(src, s, model="hash")
        after = maps.text(tree_of(s), "a")
        assert after is not None and entries(after) == ["one.md", "two.md"]
        assert "— One, renamed" in after and "— Two: Second." in after


def test_map_names_resolve_only_in_folders(sample: Store) -> None:
    tree = tree_of(sample)
    maps = FolderMaps(sample.get_chunks)
    node = maps.resolve(tree, "deploy/.map.md")
    assert node is not None and node.kind == FILE and node.data
    assert node.attrs["st_size"] == len(node.data)
    assert maps.resolve(tree, ".map.md") is not None
    for bad in (
        "deploy/github.mdx/.map.md",  # a file has none
        "nowhere/.map.md",
        "deploy/.map.1.md",  # page 1 has one name
        "deploy/.map.2.md",  # one page only
        "deploy/.map.0.md",
        "deploy/.search/.map.md",
        "deploy/.maps.md",
    ):
        assert maps.resolve(tree, bad) is None, bad
    assert parse_page(".map.md") == 1 and parse_page(".map.12.md") == 12
    assert parse_page(".map.012.md") is None


def test_the_list_tool_offers_the_map(sample: Store) -> None:
    box = Toolbox(Opened.over(sample))
    try:
        out = box.list("", map=True)
        assert len(out.text.encode()) <= MAP_BYTES
        assert "- deploy/ (" in out.text and "list(path=FOLDER, map=true)" in out.text
        assert "search(query, path='')" in out.text
        assert ".map.md" not in out.text
        scoped = box.list("", map=True, scope=("deploy",))
        assert "- deploy/" in scoped.text and "- customize/" not in scoped.text
        with pytest.raises(ToolInputError, match="no page 2"):
            box.list("deploy", map=True, page=2)
        with pytest.raises(ToolInputError, match="is a file"):
            box.list("deploy/github.mdx", map=True)
    finally:
        box.close()
