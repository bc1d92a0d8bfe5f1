"""`semfs mcp` driven by the official MCP client SDK, over stdio and streamable HTTP.

grep answers are compared with GNU ``grep -rn`` run over a real mount of the same store, in
the mount's own order; search answers with ``semfs search --json``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from conftest import SEMFS
from grepcorpus import LONG_PATH, PATTERNS, boundary_pattern, build, gnu_grep
from mounting import ingest_hash, mounted, semfs, stop_process

from ingest.store import open_store

pytest.importorskip("mcp")
from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.types import CallToolResult  # noqa: E402

pytestmark = pytest.mark.mount
T = TypeVar("T")
TOOLS = {
    "search": ["query", "path", "k", "mode"],
    "read": ["path", "start_line", "end_line"],
    "grep": ["pattern", "path", "regex", "ignore_case", "max_results"],
    "list": ["path", "recursive", "pattern"],
    "status": [],
}
# Room for every line of the comparisons; the default budget is tested on its own.
BIG = ("--budget", "10000000")
QUERIES = [("custom domain dns", "hybrid", ""), ("openapi playground", "keyword", "api-playground")]


def stdio(*args: str) -> StdioServerParameters:
    # The SDK passes only a few variables by default: PYTHONPATH and SEMFS_STORE must go too.
    return StdioServerParameters(command=SEMFS, args=["mcp", *args], env=dict(os.environ))


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(fn)


def text(result: CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert block.type == "text"
    return block.text


def grep_lines(result: CallToolResult) -> list[str]:
    """The grep lines of a grep result: its first ``shown`` lines (notes follow them)."""
    assert not result.is_error, text(result)
    data = result.structured_content
    assert data is not None
    assert data["shown"] == data["matches"]
    return text(result).split("\n")[: data["shown"]]


async def call(client: Client, name: str, **args: Any) -> CallToolResult:
    return await client.call_tool(name, args)


async def tool_calls(client: Client, boundary: str) -> dict[str, Any]:
    """List the tools and call each; the answers the tests compare."""
    tools = (await client.list_tools()).tools
    out: dict[str, Any] = {
        "tools": {t.name: list(t.input_schema.get("properties", {})) for t in tools},
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
        res = await call(client, "search", query=query, mode=mode, path=path, k=5)
        assert not res.is_error, text(res)
        assert text(res).startswith(f"# Search: {query}")
        assert res.structured_content is not None
        out["search"].append(res.structured_content["results"])
    res = await call(client, "read", path=LONG_PATH, start_line=2, end_line=3)
    out["read"] = text(res)
    res = await call(client, "list", path="deploy")
    out["list"] = res.structured_content
    res = await call(client, "list", pattern="*.txt")
    out["list_glob"] = res.structured_content
    res = await call(client, "status")
    out["status"] = res.structured_content
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
        assert res.is_error
        out["errors"][name + json.dumps(args)] = text(res)
    res = await call(client, "status")
    assert not res.is_error
    return out


def check_answers(out: dict[str, Any], mnt: Path, src: Path, boundary: str) -> None:
    assert out["tools"] == TOOLS
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
    with open_store(store) as s:
        boundary = boundary_pattern(s)
    with mounted(tmp_path / "mnt", "--store", str(store)) as m:

        async def session() -> dict[str, Any]:
            async with Client(stdio("--store", str(store), *BIG)) as client:
                return await tool_calls(client, boundary)

        out = run(session)
        assert "through the mounted daemon" in out["status"]["location"]
        check_answers(out, m.path, corpus, boundary)
        assert out["search"] == semfs_search("--store", str(store))


@contextmanager
def http_server(*args: str) -> Iterator[str]:
    with socket.socket() as sock:  # a free loopback port
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [SEMFS, "mcp", "--http", f"127.0.0.1:{port}", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"semfs mcp --http exited {proc.returncode}: {proc.stderr.read()!r}")
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                pytest.fail("semfs mcp --http did not listen within 60 s")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(proc)  # type: ignore[arg-type]


def test_http_on_a_server_store(tmp_path: Path, corpus: Path) -> None:
    """qdrant-client local mode standing in for a server, over streamable HTTP."""
    url = f"file://{tmp_path / 'qdrant'}"
    ingest_hash(corpus, url=url)
    with open_store(url=url) as s:
        boundary = boundary_pattern(s)
    with http_server("--url", url, *BIG) as address:

        async def session() -> dict[str, Any]:
            async with Client(address) as client:
                return await tool_calls(client, boundary)

        out = run(session)
    # Local mode admits one process at a time: mount and search after the server stopped.
    with mounted(tmp_path / "mnt", "--url", url) as m:
        check_answers(out, m.path, corpus, boundary)
    assert out["search"] == semfs_search("--url", url)


def test_stdio_owning_the_store_serves_ingest(tmp_path: Path, corpus: Path) -> None:
    """Without a mount, semfs mcp owns the embedded store and serves `semfs ingest`."""
    store = tmp_path / "store"
    ingest_hash(corpus, store)

    async def session() -> tuple[list[str], list[str], str]:
        async with Client(stdio("--store", str(store))) as client:
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
