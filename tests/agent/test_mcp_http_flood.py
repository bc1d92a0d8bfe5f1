"""`semfs mcp --http` under a flood of slow requests (issue 39 item 2): clients without a token,
and token holders, holding connections open with request bodies that never end.

Each test runs a real server under a 256 open-files limit (so 128 connections at most, 32 of
them kept for token holders) and attacks it with more raw sockets than that: a few seconds
each, with no timed assertion (every wait is generous; only what is answered is checked).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from semfs.fusefs.agent.connections import REQUEST_SECONDS, connection_cap
from tests.helpers.mcphttp import HttpServer, http_server
from tests.helpers.mounting import ingested_one, semfs

pytestmark = pytest.mark.mount  # real servers, as the other MCP tests

OPEN_FILES = 256
ATTACKERS = 200  # past the cap of connection_cap(256) = 128
WAIT = 60.0  # for an answer or a close: only catches a hang
INIT = (
    b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": '
    b'"2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}}'
)


def _head(port: int, token: str | None, length: int) -> bytes:
    lines = [
        "POST /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"Content-Length: {length}",
    ]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@contextlib.contextmanager
def _trickling(port: int, token: str | None, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections that each send a whole head announcing a 4,000,000-byte body,
    then one body byte a second (issue 39's attack sends one every 4 s), until the block
    ends; closed after it."""
    conns: list[socket.socket] = []
    stop = threading.Event()

    def trickle() -> None:
        while not stop.wait(1.0):
            for conn in conns:
                with contextlib.suppress(OSError):
                    conn.send(b" ")

    sender = threading.Thread(target=trickle, daemon=True)
    try:
        for _ in range(count):
            conn = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
            with contextlib.suppress(OSError):  # the server may close it at once (a bound)
                conn.sendall(_head(port, token, 4_000_000) + b"{")
            conns.append(conn)
        sender.start()
        yield conns
    finally:
        stop.set()
        if sender.is_alive():
            sender.join(WAIT)
        for conn in conns:
            conn.close()


# Keep-alive: one connection for many requests (filling the session table); the attack tests
# open a new connection for each request instead, the harder case.
_kept = httpx.Client(timeout=WAIT)


def _initialize(port: int, token: str, client: httpx.Client | None = None) -> httpx.Response:
    """An initialize request of ``token``: on a new connection, unless ``client`` is given."""
    if client is None:
        with httpx.Client(timeout=WAIT) as fresh:
            return _initialize(port, token, fresh)
    return client.post(
        f"http://127.0.0.1:{port}/mcp",
        content=INIT,
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {token}",
        },
    )


def _admin_answered(server: HttpServer, times: int = 5) -> int:
    return sum(_initialize(server.port, server.token).status_code == 200 for _ in range(times))


def _ended(conn: socket.socket, within: float) -> bool:
    """Whether the server closes ``conn`` within ``within`` seconds (what it answered read
    and dropped on the way)."""
    deadline = time.monotonic() + within
    conn.settimeout(1.0)
    while time.monotonic() < deadline:
        try:
            if conn.recv(65536) == b"":
                return True
        except TimeoutError:
            continue
        except OSError:  # reset: closed too
            return True
    return False


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return ingested_one(tmp_path, "deploy/proxy.md", "# Proxy\n\nServe the docs behind nginx.\n")


def test_clients_without_a_token_cannot_lock_out_the_admin_with_slow_bodies(store: Path) -> None:
    """Issue 39: each client sent a whole head announcing a 4 MB body, got 401, then sent a
    body byte every 4 s: each byte reset uvicorn's keep-alive timer, so the connections stayed,
    and at the connection cap every newcomer was closed, the admin token's too (0 of 17
    answered)."""
    assert connection_cap(OPEN_FILES) < ATTACKERS
    with (
        http_server("--store", str(store), open_files=OPEN_FILES) as server,
        _trickling(server.port, None, ATTACKERS) as attackers,
    ):
        assert _admin_answered(server) == 5
        # Every attacker's connection ends: at a bound, or after its 401.
        assert all(_ended(conn, WAIT) for conn in attackers)
        assert _admin_answered(server) == 5
    log = "".join(server.log)
    assert "Traceback" not in log and "ERROR" not in log, log[-2000:]


