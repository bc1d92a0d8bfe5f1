"""Searches served by the store's owner: `semfs search` beside a mount or `semfs ingest --watch`
embeds its query with the owner's model over the owner's socket and ranks exactly as a local
search; the watcher owns the store as a mount does, and a mount beside it says what to do.

Real processes, real sockets and shards; the stand-in model (``-m hash``) except where the
real model is the point."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from semfs.ingest.embedding.owner import OwnerEmbedder
from semfs.ingest.errors import SemfsError, StoreOwnedError
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Searcher
from semfs.ingest.store import QueryService
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.edge.store import EdgeStore
from semfs.ingest.store.ipc.client import RemoteStore, connect_daemon
from semfs.ingest.store.ipc.server import StoreServer
from semfs.ingest.store.ipc.wire import MAX_QUERY_CHARS
from semfs.ingest.store.owner import StoreOwner
from tests.helpers import SAMPLE_CORPUS, SEMFS
from tests.helpers.mounting import ingest_hash, mounted, semfs, stop_process, wait_until

QUERIES = [
    "custom domain",
    "how do I rotate an api key",
    "analytics integration",
    "navigation tabs",
    "deploy preview",
]
TIMEOUT = 60.0


def _search(store: Path, query: str, *extra: str) -> list[dict[str, object]]:
    out = semfs("search", query, "--store", str(store), "-k", "10", "--json", *extra).stdout
    return list(json.loads(out))


@contextmanager
def _watching(source: Path, store: Path, *model: str) -> Iterator[subprocess.Popen[str]]:
    """`semfs ingest SOURCE --watch` until the block ends; its first pass done, its socket up."""
    proc = subprocess.Popen(
        [SEMFS, "ingest", str(source), "--store", str(store), "--watch", *model],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    sock = store / "docs" / "daemon.sock"
    state = store / "docs" / "watch.json"
    try:
        wait_until(lambda: sock.exists() or proc.poll() is not None, TIMEOUT, "the socket")
        assert proc.poll() is None, proc.communicate()[0]
        wait_until(
            lambda: json.loads(state.read_text()).get("batches", 0) if state.exists() else 0,
            TIMEOUT,
            "the first pass",
        )
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        stop_process(proc, grace=30)  # type: ignore[arg-type]


def test_search_beside_a_watcher_goes_to_it_and_ranks_as_a_local_search(tmp_path: Path) -> None:
    """While `semfs ingest --watch` runs, search, status and a plain ingest work through it; a
    search's results equal those of a local search of the same store once it has stopped."""
    store = tmp_path / "store"
    with _watching(SAMPLE_CORPUS, store, "-m", "hash") as proc:
        status = semfs("status", "--store", str(store)).stdout
        assert f"in the owner (pid {proc.pid})" in status, status
        assert "semfs ingest --watch" in status, status
        with open_store(CollectionAddress(store=store)) as remote:
            assert isinstance(remote, RemoteStore)
            searcher = Searcher(remote)
            assert isinstance(searcher.embedder, OwnerEmbedder)
            assert searcher.embedder.query_backend.startswith("hash")
        served = {q: _search(store, q) for q in QUERIES}
        served_keyword = _search(store, QUERIES[0], "--mode", "keyword")
        # A plain ingest of another folder is refused for its model, through the watcher.
        other = semfs("ingest", str(tmp_path), "--store", str(store), "-m", "x", check=False)
        assert other.returncode == 1 and "refusing" in other.stderr, other.stderr
    assert proc.returncode == 0
    assert all(served.values())
    local = {q: _search(store, q) for q in QUERIES}
    assert served == local
    assert served_keyword == _search(store, QUERIES[0], "--mode", "keyword")


@pytest.mark.mount
def test_a_mount_beside_a_watcher_says_in_one_line_what_to_do(tmp_path: Path) -> None:
    store = tmp_path / "store"
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with _watching(SAMPLE_CORPUS, store, "-m", "hash") as proc:
        run = semfs("mount", str(mnt), "--store", str(store), check=False)
        assert run.returncode != 0
        err = run.stderr.strip()
        assert len(err.splitlines()) == 1, err
        assert f"semfs ingest --watch` (pid {proc.pid})" in err, err
        assert "semfs mount MOUNTPOINT --watch SOURCE" in err, err
        assert not os.path.ismount(mnt)
        # The watcher is not disturbed: it still answers.
        assert _search(store, "custom domain")


