"""Keeping a collection mirroring a folder from a process of its own: `semfs ingest --watch`.

:class:`Follower` opens the collection, then :meth:`Follower.run` makes a full pass and a
batch per burst of changes (:class:`semfs.ingest.watch.SourceWatcher`) until interrupted. The
command line only prints; a mount's ``--watch`` runs a :class:`SourceWatcher` inside its daemon.

Rules a caller may rely on:

* **It owns the store as a mount does**: `semfs search`, `semfs status`, `semfs mcp` and a
  plain `semfs ingest` reach it through its socket, searches embedded with its model (warmed
  once the collection exists). When a mount owns the store already, it writes through the
  mount's socket instead.
* **Refusals come before the first batch**: a source that is not a readable folder, another
  model than the store's, another folder than the collection's (unless ``replace``) raise
  from the constructor, not once per batch.
* The documents' model loads on the first change to embed and stays loaded between batches.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from semfs.ingest.embedding.embedder import Embedder, load_embedder
from semfs.ingest.opened import open_resident
from semfs.ingest.origin import claim_source
from semfs.ingest.pipeline import ingest, resolve_model
from semfs.ingest.report import IngestReport
from semfs.ingest.resident import ResidentStore
from semfs.ingest.sources import IngestRequest, SourceOptions, check_source
from semfs.ingest.store import Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.syncstate import SyncState, state_file
from semfs.ingest.watch import OnBatch, SourceWatcher

logger = logging.getLogger(__name__)
T = TypeVar("T")


class Follower:
    """A collection kept mirroring ``source`` by this process; close it (or use ``with``)."""

    def __init__(
        self,
        source: Path,
        address: CollectionAddress,
        options: SourceOptions,
        *,
        replace: bool = False,
    ) -> None:
        check_source(source)
        self.source = source
        self.options = options
        self._state_file = state_file(address)
        # A mount that owns the store already is written through its socket, as `semfs ingest`.
        self._opened = open_resident(address, must_exist=False)
        assert self._opened.resident is not None
        self._resident: ResidentStore = self._opened.resident
        self.store: Store = self._opened.store
        try:
            # Another model: fail now, not per batch.
            self.embedder: Embedder = load_embedder(resolve_model(self.store, options.model))
            # Another folder: refuse now, not per batch. With replace, the first pass takes it.
            self._replace = claim_source(
                self.store.read_meta(), source, address.collection, replace=replace
            ).replaced
        except BaseException:
            self.close()
            raise

    def run(
        self,
        on_batch: OnBatch | None = None,
        on_phase: Callable[[str, int], None] | None = None,
        on_progress: Callable[[int], None] | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        """Mirror the source until KeyboardInterrupt (Ctrl-C; the caller may map SIGTERM to
        it): the batch under way finishes and the state says so. ``on_batch(report, state)``
        after each batch; ``on_phase``/``on_progress`` as for
        :func:`semfs.ingest.pipeline.ingest`; ``on_ready()`` once it serves, before the first
        pass. The dense vectors follow each batch in a thread of their own (when this process
        owns the store; else its owner embeds them)."""
        o = self.options
        if self._replace:
            request = IngestRequest(o, replace_source=True)
            ingest(self.source, self.store, request, embedder=self.embedder)
        resident = self._resident

        def batch_done(report: IngestReport, state: SyncState) -> None:
            resident.changed()  # its chunks want dense vectors
            if on_batch is not None:
                on_batch(report, state)

        watcher = SourceWatcher(
            self.source,
            self.store,
            o,
            embedder=self.embedder,
            state_file=self._state_file,
            on_batch=batch_done,
            on_phase=on_phase,
            on_progress=on_progress,
        )
        store = self.store
        searcher = self._opened.searcher
        embedder = self.embedder
        # The dense pass: here when we own the store (or take it over from an ingest), else
        # the owner's own.
        self._resident.embed(lambda: embedder)
        # Through another's socket this waits: a client of a `semfs ingest` under way serves
        # once it takes the store over (semfs.ingest.resident).
        self._resident.serve(searcher=searcher)
        if self._resident.owned and store.read_meta() is not None:  # the first search: warm
            self._resident.warm(searcher)
        if on_ready is not None:
            on_ready()
        with contextlib.suppress(KeyboardInterrupt):
            watcher.run()  # stops the watcher on its way out

    def close(self) -> None:
        """Stop serving and close the store."""
        self._opened.close()

    def __enter__(self) -> Follower:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
