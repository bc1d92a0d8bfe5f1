"""Readable while it runs (issue 38.4): while `semfs ingest` writes a collection, `semfs
search`, `semfs status`, `semfs mount` and `semfs mcp` in other processes read what it has
committed (the ingest serves the store's socket), and a mount and `semfs mcp` that started as
its clients keep working once it has ended (they take the store over).

The ingest is the real command, paused while it embeds (tests/helpers/pausedingest.py): what
the others see does not race its speed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from semfs.ingest.focus import FOCUS_FILE, read_uses
from tests.helpers import pausedingest
from tests.helpers.mcpclient import call, connect, data, run, stdio
from tests.helpers.mounting import mounted, semfs, stop_process, wait_until

pytestmark = pytest.mark.mount

HANG = 120.0  # only catches a hang: a loaded machine is slow, never this slow
DOCS = 80  # about 320 chunks: more than the first encode window (tests/helpers/pausedingest)
FIRST, LAST = "notes/doc-000.md", f"notes/doc-{DOCS - 1:03d}.md"
READ = "notes/doc-040.md"  # read through the mount, never searched
READ_MCP = "notes/doc-041.md"  # read through MCP


def _source(src: Path) -> None:
    filler = " ".join(f"word{i}" for i in range(150))
    for n in range(DOCS):
        word = "aardvark" if n == 0 else "zebu" if n == DOCS - 1 else f"marker{n}"
        paragraphs = "\n\n".join(f"{word} paragraph {p}: {filler}" for p in range(4))
        path = src / f"notes/doc-{n:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Document {n}\n\n{paragraphs}\n")


def _hits(result: Any) -> list[str]:
    return [h["path"] for h in data(result)["results"]]


def _found(mnt: Path, word: str, rel: str) -> bool:
    try:
        folder = mnt / ".search" / "@keyword" / word
        return any((folder / name).resolve() == (mnt / rel).resolve() for name in folder.iterdir())
    except OSError:
        return False


def _noted(store: Path) -> list[str]:
    """The paths readers noted for the dense pass to embed first (semfs.ingest.focus)."""
    return [u.path for note in store.rglob(FOCUS_FILE) for u in read_uses(note)]


def test_an_ingest_under_way_is_read_and_its_readers_outlive_it(tmp_path: Path) -> None:
    src, store, gate = tmp_path / "src", tmp_path / "store", tmp_path / "gate"
    _source(src)
    gate.mkdir()
    command = ["semfs", "ingest", str(src), "--store", str(store), "-m", "hash", "--jobs", "2"]
    ingest = pausedingest.spawn(gate, command, capture=True)
    try:
        wait_until(
            lambda: (gate / "paused").exists() or ingest.poll() is not None, HANG, "the pause"
        )
        assert ingest.poll() is None, ingest.communicate()[0]
        # Other processes read what it committed, through its socket. Keywords first (issue
        # 38): it pauses in its second pass, every document committed with its keywords, so a
        # keyword search finds the last one while the ingest is still embedding.
        where = ("--store", str(store))
        found = semfs("search", "aardvark", "--mode", "keyword", "--paths", *where).stdout
        assert str(src / FIRST) in found
        found = semfs("search", "zebu", "--mode", "keyword", "--paths", *where).stdout
        assert str(src / LAST) in found
        hybrid = semfs("search", "zebu paragraph", *where).stdout.splitlines()
        assert hybrid[2].startswith("meaning: ") and hybrid[2].endswith(
            "% of the collection embedded; keyword scores for the rest"
        ), hybrid[:4]
        status = json.loads(semfs("status", "--json", *where).stdout)
        assert status["documents"] == DOCS and status["served_by"] == ingest.pid
        assert status["ingesting"] and not status["interrupted"], status
        assert 0 < status["embedding"]["embedded"] < status["embedding"]["chunks"], status
        with mounted(tmp_path / "mnt", *where) as m:
            assert (m.path / FIRST).read_bytes() == (src / FIRST).read_bytes()
            assert (m.path / LAST).read_bytes() == (src / LAST).read_bytes()
            # A document read is told to the dense pass, to embed first (issue 45.2).
            (m.path / READ).read_bytes()
            wait_until(lambda: READ in _noted(store), HANG, "the document read noted")

            async def agent() -> tuple[Any, Any]:
                async with connect(stdio(*where)) as client:
                    first = await call(
                        client, "search", query="aardvark", mode="keyword", details=True
                    )
                    await call(client, "read", path=READ_MCP)  # noted too (issue 45.2)
                    (gate / "go").touch()  # the ingest finishes and exits
                    await anyio.to_thread.run_sync(ingest.wait)
                    with anyio.fail_after(HANG):  # its tree follows the store within a second
                        while True:
                            last = await call(
                                client, "search", query="zebu", mode="keyword", details=True
                            )
                            if _hits(last):
                                return first, last
                            await anyio.sleep(0.1)

            first, last = run(agent)
            wait_until(lambda: READ_MCP in _noted(store), HANG, "the MCP read noted")
            assert ingest.returncode == 0, ingest.communicate()[0]
            assert _hits(first)[:1] == [FIRST]
            assert _hits(last)[:1] == [LAST]  # semfs mcp outlived the ingest
            # The mount too: it shows and finds what the ingest committed last.
            wait_until((m.path / LAST).exists, HANG, "the last document shown")
            assert (m.path / LAST).read_bytes() == (src / LAST).read_bytes()
            wait_until(lambda: _found(m.path, "zebu", LAST), HANG, "a search for the last one")

            def owner() -> Any:
                return json.loads(semfs("status", "--json", *where).stdout)["served_by"]

            wait_until(lambda: owner() == m.pid, HANG, "the mount owning the store")
    finally:
        (gate / "go").touch()
        stop_process(ingest)
