"""One default k: every door, asked for documents without saying how many, gives the same
number, DEFAULT_K (it was 10 in the agent tools, 3 in the MCP tool and 5 in its docstring).

The doors: `semfs search`, a mount's `.search/QUESTION/` folder (the view the mount serves, and
the default `semfs mount` gives it), the MCP search tool over stdio, and the Python API. Each is
asked for a question that more than DEFAULT_K documents answer."""

from __future__ import annotations

import json
from pathlib import Path

from semfs.fusefs.cli.fastmount import parse
from semfs.fusefs.mount.daemon import MountConfig
from semfs.fusefs.view.searchdir import SearchDirectories
from semfs.fusefs.view.tree import FileIds, InodeMap, Tree
from semfs.ingest.collection import open_collection
from semfs.ingest.search import Searcher
from semfs.ingest.store import DEFAULT_K
from tests.helpers.mcpclient import attr, call, connect, data, run, stdio
from tests.helpers.mounting import ingest_hash, semfs

QUESTION = "custom domain"


def test_every_door_gives_the_default_k(sample_copy: Path, store_dir: Path) -> None:
    ingest_hash(sample_copy, store_dir)
    found: dict[str, int] = {}

    found["semfs search"] = len(json.loads(semfs("search", QUESTION, "--json").stdout))

    with open_collection() as docs:
        found["Python API"] = len(docs.search(QUESTION))
        # The `@` folders of a mount with `semfs mount`'s defaults (what its parser gives).
        mount = parse(["/mnt/docs"])
        assert mount is not None
        assert MountConfig(Path("/mnt/docs")).search.k == mount["k"]
        tree = Tree.build(docs.documents(), InodeMap(), FileIds(0, 0))
        folder = SearchDirectories(Searcher(docs.store).search).resolve(tree, f".search/{QUESTION}")
        assert folder is not None and folder.children is not None
        found[".search/ folder"] = sum(1 for name in folder.children if name[:2] != "00")
        found["semfs mount --k"] = mount["k"]

    async def mcp() -> tuple[int, int]:
        async with connect(stdio()) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            default = attr(tools["search"], "input_schema")["properties"]["k"]["default"]
            # details=true: the hits as JSON beside the text (the text alone by default).
            result = await call(client, "search", query=QUESTION, details=True)
            return default, len(data(result)["results"])

    found["MCP schema"], found["MCP search"] = run(mcp)
    assert found == dict.fromkeys(found, DEFAULT_K), found
