"""A resident (long-running) process's store: open it as its owner or through the owner's
socket, serve it, warm it, stop it. The one place a front end that stays up (a mount, ``semfs
mcp``, ``semfs ingest --watch``) does this; use it rather than
:class:`~semfs.ingest.store.owner.StoreOwner` and :func:`~semfs.ingest.store.backends.open_store`
by hand::

    from semfs.ingest.resident import ResidentStore

    with ResidentStore.open(address) as resident:
        store = resident.store                      # owned here, or the owner's over its socket
        searcher = ...                              # made on first need: Callable[[], Searcher]
        resident.embed()                            # the dense pass, resumed and kept up
        resident.serve(on_change=refresh, searcher=searcher)  # after any fork: starts threads
        resident.warm(searcher)                     # the model loads in the background
        ...                                         # work until told to stop
    # leaving the block stops serving, then closes the store

Three names, three things: a :class:`~semfs.ingest.store.owner.StoreOwner` is the process
that holds a store's lock and serves the others; :mod:`semfs.ingest.store.ownerkind` says what
kind of process an owner is (a mount, a watcher, ``semfs mcp``), for messages; a
:class:`ResidentStore` is what a process that stays up holds: the owner's role when it can take
it, else a client of the process that has it.

Rules a caller may rely on:

* ``open`` owns the store when no other process does; when one does, the store is that owner's,
  reached through its socket (``owned`` is False), unless ``through_owner=False`` (a mount
  stacks on no other resident owner): then :class:`~semfs.ingest.errors.StoreOwnedError` says
  who owns it.
  A store locked by a semfs owner that serves no socket yet or any more (starting, or closing),
  or by a holder with no owner note (the moments between its lock and its note), is waited
  for, at most :data:`HANDOVER_S`; then, or at once for a holder that never serves (a
  script), :class:`~semfs.ingest.errors.StoreLockedError`.
* The hand-over: a client of a plain ``semfs ingest`` (a run that ends) outlives it. When the
  ingest's connection breaks (it finished, or was stopped), the next call takes the store over,
  as ``open`` would: this process owns it (``owned`` becomes True, and it serves as ``serve``
  was asked, if it was), or, when another client was first, goes through that one's socket.
  The call is then made again (every Store call is idempotent: an upsert, a put or a delete
  by id); the caller sees nothing but the wait (at most :data:`HANDOVER_S`) while the old
  owner closes.
* ``serve`` is a no-op through a socket (until a hand-over) and for a server backend; when
  this process owns an
  embedded store, other processes write through it (``on_change`` runs in a server thread after
  they commit; keep it short), and with ``searcher`` their searches run here, on its warm model
  (a ``semfs search`` beside us then needs no model of its own, and one round trip).
* ``warm`` loads the searcher's model in a daemon thread; failures are logged, never raised
  (each search then says why, or loads the model itself).
* ``embed`` (when we own the store, or once a hand-over gives it to us) starts the second pass
  of ingest in a thread (:class:`~semfs.ingest.densepass.DenseService`): the chunks an earlier
  run left without dense vectors, then those each write adds (``changed``; other processes'
  writes through our socket, too), with the store's model, loaded only when there is
  something to embed. Writers beside us leave the dense pass to it. ``close`` stops it after
  its window.
* ``stop_serving`` ends the service and keeps the store open (call it before whatever
  ``on_change`` wakes is stopped); ``close`` is idempotent and stops serving before closing.

Imports no click, no FUSE binding and nothing of ``semfs.fusefs``: every front end may use it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from semfs.ingest.errors import OwnerGoneError, SemfsError, StoreLockedError, StoreOwnedError
from semfs.ingest.store import DelegatingStore, QueryService, Store, ownerkind
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.owner import StoreOwner

if TYPE_CHECKING:  # imported where used: a mount's first listing needs no search engine
    from semfs.ingest.densepass import DenseService
    from semfs.ingest.embedding.embedder import Embedder
    from semfs.ingest.request import SearchRequest
    from semfs.ingest.search import Hit, Searcher, Standing

logger = logging.getLogger(__name__)

# How long a client waits for an owner that went away to let the store go (its last flush and
# close take a second or two) before its call fails.
HANDOVER_S = 60.0
_RETRY_S = 0.1
# Owners that serve a socket while they hold the store: locked without one, they are starting
# or closing (semfs.ingest.store.ownerkind's kinds).
SERVING_KINDS = frozenset({ownerkind.MOUNT, ownerkind.WATCHER, ownerkind.MCP, ownerkind.INGEST})
# Holders waited for while they hold the lock without a socket: the serving kinds, and one
# with no note (between its lock and its note, or its note and its unlock: starting or closing).
PASSING_KINDS = SERVING_KINDS | {ownerkind.UNNOTED}


class _Relay(DelegatingStore):
    """A client's store: the owner's over its socket until that owner goes, then whatever
    ``take_over(dead)`` gives in its place. Each call that finds the owner gone is made again
    on it."""

    def __init__(self, inner: Store, take_over: Callable[[Store], Store]) -> None:
        super().__init__(inner)
        self.take_over = take_over

    def close(self) -> None:
        self.inner.close()


def _relayed(name: str) -> Callable[..., Any]:
    def call(self: _Relay, *args: Any, **kwargs: Any) -> Any:
        inner = self.inner
        try:
            return getattr(inner, name)(*args, **kwargs)
        except OwnerGoneError:
            return getattr(self.take_over(inner), name)(*args, **kwargs)

    call.__name__ = name
    return call


# Every call of the Store interface (DelegatingStore passes each on; the ipc coverage test
# keeps it whole), but close and the properties.
for _name, _value in vars(DelegatingStore).items():
    if callable(_value) and not _name.startswith("_") and _name != "close":
        setattr(_Relay, _name, _relayed(_name))


class ResidentStore:
    """This process's store: its own (``owner``), or another process's through its socket."""

    def __init__(
        self,
        store: Store,
        owner: StoreOwner | None = None,
        reopen: Callable[[], StoreOwner] | None = None,
        connect: Callable[[], Store] | None = None,
    ) -> None:
        """``reopen`` owns the store (StoreOwnedError when another process does) and
        ``connect`` reaches its owner: given both, a client takes the store over when its
        owner goes (the hand-over)."""
        self.owner = owner
        self._serving: dict[str, Any] | None = None  # what serve() was asked, for a hand-over
        self._embedding: dict[str, Any] | None = None  # what embed() was asked, likewise
        self.dense: DenseService | None = None
        self._handover = threading.Lock()
        self._reopen, self._connect = reopen, connect
        self.store: Store = store
        if owner is None and reopen is not None and connect is not None:
            self.store = _Relay(store, self._take_over)

    @classmethod
    def open(
        cls, address: CollectionAddress, must_exist: bool = True, through_owner: bool = True
    ) -> ResidentStore:
        """The collection, owned by this process if no other owns it. ``must_exist``: when we
        own it, it must be ingested already (through an owner, the caller checks)."""
        owning = functools.partial(StoreOwner.open, address)
        connecting = functools.partial(open_store, address)
        started = time.monotonic()
        told = False
        while True:
            try:
                owner = owning(must_exist=must_exist)
            except StoreOwnedError as exc:
                if not through_owner:
                    raise
                remote = connecting()
                if remote.owner_link() is None:  # the owner has just gone: try again
                    remote.close()
                    time.sleep(_RETRY_S)
                    continue
                if not exc.by_ingest:  # a resident owner: its model serves our queries
                    return cls(remote)
                return cls(
                    remote, reopen=functools.partial(owning, must_exist=False), connect=connecting
                )
            except StoreLockedError as exc:
                # Locked by a semfs process that serves no socket (yet, or any more): an
                # owner starting or closing, e.g. a stdio `semfs mcp` whose client has just
                # left (its dense pass ends its window first). Wait for it as a hand-over
                # does, rather than refuse to start beside it. A holder that never serves (a
                # script, the Python API) is said at once.
                waited = time.monotonic() - started
                if exc.kind not in PASSING_KINDS or waited > HANDOVER_S:
                    raise
                if not told and waited > 2:
                    logger.warning("%s; waiting up to %g s", exc, HANDOVER_S)
                    told = True
                time.sleep(_RETRY_S)
                continue
            return cls(owner.store, owner)

    def _take_over(self, dead: Store) -> Store:
        """The store in place of ``dead``, whose owner went away: this process's own (served as
        ``serve`` was asked), or the new owner's when another client took it first."""
        assert self._reopen is not None and self._connect is not None
        relay = self.store
        assert isinstance(relay, _Relay)
        with self._handover:
            if relay.inner is not dead:  # another thread has done it
                return relay.inner
            with contextlib.suppress(Exception):
                dead.close()
            deadline = time.monotonic() + HANDOVER_S
            while True:
                try:
                    owner = self._reopen()
                except StoreOwnedError:  # another client took it over first: go through it
                    store = self._connect()
                    if store.owner_link() is not None:
                        relay.inner = store
                        logger.info("the store's owner went away: reached %s", store.location)
                        return store
                    store.close()  # and that owner went too: try again
                except (StoreLockedError, OwnerGoneError) as exc:
                    # The old owner is still closing (or a new one still starting).
                    if time.monotonic() > deadline:
                        raise OwnerGoneError(
                            f"the owner of {dead.location} went away and the store is still "
                            f"locked after {HANDOVER_S:g} s: {exc}"
                        ) from exc
                    time.sleep(_RETRY_S)
                else:
                    self.owner = owner
                    relay.inner = owner.store
                    if self._embedding is not None:
                        self._start_dense(**self._embedding)
                    if self._serving is not None:
                        self._serve(owner, **self._serving)
                    logger.info("the store's owner went away: this process owns it now")
                    return owner.store

    @property
    def owned(self) -> bool:
        """Whether this process owns the store (else it goes through the owner's socket)."""
        return self.owner is not None

    def serve(
        self,
        on_change: Callable[[], None] | None = None,
        served: Store | None = None,
        searcher: Callable[[], Searcher] | None = None,
        held: Callable[[], Collection[str]] | None = None,
    ) -> None:
        """Serve other processes (when we own the store): their writes reach ``served`` (a view
        of the store; default the store), and ``searcher()`` (made on first need) runs their
        searches and embeds their queries; ``held()`` tells their ingests which files our
        writable mount holds open (left as they are until closed). Raises SemfsError when it
        cannot serve. A client serves so once it takes the store over (the hand-over)."""
        with self._handover:
            self._serving = {
                "on_change": on_change,
                "served": served,
                "searcher": searcher,
                "held": held,
            }
            if self.owner is not None:
                self._serve(self.owner, on_change, served, searcher, held)

    def _serve(
        self,
        owner: StoreOwner,
        on_change: Callable[[], None] | None,
        served: Store | None,
        searcher: Callable[[], Searcher] | None,
        held: Callable[[], Collection[str]] | None = None,
    ) -> None:
        queries = _deferred_queries(searcher) if searcher is not None else None
        dense = self.dense
        if dense is not None:
            after = on_change

            def on_change() -> None:  # their chunks want vectors: tell the dense pass
                dense.poke()
                if after is not None:
                    after()

        owner.serve(
            on_change=on_change,
            served=served,
            queries=queries,
            embeds=dense is not None,
            held=held,
        )

    def embed(
        self,
        embedder: Callable[[], Embedder] | None = None,
        store: Store | None = None,
        on_phase: Callable[[str, int], None] | None = None,
        on_progress: Callable[[int], None] | None = None,
        on_vectors: Callable[[], None] | None = None,
    ) -> None:
        """Start the dense pass (when we own the store, or once we take it over; else its
        owner runs its own), with ``embedder()`` (default: the store's model, made when first
        needed), writing through ``store`` (a view of ours; default ours); ``on_vectors()``
        now and then while it stores vectors (cached search results rank otherwise since).
        Call it before :meth:`serve`, which tells other writers that we embed."""
        with self._handover:
            self._embedding = {
                "embedder": embedder,
                "store": store,
                "on_phase": on_phase,
                "on_progress": on_progress,
                "on_vectors": on_vectors,
            }
            if self.owner is not None:
                self._start_dense(**self._embedding)

    def _start_dense(
        self,
        embedder: Callable[[], Embedder] | None,
        store: Store | None,
        on_phase: Callable[[str, int], None] | None,
        on_progress: Callable[[int], None] | None,
        on_vectors: Callable[[], None] | None,
    ) -> None:
        if self.dense is not None:
            return
        from semfs.ingest.densepass import DenseService

        target = store or self.store
        self.dense = DenseService(
            target,
            embedder or (lambda: _documents_embedder(target)),
            on_phase=on_phase,
            on_progress=on_progress,
            on_vectors=on_vectors,
        )
        self.dense.start()

    def changed(self) -> None:
        """This process wrote the store (a watcher's batch, a write tool): embed what it added."""
        dense = self.dense
        if dense is not None:
            dense.poke()

    def warm(self, searcher: Callable[[], Searcher], delay: float = 0.0) -> None:
        """Load ``searcher()``'s model in a daemon thread, ``delay`` seconds from now (a mount
        lets its first listings come first: the model's import holds the GIL a while)."""
        threading.Thread(
            target=_warm_up, args=(searcher, delay), name="semfs-model", daemon=True
        ).start()

    def stop_serving(self) -> None:
        """Stop serving other processes (waits for calls under way); keep the store open."""
        with self._handover:
            self._serving = None
            owner = self.owner
        if owner is not None:
            owner.stop_serving()

    def close(self) -> None:
        """Stop serving, then close the store. Safe to call twice (both closes are)."""
        with self._handover:
            self._embedding = None
            dense, self.dense = self.dense, None
        if dense is not None:
            dense.stop()  # after its window: the vectors so far are stored
        (self.owner or self.store).close()

    def __enter__(self) -> ResidentStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _documents_embedder(store: Store) -> Embedder:
    """The embedder of the store's documents (its recorded model)."""
    from semfs.ingest.embedding.embedder import load_embedder

    meta = store.read_meta()
    if meta is None:
        raise SemfsError(f"{store.location} has no model recorded yet")
    return load_embedder(meta.model)


