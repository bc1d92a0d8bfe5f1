"""One contract per capability of the split store interface (issue 49), so that a backend
implements what it serves and callers ask what it declared, never its class:

* reading (:class:`StoreReader`): what a search and a store check need, and nothing written;
* the owner's link (:meth:`StoreReader.owner_link`): what a store reached through its owner's
  socket declares (embeds queries, runs searches, embeds what we write, holds files open),
  and the callers that act on it;
* a backend row's :class:`Capabilities`: a shard is set aside only where the row says.

Real Edge stores, a real owner serving on its socket, the hash stand-in model.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from semfs.ingest.embedding.owner import owner_embedder
from semfs.ingest.errors import SemfsError
from semfs.ingest.pipeline import ingest
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Searcher
from semfs.ingest.store import QueryService, StoreReader, StoreWriter
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import BACKENDS, open_store, set_aside
from semfs.ingest.store.check import check_store
from semfs.ingest.store.edge.store import EdgeStore
from tests.helpers import SAMPLE_CORPUS
from tests.helpers.mounting import ingest_hash


def _read_only(inner: StoreReader) -> StoreReader:
    """A backend that serves reads only: it implements StoreReader's abstract methods (each
    passed to ``inner``) and nothing of the writing side."""

    def forward(name: str) -> Callable[..., Any]:
        return lambda self, *args, **kwargs: getattr(inner, name)(*args, **kwargs)

    methods = {name: forward(name) for name in StoreReader.__abstractmethods__}
    methods["location"] = property(lambda self: inner.location)
    methods.update(backend="read-only", collection=inner.collection)
    return type("ReadOnly", (StoreReader,), methods)()  # type: ignore[no-any-return]


def test_reading_is_all_a_search_and_a_check_need(store_dir: Path) -> None:
    ingest_hash(SAMPLE_CORPUS, store_dir)
    with EdgeStore(store_dir, "docs") as edge:
        reader = _read_only(edge)
        assert not isinstance(reader, StoreWriter) and not hasattr(reader, "put_document")
        request = SearchRequest("custom domain", k=3)
        hits = Searcher(reader).search(request)
        assert [h.path for h in hits] == [h.path for h in Searcher(edge).search(request)]
        assert hits and check_store(reader).ok
        assert reader.owner_link() is None  # this process reads it itself


def _embed(text: str) -> list[float]:
    return [1.0] + [0.0] * 255


@pytest.mark.parametrize("declared", [False, True])
def test_the_owner_link_says_what_the_owner_declared_and_callers_act_on_it(
    tmp_path: Path, declared: bool
) -> None:
    """An owner serving with or without each service: the link declares exactly that, the
    query embedder and the ingest's dense pass follow it, and so does the held-files check."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("# A\n\nkeys rotate monthly\n")
    (src / "held.md").write_text("# Held\n\nopen for writing\n")
    owner = EdgeStore(tmp_path / "store", "docs")
    queries = QueryService(_embed, lambda: "test backend") if declared else None
    stop = owner.serve_writers(queries=queries, embeds=declared, held=lambda: ["held.md"])
    assert owner.owner_link() is None  # the process that owns it talks to it itself
    try:
        with open_store(CollectionAddress(store=tmp_path / "store")) as through:
            link = through.owner_link()
            assert link is not None and link.pid == os.getpid()
            assert (link.embeds, link.query_backend is not None) == (declared, declared)
            assert not link.searches  # no search was served
            assert link.held_open() == frozenset({"held.md"})
            report = ingest(src, through, model="hash")
            assert report.added == ["a.md"]  # the file held open is left as it is
            # Declared: the owner embeds what we wrote; else this run did.
            assert report.dense_elsewhere == (f"pid {os.getpid()}" if declared else "")
            assert (report.chunks_embedded > 0) is not declared
            embedder = owner_embedder(through, "hash", lambda: None)
            assert (embedder is not None) == declared
            if embedder is not None:
                assert embedder.encode(["anything"]) == [_embed("anything")]
    finally:
        assert stop is not None
        stop()
        owner.close()


def test_only_a_row_that_can_set_aside_a_shard_does(tmp_path: Path) -> None:
    """``semfs check --rebuild`` asks the row: the embedded one renames the shard aside, the
    server's refuses in one line (it touched nothing)."""
    assert [n for n, b in BACKENDS.items() if b.can.set_aside] == ["embedded"]
    ingest_hash(SAMPLE_CORPUS, tmp_path / "store")
    aside = set_aside(CollectionAddress(store=tmp_path / "store"))
    assert aside.is_dir() and aside.name.startswith("shard.damaged")
    with pytest.raises(SemfsError, match="only an embedded store's shard can be set aside"):
        set_aside(CollectionAddress(url=f"file://{tmp_path / 'local'}"))
