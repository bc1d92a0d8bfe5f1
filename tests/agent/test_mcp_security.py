"""`semfs mcp` under attack: who may call it over HTTP, what a scoped token sees, hostile
regular expressions, output budgets, abandoned sessions, and the CLI's edges.

Servers are real (`semfs mcp` processes on free loopback ports) and are driven by real clients:
raw HTTP (httpx) for what an attacker sends, the MCP SDK's client for what an agent does.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.helpers import SAMPLE_CORPUS, SEMFS
from tests.helpers.grepcorpus import gnu_grep
from tests.helpers.mcpclient import call, connect, data, is_error, stdio, text
from tests.helpers.mcphttp import http_server
from tests.helpers.mounting import ingest_hash, semfs

pytestmark = pytest.mark.mount
NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
PAGE = "deploy/reverse-proxy.mdx"  # byte for byte the page of ../shared/corpora/mintlify-docs
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def post(url: str, token: str | None = None, body: Any = INIT, **headers: str) -> httpx.Response:
    sent = dict(MCP_HEADERS, **headers)
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    return httpx.post(url, json=body, headers=sent, timeout=30)


def run_in(client_args: tuple[str, str], calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Each call's result over streamable HTTP with the given (url, token)."""
    url, token = client_args

    async def session() -> list[Any]:
        async with connect(url, token) as client:
            return [await call(client, name, **args) for name, args in calls]

    return anyio.run(session)


@pytest.fixture
def sample_store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    ingest_hash(SAMPLE_CORPUS, store)
    return store


def test_http_needs_the_token(open_tmp: Path) -> None:
    """Before: any local user read every document (0600 ones too) through read and grep."""
    src = open_tmp / "src"
    shutil.copytree(SAMPLE_CORPUS / "deploy", src / "deploy")
    (src / "private.md").write_text("# Private\n\nthe salary table\n")
    (src / "private.md").chmod(0o600)
    store = open_tmp / "store"
    ingest_hash(src, store)
    # The store folders opened to all, so that only the token file's own mode protects it.
    subprocess.run(["chmod", "-R", "go+rX", str(store)], check=True)
    with http_server("--store", str(store)) as server:
        assert server.token_path == store / "docs" / "mcp.token"
        assert stat.S_IMODE(server.token_path.stat().st_mode) == 0o600
        read_private = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "read", "arguments": {"path": "private.md"}},
        }
        for token in (None, "semfs_" + "x" * 43, server.token + "x", server.token[:-1]):
            for body in (INIT, read_private):
                answer = post(server.url, token, body)
                assert answer.status_code == 401, (token, answer.text)
                assert "salary" not in answer.text
        # Another local user cannot read the token file.
        peek = subprocess.run(
            [*AS_NOBODY, "cat", str(server.token_path)],
            capture_output=True,
            check=False,
        )
        assert peek.returncode != 0 and b"semfs_" not in peek.stdout
        # The admin token reads as before.
        (res,) = run_in((server.url, server.token), [("read", {"path": "private.md"})])
        assert not is_error(res) and "the salary table" in text(res)
    started = [line for line in server.log if "new token in " in line]
    assert len(started) == 1 and server.url in started[0]


def test_a_scoped_token_reads_nothing_outside_its_folder_through_a_link(open_tmp: Path) -> None:
    """Issue 29: a token scoped to drop/ read, grepped and found what links in drop/ pointed
    at: a file in a folder only root may enter, and one in an open sibling folder."""
    src = open_tmp / "src"
    for name in ("private", "drop", "open"):
        (src / name).mkdir(parents=True)
    (src / "private" / "p.md").write_text("# P\n\nPRIVATE salary table\n")
    (src / "open" / "o.md").write_text("# O\n\nOUTSIDER page elsewhere\n")
    (src / "drop" / "mine.md").write_text("# Mine\n\nthe drop's own page\n")
    (src / "private").chmod(0o700)
    (src / "drop").chmod(0o777)
    for link, target in (("x.md", "../private/p.md"), ("y.md", "../open/o.md")):
        planted = subprocess.run([*AS_NOBODY, "ln", "-s", target, str(src / "drop" / link)])
        assert planted.returncode == 0
    store = open_tmp / "store"
    ingest_hash(src, store)
    token = semfs("token", "create", "drop", "--under", "drop", "--store", str(store)).stdout
    with http_server("--store", str(store)) as server:
        results = run_in(
            (server.url, token.strip()),
            [
                ("read", {"path": "drop/x.md"}),
                ("read", {"path": "drop/y.md"}),
                ("grep", {"pattern": "PRIVATE|OUTSIDER", "regex": True}),
                ("search", {"query": "PRIVATE salary table", "mode": "keyword", "details": True}),
                (
                    "search",
                    {"query": "OUTSIDER page elsewhere", "mode": "keyword", "details": True},
                ),
                ("read", {"path": "drop/mine.md"}),
            ],
        )
    for res in results[:3]:
        assert "PRIVATE" not in text(res) and "OUTSIDER" not in text(res), text(res)
    for res in results[3:5]:  # the results text repeats the query: look at the hits
        found = json.dumps(data(res)["results"])
        assert "PRIVATE" not in found and "OUTSIDER" not in found, found
    assert "the drop's own page" in text(results[5])