def _warm_up(make: Callable[[], Searcher], delay: float) -> None:
    time.sleep(delay)
    started = time.monotonic()
    try:
        searcher = make()
        name = searcher.embedder.name
    except Exception as exc:  # searches fail one by one with the same error
        logger.warning("cannot prepare searches: %s", exc)
        return
    try:
        searcher.warm_up()
    except Exception as exc:  # searches retry the load, and fail one by one if it cannot be done
        logger.warning(
            "cannot load the embedding model %s: %s",
            name,
            exc,
            exc_info=logger.isEnabledFor(logging.DEBUG),
        )
        return
    logger.info("embedding model %s ready in %.1f s", name, time.monotonic() - started)


def _deferred_queries(searcher: Callable[[], Searcher]) -> QueryService:
    """:func:`semfs.ingest.search.query_service` for ``searcher``, with the search package
    imported at the first query, not here: a mount serves before it answers its first listing,
    and that import (the ranking, the excerpts, the engine's search calls) was a third of the
    daemon's start."""

    @functools.cache
    def service() -> QueryService:
        from semfs.ingest.search import query_service

        return query_service(searcher)

    def search(options: dict[str, Any]) -> list[dict[str, Any]]:
        served = service().search
        assert served is not None  # query_service always gives one
        return served(options)

    return QueryService(
        embed=lambda text: service().embed(text),
        backend=lambda: service().backend(),
        search=search,
    )


