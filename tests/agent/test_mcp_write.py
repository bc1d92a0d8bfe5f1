"""The MCP write tool: who may write, where it writes, and that a search finds it at once.

Real `semfs mcp` servers (stdio and HTTP) on a hash-model store ingested from a folder; the
bytes are checked in that folder, the search through the same server.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from mcp.client.stdio import StdioServerParameters

from tests.helpers import SEMFS
from tests.helpers.mcpclient import call, connect, data, is_error, run, stdio, text
from tests.helpers.mcphttp import http_server
from tests.helpers.mounting import ingest_hash, semfs

pytestmark = pytest.mark.mount  # HTTP servers and subprocesses, as the other MCP tests


@pytest.fixture
def source(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "deploy").mkdir(parents=True)
    (src / "deploy" / "proxy.md").write_text("# Proxy\nServe the docs behind nginx.\n")
    (src / "report.pdf").write_bytes(b"%PDF-1.4 not really\n")
    ingest_hash(src, tmp_path / "store")
    return src


def _hits(result: Any) -> list[str]:
    return [h["path"] for h in data(result)["results"]]


def test_stdio_writes_only_when_started_writable(tmp_path: Path, source: Path) -> None:
    store = ("--store", str(tmp_path / "store"))

    async def read_only() -> list[str]:
        async with connect(stdio(*store)) as client:
            return [t.name for t in (await client.list_tools()).tools]

    assert "write" not in run(read_only)

    async def writable() -> list[Any]:
        async with connect(stdio(*store, "--writable")) as client:
            return [
                await call(client, "write", path="notes/build.log", text="step one: okapi\n"),
                await call(client, "write", path="notes/build.log", text="step two: quokka\n"),
                await call(client, "search", query="quokka", mode="keyword", details=True),
                await call(
                    client, "write", path="notes/build.log", text="only kiwi\n", mode="replace"
                ),
                await call(client, "search", query="kiwi", mode="keyword", details=True),
                await call(client, "read", path="notes/build.log"),
                await call(client, "write", path=".git/config", text="x"),
                await call(client, "write", path="report.pdf", text="x"),
                await call(client, "write", path="report.pdf.md", text="x"),
                await call(client, "write", path="../escape.md", text="x"),
                await call(client, "write", path="notes/x.md", text="x", mode="prepend"),
            ]

    first, second, found, replaced, found_again, read, *refused = run(writable)
    assert not is_error(first) and data(first)["indexed"] and data(first)["size"] == 16
    assert data(second)["size"] == 33 and "searchable now" in text(second)
    assert "notes/build.log" in _hits(found)
    assert data(replaced)["size"] == 10
    assert _hits(found_again)[:1] == ["notes/build.log"]
    assert "only kiwi" in text(read)
    assert (source / "notes" / "build.log").read_text() == "only kiwi\n"
    assert all(is_error(r) for r in refused), [text(r) for r in refused]
    assert not (source / ".git").exists() and not (source / "report.pdf.md").exists()
    assert not (tmp_path / "escape.md").exists()
    assert sorted(p.name for p in (source / "notes").iterdir()) == ["build.log"]  # no temp left


def test_a_long_word_written_freezes_nothing(tmp_path: Path, source: Path) -> None:
    # Issue 39.3: a 512 KiB word given to write held the server's GIL in BM25 while it was
    # indexed (quadratic in a word's length): the server answered nothing for 60 s.
    store = ("--store", str(tmp_path / "store"))

    async def session() -> tuple[Any, float, int]:
        async with connect(stdio(*store, "--writable")) as client:
            await call(client, "status")  # the server is up
            word = "y" * (1024 * 1024)  # twice the report's word: a clear freeze before
            write = asyncio.ensure_future(call(client, "write", path="notes/w.log", text=word))
            slowest, calls = 0.0, 0
            while not write.done():
                began = time.monotonic()
                await call(client, "status")
                slowest, calls = max(slowest, time.monotonic() - began), calls + 1
                await asyncio.sleep(0.02)
            return await write, slowest, calls

    written, slowest, calls = run(session)
    assert not is_error(written) and data(written)["indexed"], text(written)
    assert calls >= 1 and slowest < 5.0, f"status took {slowest:.1f} s during the write"


def test_http_write_needs_a_writable_server_or_a_write_token(tmp_path: Path, source: Path) -> None:
    store = ("--store", str(tmp_path / "store"))
    writer = semfs("token", "create", "agent", "--under", "notes", "--write", *store).stdout.strip()
    reader = semfs("token", "create", "ci", "--under", "notes", *store).stdout.strip()
    assert "\twrite\tnotes" in semfs("token", "list", *store).stdout
    listed = json.loads(semfs("token", "list", "--json", *store).stdout)
    assert sorted((t["name"], t["write"], t["under"]) for t in listed) == [
        ("agent", True, ["notes"]),
        ("ci", False, ["notes"]),
    ]
    assert all(set(t) == {"name", "created", "write", "under"} for t in listed)  # no secret

    def calls(url: str, token: str, *writes: dict[str, Any]) -> list[Any]:
        async def session() -> list[Any]:
            async with connect(url, token) as client:
                return [await call(client, "write", **w) for w in writes]

        return run(session)

    with http_server(*store) as server:  # not --writable
        (admin,) = calls(server.url, server.token, {"path": "notes/o.md", "text": "admin"})
        (scoped_reader,) = calls(server.url, reader, {"path": "notes/r.md", "text": "reader"})
        ok, outside = calls(
            server.url,
            writer,
            {"path": "notes/agent.md", "text": "The agent saw a pangolin.\n"},
            {"path": "deploy/agent.md", "text": "outside its folder"},
        )
    assert is_error(admin) and "--writable" in text(admin)
    assert is_error(scoped_reader) and is_error(outside)
    assert not is_error(ok), text(ok)
    assert (source / "notes" / "agent.md").read_text() == "The agent saw a pangolin.\n"
    assert sorted(p.name for p in (source / "notes").iterdir()) == ["agent.md"]
    assert sorted(p.name for p in (source / "deploy").iterdir()) == ["proxy.md"]
    with http_server(*store, "--writable") as server:
        (admin,) = calls(server.url, server.token, {"path": "notes/o.md", "text": "admin\n"})
    assert not is_error(admin), text(admin)
    assert (source / "notes" / "o.md").read_text() == "admin\n"


NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def _needs_root_and_setpriv() -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to act as another user")


def test_a_write_never_makes_a_set_uid_file_or_gives_one_to_the_servers_user(
    open_tmp: Path,
) -> None:
    """Issue 39's attack: nobody plants a file of its own, mode 4755, in a write token's
    folder; the token's holder replaces its text. Before: the file became -rwsr-xr-x
    root:root (the server runs as root), a set-uid program of root's with text nobody chose."""
    _needs_root_and_setpriv()
    src = open_tmp / "src"
    (src / "drop").mkdir(parents=True)
    (src / "drop").chmod(0o777)
    (src / "page.md").write_text("# Page\n")
    store = open_tmp / "store"
    ingest_hash(src, store)
    plant = (
        "printf 'x\\n' > {d}/tool && chmod 4755 {d}/tool && "
        "printf 'x\\n' > {d}/log.md && chmod 6775 {d}/log.md && "
        "printf 'x\\n' > {d}/sticky.md && chmod 1644 {d}/sticky.md"
    )
    planted = subprocess.run([*AS_NOBODY, "sh", "-c", plant.format(d=src / "drop")])
    assert planted.returncode == 0
    args = ("--store", str(store))
    writer = semfs("token", "create", "agent", "--under", "drop", "--write", *args).stdout.strip()
    elf_and_text = "\x7fELF this is text too\n"
    with http_server(*args) as server:

        async def session() -> list[Any]:
            async with connect(server.url, writer) as client:
                return [
                    await call(
                        client, "write", path="drop/tool", text=elf_and_text, mode="replace"
                    ),
                    await call(client, "write", path="drop/log.md", text="appended\n"),
                    await call(
                        client, "write", path="drop/sticky.md", text="new\n", mode="replace"
                    ),
                    await call(client, "write", path="drop/new.md", text="mine\n"),
                ]

        results = run(session)
    assert not any(is_error(r) for r in results), [text(r) for r in results]
    modes = {}
    for name in ("tool", "log.md", "sticky.md", "new.md"):
        st = (src / "drop" / name).stat()
        modes[name] = (st.st_uid, st.st_gid, oct(stat.S_IMODE(st.st_mode)))
    assert modes == {
        "tool": (NOBODY, NOBODY, "0o755"),
        "log.md": (NOBODY, NOBODY, "0o775"),
        "sticky.md": (NOBODY, NOBODY, "0o644"),
        "new.md": (0, 0, "0o644"),  # a new file is the server's user's
    }
    assert (src / "drop" / "tool").read_text() == elf_and_text
    assert (src / "drop" / "log.md").read_text() == "x\nappended\n"


