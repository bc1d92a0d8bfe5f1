"""The Python API (`import semfs`, semfs.ingest.collection): what `semfs ingest`, `search`,
`status`, a mount's results file and `.similar/`, `--watch` and `semfs collections` do, from
Python; and docs/python-api.md, whose examples run here as written, top to bottom."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from semfs.ingest.collection import open_collection
from semfs.ingest.errors import SemfsError, StoreNotFoundError
from semfs.ingest.request import SearchRequest
from semfs.ingest.store.address import CollectionAddress
from tests.helpers import REPO
from tests.helpers.mounting import semfs
from tests.helpers.mounting import semfs as run_semfs

GUIDE = REPO / "docs" / "python-api.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def test_the_api_is_the_command_lines_library(sample_copy: Path, store_dir: Path) -> None:
    with open_collection("docs") as docs:
        report = docs.ingest(sample_copy, model="hash")
        assert report.added and not report.skipped
        hits = docs.search("custom domain", k=4)
        status = docs.status()
        records = docs.documents()
        page = docs.read(hits[0].path)
    # The same hits as `semfs search --json`, the same counts as `semfs status --json`.
    cli_hits = json.loads(semfs("search", "custom domain", "-k", "4", "--json").stdout)
    # The command line names each hit's collection (it may search several: -c a -c b).
    assert [{**h.to_json(), "collection": "docs"} for h in hits] == cli_hits
    cli_status = json.loads(semfs("status", "--json").stdout)
    for key in ("documents", "chunks", "model", "source", "generation", "bytes"):
        assert status[key] == cli_status[key], key
    # Every document, by path; its bytes exactly the source file's.
    assert [r.path for r in records] == sorted(r.path for r in records)
    assert len(records) == status["documents"]
    source = (sample_copy / hits[0].path).read_bytes()
    assert hashlib.sha256(page).digest() == hashlib.sha256(source).digest()


def test_requests_and_errors(sample_copy: Path, tmp_path: Path) -> None:
    address = CollectionAddress("other", store=tmp_path / "elsewhere")
    with open_collection(address) as docs:
        with pytest.raises(StoreNotFoundError):  # not ingested yet
            docs.search("anything")
        docs.ingest(sample_copy, model="hash", include=["deploy/*"])
        request = SearchRequest("custom domain", k=2, under="./deploy/")
        hits = docs.search(request)
        assert len(hits) == 2 and all(h.path.startswith("deploy/") for h in hits)
        assert docs.search("custom domain", k=2, under="deploy") == hits
        with pytest.raises(TypeError):
            docs.search(request, k=3)  # one way or the other, not both
        with pytest.raises(SemfsError, match="k must be between 1 and 100"):
            docs.search("custom domain", k=0)
        with pytest.raises(SemfsError, match="unknown mode 'fuzzy'"):
            docs.search("custom domain", mode="fuzzy")
        with pytest.raises(StoreNotFoundError, match=r"no document 'nope\.md'"):
            docs.read("nope.md")
    assert (tmp_path / "elsewhere" / "other").is_dir()


@pytest.mark.model
def test_the_guide_runs_as_written(tmp_path: Path) -> None:
    """The ```python blocks of docs/python-api.md, in order, as one script a reader would run
    (a file: smolagents' @tool reads its function's source), with the real default model, in
    a store of its own."""
    blocks = _BLOCK.findall(GUIDE.read_text())
    assert len(blocks) >= 6, "the guide lost its examples"
    # The first example ingests ./my-notes.
    (tmp_path / "my-notes").mkdir()
    (tmp_path / "my-notes" / "keys.md").write_text("# Keys\n\nRotate an API key every 90 days.\n")
    script = tmp_path / "python_api_guide.py"
    script.write_text("\n".join(f"# --- block {n} ---\n{b}" for n, b in enumerate(blocks, 1)))
    run = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, f"{run.stderr}\n--- {script.name}:\n{script.read_text()}"
    assert "keys/rotate.md" in run.stdout and "fonts.md" in run.stdout
    assert run.stdout.startswith("# Search: how do I rotate an api key\n"), run.stdout[:300]


def test_the_front_door_is_import_semfs() -> None:
    # Every name it offers resolves to the library's own object; importing it loads none of
    # them (a mount and the command line import semfs first: they must not pay for a store).
    import semfs

    for name in semfs.__all__:
        assert getattr(semfs, name) is not None, name
    assert semfs.open_collection is open_collection and semfs.SearchRequest is SearchRequest
    assert semfs.CollectionAddress is CollectionAddress and semfs.SemfsError is SemfsError
    with pytest.raises(AttributeError):
        semfs.no_such_name  # noqa: B018
    code = "import sys, semfs; print(sorted(m for m in sys.modules if m.startswith('semfs.')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert loaded.returncode == 0 and loaded.stdout.strip() == "[]", loaded


def test_results_text_similar_and_collections(sample_copy: Path, tmp_path: Path) -> None:
    import semfs

    where = semfs.CollectionAddress("docs", store=tmp_path / "store")
    with semfs.open_collection(where) as docs:
        docs.ingest(sample_copy, model="hash")
        hits = docs.search("custom domain", k=3)
        text = docs.results_text("custom domain", k=3)
        near = docs.similar(hits[0].path, k=3)
    # The results file a mount and `semfs search` show, with the same hits.
    assert text.startswith("# Search: custom domain\n")
    assert all(f"\n{h.rank}. {h.path} (" in text for h in hits), text
    cli = run_semfs("search", "custom domain", "-k", "3", "--store", str(tmp_path / "store"))
    assert text == cli.stdout
    # Documents like one: itself left out.
    assert near and hits[0].path not in [h.path for h in near]
    # Listed, removed (then gone, and removing it again says so).
    assert semfs.collections(where) == ["docs"]
    semfs.remove(where)
    assert semfs.collections(where) == []
    with pytest.raises(semfs.StoreNotFoundError):
        semfs.remove(where)


def test_watch_follows_the_folder(sample_copy: Path, tmp_path: Path) -> None:
    import semfs

    where = semfs.CollectionAddress("docs", store=tmp_path / "store")
    with semfs.open_collection(where) as docs:
        docs.ingest(sample_copy, model="hash")
        with docs.watch(sample_copy) as watcher:
            (sample_copy / "faq.md").write_text("# FAQ\n\nSupport answers in one working day.\n")
            deadline = time.monotonic() + 300  # generous: the machine may be loaded
            while "faq.md" not in [d.path for d in docs.documents()]:
                assert time.monotonic() < deadline, watcher.state
                time.sleep(0.2)
        assert [h.path for h in docs.search("support answers working day", k=1)] == ["faq.md"]
        # Its dense vectors followed the batch: nothing is left to embed.
        meta = docs.store.read_meta()
        assert meta is not None and not meta.dense_pending