@pytest.mark.mount
def test_search_beside_a_mount_ranks_as_a_local_search(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ingest_hash(SAMPLE_CORPUS, store)
    with mounted(tmp_path / "mnt", "--store", str(store)) as m:
        status = semfs("status", "--store", str(store)).stdout
        assert f"in the owner (pid {m.proc.pid})" in status, status
        served = {q: _search(store, q) for q in QUERIES}
    assert all(served.values())
    assert served == {q: _search(store, q) for q in QUERIES}


@pytest.mark.mount
@pytest.mark.model
def test_search_beside_a_mount_embeds_with_its_warm_model(tmp_path: Path) -> None:
    """The real model: the query goes to the mount (which imports torch or onnxruntime, not the
    client), and the ranking is the local one."""
    from semfs.ingest.embedding.embedder import load_embedder

    store = tmp_path / "store"
    source = tmp_path / "src"
    for f in sorted(SAMPLE_CORPUS.rglob("*.md*"))[:6]:
        (source / f.relative_to(SAMPLE_CORPUS)).parent.mkdir(parents=True, exist_ok=True)
        (source / f.relative_to(SAMPLE_CORPUS)).write_bytes(f.read_bytes())
    with open_store(CollectionAddress(store=store)) as s:
        from semfs.ingest.pipeline import ingest

        ingest(source, s, embedder=load_embedder())
    with mounted(tmp_path / "mnt", "--store", str(store)):
        env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
        r = subprocess.run(
            [SEMFS, "search", "custom domain", "--store", str(store), "-k", "10", "--json"],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            check=True,
        )
        served = [h["path"] for h in json.loads(r.stdout)]
    imported = imported_packages(r.stderr)
    assert "semfs" in imported and "json" in imported  # the import log was read
    heavy = imported & {"torch", "onnxruntime", "sentence_transformers", "transformers"}
    assert not heavy, f"the client imported {sorted(heavy)} instead of asking the mount"
    local = [h["path"] for h in _search(store, "custom domain")]
    assert served == local and served


def imported_packages(importtime: str) -> set[str]:
    """The top-level packages in ``python -X importtime`` output, whose lines are
    ``import time: SELF | CUMULATIVE | NAME`` with NAME indented by its nesting depth
    (``|           torch``: searching for "| torch" finds nothing)."""
    names = set()
    for line in importtime.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":  # the header line
                names.add(name.split(".")[0])
    return names


def test_imported_packages_reads_nested_names() -> None:
    sample = (
        "import time: self [us] | cumulative | imported package\n"
        "import time:       120 |        120 |   _io\n"
        "import time:      4000 |    900000 |           torch\n"
        "import time:        12 |         12 |     torch._C.foo\n"
    )
    assert imported_packages(sample) == {"_io", "torch"}


def _edge_with_hash_store(tmp_path: Path) -> EdgeStore:
    store = tmp_path / "store"
    ingest_hash(SAMPLE_CORPUS, store)
    return EdgeStore(store, "docs")


def test_embed_query_refuses_what_is_not_one_bounded_text(tmp_path: Path) -> None:
    edge = _edge_with_hash_store(tmp_path)
    calls: list[str] = []

    def embed(text: str) -> list[float]:
        calls.append(text)
        return [0.5] * 384

    server = StoreServer(edge, edge.dir, queries=QueryService(embed, lambda: "test backend"))
    server.start()
    try:
        remote = connect_daemon(edge.dir, "docs")
        assert remote is not None and remote.query_backend == "test backend"
        assert remote.embed_query("ok") == [0.5] * 384
        with pytest.raises(SemfsError, match="at most"):
            remote.embed_query("x" * (MAX_QUERY_CHARS + 1))
        with pytest.raises(SemfsError, match="one text"):
            remote._call("embed_query", 1, 2)
        assert remote.read_meta() is not None  # the connection lives on
        remote.close()
        assert calls == ["ok"]
    finally:
        server.close()
        edge.close()


def test_an_owner_that_embeds_no_queries_leaves_them_to_the_client(tmp_path: Path) -> None:
    """A server without a query service (an older owner): the client embeds locally; an owner
    whose model fails: the client falls back to its own, and still answers."""
    edge = _edge_with_hash_store(tmp_path)
    server = StoreServer(edge, edge.dir)
    server.start()
    try:
        remote = connect_daemon(edge.dir, "docs")
        assert remote is not None and remote.query_backend is None
        assert not isinstance(Searcher(remote).embedder, OwnerEmbedder)
        with pytest.raises(SemfsError, match="does not embed queries"):
            remote.embed_query("x")
        remote.close()
    finally:
        server.close()

    def broken(text: str) -> list[float]:
        raise RuntimeError("model gone")

    server = StoreServer(edge, edge.dir, queries=QueryService(broken, lambda: "broken"))
    server.start()
    try:
        remote = connect_daemon(edge.dir, "docs")
        assert remote is not None
        searcher = Searcher(remote)
        assert isinstance(searcher.embedder, OwnerEmbedder)
        hits = searcher.search(SearchRequest("custom domain", k=3))
        assert hits and "in the owner" not in searcher.embedder.query_backend
        remote.close()
    finally:
        server.close()
        edge.close()


def test_owner_refusal_names_the_watcher(tmp_path: Path) -> None:
    """StoreOwner.open beside a live owner raises with its pid and its command line."""
    store = tmp_path / "store"
    with _watching(SAMPLE_CORPUS, store, "-m", "hash") as proc:
        with pytest.raises(StoreOwnedError) as info:
            StoreOwner.open(CollectionAddress(store=store))
        assert info.value.pid == proc.pid and info.value.by_watcher
        # The socket is ours alone, as a mount's is.
        assert os.stat(store / "docs" / "daemon.sock").st_mode & 0o777 == 0o600