def test_a_server_that_cannot_keep_the_owner_refuses_to_replace(open_tmp: Path) -> None:
    """A server of another user than root (nobody here) replaces only what it can give
    back to its owner: a root file it may write is appended to, never replaced by a file of
    nobody's."""
    _needs_root_and_setpriv()
    src = open_tmp / "src"
    (src / "shared").mkdir(parents=True)
    (src / "shared").chmod(0o777)
    (src / "shared" / "root.md").write_text("root's\n")
    (src / "shared" / "root.md").chmod(0o666)
    store = open_tmp / "store"
    ingest_hash(src, store)
    subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(store)], check=True)
    server = StdioServerParameters(
        command=AS_NOBODY[0],
        args=[*AS_NOBODY[1:], SEMFS, "mcp", "--store", str(store), "--writable"],
        env=dict(os.environ, HOME=str(open_tmp)),
    )

    async def session() -> list[Any]:
        async with connect(server) as client:
            return [
                await call(
                    client, "write", path="shared/root.md", text="nobody's\n", mode="replace"
                ),
                await call(client, "write", path="shared/root.md", text="added\n"),
                await call(client, "write", path="shared/.search/q/00-results.md", text="x"),
                await call(client, "write", path="shared/.map.md", text="x"),
            ]

    replaced, appended, *reserved = run(session)
    assert is_error(replaced) and "belongs to user 0" in text(replaced), text(replaced)
    assert "\n" not in text(replaced)
    assert not is_error(appended), text(appended)
    st = (src / "shared" / "root.md").stat()
    assert (st.st_uid, (src / "shared" / "root.md").read_text()) == (0, "root's\nadded\n")
    for res in reserved:
        assert is_error(res) and "a name semfs shows in every folder" in text(res), text(res)
    assert sorted(p.name for p in (src / "shared").iterdir()) == ["root.md"]
