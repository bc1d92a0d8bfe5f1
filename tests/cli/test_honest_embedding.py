"""Honest at every moment (issue 45.3): from the first committed chunk of a first pass,
`semfs status --json` and the results' meaning line count what is really embedded; an
interrupted `semfs ingest --json` prints its report; a search whose owner ends under it fails
loudly, never an empty list as a success.

Real `semfs ingest`, `semfs status` and `semfs search` processes on real Edge stores; the
ingest is the real command on the hash stand-in, held in its first pass by
:mod:`tests.helpers.pausedingest` (no race against its speed)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from semfs.ingest.errors import OwnerGoneError
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Searcher, query_service
from semfs.ingest.store.edge.store import EdgeStore
from semfs.ingest.store.ipc.client import connect_daemon
from semfs.ingest.store.ipc.server import StoreServer
from tests.helpers import SAMPLE_CORPUS, SEMFS
from tests.helpers.mounting import ingest_hash, semfs, stop_process, wait_until

# One chunk each: the first window, held for the BM25 sample of 2048 chunks, is committed
# before the chunker meets STOP in document PAUSE_AT, where the run pauses.
DOCUMENTS = 2200
PAUSE_AT = 2100
STOP = "pausehere"


def test_status_and_results_count_the_chunks_without_vectors_during_a_first_pass(
    tmp_path: Path,
) -> None:
    """Before: the meta said "some chunks lack a vector" only at the end of the first pass, so
    `status` said every chunk was embedded and results had no meaning line until then. And an
    interrupted `--json` ingest printed nothing on stdout."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(DOCUMENTS):
        stop = STOP if i == PAUSE_AT else ""
        (src / f"d{i:04d}.md").write_text(f"# Note {i}\n\nword{i} alpha beta gamma {stop}.\n")
    store, gate = tmp_path / "store", tmp_path / "gate"
    gate.mkdir()
    command = ["semfs", "ingest", str(src), "--store", str(store), "-m", "hash", "--json"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.pausedingest", str(gate), "--at", STOP, *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: (gate / "paused").exists() or proc.poll() is not None, 240, "a pause")
        assert proc.poll() is None, proc.communicate()
        status = json.loads(semfs("status", "--store", str(store), "--json").stdout)
        assert 0 < status["documents"] < DOCUMENTS, status  # the first pass is under way
        assert status["ingesting"], status
        embedding = status["embedding"]
        assert embedding["embedded"] == 0 and embedding["chunks"] >= status["chunks"], status
        found = semfs("search", "alpha beta", "--store", str(store)).stdout
        assert "meaning: 0 % of the collection embedded" in found, found
        semantic = semfs("search", "alpha beta", "--store", str(store), "--mode", "semantic")
        assert "@semantic searched only that part" in semantic.stdout, semantic.stdout
        # Stopped there: the report of what was kept, on stdout, as a run's would be.
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        stop_process(proc)  # type: ignore[arg-type]
    assert proc.returncode == 128 + signal.SIGTERM, err
    report = json.loads(out)
    assert report["interrupted"] == "keywords", report
    # What a run that stopped there kept: the documents status counted (none since: paused).
    assert report["committed"] == status["documents"], report
    assert report["chunks_written"] >= report["committed"], report
    assert err.count("Interrupted:") == 1, err


class SeenServer(StoreServer):
    """A real owner's server that also counts the requests it receives."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.requests = 0

    def _handle(self, conn: socket.socket, pid: int, frame: bytes) -> bool:
        self.requests += 1
        return super()._handle(conn, pid, frame)


def test_a_search_whose_owner_ends_under_it_waits_for_the_next_owner(tmp_path: Path) -> None:
    """Before: an owner whose store closed while its socket still answered (a call under way
    gets a few seconds as the owner ends) ranked nothing and sent ``[]`` as a success, which
    `semfs search --json` printed with exit status 0 (6 of 40 searches during an ingest's
    SIGTERM exit). Now the owner's store raises OwnerGoneError, and the command tries again
    until the next owner (here a new one on the same store) answers."""
    ingest_hash(SAMPLE_CORPUS, tmp_path / "store")
    with EdgeStore(tmp_path / "store", "docs") as alone:
        expected = [h.path for h in Searcher(alone).search(SearchRequest("custom domain", k=3))]
    edge = EdgeStore(tmp_path / "store", "docs")
    owners = Searcher(edge)
    server = SeenServer(edge, edge.dir, queries=query_service(lambda: owners))
    server.start()
    client = connect_daemon(edge.dir, "docs")
    assert client is not None
    nxt: EdgeStore | None = None
    new_server: StoreServer | None = None
    proc: subprocess.Popen[str] | None = None
    try:
        searcher = Searcher(client)
        request = SearchRequest("custom domain", k=3)
        assert [h.path for h in searcher.search(request)] == expected  # the owner searches
        edge.close()  # the owner ends: its store closes before its last calls are answered
        with pytest.raises(OwnerGoneError, match="ended"):
            searcher.search(request)
        seen = server.requests
        proc = subprocess.Popen(
            [SEMFS, "search", "custom domain", "--store", str(tmp_path / "store"), "-k", "3",
             "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        wait_until(lambda: server.requests > seen, 120, "the search to reach the ending owner")
        client.close()
        server.close()  # the old owner is gone; a new one takes the store
        nxt = EdgeStore(tmp_path / "store", "docs")
        new_searcher = Searcher(nxt)
        new_server = StoreServer(nxt, nxt.dir, queries=query_service(lambda: new_searcher))
        new_server.start()
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert [h["path"] for h in json.loads(out)] == expected
    finally:
        if proc is not None:
            stop_process(proc)  # type: ignore[arg-type]
        client.close()
        server.close()
        edge.close()
        if new_server is not None:
            new_server.close()
        if nxt is not None:
            nxt.close()