class LazySearcher:
    """The one searcher a process makes on first need (the mount, the MCP tools, a watcher,
    the Python API): ``searcher()`` makes it once and returns the same one after, thread-safe;
    ``search`` and ``similar`` run on it. Its module imports the engine and the excerpt
    picker, which a mount's first listing does not need. :meth:`reset` forgets it (a first
    ingest chose the model it loads; ``embedder``: the model to make it with from then on)."""

    def __init__(self, store: Store, embedder: Embedder | None = None) -> None:
        self._store = store
        self._embedder = embedder
        self._searcher: Searcher | None = None
        self._lock = threading.Lock()

    def __call__(self) -> Searcher:
        with self._lock:
            if self._searcher is None:
                from semfs.ingest.search import Searcher

                self._searcher = Searcher(self._store, embedder=self._embedder)
            return self._searcher

    def reset(self, embedder: Embedder | None = None) -> None:
        with self._lock:
            self._searcher = None
            self._embedder = embedder

    def search(
        self, request: SearchRequest, committed: Callable[[str, int], bool] | None = None
    ) -> list[Hit]:
        return self().search(request, committed)

    def similar(
        self,
        path: str,
        gen: int,
        request: SearchRequest,
        committed: Callable[[str, int], bool] | None = None,
    ) -> list[Hit]:
        return self().similar(path, gen, request, committed)

    def nearness(self, request: SearchRequest) -> float | None:
        return self().nearness(request)

    def standing(self, request: SearchRequest) -> Standing:
        return self().standing(request)
