"""``semfs mcp --http`` run for a test: a free loopback port, the admin token, its log."""

from __future__ import annotations

import queue
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers import SEMFS, with_open_files
from tests.helpers.mounting import stop_process

STARTUP_SECONDS = 60
STARTED = re.compile(r"serving .* at (\S+); (?:new )?token in (/\S+) \(")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class HttpServer:
    url: str  # http://127.0.0.1:PORT/mcp, whatever address it is bound to
    port: int
    token_path: Path
    log: list[str] = field(default_factory=list)  # its stderr lines

    @property
    def token(self) -> str:
        return self.token_path.read_text().strip()


@contextmanager
def http_server(
    *args: str, bind: str = "127.0.0.1", open_files: int | None = None
) -> Iterator[HttpServer]:
    """``semfs mcp --http BIND:PORT ARGS`` until the block ends (stopped even on failure);
    ``open_files``: its RLIMIT_NOFILE."""
    port = free_port()
    proc = subprocess.Popen(
        [*with_open_files(open_files), SEMFS, "mcp", "--http", f"{bind}:{port}", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        log: list[str] = []
        lines: queue.Queue[str | None] = queue.Queue()
        stderr = proc.stderr

        def drain() -> None:  # all along, so that the pipe never fills and blocks the server
            for line in stderr:
                log.append(line)
                lines.put(line)
            lines.put(None)

        threading.Thread(target=drain, daemon=True).start()
        match = None
        deadline = time.monotonic() + STARTUP_SECONDS
        while match is None:  # the start-up line comes once the socket listens
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no start-up line within {STARTUP_SECONDS} s: {''.join(log)}")
            if line is None:
                proc.wait(timeout=30)
                pytest.fail(f"semfs mcp --http exited {proc.returncode}: {''.join(log)}")
            match = STARTED.search(line)
        yield HttpServer(f"http://127.0.0.1:{port}/mcp", port, Path(match.group(2)), log)
    finally:
        stop_process(proc)  # type: ignore[arg-type]