def test_host_and_origin_checked_on_every_bind(sample_store: Path) -> None:
    """Before: on 0.0.0.0 a foreign Host and Origin got 200 (loopback binds: 421/403)."""
    for bind in ("0.0.0.0", "127.0.0.1"):
        with http_server("--store", str(sample_store), "--allow-host", "docs.lan", bind=bind) as s:
            here = f"127.0.0.1:{s.port}"
            assert post(s.url, s.token).status_code == 200
            assert post(s.url, s.token, Host="evil.example.com").status_code == 421
            assert post(s.url, s.token, Host=f"evil.example.com:{s.port}").status_code == 421
            assert post(s.url, s.token, Origin="http://evil.example.com").status_code == 403
            assert post(s.url, s.token, Host=f"docs.lan:{s.port}").status_code == 200
            origin = post(s.url, s.token, Origin=f"http://docs.lan:{s.port}", Host=here)
            assert origin.status_code == 200
            # Without the token a foreign Host learns nothing either.
            assert post(s.url, None, Host="evil.example.com").status_code in (401, 421)
        if bind == "0.0.0.0":
            assert any("all interfaces" in line for line in s.log)


def _names(result: Any, key: str) -> list[str]:
    return [e["path"] for e in data(result)[key]]


def test_a_scoped_token_neither_sees_nor_infers_outside(sample_store: Path) -> None:
    store = ["--store", str(sample_store)]
    made = semfs("token", "create", "ci", "--under", "deploy", *store)
    token = made.stdout.strip()
    assert token.startswith("semfs_") and "deploy" in made.stderr
    assert semfs("token", "list", *store).stdout.split("\t")[0] == "ci"
    tokens_file = sample_store / "docs" / "mcp-tokens.json"
    assert stat.S_IMODE(tokens_file.stat().st_mode) == 0o600
    assert token not in tokens_file.read_text()  # only its digest is kept
    inside = sorted(
        p.relative_to(SAMPLE_CORPUS).as_posix() for p in SAMPLE_CORPUS.rglob("*") if p.is_file()
    )
    deploy = [p for p in inside if p.startswith("deploy/")]
    outside = "customize/custom-domain.mdx"
    outside_word = "Mermaid"  # outside deploy/ only
    assert gnu_grep(SAMPLE_CORPUS, outside_word, False, False)
    assert not gnu_grep(SAMPLE_CORPUS / "deploy", outside_word, False, False)
    outside_title = (SAMPLE_CORPUS / outside).read_text().split("title:")[1].split("\n")[0]
    with http_server(*store) as server:
        results = run_in(
            (server.url, token),
            [
                ("list", {}),
                ("list", {"recursive": True}),
                ("list", {"pattern": "*.mdx"}),
                ("status", {}),
                ("grep", {"pattern": outside_word}),
                ("grep", {"pattern": "e", "regex": True, "max_results": 10_000}),
                ("search", {"query": outside_title, "k": 100, "details": True}),
                ("search", {"query": outside_title, "k": 100, "mode": "keyword", "details": True}),
                # Outside paths and missing ones must answer alike.
                ("read", {"path": outside}),
                ("read", {"path": "customize/no-such-page.mdx"}),
                ("list", {"path": "customize"}),
                ("list", {"path": "no-such-folder"}),
                ("grep", {"pattern": "DNS", "path": outside}),
                ("grep", {"pattern": "DNS", "path": "customize/no-such-page.mdx"}),
                ("search", {"query": "dns", "path": "customize"}),
                ("search", {"query": "dns", "path": "no-such-folder"}),
            ],
        )
        listing, recursive, globbed, status, grep_word, grep_all, hybrid, keyword = results[:8]
        assert _names(listing, "entries") == ["deploy"]
        assert {p for p in _names(recursive, "entries") if p != "deploy"} == set(deploy)
        assert _names(globbed, "entries") == deploy
        assert data(status)["documents"] == len(deploy)
        assert data(status)["bytes"] == sum((SAMPLE_CORPUS / p).stat().st_size for p in deploy)
        assert data(status)["scope"] == ["deploy"]
        # Before: "location: <the store's path>" told a scoped token where the store lives.
        assert "location" not in data(status)
        assert str(sample_store) not in text(status)
        assert data(grep_word)["matches"] == 0 and data(grep_word)["documents_in_scope"] == 17
        assert all(
            line.startswith("deploy/")
            for line in text(grep_all).split("\n")[:-1]
            if not line.startswith("[")
        )
        for res in (hybrid, keyword):
            hits = [h["path"] for h in data(res)["results"]]
            assert hits and all(p.startswith("deploy/") for p in hits), hits
            assert f". {outside} (" not in text(res)  # the ranked list names no outside page
            assert " · in deploy/ · " in text(res)  # not "in the whole collection"
        errors = results[8:]
        assert all(is_error(r) for r in errors)
        for seen, missing, real, fake in [
            (errors[0], errors[1], outside, "customize/no-such-page.mdx"),
            (errors[2], errors[3], "customize", "no-such-folder"),
            (errors[4], errors[5], outside, "customize/no-such-page.mdx"),
            (errors[6], errors[7], "customize", "no-such-folder"),
        ]:
            assert text(seen).replace(real, "X") == text(missing).replace(fake, "X")
        # The admin token still sees everything; a revoked token is refused at once.
        (whole,) = run_in((server.url, server.token), [("status", {})])
        assert data(whole)["documents"] == len(inside)
        assert post(server.url, token).status_code == 200
        semfs("token", "revoke", "ci", *store)
        assert post(server.url, token).status_code == 401
    assert semfs("token", "revoke", "ci", *store, check=False).returncode == 1


