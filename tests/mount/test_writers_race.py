"""Writers of one collection never clean up each other's work (issue 39 item 0), and a big
file written into a writable mount is keyword-searchable at once (issue 38).

Three writers, each real: the watcher's batch of a big file written through a writable mount,
the MCP write tool (`semfs mcp --writable`, a client of the mount), and a plain `semfs ingest`
beside the mount. Every pair races, several rounds, and each round ends with the store as
`semfs check` wants it and every file of the source in it. Before: a batch marked the store
dirty, and a write beside it took that for a killed run and deleted the batch's chunks
(`big2.log: chunk 0 of generation 3 is missing`); a plain ingest during the batch embedded
the same big file again.
"""

from __future__ import annotations

import json
import random
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.mcpclient import call, connect, data, run, stdio
from tests.helpers.mounting import Mount, ingest_hash, mounted, semfs, wait_until

pytestmark = pytest.mark.mount

SETTLE = 180.0  # the mount's batches and dense pass, on a loaded machine
ROUNDS = 3


def _status(store: Path) -> dict[str, Any]:
    return json.loads(semfs("status", "--store", str(store), "--json").stdout)


def _settled(store: Path) -> bool:
    status = _status(store)
    # (No "embedding" in a status of before keywords first: an ingest embedded as it wrote.)
    watch, embedding = status.get("watch") or {}, status.get("embedding") or {}
    return (
        watch.get("pending") == 0
        and watch.get("batches", 0) > 0
        and embedding.get("embedded") == embedding.get("chunks")
        and not status.get("interrupted")
    )


def _sound(src: Path, store: Path) -> None:
    """The store is whole and mirrors the source: `semfs check` is clean, and an ingest
    would change nothing."""
    wait_until(lambda: _settled(store), SETTLE, "the mount's batches and dense pass")
    checked = semfs("check", "--store", str(store), check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    dry = json.loads(semfs("ingest", str(src), "--store", str(store), "--dry-run", "--json").stdout)
    assert (dry["added"], dry["updated"], dry["deleted"]) == (0, 0, 0), dry


def _big(mnt: Path, rel: str, lines: int) -> Callable[[], Any]:
    """A big log written through the mount, as the guide says (`seq 1 N > MNT/notes/x.log`):
    the watcher's batch follows its close."""

    def write() -> Any:
        (mnt / rel).parent.mkdir(parents=True, exist_ok=True)
        with open(mnt / rel, "w") as out:
            subprocess.run(["seq", "1", str(lines)], stdout=out, check=True, timeout=120)
        return rel

    return write


def _mcp(store: Path, rel: str, text: str) -> Callable[[], Any]:
    """The MCP write tool of a `semfs mcp --writable` beside the mount (its client)."""

    def write() -> Any:
        async def go() -> Any:
            async with connect(stdio("--store", str(store), "--writable")) as client:
                return data(await call(client, "write", path=rel, text=text))

        return run(go)

    return write


def _plain(src: Path, store: Path) -> Callable[[], Any]:
    """A plain `semfs ingest` of the source beside the mount."""

    def ingest() -> Any:
        out = semfs("ingest", str(src), "--store", str(store), "--json", timeout=600).stdout
        return json.loads(out)

    return ingest


def _race(*writers: Callable[[], Any]) -> list[Any]:
    """Run the writers at once (each a moment after the last, at random), each in a thread;
    their results, or the first failure raised."""
    results: list[Any] = [None] * len(writers)
    errors: list[BaseException] = []

    def go(i: int, writer: Callable[[], Any]) -> None:
        try:
            results[i] = writer()
        except BaseException as exc:
            errors.append(exc)

    threads = []
    for i, writer in enumerate(writers):
        threading.Event().wait(random.uniform(0, 0.4))
        thread = threading.Thread(target=go, args=(i, writer))
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join(600)
    if errors:
        raise errors[0]
    return results


@pytest.fixture
def writable(tmp_path: Path) -> Any:
    src, store = tmp_path / "src", tmp_path / "store"
    (src / "notes").mkdir(parents=True)
    for i in range(5):
        (src / "notes" / f"n{i}.md").write_text(f"# Note {i}\n\nalpaca {i} grazes\n")
    ingest_hash(src, store)
    args = ("--store", str(store), "--watch", str(src), "--writable", "-m", "hash")
    with mounted(tmp_path / "mnt", *args) as m:
        yield src, store, m


def test_every_pair_of_writers_races_and_the_store_stays_whole(
    writable: tuple[Path, Path, Mount],
) -> None:
    src, store, m = writable
    for r in range(ROUNDS):
        # The watcher's batch of a big file, and an MCP write.
        _big_done, note = _race(
            _big(m.path, f"logs/big{r}.log", 120_000),
            _mcp(store, f"notes/mcp{r}.md", f"# MCP {r}\n\nquokka {r} hops\n"),
        )
        assert note["indexed"], note
        _sound(src, store)
        # The watcher's batch of a big file, and a plain ingest: never embedded twice, and
        # the big file not held back twice (the plain ingest leaves the mount's open file).
        _big_done, plain = _race(_big(m.path, f"logs/other{r}.log", 120_000), _plain(src, store))
        assert plain["chunks_embedded"] == 0, plain  # the mount's dense pass embeds
        _sound(src, store)
        # An MCP write and a plain ingest.
        note, plain = _race(
            _mcp(store, f"notes/mcp-b{r}.md", f"# B {r}\n\nwombat {r}\n"), _plain(src, store)
        )
        assert note["indexed"], note
        _sound(src, store)
    status = _status(store)
    assert status["documents"] == 5 + 4 * ROUNDS


def test_the_reproduction_of_issue_39(writable: tuple[Path, Path, Mount]) -> None:
    """`seq 1 1200000 > M/big2.log; sleep 15`, then an MCP write: before, `semfs status`
    said `damaged: the last ingest left 3 documents and 12502 chunks, the store now holds 4
    and 7383` and `semfs check`, `big2.log: chunk 0 of generation 3 is missing`."""
    src, store, m = writable
    _big(m.path, "big2.log", 1_200_000)()
    threading.Event().wait(15)
    note = _mcp(store, "notes/mcp-note.md", "# Note\n\nwritten by an agent\n")()
    assert note["indexed"], note
    _sound(src, store)
    checked = semfs("check", "--store", str(store))
    assert "missing" not in checked.stdout and checked.stdout.startswith("ok: ")
    assert "damaged" not in semfs("status", "--store", str(store)).stdout


def test_a_big_log_is_keyword_searchable_soon_after_its_close(
    writable: tuple[Path, Path, Mount],
) -> None:
    """Before: a 1.29 MB log written into the mount was not searchable after 30 minutes (its
    batch embedded it whole, and every later write waited behind it). Now its batch commits
    its keywords; a write after it is searchable at once, its dense vectors behind."""
    _src, _store, m = writable
    _big(m.path, "notes/big.log", 200_000)()
    keyword = m.path / ".search" / "@keyword" / "@k=5" / "199999"
    wait_until(lambda: _has(keyword, "big.log"), SETTLE, "the big log found by a keyword")
    (m.path / "notes" / "after.md").write_text("# After\n\nplatypus\n")
    wait_until(
        lambda: _has(m.path / ".search" / "@keyword" / "platypus", "after.md"),
        SETTLE,
        "a write after the big log",
    )


def _has(folder: Path, name: str) -> bool:
    try:
        return any(entry.endswith(name) for entry in (p.name for p in folder.iterdir()))
    except OSError:
        return False
