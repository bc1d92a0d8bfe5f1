"""`semfs mcp --http`'s bounds that no attack test reached (issue 46's breaks): a request body
sent in chunks (no Content-Length) is bounded as a declared one is, and connections without a
token hold at most their share of the cap. A real server, raw sockets, no timed assertion."""

from __future__ import annotations

import contextlib
import socket
import time
from pathlib import Path

import pytest

from tests.helpers.mcphttp import http_server
from tests.helpers.mounting import ingested_one

pytestmark = pytest.mark.mount  # real servers, as the other MCP tests

WAIT = 60.0  # for an answer, a close or a log line: only catches a hang
MAX_BODY = 4 * 1024 * 1024  # the SDK's bound on a request body


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return ingested_one(tmp_path, "proxy.md", "# Proxy\n\nServe the docs behind nginx.\n")


def _answer(conn: socket.socket) -> bytes:
    conn.settimeout(WAIT)
    data = b""
    with contextlib.suppress(OSError):
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    return data


def test_a_chunked_body_past_the_bound_is_refused(store: Path) -> None:
    """No Content-Length to refuse at once: the body is counted as it comes, and 413 is
    answered once it passes 4 MiB (before, it was read whole, however long)."""
    with http_server("--store", str(store)) as server:
        conn = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT)
        with conn:
            head = (
                f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                f"Authorization: Bearer {server.token}\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            piece = b" " * 65536
            chunk = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
            with contextlib.suppress(OSError):  # the server may answer and close mid-send
                conn.sendall(head.encode())
                for _ in range(MAX_BODY // len(piece) + 4):
                    conn.sendall(chunk)
                conn.sendall(b"0\r\n\r\n")
            answer = _answer(conn)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_a_declared_body_past_the_bound_is_refused_before_it_comes(store: Path) -> None:
    """A Content-Length past 4 MiB is answered 413 at once: the server does not wait for
    (or read) a body it will refuse."""
    with http_server("--store", str(store)) as server:
        conn = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT)
        with conn:
            conn.sendall(
                (
                    f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                    "Content-Type: application/json\r\n"
                    "Accept: application/json, text/event-stream\r\n"
                    f"Authorization: Bearer {server.token}\r\n"
                    f"Content-Length: {MAX_BODY + 1}\r\n\r\n{{"
                ).encode()
            )
            answer = _answer(conn)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_connections_without_a_token_hold_at_most_three_quarters_of_the_cap(
    store: Path,
) -> None:
    """Under a 256 open-files limit the cap is 128 connections, 32 of them kept for token
    holders: a 97th connection without a token closes the oldest such one (and says so in
    the log), though the cap itself is not reached."""
    conns: list[socket.socket] = []
    with http_server("--store", str(store), open_files=256) as server:
        try:
            for _ in range(110):
                conns.append(socket.create_connection(("127.0.0.1", server.port), timeout=WAIT))
            deadline = time.monotonic() + WAIT
            while not any("without a token, at most 96" in line for line in server.log):
                assert time.monotonic() < deadline, "".join(server.log)[-2000:]
                time.sleep(0.1)
            conns[0].settimeout(WAIT)
            with contextlib.suppress(ConnectionResetError):
                assert conns[0].recv(1) == b""  # the oldest was closed
        finally:
            for conn in conns:
                conn.close()
