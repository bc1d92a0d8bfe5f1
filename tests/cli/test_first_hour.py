"""What a new user tripped on in their first hour (issue 41), each checked as they met it: an
empty search, a dry run's names, a collection whose first sync has not committed, the runtime
in --version, -c completion, and the log of a mount whose --watch makes its collection."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from semfs.fusefs.mount.logfile import default_log_file
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from tests.helpers import SEMFS


def _semfs(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SEMFS, *args], capture_output=True, text=True, timeout=300, check=False, **kw
    )


def _sources(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "requests").mkdir(parents=True)
    (src / "requests" / "api.html").write_text(
        "<html><body><h1>API</h1><p>Sessions keep cookies across requests.</p></body></html>"
    )
    (src / "a.md").write_text("# A\n\nalpha\n")
    return src


def test_an_empty_search_is_a_usage_error_naming_the_argument(tmp_path: Path) -> None:
    run = _semfs("search", "", "--store", str(tmp_path / "s"))
    assert run.returncode == 2, run
    assert "QUERY" in run.stderr and "give a question" in run.stderr, run.stderr
    assert "Name the folder" not in run.stdout + run.stderr


def test_a_dry_run_names_converted_files_as_the_source_folder_does(tmp_path: Path) -> None:
    src = _sources(tmp_path)
    args = ["--store", str(tmp_path / "s"), "--model", "hash", "--dry-run"]
    run = _semfs("ingest", str(src), *args)
    assert run.returncode == 0, run.stderr
    assert "  add requests/api.html (text view: requests/api.html.md)\n" in run.stdout, run.stdout
    assert "  add a.md\n" in run.stdout
    assert not (tmp_path / "s").exists()


def test_a_collection_without_its_first_batch_says_so_not_that_it_is_missing(
    tmp_path: Path,
) -> None:
    """What a mount whose --watch makes the collection leaves until its first batch commits
    (the shard made, no meta): `semfs status -c work` said "no collection 'work'" while
    naming `work` among the collections."""
    with open_store(CollectionAddress(store=tmp_path / "s", collection="work")) as store:
        store.create(384)
    listed = _semfs("collections", "list", "--store", str(tmp_path / "s"))
    assert "work" in listed.stdout + listed.stderr
    run = _semfs("status", "-c", "work", "--store", str(tmp_path / "s"))
    assert run.returncode == 1
    assert "holds no documents yet" in run.stderr and "no collection" not in run.stderr, run


def test_version_says_what_embeds(tmp_path: Path) -> None:
    run = _semfs("--version")
    assert run.returncode == 0
    lines = run.stdout.splitlines()
    assert lines[0].startswith("semfs, version ")
    assert lines[1].startswith("embedding runtime: onnxruntime ") and "without torch" in lines[1]
    assert lines[2].startswith("torch extra: "), lines


def test_collection_names_complete_after_c(tmp_path: Path) -> None:
    store = tmp_path / "s"
    for name in ("docs", "notes", "work"):
        with open_store(CollectionAddress(store=store, collection=name)) as s:
            s.create(384)
    env = {
        **os.environ,
        "_SEMFS_COMPLETE": "bash_complete",
        "COMP_WORDS": f"semfs search x --store {store} -c w",
        "COMP_CWORD": "6",
    }
    run = subprocess.run([SEMFS], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["plain,work"], run.stdout
    env["COMP_WORDS"] = f"semfs status --store {store} -c "
    env["COMP_CWORD"] = "5"
    run = subprocess.run([SEMFS], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert sorted(run.stdout.split()) == ["plain,docs", "plain,notes", "plain,work"], run.stdout
    # A store that cannot be read completes nothing, and prints no error into the shell.
    env["COMP_WORDS"] = "semfs status --url http://127.0.0.1:9 -c "
    env["COMP_CWORD"] = "5"
    run = subprocess.run([SEMFS], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert run.returncode == 0 and run.stdout.strip() == "" and run.stderr == "", run


def test_a_mount_that_makes_its_collection_logs_where_help_says(tmp_path: Path) -> None:
    """`semfs mount --watch` into a collection that does not exist yet: its default log is
    STORE/COLLECTION/mount.log all the same (the folder made owner-only), not /dev/null."""
    store = tmp_path / "store"
    work = CollectionAddress(store=store, collection="work")
    assert default_log_file(work) is None  # not there, not being made
    log = default_log_file(work, creating=True)
    assert log == store / "work" / "mount.log"
    for folder in (store, store / "work"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    # A server's collection keeps its local files (this log too) under the store folder.
    server = CollectionAddress(store=store, url="http://127.0.0.1:6333", collection="work")
    log = default_log_file(server, creating=True)
    assert log is not None and log.parent == server.local_dir and log.is_relative_to(store)
