"""What abandoned MCP HTTP sessions cost `semfs mcp --http`: RSS before, after N sessions
opened and never closed (a client that goes away without DELETE), and after the idle timeout.

The baseline is the same server's RSS before the sessions, in the same run. Loopback only,
a bounded number of requests, and the server is stopped at the end.

    python scripts/bench_mcp_sessions.py --store STORE --sessions 2000 --timeout 5
    python scripts/bench_mcp_sessions.py --store STORE --semfs OTHER/.venv/bin/semfs --no-timeout
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
from benchmarks.harness import require_linux

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


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--semfs", default=str(Path(sys.executable).with_name("semfs")))
    ap.add_argument("--sessions", type=int, default=2000)
    ap.add_argument("--timeout", type=float, default=5.0, help="--session-timeout to run with")
    ap.add_argument("--no-timeout", action="store_true", help="a server without the option")
    args = ap.parse_args()
    require_linux("bench_mcp_sessions")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [args.semfs, "mcp", "--http", f"127.0.0.1:{port}", "--store", args.store]
    if not args.no_timeout:
        cmd += ["--session-timeout", str(args.timeout)]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    headers = dict(HEADERS)
    try:
        assert proc.stderr is not None
        stderr = proc.stderr
        lines: list[str] = []
        threading.Thread(target=lambda: lines.extend(stderr), daemon=True).start()
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = [m for line in lines if (m := re.search(r"token in (/\S+) \(", line))]
            if found:
                token = Path(found[0].group(1)).read_text().strip()
                headers["Authorization"] = f"Bearer {token}"
                break
            with socket.socket() as probe:
                if args.no_timeout and probe.connect_ex(("127.0.0.1", port)) == 0:
                    break  # an older server: no token, no start-up line
            time.sleep(0.2)
        with httpx.Client(headers=headers, timeout=30) as client:
            assert client.post(url, json=INIT).status_code == 200  # warm: one session
            time.sleep(1)
            before = rss_mb(proc.pid)
            codes: dict[int, int] = {}
            ids = []
            for _ in range(args.sessions):
                answer = client.post(url, json=INIT)
                codes[answer.status_code] = codes.get(answer.status_code, 0) + 1
                if "mcp-session-id" in answer.headers:
                    ids.append(answer.headers["mcp-session-id"])
            time.sleep(1)
            after = rss_mb(proc.pid)
            wait = 0.0 if args.no_timeout else args.timeout * 3 + 5
            time.sleep(wait)
            ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
            alive = sum(
                client.post(url, json=ping, headers={"mcp-session-id": i}).status_code == 200
                for i in ids[:50]
            )
            later = rss_mb(proc.pid)
            # A second wave: freed sessions' memory is reused (Python keeps it from the OS).
            for _ in range(args.sessions):
                client.post(url, json=INIT)
            time.sleep(1)
            second = rss_mb(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
    print(
        json.dumps(
            {
                "sessions_asked": args.sessions,
                "answers": codes,
                "rss_before_mb": round(before, 1),
                "rss_after_sessions_mb": round(after, 1),
                "added_mb": round(after - before, 1),
                "ratio_after_to_before": round(after / before, 2),
                f"rss_{wait:g}s_later_mb": round(later, 1),
                "of_first_50_sessions_still_alive": alive,
                "rss_after_a_second_wave_mb": round(second, 1),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
