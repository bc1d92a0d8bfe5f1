"""A collection's address: one local folder for every per-collection file, on either backend.

Before the address, a server collection's watch state went to the default store's
``servers/HOST/COLLECTION/`` whatever ``--store`` said, while its tokens went to
``STORE/servers/HOST_COLLECTION/``: `semfs status --store S --url U` and `semfs mcp --store S
--url U` looked in two places. Now each file is in ``address.local_dir``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from semfs.fusefs.agent.tokens import SCOPED_TOKENS, token_folder
from semfs.fusefs.mount.logfile import default_log_file
from semfs.ingest.errors import SemfsError
from semfs.ingest.logs import MOUNT_LOG
from semfs.ingest.skipmemo import memo_file
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import BACKENDS, backend_for
from semfs.ingest.syncstate import state_file
from tests.helpers import SEMFS


def test_an_embedded_collections_files_sit_beside_its_shard(tmp_path: Path) -> None:
    address = CollectionAddress("docs", store=tmp_path)
    assert address.local_dir == tmp_path / "docs"
    assert state_file(address).parent == address.local_dir
    assert memo_file(address).parent == address.local_dir
    assert token_folder(address) == address.local_dir
    assert default_log_file(address) is None  # no folder yet: nothing made it
    address.local_dir.mkdir()
    assert default_log_file(address) == address.local_dir / MOUNT_LOG


def test_a_server_collections_files_are_under_the_given_store(tmp_path: Path) -> None:
    address = CollectionAddress("docs", store=tmp_path, url="http://me:pw@qdrant.lan:6333")
    assert address.local_dir == tmp_path / "servers" / "qdrant.lan_6333" / "docs"
    for where in (state_file(address), memo_file(address), token_folder(address) / "x"):
        assert where.parent == address.local_dir
    # Another collection, another server: other folders.
    assert address.named("api").local_dir != address.local_dir
    other = CollectionAddress("docs", store=tmp_path, url="http://qdrant.lan:6334")
    assert other.local_dir != address.local_dir


def test_the_api_key_and_credentials_are_never_shown(tmp_path: Path) -> None:
    address = CollectionAddress("docs", tmp_path, "https://me:secret@q.lan:6333", "KEY-123")
    shown = [repr(address), address.where, str(address.local_dir), address.mount_source]
    assert not any("secret" in s or "KEY-123" in s for s in shown), shown
    assert address.where == "https://q.lan:6333"
    assert address.mount_source == "semfs:docs@q.lan:6333"


def test_a_collection_name_that_is_a_path_is_refused(tmp_path: Path) -> None:
    for bad in ("../x", "a/b", "", ".hidden"):
        with pytest.raises(SemfsError, match="invalid collection name"):
            _ = CollectionAddress(bad, store=tmp_path).local_dir


def test_every_address_has_exactly_the_backend_that_serves_it(tmp_path: Path) -> None:
    assert backend_for(CollectionAddress(store=tmp_path)) is BACKENDS["embedded"]
    assert backend_for(CollectionAddress(url="file:///tmp/q")) is BACKENDS["server"]
    assert CollectionAddress(url="").url is None  # QDRANT_URL="" is no server


def test_a_server_collections_tokens_from_before_move_to_its_folder(tmp_path: Path) -> None:
    address = CollectionAddress("docs", store=tmp_path, url="http://h:6333")
    legacy = tmp_path / "servers" / "h_6333_docs"
    legacy.mkdir(parents=True, mode=0o700)
    (legacy / SCOPED_TOKENS).write_text("[]")
    folder = token_folder(address)
    assert folder == address.local_dir and (folder / SCOPED_TOKENS).read_text() == "[]"
    assert not legacy.exists()
    assert os.stat(folder.parent).st_mode & 0o077 == 0


def test_tokens_and_watch_state_of_a_url_share_the_stores_folder(tmp_path: Path) -> None:
    """The split, end to end: `semfs token create --store S --url U` writes where the watch
    state of the same address is kept (no server needed to make a token)."""
    store = tmp_path / "store"
    url = "http://qdrant.invalid:6333"
    env = {**os.environ, "SEMFS_STORE": str(tmp_path / "elsewhere")}
    made = subprocess.run(
        [SEMFS, "token", "create", "ci", "--under", "x", "--store", str(store), "--url", url],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    address = CollectionAddress("docs", store=store, url=url)
    assert (address.local_dir / SCOPED_TOKENS).is_file()
    assert state_file(address).parent == address.local_dir
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("url", ["http://..", "http://.", "http://.hidden:6333", "file:.."])
def test_a_server_folder_is_never_the_store_folder_or_above(tmp_path: Path, url: str) -> None:
    """Issue 46.10: CollectionAddress(url="http://..") resolved to the embedded collection's
    own folder (STORE/servers/../docs)."""
    address = CollectionAddress(store=tmp_path, url=url)
    local = address.local_dir
    assert local.parent.parent == tmp_path / "servers", local
    assert not local.parent.name.startswith("."), local
    assert local != CollectionAddress(store=tmp_path).local_dir


def test_an_embedded_collection_may_not_be_called_servers(tmp_path: Path) -> None:
    """Issue 46.10: `-c servers` shared its folder with STORE/servers/ (server collections'
    local files); it is refused in one line, and a server collection may be so called."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("alpha\n")
    with pytest.raises(SemfsError, match="reserved"):
        _ = CollectionAddress("servers", store=tmp_path).local_dir
    run = subprocess.run(
        [SEMFS, "ingest", str(src), "--store", str(tmp_path / "s"), "-c", "servers", "-m", "hash"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0
    assert "the collection name 'servers' is reserved" in run.stderr and "-c" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert not (tmp_path / "s" / "servers" / "shard").exists()
    server = CollectionAddress("servers", store=tmp_path, url="http://localhost:6333")
    assert server.local_dir == tmp_path / "servers" / "localhost_6333" / "servers"


def test_an_embedded_collection_may_not_be_renamed_servers(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("alpha\n")
    subprocess.run(
        [SEMFS, "ingest", str(src), "--store", str(tmp_path / "s"), "-m", "hash"],
        check=True,
        capture_output=True,
    )
    run = subprocess.run(
        [SEMFS, "collections", "rename", "docs", "servers", "--store", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0 and "reserved" in run.stderr, run.stderr
    assert (tmp_path / "s" / "docs" / "shard").is_dir()