def test_token_files_others_can_read_are_refused(sample_store: Path, tmp_path: Path) -> None:
    loose = tmp_path / "loose.token"
    loose.write_text("semfs_" + "a" * 43 + "\n")
    loose.chmod(0o644)
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    address = f"127.0.0.1:{port.getsockname()[1]}"
    port.close()
    proc = semfs(
        "mcp",
        "--http",
        address,
        "--store",
        str(sample_store),
        "--token-file",
        str(loose),
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "can be read by others" in proc.stderr
    assert f"chmod 600 {loose}" in proc.stderr
    # A link is refused too, even to a private file: it could be swapped under us.
    private = tmp_path / "private.token"
    private.write_text("semfs_" + "b" * 43 + "\n")
    private.chmod(0o600)
    link = tmp_path / "link.token"
    link.symlink_to(private)
    proc = semfs(
        "mcp",
        "--http",
        address,
        "--store",
        str(sample_store),
        "--token-file",
        str(link),
        check=False,
    )
    assert proc.returncode == 1 and "is a symlink" in proc.stderr


def test_the_catastrophic_regex_answers_and_blocks_nothing(tmp_path: Path) -> None:
    """Before: grep (-+)+$ on this page ran for more than 11 minutes, and the server answered
    nothing else meanwhile. The hostile line makes (-|--)+$ backtrack about 1.6**40 times in
    any backtracking engine: only RE2 answers it (this test passed with RE2 disabled before
    the line was added)."""
    src = tmp_path / "src"
    shutil.copytree(SAMPLE_CORPUS / "deploy", src / "deploy")
    (src / "hostile.md").write_text("# Dashes\n\n" + "-" * 40 + "x\n")
    sample_store = tmp_path / "store"
    ingest_hash(src, sample_store)
    every = len(gnu_grep(src, "(-|--)+$", True, False))
    assert every
    want = [
        f"{PAGE}:{line}"
        for line in gnu_grep(
            SAMPLE_CORPUS / "deploy", "(-+)+$", True, False, "reverse-proxy.mdx", mount_order=False
        )
    ]
    want = [w.replace(f"{PAGE}:reverse-proxy.mdx:", f"{PAGE}:") for w in want]
    assert want  # the front matter's --- lines

    async def session() -> tuple[Any, Any, list[str]]:
        async with connect(stdio("--store", str(sample_store))) as client:
            with anyio.fail_after(120):
                fast = await call(client, "grep", pattern="(-+)+$", regex=True, path=PAGE)
                linear = await call(client, "grep", pattern="(-|--)+$", regex=True)
                assert not is_error(linear), text(linear)
                assert data(linear)["matches"] == every  # the front matters' --- lines
            # One that RE2 cannot run (\b): it backtracks until its deadline, while the
            # server keeps answering.
            order: list[str] = []
            slow: list[Any] = []

            async def slow_grep() -> None:
                slow.append(await call(client, "grep", pattern=r"(-|--)+\b$", regex=True))
                order.append("grep")

            async def status() -> None:
                await anyio.sleep(0.5)  # the grep is under way
                await call(client, "status")
                order.append("status")

            with anyio.fail_after(300):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(slow_grep)
                    tg.start_soon(status)
            return fast, slow[0], order

    fast, slow, order = anyio.run(session)
    assert not is_error(fast) and text(fast).split("\n")[: data(fast)["shown"]] == want
    assert order == ["status", "grep"]
    assert is_error(slow)
    message = text(slow)
    assert "pattern too slow, narrow it" in message and "\n" not in message


def _within(result: Any, budget: int) -> int:
    size = len(text(result).encode()) + len(json.dumps(data(result), ensure_ascii=False).encode())
    assert size <= budget, size
    return size


def test_every_tool_stays_within_the_budget(tmp_path: Path) -> None:
    """Before: read of a page with a 200 KB line returned 200 KB; search's structured content
    was 128-208 KB for k=100 or a one-letter query."""
    src = tmp_path / "src"
    shutil.copytree(SAMPLE_CORPUS, src)
    (src / "long.md").write_text("# Long\n\n" + "word " * 40_000 + "\n\nafter\n")
    for i in range(1200):
        (src / "many" / f"{i // 100:02d}").mkdir(parents=True, exist_ok=True)
        (src / "many" / f"{i // 100:02d}" / f"page-{i:04d}.md").write_text(f"# Page {i}\n\nx\n")
    store = tmp_path / "store"
    ingest_hash(src, store)
    budget = 30_000

    async def session() -> list[Any]:
        async with connect(stdio("--store", str(store))) as client:
            return [
                await call(client, "read", path="long.md"),
                await call(client, "read", path="long.md", start_line=3),
                # details: the whole form, passages included (the compact one fits).
                await call(client, "search", query="a", k=100, details=True),
                await call(
                    client, "search", query="deploy preview custom domain", k=100, details=True
                ),
                await call(client, "grep", pattern="e", max_results=10_000),
                await call(client, "list", recursive=True),
                await call(client, "status"),
            ]

    results = anyio.run(session)
    assert not any(is_error(r) for r in results)
    read_all, read_long, one_letter, hundred, grep_e, listing, status = results
    for res in results:
        _within(res, budget)
    # The lines before the long one, then the call that goes on; then the long one, cut.
    assert text(read_all).startswith("1\t# Long\n2\t\n")
    assert "read(path='long.md', start_line=3)" in text(read_all)
    assert text(read_long).startswith("3\tword word") and "[line 3 cut at" in text(read_long)
    assert data(read_long)["line_cut"] == 3
    assert "read(path='long.md', start_line=4)" in text(read_long)
    for res in (one_letter, hundred, listing):
        assert "within the output budget" in data(res)["cut"], data(res).get("cut")
        assert "[output cut at" in text(res) or len(text(res)) < budget
    assert len(data(listing)["entries"]) < 1200
    assert "[output cut at" in text(grep_e)
    assert data(status)["documents"] == 1200 + 43


def test_idle_http_sessions_expire(sample_store: Path) -> None:
    """Before: 2,000 abandoned sessions held 102 MB for good (sessions lived 30 minutes)."""
    with http_server("--store", str(sample_store), "--session-timeout", "1") as server:
        opened = post(server.url, server.token)
        assert opened.status_code == 200
        session = opened.headers["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        # Each ping is a request, so it restarts the idle clock: wait longer each time.
        for idle in (2, 4, 8, 16, 32):
            time.sleep(idle)
            answer = post(server.url, server.token, ping, **{"mcp-session-id": session})
            if answer.status_code == 404:
                break
        assert answer.status_code == 404, "an idle session outlived its timeout"


def test_one_token_cannot_lock_the_others_out(sample_store: Path) -> None:
    """Before: 256 initialize calls with no DELETE filled the session table, and every client,
    the admin token's included, got 503 "Too many open sessions" until they idled out (600 s)."""
    store = ["--store", str(sample_store)]
    greedy = semfs("token", "create", "greedy", "--under", "deploy", *store).stdout.strip()
    other = semfs("token", "create", "other", "--under", "deploy", *store).stdout.strip()
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    with http_server(*store) as server:
        opened = []
        for _ in range(300):  # past the table's 256, never ending one
            answer = post(server.url, greedy)
            assert answer.status_code == 200, (len(opened), answer.text)
            opened.append(answer.headers["mcp-session-id"])
        # Everyone else still gets in.
        assert post(server.url, server.token).status_code == 200
        mine = post(server.url, other)
        assert mine.status_code == 200

        # The greedy token kept its newest sessions (16) and lost its oldest ones.
        def status_of(token: str, session: str) -> int:
            return post(server.url, token, ping, **{"mcp-session-id": session}).status_code

        assert status_of(greedy, opened[-1]) == 200
        assert status_of(greedy, opened[-16]) == 200
        assert status_of(greedy, opened[0]) == 404
        assert status_of(greedy, opened[-17]) == 404
        # A revoked token's sessions close, an open GET stream included.
        stream_headers = {
            "Accept": "text/event-stream",
            "Authorization": f"Bearer {other}",
            "mcp-session-id": mine.headers["mcp-session-id"],
        }
        with (
            httpx.Client(timeout=httpx.Timeout(30.0)) as client,
            client.stream("GET", server.url, headers=stream_headers) as stream,
        ):
            assert stream.status_code == 200
            semfs("token", "revoke", "other", *store)
            # The server pings an open stream every 15 s: read until it ends, or 45 s.
            deadline = time.monotonic() + 45
            try:
                for _ in stream.iter_bytes():
                    if time.monotonic() > deadline:
                        pytest.fail("the revoked token's stream stayed open for 45 s")
            except httpx.ReadTimeout:
                pytest.fail("the revoked token's stream stayed open for 30 s")


def test_slow_clients_neither_lock_out_a_normal_request_nor_flood_the_log(
    sample_store: Path,
) -> None:
    """Before: under a 256 open-files limit, 300 connections with half-sent request heads made
    every accept fail (EMFILE, a traceback each in the log) and a normal request time out;
    half-sent heads were never timed out."""
    slow: list[socket.socket] = []
    with http_server("--store", str(sample_store), open_files=256) as server:
        try:
            for _ in range(300):  # more than the server may hold open
                conn = socket.create_connection(("127.0.0.1", server.port), timeout=30)
                conn.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and no more
                slow.append(conn)
            # A normal client still gets in and is answered.
            answer = httpx.post(
                server.url,
                json=INIT,
                headers={**MCP_HEADERS, "Authorization": f"Bearer {server.token}"},
                timeout=60,
            )
            assert answer.status_code == 200
            # Every half-sent head is closed: at the cap (the longest waiting first), or at
            # the head deadline. Each recv waits at most 30 s (longer than the deadline).
            for conn in slow:
                conn.settimeout(30)
                with contextlib.suppress(ConnectionResetError):
                    assert conn.recv(1) == b""
        finally:
            for conn in slow:
                conn.close()
        log = "".join(server.log)
    assert "Traceback" not in log and "Too many open files" not in log, log[-2000:]
    refused = [line for line in log.splitlines() if "refused" in line]
    assert refused and all("HTTP connection" in line for line in refused), log[-2000:]
    assert sum(int(line.split("refused ")[1].split()[0]) for line in refused) >= 300 - 192


def test_port_in_use_is_one_error_line(sample_store: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = semfs(
            "mcp", "--http", f"127.0.0.1:{port}", "--store", str(sample_store), check=False
        )
    assert proc.returncode == 1
    assert proc.stderr == f"Error: cannot listen on 127.0.0.1:{port}: the port is in use\n"
    # Before: the failed start had written a new admin token all the same.
    assert not (sample_store / "docs" / "mcp.token").exists()


def test_a_closed_stdout_ends_quietly(sample_store: Path) -> None:
    """`semfs search ... | head -1`: before, "Error: BrokenPipeError" and exit 1."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte
    try:
        proc = subprocess.run(
            [SEMFS, "search", "custom domain", "--store", str(sample_store)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert proc.stderr == b""
    assert proc.returncode == -signal.SIGPIPE  # as `cat` or `grep` end there


PYTHON_NAMES = ("Error:", "Exception", "Traceback", "recursion depth", "codec")


def test_hostile_arguments_get_one_line_that_names_the_problem(tmp_path: Path) -> None:
    """Before: "search failed: UnicodeEncodeError: 'utf-8' codec can't encode ...", "grep
    failed: RecursionError: maximum recursion depth exceeded", "write failed: ValueError:
    embedded null byte", a 500 and a traceback for a body nested 100,000 deep, and no reply
    at all (a traceback in the log) for a file name that is not UTF-8."""
    src = tmp_path / "src"
    shutil.copytree(SAMPLE_CORPUS / "deploy", src / "deploy")
    store = tmp_path / "store"
    ingest_hash(src, store)
    lone = "\\udcff"  # JSON's escape: a str with a lone surrogate on the server's side
    calls = {
        "search": ('{"query": "key' + lone + '"}', "the query is not UTF-8 text: byte 0xff"),
        "grep": ('{"pattern": "x' + lone + '"}', "the pattern is not UTF-8 text: byte 0xff"),
        "grep regex": (
            json.dumps({"pattern": "(" * 3000 + "a" + ")" * 3000, "regex": True}),
            "the pattern nests too deeply (3000 groups)",
        ),
        "write": ('{"path": "notes/a.md", "text": "x' + lone + '"}', "the text is not UTF-8"),
        "write nul": (json.dumps({"path": "notes/\x00.md", "text": "x"}), "NUL character"),
        "write name": ('{"path": "notes/' + lone + '.md", "text": "x"}', r"notes/\\udcff.md"),
        "search surrogate": ('{"query": "a\\ud800"}', "lone surrogate U+D800"),
    }
    with (
        http_server("--store", str(store), "--writable") as server,
        httpx.Client(timeout=60) as client,
    ):
        headers = {**MCP_HEADERS, "Authorization": f"Bearer {server.token}"}
        opened = client.post(server.url, json=INIT, headers=headers)
        headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        client.post(
            server.url,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=headers,
        )
        answers = {}
        for i, (what, (args, _)) in enumerate(calls.items()):
            name = what.split()[0]
            call_id, params = str(i + 2), '{"name": "' + name + '", "arguments": ' + args + "}"
            body = '{"jsonrpc": "2.0", "id": ' + call_id + ', "method": "tools/call", '
            body += '"params": ' + params + "}"
            answers[what] = client.post(server.url, content=body, headers=headers).text
        deep = client.post(server.url, content="[" * 100_000 + "]" * 100_000, headers=headers)
    for what, (_, expected) in calls.items():
        assert expected in answers[what], (what, answers[what])
        assert not any(name in answers[what] for name in PYTHON_NAMES), answers[what]
    assert deep.status_code == 400 and "JSON nested deeper than the server parses" in deep.text
    log = "".join(server.log)
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]
    assert (src / "notes" / os.fsdecode(b"\xff.md")).read_text() == "x"
    # The command line says the same.
    proc = semfs("search", os.fsdecode(b"key\xff"), "--store", str(store), check=False)
    assert proc.returncode == 1
    assert proc.stderr == (
        "Error: the query is not UTF-8 text: byte 0xff at character 4 is not UTF-8\n"
    )


def test_only_the_admin_token_writes_by_the_servers_right() -> None:
    """The write tool's right: stdio and the admin token follow the server's --writable; a
    scoped token its own --write, even one named like the admin grant (a tokens file older
    than that name may hold one)."""
    from types import SimpleNamespace
    from typing import cast

    from semfs.fusefs.agent.mcp import Served, may_write
    from semfs.fusefs.agent.tokens import ADMIN, Grant

    writable = cast(Served, SimpleNamespace(writable=True))
    assert may_write(writable, None) and may_write(writable, Grant(ADMIN))
    assert not may_write(writable, Grant(ADMIN, ("docs",)))
    assert may_write(writable, Grant(ADMIN, ("docs",), write=True))
    assert not may_write(cast(Served, SimpleNamespace(writable=False)), Grant(ADMIN))
