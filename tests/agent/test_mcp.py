"""`semfs mcp` driven by the official MCP client SDK, over stdio and streamable HTTP.

grep answers are compared with GNU ``grep -rn`` run over a real mount of the same store, in
the mount's own order; search answers with ``semfs search --json``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client

from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from tests.helpers import NOBODY, SEMFS
from tests.helpers.grepcorpus import LONG_PATH, PATTERNS, boundary_pattern, build, gnu_grep
from tests.helpers.mcpclient import (
    attr,
    call,
    connect,
    data,
    grep_lines,
    is_error,
    run,
    stdio,
    text,
)
from tests.helpers.mcphttp import http_server
from tests.helpers.mounting import ingest_hash, mounted, semfs, stop_process

pytestmark = pytest.mark.mount
TOOLS = {
    "search": ["query", "path", "k", "mode", "more", "details"],
    "read": ["path", "start_line", "end_line", "pages"],
    "grep": ["pattern", "path", "regex", "ignore_case", "max_results", "context"],
    "list": ["path", "recursive", "pattern", "map", "page"],
    "status": [],
}
# Room for every line of the comparisons; the default budget is tested on its own.
BIG = ("--budget", "10000000")
QUERIES = [("custom domain dns", "hybrid", ""), ("openapi playground", "keyword", "api-playground")]


async def tool_calls(client: ClientSession, boundary: str) -> dict[str, Any]:
    """List the tools and call each; the answers the tests compare."""
    tools = (await client.list_tools()).tools
    out: dict[str, Any] = {
        "tools": {t.name: list(attr(t, "input_schema").get("properties", {})) for t in tools},
        "descriptions": {t.name: t.description or "" for t in tools},
    }
    out["grep"] = [
        grep_lines(
            await call(client, "grep", pattern=p, regex=r, ignore_case=i, max_results=10_000)
        )
        for p, r, i in [*PATTERNS, (boundary, False, False)]
    ]
    out["grep_file"] = grep_lines(
        await call(client, "grep", pattern="DNS", path="customize/custom-domain.mdx")
    )
    out["search"] = []
    for query, mode, path in QUERIES:
        detailed = await call(
            client, "search", query=query, mode=mode, path=path, k=5, details=True
        )
        assert not is_error(detailed), text(detailed)
        assert text(detailed).startswith(f"# Search: {query}")
        out["search"].append(data(detailed)["results"])
        # Without details, no structured content: clients that get both pass the model the
        # structured content alone (Claude Code, VS Code) or both, so the text is all.
        res = await call(client, "search", query=query, mode=mode, path=path, k=5)
        assert data(res) is None and text(res) == text(detailed)
    # More stays one parameter away, as @more on a mount and --more in semfs search.
    res = await call(client, "search", query=QUERIES[0][0], k=5, more=True, details=True)
    assert not is_error(res) and " · more · " in text(res).split("\n")[1], text(res)
    out["search_more"] = data(res)["results"]
    res = await call(client, "read", path=LONG_PATH, start_line=2, end_line=3)
    out["read"] = text(res)
    res = await call(client, "list", path="deploy")
    out["list"] = data(res)
    res = await call(client, "list", pattern="*.txt")
    out["list_glob"] = data(res)
    res = await call(client, "status")
    out["status"] = data(res)
    # Bad input: one clear message each, and the server keeps answering.
    out["errors"] = {}
    for name, args in [
        ("grep", {"pattern": "(", "regex": True}),
        ("read", {"path": "no/such/file.md"}),
        ("list", {"path": "../outside"}),
        ("search", {"query": "x", "k": 0}),
        ("search", {"query": "x", "mode": "fuzzy"}),
        ("read", {"path": "deploy"}),
    ]:
        res = await call(client, name, **args)
        assert is_error(res)
        out["errors"][name + json.dumps(args)] = text(res)
    res = await call(client, "status")
    assert not is_error(res)
    return out


def check_answers(out: dict[str, Any], mnt: Path, src: Path, boundary: str, *, write: bool) -> None:
    tools = dict(out["tools"])
    # Offered over HTTP (a token may be made --write) and by a --writable server only.
    assert tools.pop("write", None) == (["path", "text", "mode"] if write else None)
    assert tools == TOOLS
    assert "How to work" in out["descriptions"]["search"]  # the guide, for the agent
    assert "grep -rn" in out["descriptions"]["grep"]
    for got, (p, r, i) in zip(out["grep"], [*PATTERNS, (boundary, False, False)], strict=True):
        assert got == gnu_grep(mnt, p, r, i, mount_order=False), (p, r, i)
    assert any(out["grep"]) and out["grep"][-1], "the boundary pattern must match"
    one = "customize/custom-domain.mdx"
    assert out["grep_file"] == gnu_grep(mnt, "DNS", False, False, one, mount_order=False)
    # read: numbered, the text after the tab byte-identical to the mount's lines.
    lines = (mnt / LONG_PATH).read_text().split("\n")
    assert out["read"] == f"2\t{lines[1]}\n3\t{lines[2]}\n"
    assert out["list"]["entries"] == [
        {"path": f"deploy/{n}", "type": "file", "size": (mnt / "deploy" / n).stat().st_size}
        for n in sorted(os.listdir(mnt / "deploy"))
    ]
    assert [e["path"] for e in out["list_glob"]["entries"]] == [LONG_PATH]
    assert out["status"]["documents"] == sum(len(f) for _, _, f in os.walk(src))
    messages = list(out["errors"].values())
    assert all("\n" not in m and m for m in messages), messages
    assert "bad regular expression" in messages[0]
    assert "no such file" in messages[1]
    assert "outside the collection" in messages[2]
    assert "k must be between 1 and 100" in messages[3]
    assert "unknown mode" in messages[4]
    assert "is a directory" in messages[5]


def semfs_search(*store_args: str) -> list[list[dict[str, Any]]]:
    out = []
    for query, mode, path in QUERIES:
        args = ["search", query, "--mode", mode, "-k", "5", "--json", *store_args]
        if path:
            args += ["--under", path]
        out.append(json.loads(semfs(*args).stdout))
    return out


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return build(tmp_path / "src")


def test_stdio_through_a_mounted_daemon(tmp_path: Path, corpus: Path) -> None:
    """Embedded store owned by a mount: semfs mcp goes through the daemon's socket."""
    store = tmp_path / "store"
    ingest_hash(corpus, store)
    with open_store(CollectionAddress(store=store)) as s:
        boundary = boundary_pattern(s)
    with mounted(tmp_path / "mnt", "--store", str(store)) as m:

        async def session() -> dict[str, Any]:
            async with connect(stdio("--store", str(store), *BIG)) as client:
                return await tool_calls(client, boundary)

        out = run(session)
        assert "through the mounted daemon" in out["status"]["location"]
        check_answers(out, m.path, corpus, boundary, write=False)  # stdio, not --writable
        assert out["search"] == semfs_search("--store", str(store))
        more = ["search", QUERIES[0][0], "-k", "5", "--more", "--json", "--store", str(store)]
        assert out["search_more"] == json.loads(semfs(*more).stdout)
        lines = [
            sum(len(e["lines"]) for h in r for e in h["excerpts"])
            for r in (out["search"][0], out["search_more"])
        ]
        assert lines[1] > lines[0], lines


