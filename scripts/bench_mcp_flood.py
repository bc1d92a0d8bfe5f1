"""Slow clients against `semfs mcp --http`: does a normal request still get answered, how fast,
and what does the server's log cost? Three attacks (``--attack``), each reconnecting what the
server closes:

* ``head`` (issue 29): a 1024 open-files limit, 1,100 connections each sending one more
  request-head byte every 5 s;
* ``body`` (issue 39): each connection sends a whole head without a token announcing a
  4,000,000-byte body, gets 401, then sends one body byte every ``--interval`` seconds;
* ``drop`` (issue 39): a token holder sends a head and part of a body, then closes, on every
  connection every ``--interval`` seconds (what the server's log writes for it).

Prints the normal requests' answers and times (one every 2 s, 10 s timeout each), how many slow
connections the server closed, and its stderr's size, tracebacks and "refused" lines. The
baseline is the same run's first normal request, before the slow clients. Loopback only, a
bounded run (--seconds), and the server is stopped at the end.

    python scripts/bench_mcp_flood.py --store STORE
    python scripts/bench_mcp_flood.py --store STORE --semfs OTHER/.venv/bin/semfs
"""

from __future__ import annotations

import argparse
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
LIMITED = (
    "import os, resource, sys; n = int(sys.argv[1]); "
    "resource.setrlimit(resource.RLIMIT_NOFILE, (n, n)); os.execv(sys.argv[2], sys.argv[2:])"
)
HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


def whole_head(port: int, length: int, token: str | None = None) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {length}\r\n{auth}\r\n"
    ).encode()


def normal(url: str, token: str) -> tuple[bool, float]:
    started = time.monotonic()
    try:
        answer = httpx.post(
            url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {token}"}, timeout=10
        )
        ok = answer.status_code == 200
    except httpx.HTTPError:
        ok = False
    return ok, time.monotonic() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--semfs", default=str(Path(sys.executable).with_name("semfs")))
    ap.add_argument("--open-files", type=int, default=1024, help="the server's RLIMIT_NOFILE")
    ap.add_argument("--slow", type=int, default=1100, help="slow connections to hold")
    ap.add_argument("--interval", type=float, default=5.0, help="seconds between head bytes")
    ap.add_argument("--seconds", type=float, default=40.0, help="how long the flood lasts")
    ap.add_argument("--attack", choices=("head", "body", "drop"), default="head")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.slow + 256)), hard))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token_file = Path(args.store) / "flood.token"
    cmd = [sys.executable, "-c", LIMITED, str(args.open_files), args.semfs, "mcp", "--http"]
    cmd += [f"127.0.0.1:{port}", "--store", args.store, "--token-file", str(token_file)]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    stderr = proc.stderr
    log = bytearray()
    ready = threading.Event()

    def drain() -> None:
        for line in stderr:
            log.extend(line)
            if b"serving" in line:
                ready.set()

    threading.Thread(target=drain, daemon=True).start()
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        if not ready.wait(120):
            sys.exit(f"no start-up line: {log.decode(errors='replace')}")
        token = token_file.read_text().strip()
        opening = {
            "head": HEAD,
            "body": whole_head(port, 4_000_000) + b"{",
            "drop": whole_head(port, 1000, token) + b'{"jsonrpc"',
        }[args.attack]
        base_ok, base_time = normal(url, token)
        start_log = len(log)
        conns: list[socket.socket | None] = [None] * args.slow
        closed = failed_connects = 0
        results: list[tuple[bool, float]] = []
        end = time.monotonic() + args.seconds

        def normals() -> None:  # beside the flood, from its second on
            time.sleep(1.0)
            while time.monotonic() < end:
                results.append(normal(url, token))
                time.sleep(2.0)

        prober = threading.Thread(target=normals, daemon=True)
        prober.start()
        next_byte = time.monotonic()
        while time.monotonic() < end:  # bounded: stops by itself after --seconds
            now = time.monotonic()
            if now >= next_byte:  # one more head byte on every connection; reopen closed ones
                next_byte = now + args.interval
                for i, held in enumerate(conns):
                    try:
                        if held is None:
                            fresh = socket.create_connection(("127.0.0.1", port), timeout=2)
                            conns[i] = fresh
                            fresh.sendall(opening)
                            if args.attack == "drop":
                                fresh.close()
                                conns[i] = None
                        else:
                            held.sendall(b"a")
                    except OSError:
                        if conns[i] is not None:
                            closed += held is not None
                            conns[i].close()  # type: ignore[union-attr]
                        if held is None:
                            failed_connects += 1
                        conns[i] = None
                    if time.monotonic() > end:
                        break
            time.sleep(0.05)
        prober.join(15)
        for conn in conns:
            if conn is not None:
                conn.close()
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    flood_log = bytes(log[start_log:])
    times = [t for ok, t in results if ok]
    print(
        f"server: {args.semfs}, RLIMIT_NOFILE {args.open_files}, {args.slow} slow clients, "
        f"attack: {args.attack}"
    )
    print(f"baseline request: {'ok' if base_ok else 'FAILED'} in {base_time * 1000:.0f} ms")
    print(f"normal requests during the flood: {len(times)}/{len(results)} answered", end="")
    if times:
        print(f", median {statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms")
    else:
        print()
    print(f"slow connections closed by the server: {closed}; connects failed: {failed_connects}")
    lines = flood_log.decode(errors="replace").splitlines()
    print(
        f"server stderr during the flood: {len(flood_log)} bytes, "
        f"{sum('Traceback' in line for line in lines)} tracebacks, "
        f"{sum('refused' in line for line in lines)} 'refused' lines"
    )
    for line in [line for line in lines if "refused" in line][:3]:
        print("   ", line)


if __name__ == "__main__":
    main()
