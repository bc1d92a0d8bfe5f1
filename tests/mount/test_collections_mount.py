"""One mount of two collections (`semfs mount MNT --collections docs,code`), through a real
mount: each collection a top-level folder, the root's `.search` over both, a collection's own
`.search` and `.similar` inside it, the root map naming each, `grep -r` and `ls -R` over both.

One store and one mount for the module. The two collections use different models, each its
own, as issue 50 asks: `docs` (six pages of the prose sample) the default model, `code`
(semfs's own format readers) the packaged model int8 on ONNX Runtime (`@onnx-int8`). Both are
searched at the root, each question answered by its own collection's model. Only a handful
of small documents, so the default model embeds them in a second or two.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from semfs.ingest.embedding.base import DEFAULT_MODEL
from semfs.ingest.pipeline import ingest
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from tests.helpers import REPO, SAMPLE_CORPUS, SEMFS
from tests.helpers.mounting import Mount, mounted

pytestmark = pytest.mark.mount

INT8 = "all-MiniLM-L6-v2@onnx-int8"
# A question about each collection, and the page that answers it (as the mount names it).
CODE_QUESTION = "open a zip container within the bomb bounds"
CODE_PAGE = "code/base.py"
DOCS_QUESTION = "export the site for air-gapped environments and on-premise customers"
DOCS_PAGE = "docs/deploy/export.mdx"
# The prose: a few short pages of the sample, the answering one among them.
DOCS_PAGES = (
    "deploy/export.mdx",
    "deploy/deployments.mdx",
    "deploy/vercel.mdx",
    "deploy/monorepo.mdx",
    "deploy/docs-subpath.mdx",
    "components/callouts.mdx",
)


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("collections")
    code, docs = base / "code", base / "docs"
    shutil.copytree(REPO / "ingest" / "formats", code, ignore=shutil.ignore_patterns("__pycache__"))
    for page in DOCS_PAGES:
        (docs / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SAMPLE_CORPUS / page, docs / page)
    store = base / "store"
    for name, source, model in (("docs", docs, None), ("code", code, INT8)):
        with open_store(CollectionAddress(name, store=store)) as s:
            ingest(source, s, model=model)  # None: the default model
    return {"docs": docs, "code": code, "store": store}


@pytest.fixture(scope="module")
def mnt(sources: dict[str, Path]) -> Iterator[Mount]:
    mountpoint = sources["store"].parent / "mnt"
    store = str(sources["store"])
    with mounted(mountpoint, "--store", store, "--collections", "docs,code") as m:
        yield m


def in_mount(m: Mount, folder: Path) -> list[str]:
    """The documents a search folder links to, best first, as paths in the mount."""
    names = sorted(os.listdir(folder))
    assert names[0] == "00-results.md", names
    root = os.path.realpath(m.path)
    return [os.path.relpath(os.path.realpath(folder / n), root) for n in names[1:]]


def test_each_collection_is_a_folder_that_grep_and_ls_see(
    mnt: Mount, sources: dict[str, Path]
) -> None:
    assert sorted(os.listdir(mnt.path)) == ["code", "docs"]
    for name in ("docs", "code"):  # each tree is its collection's, byte for byte
        diff = subprocess.run(
            ["diff", "-r", str(sources[name]), str(mnt.path / name)], capture_output=True
        )
        assert diff.returncode == 0, diff.stdout.decode()[:2000]
    listing = subprocess.run(
        ["ls", "-R", str(mnt.path)], capture_output=True, text=True, check=True
    ).stdout
    assert f"{mnt.path}/code:\n" in listing and "base.py" in listing
    assert f"{mnt.path}/docs/deploy:\n" in listing and "export.mdx" in listing
    found = subprocess.run(
        ["grep", "-rl", "zip", str(mnt.path)], capture_output=True, text=True, check=True
    ).stdout.split()
    tops = {os.path.relpath(p, mnt.path).split("/")[0] for p in found}
    assert tops == {"code", "docs"}, found


def test_the_roots_search_puts_each_collections_page_first(mnt: Mount) -> None:
    for question, page in ((CODE_QUESTION, CODE_PAGE), (DOCS_QUESTION, DOCS_PAGE)):
        folder = mnt.path / ".search" / question
        assert in_mount(mnt, folder)[0] == page
        results = (folder / "00-results.md").read_text()
        assert f"1. {page} " in results  # named by its path in the mount


def test_a_collections_search_and_similar_stay_inside_it(mnt: Mount) -> None:
    # The code question asked in docs/ finds docs only, and the docs question in code/ code.
    for name, question in (("docs", CODE_QUESTION), ("code", DOCS_QUESTION)):
        found = in_mount(mnt, mnt.path / name / ".search" / question)
        assert found and all(p.startswith(name + "/") for p in found), found
    # A document's neighbours are its own collection's (another's vectors are another model's).
    for folder in (mnt.path / ".similar" / "code" / "epub.py", mnt.path / "code/.similar/epub.py"):
        found = in_mount(mnt, folder)
        assert found and all(p.startswith("code/") for p in found), found


def test_the_root_map_names_each_collection_with_its_size_kind_and_model(
    mnt: Mount, sources: dict[str, Path]
) -> None:
    text = (mnt.path / ".map.md").read_text()
    code = len(list(sources["code"].glob("*.py")))  # semfs's format readers, however many
    lines = {line.split("/")[0]: line for line in text.splitlines() if line.startswith("- ")}
    assert "2 collections" in text.splitlines()[0], text
    assert "## Collections" in text
    assert lines["- code"].startswith(f"- code/ ({code}) — collection of code, "), text
    assert lines["- code"].endswith(INT8), text
    assert lines["- docs"].startswith(f"- docs/ ({len(DOCS_PAGES)}) — collection of prose, "), text
    assert f", model {DEFAULT_MODEL}: " in lines["- docs"], text
    # A collection's own map is its tree's, with paths from the mount's root.
    own = f"# docs/ — {len(DOCS_PAGES)} documents"
    assert (mnt.path / "docs/.map.md").read_text().startswith(own)


def test_the_guide_names_the_collections(mnt: Mount) -> None:
    out = subprocess.run(
        [SEMFS, "guide", str(mnt.path)], capture_output=True, text=True, check=True
    ).stdout
    assert f"several collections, each a folder: {mnt.path}/docs/, {mnt.path}/code/." in out