def test_http_on_a_server_store(tmp_path: Path, corpus: Path) -> None:
    """qdrant-client local mode standing in for a server, over streamable HTTP."""
    url = f"file://{tmp_path / 'qdrant'}"
    ingest_hash(corpus, url=url)
    with open_store(CollectionAddress(url=url)) as s:
        boundary = boundary_pattern(s)
    with http_server("--url", url, *BIG) as server:

        async def session() -> dict[str, Any]:
            async with connect(server.url, server.token) as client:
                return await tool_calls(client, boundary)

        out = run(session)
    # Local mode admits one process at a time: mount and search after the server stopped.
    with mounted(tmp_path / "mnt", "--url", url) as m:
        check_answers(out, m.path, corpus, boundary, write=True)  # HTTP: a token may write
    assert out["search"] == semfs_search("--url", url)


def test_stdio_owning_the_store_serves_ingest(tmp_path: Path, corpus: Path) -> None:
    """Without a mount, semfs mcp owns the embedded store and serves `semfs ingest`."""
    store = tmp_path / "store"
    ingest_hash(corpus, store)

    async def session() -> tuple[list[str], list[str], str]:
        async with connect(stdio("--store", str(store))) as client:
            before = grep_lines(await call(client, "grep", pattern="fresh words"))
            (corpus / "new.md").write_text("# New\n\nsome fresh words here\n")
            # semfs ingest finds the shard locked by this server and writes through it.
            await anyio.to_thread.run_sync(
                lambda: semfs("ingest", str(corpus), "--store", str(store), "--model", "hash")
            )
            deadline = time.monotonic() + 10
            while True:
                after = grep_lines(await call(client, "grep", pattern="fresh words"))
                if after or time.monotonic() > deadline:
                    break
                await anyio.sleep(0.2)
            status = await call(client, "status")
            common = await call(client, "grep", pattern="e", max_results=10_000)
            return before, after, text(status), common

    before, after, status, common = run(session)
    assert before == []
    assert after == ["new.md:3:some fresh words here"]
    assert "location:" in status
    # The default budget: 30 KB at a line end, then a note on how to narrow the call.
    body = text(common).encode()
    assert 29_000 < len(body) < 30_300
    assert body.decode().endswith("use a narrower path or a more specific pattern]\n")