def test_a_token_holder_cannot_hold_the_slots_others_need(store: Path) -> None:
    """A scoped token's 200 requests whose bodies never end (each bounded to REQUEST_SECONDS)
    leave the admin token and another token answered: at the cap, the token holding the most
    connections loses its oldest."""
    args = ("--store", str(store))
    greedy = semfs("token", "create", "greedy", "--under", "deploy", *args).stdout.strip()
    other = semfs("token", "create", "other", "--under", "deploy", *args).stdout.strip()
    with (
        http_server(*args, open_files=OPEN_FILES) as server,
        _trickling(server.port, greedy, ATTACKERS) as hogs,
    ):
        assert _admin_answered(server) == 5
        assert _initialize(server.port, other).status_code == 200
        # No request lasts past its deadline, however its body trickles.
        assert all(_ended(conn, REQUEST_SECONDS + WAIT) for conn in hogs)
    log = "".join(server.log)
    assert "Traceback" not in log and "ERROR" not in log, log[-2000:]


def test_requests_dropped_mid_body_leave_no_traceback(store: Path) -> None:
    """Before: each request a token holder dropped mid-body logged two ERROR lines and a
    traceback (2.47 MB in 30 s)."""
    with http_server("--store", str(store)) as server:
        for _ in range(50):
            with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT) as conn:
                conn.sendall(_head(server.port, server.token, 1000) + b'{"jsonrpc"')
        assert _admin_answered(server, 1) == 1  # served after all of them, so they are done
        time.sleep(0.5)  # a last log line would come at once; none is waited for
    log = "".join(server.log)
    assert "Traceback" not in log and "ERROR" not in log, log[-2000:]
    assert len(log) < 1000, len(log)


def _busy_session(port: int, token: str) -> socket.socket:
    """A new session of ``token`` kept busy by an open GET event stream (a request in flight:
    such a session is never the one closed to make room)."""
    opened = _initialize(port, token, _kept)
    assert opened.status_code == 200, opened.text
    conn = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    conn.sendall(
        (
            f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
            f"Authorization: Bearer {token}\r\n"
            f"mcp-session-id: {opened.headers['mcp-session-id']}\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = conn.recv(4096)
        assert chunk, head
        head += chunk
    assert head.startswith(b"HTTP/1.1 200"), head
    return conn


def test_a_full_table_of_busy_sessions_admits_the_admin_token_and_logs_which_limit(
    store: Path,
) -> None:
    """The table holds 256 sessions: with every one busy (16 tokens with 16 open event streams
    each), a 17th token and a token at its own 16 are refused (503), the admin token is admitted.
    Before: each refusal logged a line of its own (1,426 in 20 s), which named the table's 256
    when the token's 16 had fired."""
    from semfs.fusefs.agent.mcp import MAX_SESSIONS, SESSIONS_PER_TOKEN
    from semfs.fusefs.agent.tokens import ScopedTokens

    tokens = ScopedTokens(store / "docs")
    names = [f"t{i:02d}" for i in range(MAX_SESSIONS // SESSIONS_PER_TOKEN + 1)]
    made = {name: tokens.create(name, ("deploy",)) for name in names}
    streams: list[socket.socket] = []
    with http_server("--store", str(store)) as server:
        try:
            for name in names[:-1]:
                streams += [_busy_session(server.port, made[name]) for _ in range(16)]
            assert len(streams) == MAX_SESSIONS
            refused = [_initialize(server.port, made[names[-1]], _kept) for _ in range(20)]
            refused += [_initialize(server.port, made[names[0]], _kept) for _ in range(20)]
            assert [r.status_code for r in refused] == [503] * 40
            assert _initialize(server.port, server.token).status_code == 200
            assert _initialize(server.port, server.token).status_code == 200
            time.sleep(1.5)  # the refusals' line comes within a second
        finally:
            for conn in streams:
                conn.close()
    lines = [line for line in server.log if "refused" in line and "session" in line]
    assert lines and len(lines) <= 3, lines  # not one per refusal
    log = "".join(lines)
    assert "the table's 256 sessions are all busy" in log, log
    assert "token 't00' has all 16 of its sessions busy" in log, log
    assert sum(int(line.split("refused ")[1].split()[0]) for line in lines) == 40
    assert "Refusing to open a new session" not in "".join(server.log)
