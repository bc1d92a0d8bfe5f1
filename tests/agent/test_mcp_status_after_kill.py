"""After a ``kill -9`` of an ingest, the MCP ``status`` tool says no ingest runs (issue
46.10): it said ``ingest_running: True`` for good, from the meta the killed run left dirty.
Whether one runs is whether a live process holds the collection's write or embed lock (a
``flock``, which a killed process lets go of at once)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from tests.helpers import pausedingest
from tests.helpers.mcpclient import connect, data, run, stdio
from tests.helpers.mounting import stop_process, wait_until

WAIT = 120.0  # only catches a hang
MARK = "pauseword"  # the ingest pauses in its keyword pass at the text holding it


def _status(store: Path) -> dict[str, Any]:
    async def status() -> dict[str, Any]:
        async with connect(stdio("--store", str(store))) as client:
            return data(await client.call_tool("status", {}))  # type: ignore[no-any-return]

    return run(status)


def test_status_after_an_ingest_killed_mid_way_says_none_runs(tmp_path: Path) -> None:
    src, store, gate = tmp_path / "src", tmp_path / "store", tmp_path / "gate"
    src.mkdir()
    gate.mkdir()
    for i in range(5):
        (src / f"d{i}.md").write_text(f"# D {i}\n\nnote {i}\n")
    (src / "zz-last.md").write_text(f"# Last\n\n{MARK} here the ingest pauses\n")
    command = ["semfs", "ingest", str(src), "--store", str(store), "-m", "hash"]
    ingest = pausedingest.spawn(gate, command, at=MARK)
    try:
        wait_until(lambda: (gate / "paused").exists() or ingest.poll() is not None, WAIT, "pause")
        assert ingest.poll() is None
        ingest.send_signal(signal.SIGKILL)
        ingest.wait(WAIT)
        status = _status(store)
        assert status["ingest_running"] is False, status
    finally:
        (gate / "go").touch()
        stop_process(ingest)