def test_smolagents_tool_collection(tmp_path: Path, corpus: Path) -> None:
    """smolagents loads the tools from `semfs mcp` and calls them; no language model."""
    smolagents = pytest.importorskip("smolagents", reason="smolagents is not installed")
    try:
        import mcpadapt.core  # noqa: F401  smolagents' MCP bridge
    except ImportError as exc:
        pytest.skip(f"smolagents cannot load MCP tools here: {exc}")
    store = tmp_path / "store"
    ingest_hash(corpus, store)
    params = stdio("--store", str(store))
    with smolagents.ToolCollection.from_mcp(
        params, trust_remote_code=True, structured_output=False
    ) as tools:
        by_name = {t.name: t for t in tools.tools}
        assert set(by_name) == set(TOOLS)
        assert list(by_name["grep"].inputs) == TOOLS["grep"]
        found = by_name["search"](query="custom domain dns", k=3)
        lines = by_name["grep"](pattern="München", max_results=10)
    want = semfs_search("--store", str(store))[0]
    assert str(found).startswith("# Search: custom domain dns")
    for hit in want[:3]:
        # The text shows the strength to 2 places, the JSON to 3: 0.5049 is 0.50 there and
        # 0.505 here, which is 0.51 at 2 places. The same hit, the same strength.
        line = re.search(rf"\n{hit['rank']}\. {re.escape(hit['path'])} \((\S+) (\w+)\)", str(found))
        assert line is not None, (hit, str(found))
        assert (
            abs(float(line.group(1)) - hit["strength"]) <= 0.006 and line.group(2) == hit["match"]
        )
    assert str(lines).rstrip("\n").split("\n") == gnu_grep(corpus, "München", False, False)


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    proc = semfs("mcp", "--http", "8765", check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "Error: --http takes HOST:PORT, such as 127.0.0.1:8765, not '8765'"
    )
    proc = semfs("mcp", "--store", str(tmp_path / "nothing"), check=False)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "semfs ingest" in proc.stderr


def test_client_gone_mid_call_leaves_nothing(tmp_path: Path, corpus: Path) -> None:
    """A client that closes the pipe during a call: the server exits and frees the store."""
    store = tmp_path / "store"
    ingest_hash(corpus, store)
    proc = subprocess.Popen(
        [SEMFS, "mcp", "--store", str(store)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "grep", "arguments": {"pattern": "[a-z]+", "regex": True}},
        },
    ]
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    proc.stdin.close()  # gone, with the call in flight
    try:
        assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        stop_process(proc)  # type: ignore[arg-type]
    assert not (store / "docs" / "daemon.sock").exists()
    with open_store(
        CollectionAddress(store=store)
    ) as s:  # neither locked nor served by a leftover process
        assert type(s).__name__ == "EdgeStore"


def test_the_server_is_semfs_and_its_search_text_has_no_mount_hints(
    tmp_path: Path, corpus: Path
) -> None:
    """It reported the MCP SDK's version (1.30.0) as its own, and its search text told
    clients to follow links (NN-name) and name folders, which a tool client has none of."""
    from semfs.ingest import __version__

    store = tmp_path / "store"
    ingest_hash(corpus, store)

    async def session() -> tuple[Any, str, str, str]:
        params = stdio("--store", str(store))
        async with stdio_client(params) as streams, ClientSession(streams[0], streams[1]) as c:
            init = await c.initialize()
            found = await c.call_tool("search", {"query": "error message"})
            empty = await c.call_tool("search", {"query": "   "})
            texts = found.content[0].text, empty.content[0].text
            return attr(init, "server_info"), attr(init, "instructions"), *texts

    info, instructions, found, empty = run(session)
    assert info.name == "semfs" and info.version == __version__
    # No legend in the search text: the server's instructions carry it, once.
    assert "strong >= 0.5" in instructions and "read(path, start_line, end_line)" in instructions
    assert "strong" not in found.split("\n\n", 1)[0] and "match 0-1" not in found
    for mount_only in ("NN-name", "sed -n", "@full", "Name the folder"):
        assert mount_only not in found and mount_only not in empty
    assert "Give a question as query." in empty


def test_the_server_starts_in_a_folder_its_user_cannot_read(tmp_path: Path) -> None:
    """Started in a folder its user may not enter (another user's cwd kept across setpriv),
    the server still starts: nothing of its working folder is read (the SDK's `.env`)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to act as another user")
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    start = "from semfs.fusefs.agent.mcp import _Server; print(_Server('semfs').name)"
    done = subprocess.run(
        [*AS_NOBODY, sys.executable, "-c", start],
        cwd=closed,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (done.returncode, done.stdout) == (0, "semfs\n"), done.stderr[-2000:]
