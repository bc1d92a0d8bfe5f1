"""`semfs collections list|rm|rename` on both backends (the server one against qdrant-client's
local mode), refusals while a mount or a watcher owns a collection, missing collections named
with the ones there are, and a `semfs status` a person can read."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from semfs.fusefs.cli import display
from semfs.fusefs.cli.group import cli
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.catalog import mounted_at
from semfs.ingest.syncstate import SyncState, state_file
from tests.helpers import SEMFS
from tests.helpers.mounting import mounted, stop_process, wait_until


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def _run(*args: str, input: str | None = None) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, list(args), input=input)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture(params=["embedded", "server"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    """Options naming the store: the embedded one, or a stand-in server (local mode)."""
    if request.param == "server":
        return ["--url", f"file://{tmp_path / 'local-qdrant'}"]
    return []


@pytest.fixture
def two(tmp_path: Path, where: list[str]) -> tuple[Path, Path]:
    a = _tree(tmp_path / "a", {"one.md": "# One\n\nalpha\n", "sub/two.md": "# Two\n\nbeta\n"})
    b = _tree(tmp_path / "b", {"three.md": "# Three\n\ngamma\n"})
    assert _run("ingest", str(a), "--model", "hash", *where)[0] == 0
    assert _run("ingest", str(b), "--model", "hash", "-c", "bee", *where)[0] == 0
    return a, b


def _listed(where: list[str]) -> dict[str, dict[str, object]]:
    code, out, err = _run("collections", "list", "--json", *where)
    assert code == 0, err
    return {row["name"]: row for row in json.loads(out)}


def test_list_shows_every_collection(two: tuple[Path, Path], where: list[str]) -> None:
    a, b = two
    rows = _listed(where)
    assert sorted(rows) == ["bee", "docs"]
    docs = rows["docs"]
    assert docs["documents"] == 2 and docs["source"] == str(a) and docs["model"] == "hash"
    assert docs["bytes"] == (a / "one.md").stat().st_size + (a / "sub/two.md").stat().st_size
    assert isinstance(docs["chunks"], int) and docs["chunks"] >= 2
    assert isinstance(docs["ingested_at"], float) and time.time() - docs["ingested_at"] < 600
    assert rows["bee"]["source"] == str(b) and rows["bee"]["documents"] == 1
    code, out, _ = _run("collections", "list", *where)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == [
        "NAME",
        "DOCS",
        "CHUNKS",
        "SIZE",
        "MODEL",
        "LAST",
        "INGEST",
        "SOURCE",
    ]
    assert lines[1].startswith("bee ") and lines[1].endswith(str(b)) and "bytes" in lines[1]
    assert lines[2].startswith("docs ") and " s ago " in lines[2]


def test_rm_asks_first_then_removes(two: tuple[Path, Path], where: list[str]) -> None:
    a, _ = two
    code, out, _ = _run("collections", "rm", "docs", *where, input="n\n")
    assert code == 1 and "Remove collection 'docs' (2 documents" in out and str(a) in out
    assert sorted(_listed(where)) == ["bee", "docs"]
    code, out, _ = _run("collections", "rm", "docs", *where, input="y\n")
    assert code == 0 and "Removed collection 'docs'" in out
    assert sorted(_listed(where)) == ["bee"]
    assert a.exists() and (a / "one.md").read_text() == "# One\n\nalpha\n"  # the source stays
    code, _, _ = _run("collections", "rm", "bee", "-y", *where)
    assert code == 0 and _listed(where) == {}
    # A removed collection is gone for good: ingesting its folder again makes a new one.
    assert _run("ingest", str(a), "--model", "hash", *where)[0] == 0
    assert _listed(where)["docs"]["documents"] == 2


def test_rename_keeps_everything(two: tuple[Path, Path], where: list[str]) -> None:
    a, _ = two
    before = _listed(where)["docs"]
    code, out, _ = _run("collections", "rename", "docs", "fastapi", *where)
    assert code == 0 and "Renamed collection 'docs' to 'fastapi'" in out
    rows = _listed(where)
    assert sorted(rows) == ["bee", "fastapi"]
    after = rows["fastapi"]
    for key in ("documents", "chunks", "bytes", "model", "source", "ingested_at"):
        assert after[key] == before[key], key
    code, out, _ = _run("search", "alpha", "-c", "fastapi", "--json", *where)
    assert code == 0 and json.loads(out)[0]["path"] == "one.md"
    # The collection still knows its folder under its new name.
    assert _run("ingest", str(a), "-c", "fastapi", *where)[0] == 0
    code, _, err = _run("collections", "rename", "fastapi", "bee", *where)
    assert code == 1 and "already exists" in err and sorted(_listed(where)) == ["bee", "fastapi"]
    code, _, err = _run("collections", "rename", "fastapi", "bad/name", *where)
    assert code == 1 and "invalid collection name" in err


def test_missing_collections_name_the_ones_there(two: tuple[Path, Path], where: list[str]) -> None:
    for args in (["status"], ["search", "alpha"], ["collections", "rm", "-y"]):
        cmd = [*args[:2], "nope"] if args[0] == "collections" else [*args, "-c", "nope"]
        code, _, err = _run(*cmd, *where)
        line = err.strip().splitlines()[-1]
        assert code == 1 and "no collection 'nope'" in line, (cmd, err)
        assert "bee, docs" in line and "-c NAME" in line, (cmd, err)


def test_missing_collection_of_an_empty_store_says_ingest(tmp_path: Path) -> None:
    code, _, err = _run("status")
    assert code == 1 and "has none yet" in err and "semfs ingest DIR" in err
    code, out, err = _run("collections", "list")
    assert code == 0 and out == "" and "no collections" in err


@pytest.mark.mount
def test_mount_of_a_missing_collection_names_the_ones_there(
    tmp_path: Path, store_dir: Path
) -> None:
    src = _tree(tmp_path / "src", {"one.md": "one\n"})
    assert _run("ingest", str(src), "--model", "hash", "-c", "semfs-demo")[0] == 0
    (tmp_path / "mnt").mkdir()
    r = subprocess.run(
        [SEMFS, "mount", str(tmp_path / "mnt")], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 1 and "no collection 'docs'" in r.stderr
    assert "semfs-demo" in r.stderr and not os.path.ismount(tmp_path / "mnt")


@pytest.mark.mount
def test_rm_and_rename_refuse_a_mounted_collection(tmp_path: Path, store_dir: Path) -> None:
    src = _tree(tmp_path / "src", {"one.md": "one\n"})
    assert _run("ingest", str(src), "--model", "hash")[0] == 0
    with mounted(tmp_path / "mnt", "--store", str(store_dir)) as m:
        assert str(m.path) in mounted_at("semfs:docs")
        for args in (["rm", "docs", "-y"], ["rename", "docs", "other"]):
            code, _, err = _run("collections", *args)
            assert code == 1 and "docs" in err and str(m.path) in err and "umount" in err, err
        assert (m.path / "one.md").read_text() == "one\n"
    assert sorted(_listed([])) == ["docs"]


def test_rm_refuses_a_collection_a_watcher_follows(tmp_path: Path, store_dir: Path) -> None:
    src = _tree(tmp_path / "src", {"one.md": "one\n"})
    assert _run("ingest", str(src), "--model", "hash")[0] == 0
    watcher = subprocess.Popen(
        [SEMFS, "ingest", str(src), "--watch"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        state = state_file(CollectionAddress("docs", store=store_dir))
        wait_until(state.exists, 60, "the watcher's state file")
        code, _, err = _run("collections", "rm", "docs", "-y")
        assert code == 1 and f"followed by pid {watcher.pid}" in err and str(src) in err, err
        assert sorted(_listed([])) == ["docs"]
    finally:
        stop_process(watcher)


def test_rm_refuses_a_server_collection_a_watcher_follows(tmp_path: Path) -> None:
    """A server has no lock: the watcher's state file (as SourceWatcher saves it) says it runs."""
    url = f"file://{tmp_path / 'local-qdrant'}"
    src = _tree(tmp_path / "src", {"one.md": "one\n"})
    assert _run("ingest", str(src), "--model", "hash", "--url", url)[0] == 0
    state = SyncState(source=str(src))  # this process: alive
    state.save(state_file(CollectionAddress("docs", url=url)))
    code, _, err = _run("collections", "rm", "docs", "-y", "--url", url)
    assert code == 1 and f"followed by pid {os.getpid()}" in err
    state.stopped = True
    state.save(state_file(CollectionAddress("docs", url=url)))
    assert _run("collections", "rm", "docs", "-y", "--url", url)[0] == 0
    assert not state_file(CollectionAddress("docs", url=url)).exists()


