"""`semfs mcp --collections a,b`: one MCP server of several collections (issue 50).

Two collections of one store on different models (the hash stand-in at 384 and 64 dimensions):
the tools search both, each with its own model, and name each hit's collection; a scoped token
for one collection sees nothing of the other through any tool (a real server over HTTP).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from semfs.fusefs.agent.several import SeveralToolbox
from semfs.fusefs.agent.toolbox import Toolbox
from semfs.ingest.collection import open_collections
from semfs.ingest.opened import Opened
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from tests.agent.test_mcp_security import run_in
from tests.helpers.mcpclient import data, is_error, text
from tests.helpers.mcphttp import http_server
from tests.helpers.mounting import semfs
from tests.helpers.several import MODELS, two_collections

HIDDEN = "secretrepo"


@contextmanager
def several(store: Path) -> Iterator[SeveralToolbox]:
    with ExitStack() as stack:
        boxes = {}
        for name in MODELS:
            opened = stack.enter_context(open_store(CollectionAddress(name, store=store)))
            box = Toolbox(Opened.over(opened))
            stack.callback(box.close)
            boxes[name] = box
        yield SeveralToolbox(boxes)


def test_one_server_searches_both_collections_each_with_its_own_model(tmp_path: Path) -> None:
    store = two_collections(tmp_path)
    with several(store) as box:
        status = box.status().data["collections"]
        assert {s["collection"]: s["model"] for s in status} == MODELS
        prose = box.search("rotate an API key", details=True)
        assert prose.data["results"][0]["collection"] == "handbook", prose.text
        assert prose.data["results"][0]["path"] == "guide/keys.md"
        assert "handbook/guide/keys.md" in prose.text
        code = box.search("retry zebrafish upload", k=2, details=True)
        assert [h["collection"] for h in code.data["results"]] == [HIDDEN, HIDDEN], code.text
        # A hit's path reads as it is shown; or inside its collection, named.
        shown = box.read(f"{HIDDEN}/src/upload.py")
        assert "def retry_upload" in shown.text and shown.data["path"] == f"{HIDDEN}/src/upload.py"
        assert box.read("src/upload.py", collection=HIDDEN).text == shown.text
        assert box.grep("zebrafish", ignore_case=True).text.startswith(f"{HIDDEN}/")
        listed = box.list().data["entries"]
        assert [e["path"] for e in listed] == list(MODELS)
        scoped = box.search("zebrafish", path=HIDDEN, details=True).data["results"]
        assert scoped and {h["collection"] for h in scoped} == {HIDDEN}
        # Merged as `semfs search -c A -c B` and the Python API merge (the nearest collection's
        # first hit first: for "one hour" not the strongest one's).
        tools = box.search("one hour", k=4, details=True).data["results"]
    with open_collections([CollectionAddress(n, store=store) for n in MODELS]) as both:
        api = both.search("one hour", k=4)
    assert [f"{h['collection']}/{h['path']}" for h in tools] == [h.path for h in api]


def _calls(name: str) -> list[tuple[str, dict[str, Any]]]:
    """Every tool, aimed at collection ``name`` by path and by ``collection``."""
    return [
        ("search", {"query": "retry zebrafish upload", "path": name}),
        ("search", {"query": "zebrafish", "collection": name}),
        ("read", {"path": f"{name}/src/upload.py"}),
        ("read", {"path": "README.md", "collection": name}),
        ("grep", {"pattern": "zebrafish", "path": name}),
        ("grep", {"pattern": "zebrafish", "collection": name}),
        ("list", {"path": name}),
        ("list", {"path": name, "map": True}),
        ("list", {"collection": name, "recursive": True}),
        ("status", {"collection": name}),
        ("write", {"path": f"{name}/notes.md", "text": "hello"}),
    ]


# Every tool over the whole server: what the token sees must hold nothing of the other.
EVERYTHING: list[tuple[str, dict[str, Any]]] = [
    ("search", {"query": "retry zebrafish upload", "k": 10, "details": True}),
    ("grep", {"pattern": "zebrafish|retry_upload", "regex": True, "ignore_case": True}),
    ("list", {"recursive": True}),
    ("list", {"pattern": "*"}),
    ("list", {"map": True}),
    ("status", {}),
]


def test_a_token_for_one_collection_sees_nothing_of_the_other(tmp_path: Path) -> None:
    """Before: no server of several collections (and no token naming collections). The
    collection's own scoped token (`-c handbook`) holds there too, below its collection: before,
    a server of several read only the store's tokens (401)."""
    store = two_collections(tmp_path)
    made = semfs("token", "create", "hb", "--several", "--under", "handbook", "--store", str(store))
    own = semfs("token", "create", "g", "-c", "handbook", "--under", "guide", "--store", str(store))
    with http_server("--store", str(store), "--collections", ",".join(MODELS)) as server:
        seen = {
            token: (
                run_in((server.url, token), _calls(HIDDEN)),
                run_in((server.url, token), _calls("nosuchcoll")),
                run_in((server.url, token), EVERYTHING),
            )
            for token in (made.stdout.strip(), own.stdout.strip())
        }
        admin = run_in((server.url, server.token), EVERYTHING)
    counts = []
    for hidden, absent, overall in seen.values():
        # Aimed at it: the very answer a collection the server does not have gets.
        for call, got, baseline in zip(_calls(HIDDEN), hidden, absent, strict=True):
            assert is_error(got) and is_error(baseline), (call, text(got))
            assert text(got).replace(HIDDEN, "X") == text(baseline).replace("nosuchcoll", "X"), call
        # Over everything: no name, path, line or count of it (the admin token sees them).
        secret = [HIDDEN, "zebrafish", "upload.py", "hash:64"]
        for call, got, full in zip(EVERYTHING, overall, admin, strict=True):
            assert not is_error(got), (call, text(got))
            shown = json.dumps(data(got) or {}) + text(got).replace("retry zebrafish upload", "")
            assert not [s for s in secret if s in shown], (call, shown)
            everything = json.dumps(data(full) or {}) + text(full)
            assert HIDDEN in everything, (call, everything)
        counts.append([(c["collection"], c["documents"]) for c in data(overall[-1])["collections"]])
    # The store's token sees all of handbook; the collection's own its guide/ only.
    assert counts == [[("handbook", 2)], [("handbook", 1)]]


def test_token_create_several_needs_a_collection_first() -> None:
    bad = semfs("token", "create", "t", "--several", "--under", "../x", check=False)
    assert bad.returncode != 0 and "collection name" in bad.stderr
