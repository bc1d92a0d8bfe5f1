"""Searches run by the store's owner: `semfs search` beside an owner sends it one request for the
whole search (at most 3 round trips in all), gets a local search's hits, and searches itself
when the owner cannot; the owner takes only a bounded query and typed options. And a search
asks its store for k documents, not one look-up per candidate path.

Real Edge stores, a real owner's server on a real socket, the real `semfs search` command; the
counts come from spies around the real server and store (not mocks of the search under test).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from semfs.ingest.errors import SemfsError
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Searcher, query_service
from semfs.ingest.store import DelegatingStore, QueryService, Store
from semfs.ingest.store.edge.store import EdgeStore
from semfs.ingest.store.ipc.client import connect_daemon
from semfs.ingest.store.ipc.server import StoreServer
from semfs.ingest.store.ipc.wire import MAX_QUERY_CHARS
from semfs.ingest.store.schema import DocumentRecord
from tests.helpers import SAMPLE_CORPUS
from tests.helpers.mounting import ingest_hash, semfs

K = 5
# What a search may cost beside an owner, the hello aside: the command's own read of the
# collection's meta, the searcher's, and the search the owner runs.
MAX_ROUND_TRIPS = 3
QUERIES = ["custom domain", "how do I rotate an api key", "analytics integration"]


class CountingServer(StoreServer):
    """A real owner's server that also records the method of every request it receives."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.requests: list[str] = []

    def _handle(self, conn: socket.socket, pid: int, frame: bytes) -> bool:
        try:
            self.requests.append(str(json.loads(frame).get("method")))
        except ValueError:
            self.requests.append("?")
        return super()._handle(conn, pid, frame)


class DocumentLookups(DelegatingStore):
    """A real store that counts get_document calls (a spy)."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.lookups: list[str] = []

    def get_document(self, path: str) -> DocumentRecord | None:
        self.lookups.append(path)
        return self.inner.get_document(path)


@pytest.fixture
def edge(tmp_path: Path) -> Iterator[EdgeStore]:
    ingest_hash(SAMPLE_CORPUS, tmp_path / "store")
    store = EdgeStore(tmp_path / "store", "docs")
    try:
        yield store
    finally:
        store.close()


def _search(store: Path, query: str) -> list[dict[str, object]]:
    out = semfs("search", query, "--store", str(store), "-k", str(K), "--json").stdout
    return list(json.loads(out))


def test_search_beside_an_owner_makes_at_most_three_round_trips(
    edge: EdgeStore, tmp_path: Path
) -> None:
    searcher = Searcher(edge)
    server = CountingServer(edge, edge.dir, queries=query_service(lambda: searcher))
    server.start()
    try:
        served = {}
        for query in QUERIES:
            server.requests.clear()
            served[query] = _search(tmp_path / "store", query)
            assert len(served[query]) == K
            assert len(server.requests) <= MAX_ROUND_TRIPS, server.requests
            assert "get_document" not in server.requests, server.requests
    finally:
        server.close()
    # The owner's search is the one this process would run on the same store.
    edge.close()
    assert served == {q: _search(tmp_path / "store", q) for q in QUERIES}


def test_a_search_asks_for_k_documents_not_one_per_candidate(edge: EdgeStore) -> None:
    """Every candidate chunk's path used to be looked up, ~25 distinct paths for k=2 here; a
    search needs only the k it keeps (the only other look-ups are versions it skips)."""
    counting = DocumentLookups(edge)
    searcher = Searcher(counting)
    for k in (1, 2, K):
        for query in QUERIES:
            counting.lookups.clear()
            hits = searcher.search(SearchRequest(query, k=k))
            assert len(hits) == k
            assert counting.lookups == [h.path for h in hits], counting.lookups


def test_the_owner_takes_one_bounded_query_and_typed_options(edge: EdgeStore) -> None:
    searcher = Searcher(edge)
    server = StoreServer(edge, edge.dir, queries=query_service(lambda: searcher))
    server.start()
    try:
        remote = connect_daemon(edge.dir, "docs")
        assert remote is not None and remote.searches
        assert remote.search({"query": "custom domain", "k": 2, "mode": "hybrid"})
        refused = [
            ((), {"query": "x" * (MAX_QUERY_CHARS + 1)}, "at most"),
            ((), {"query": "x", "k": True}, "k cannot be bool"),
            ((), {"query": "x", "k": "5"}, "k cannot be str"),
            ((), {"query": "x", "committed": None}, "keyword arguments"),
            (("x",), {}, "keyword arguments"),
            ((), {"query": "x", "mode": "fuzzy"}, "unknown mode"),
            ((), {"query": "x", "k": 10_000}, "k must be"),
        ]
        for args, kwargs, message in refused:
            with pytest.raises(SemfsError, match=message):
                remote._call("search", *args, **kwargs)
        assert remote.read_meta() is not None  # the connection lives on
        remote.close()
    finally:
        server.close()


def test_an_owner_that_cannot_search_leaves_the_search_to_the_client(edge: EdgeStore) -> None:
    """An owner whose search fails: the client searches itself (embedding through the owner),
    with the same hits; one that does not offer searches is never asked."""
    local = Searcher(edge)
    expected = local.search(SearchRequest("custom domain", k=K))

    def broken(options: dict[str, object]) -> list[dict[str, object]]:
        raise RuntimeError("searcher gone")

    served = query_service(lambda: local)
    for queries in (
        QueryService(served.embed, served.backend, broken),
        QueryService(served.embed, served.backend),
    ):
        server = CountingServer(edge, edge.dir, queries=queries)
        server.start()
        try:
            remote = connect_daemon(edge.dir, "docs")
            assert remote is not None
            assert remote.searches is (queries.search is not None)
            assert Searcher(remote).search(SearchRequest("custom domain", k=K)) == expected
            assert server.requests.count("search") == (1 if queries.search else 0)
            assert "embed_query" in server.requests
            remote.close()
        finally:
            server.close()
