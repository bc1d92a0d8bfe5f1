"""`semfs mcp --http`'s log holds what needs a person, not one line per normal call (issue 46,
found by use: 98 tracebacks for 96 calls, one per client exit; 94 pydantic warnings per
connection of an `mcp` 2.x client; `status` saying no ingest ran while one embedded). A real
server, real clients."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.helpers import pausedingest
from tests.helpers.mcpclient import connect, data, run, stdio
from tests.helpers.mcphttp import http_server
from tests.helpers.mounting import ingested_one, stop_process, wait_until

pytestmark = pytest.mark.mount  # real servers, as the other MCP tests

WAIT = 60.0


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return ingested_one(tmp_path, "deploy/proxy.md", "# Proxy\n\nServe the docs behind nginx.\n")


def test_well_behaved_clients_leave_no_line_in_the_log(store: Path) -> None:
    with http_server("--store", str(store)) as server:

        async def calls() -> None:
            for _ in range(6):
                async with connect(server.url, server.token) as client:
                    await client.call_tool("search", {"query": "nginx"})
                    await client.call_tool("status", {})

        run(calls)

        # A last session's lines would come as it ends: one more call orders them before it.
        async def last() -> dict:
            async with connect(server.url, server.token) as client:
                return data(await client.call_tool("status", {}))

        run(last)
    log = "".join(server.log[1:])
    assert log == "", log[-3000:]


def test_a_newer_clients_unknown_request_is_answered_without_a_log_flood(store: Path) -> None:
    """An `mcp` 2.x client asks `server/discover` first: the SDK answered it with an error
    and logged pydantic's whole validation report (94 lines) for each connection."""
    with http_server("--store", str(store)) as server:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {server.token}",
        }
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "probe", "version": "2.3.0"},
            },
        }
        with httpx.Client(timeout=WAIT) as client:
            for i in range(3):
                opened = client.post(server.url, json=init, headers=headers)
                assert opened.status_code == 200, opened.text
                session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"]}
                done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                client.post(server.url, json=done, headers=session)
                answer = client.post(
                    server.url,
                    json={"jsonrpc": "2.0", "id": i + 1, "method": "server/discover", "params": {}},
                    headers=session,
                )
                assert answer.status_code == 200 and "error" in answer.text, answer.text
    lines = server.log[1:]
    assert len(lines) == 1 and "'server/discover'" in lines[0], "".join(lines)[-3000:]


def test_status_says_an_ingest_runs_while_it_embeds(tmp_path: Path, store: Path) -> None:
    """A `semfs ingest` paused in its second pass (every document in, vectors under way):
    the status tool says an ingest runs, and how far the vectors are; once it ends, not."""
    src = tmp_path / "more"
    src.mkdir()
    for i in range(80):
        (src / f"d{i:02d}.md").write_text(f"# D {i}\n\n" + "words of a note. " * 400)
    gate = tmp_path / "gate"
    gate.mkdir()
    fresh = tmp_path / "fresh-store"
    command = ["semfs", "ingest", str(src), "--store", str(fresh), "-m", "hash"]
    ingest = pausedingest.spawn(gate, command)
    try:
        wait_until(lambda: (gate / "paused").exists() or ingest.poll() is not None, WAIT, "pause")
        assert ingest.poll() is None

        async def status() -> dict:
            async with connect(stdio("--store", str(fresh))) as client:
                return data(await client.call_tool("status", {}))

        during = run(status)
        assert during["ingest_running"] is True, during
        assert during["embedded_chunks"].endswith(f" of {during['chunks']}"), during
        (gate / "go").touch()
        assert ingest.wait(WAIT) == 0
        after = run(status)
        assert after["ingest_running"] is False and "embedded_chunks" not in after, after
    finally:
        (gate / "go").touch()
        stop_process(ingest)