def test_a_server_collections_local_files_go_and_move_with_it(tmp_path: Path) -> None:
    """A server collection's files on this machine (tokens, watch state) are in its local
    folder: removed with it (a new collection of that name inherits no token), moved with a
    rename. The embedded store's are in the collection's own folder, which goes with it."""
    url = f"file://{tmp_path / 'local-qdrant'}"
    src = _tree(tmp_path / "src", {"one.md": "one\n"})
    for name in ("docs", "other"):
        assert _run("ingest", str(src), "--model", "hash", "--url", url, "-c", name)[0] == 0
        assert _run("token", "create", "ci", "--under", "x", "--url", url, "-c", name)[0] == 0
    docs, other = CollectionAddress("docs", url=url), CollectionAddress("other", url=url)
    assert docs.local_dir.is_dir() and other.local_dir.is_dir()
    assert _run("collections", "rm", "docs", "-y", "--url", url)[0] == 0
    assert not docs.local_dir.exists()
    tokens = sorted(p.name for p in other.local_dir.iterdir())
    assert _run("collections", "rename", "other", "renamed", "--url", url)[0] == 0
    assert not other.local_dir.exists()
    assert sorted(p.name for p in other.named("renamed").local_dir.iterdir()) == tokens


def test_mountinfo_lists_semfs_mounts_of_a_collection(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text(
        "36 35 0:40 / /home/me/mnt\\040docs rw - fuse.semfs semfs:docs ro,user_id=1000\n"
        "37 35 0:41 / /mnt/x rw - fuse.sshfs semfs:docs rw\n"
        "38 35 0:42 / /mnt/y rw shared:1 - fuse.semfs semfs:docs@qdrant.example:6333 ro\n"
        "39 35 0:43 / /mnt/both rw - fuse.semfs semfs:code+docs ro\n"  # --collections code,docs
    )
    assert mounted_at("semfs:docs", info) == ["/home/me/mnt docs", "/mnt/both"]
    assert mounted_at("semfs:code", info) == ["/mnt/both"]
    assert mounted_at("semfs:cod", info) == []
    server = CollectionAddress("docs", url="https://me:secret@qdrant.example:6333/x").mount_source
    assert server == "semfs:docs@qdrant.example:6333"
    assert mounted_at(server, info) == ["/mnt/y"]
    other = CollectionAddress("docs", url="http://other:6333").mount_source
    assert mounted_at(other, info) == []
    assert CollectionAddress("docs").mount_source == "semfs:docs"
    assert mounted_at("semfs:docs", tmp_path / "absent") == []


def test_status_is_readable(tmp_path: Path, store_dir: Path) -> None:
    src = _tree(tmp_path / "src", {"big.md": "word " * 300_000})  # 1.4 MiB
    assert _run("ingest", str(src), "--model", "hash")[0] == 0
    code, out, _ = _run("status")
    lines = dict(line.strip().split(": ", 1) for line in out.splitlines())
    assert code == 0 and lines["source"] == str(src)
    assert lines["documents"] == "1 (1.4 MiB)" and lines["interrupted"] == "no"
    assert lines["on disk"].endswith("MiB") and lines["model"] == "hash (dimension 384)"
    assert " s ago), took " in lines["last ingest"] and lines["last ingest"].endswith(" s")
    assert "False" not in out and "True" not in out
    code, out, _ = _run("status", "--bytes")
    assert "documents: 1 (1500000 bytes)" in out
    info = json.loads(_run("status", "--json")[1])
    assert info["bytes"] == 1_500_000 and info["interrupted"] is False
    assert info["source"] == str(src) and isinstance(info["ingest_seconds"], float)


def test_display_formats() -> None:
    assert display.size(1473076) == "1.4 MiB" and display.size(1023) == "1023 bytes"
    assert display.size(1024) == "1.0 KiB" and display.size(5 * 1024**3) == "5.0 GiB"
    assert display.size(None) == "unknown"
    assert display.yes_no(True) == "yes" and display.yes_no(False) == "no"
    assert display.duration(2.94) == "2.9 s" and display.duration(192) == "3 min 12 s"
    assert display.duration(7384) == "2 h 3 min"
    assert display.ago(5) == "5 s ago" and display.ago(3 * 86400) == "3 days ago"
    assert display.when(None) == "never"
    assert display.when(1000.0, now=1130.0).endswith("(2 min ago)")


def test_search_under_a_folder_that_is_not_one_is_an_error(
    two: tuple[Path, Path], where: list[str]
) -> None:
    """It printed "no matches" and exited 0 (after loading the model); MCP said why."""
    for under, why in (("nonexistent", "no such folder"), ("one.md", "that is a file")):
        code, out, err = _run("search", "alpha", "--under", under, *where)
        assert code == 1 and out == "" and f"--under {under}: {why}" in err
    code, out, _ = _run("search", "beta", "--under", "sub/", "--json", *where)
    assert code == 0 and [h["path"] for h in json.loads(out)] == ["sub/two.md"]


@pytest.mark.parametrize("command", [["status"], ["collections", "list"], ["search", "alpha"]])
def test_a_removal_cut_short_is_finished_by_the_next_command(
    tmp_path: Path, store_dir: Path, command: list[str]
) -> None:
    """Issue 29: kill -9 between `collections rm`'s rename and its delete left
    .removing-NAME-PID, the collection's text in it, for good."""
    for name in ("docs", "gone"):
        _tree(tmp_path / name, {"a.md": "alpha text of " + name})
        assert _run("ingest", str(tmp_path / name), "-c", name, "--model", "hash")[0] == 0
    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid names no process now: the remover that was killed
    leftover = store_dir / f".removing-gone-{dead.pid}"
    (store_dir / "gone").rename(leftover)
    remover = subprocess.Popen(["sleep", "60"])  # a removal under way: left to its process
    try:
        running = store_dir / f".removing-other-{remover.pid}"
        running.mkdir()
        assert _run(*command)[0] == 0
        assert not leftover.exists() and running.is_dir()
    finally:
        stop_process(remover)
    running.rmdir()
    assert sorted(p.name for p in store_dir.iterdir() if not p.name.startswith(".")) == ["docs"]
