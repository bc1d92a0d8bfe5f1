"""One collection opened for a front end: its store, its one searcher and its results text.

The one composition root of the front ends that search a collection: the mount daemon
(:mod:`semfs.fusefs.mount.daemon`), the MCP tools (:mod:`semfs.fusefs.agent.toolbox`), a
follower (:mod:`semfs.ingest.follow`) and the Python :class:`~semfs.ingest.collection.Collection`
each get an :class:`Opened` from :func:`open_resident` or :func:`open_direct`, and wire nothing
else of the store, the searcher or the renderer by hand; several collections (one mount or one
MCP server of ``docs`` and ``code``) are several of them, each with its own store, model and
owner::

    from semfs.ingest.opened import open_resident

    with open_resident(address) as opened:      # owned here, or through its owner's socket
        hits = opened.searcher.search(request)  # the one searcher, made on first need
        text = opened.results_text(request, tuple(hits))  # 00-results.md, byte for byte

Rules a caller may rely on:

* ``searcher`` is a :class:`~semfs.ingest.resident.LazySearcher`: nothing of the search engine
  or the model loads until the first search (a mount's first listing needs neither).
* :meth:`Opened.results_text` is the results file every front end shows for a search (the
  renderer of :mod:`semfs.ingest.search.results`), with the status lines under its title: the
  caller's ``status`` (a watcher's freshness), then how much of the searched folder is
  embedded while a dense pass is under way (:meth:`Opened.meaning_note`).
* ``resident`` is the :class:`~semfs.ingest.resident.ResidentStore` of a process that stays up
  (:func:`open_resident`), None for a direct open (:func:`open_direct`, the Python API's: a
  mount or ``semfs mcp`` that owns the store is still reached through its socket);
  :meth:`Opened.close` closes whichever it is, once.

Imports no click, no FUSE binding and nothing of ``semfs.fusefs``: every front end may use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from semfs.ingest.resident import LazySearcher, ResidentStore
from semfs.ingest.store import Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store

if TYPE_CHECKING:
    from semfs.ingest.request import SearchRequest
    from semfs.ingest.search import Hit


@dataclass
class Opened:
    """One open collection as a front end uses it: ``store``, the one ``searcher`` on it, and
    ``resident`` when this process stays up with it (see the module's rules)."""

    address: CollectionAddress
    store: Store
    searcher: LazySearcher
    resident: ResidentStore | None = None

    @classmethod
    def over(cls, store: Store) -> Opened:
        """An Opened on ``store``, which the caller already holds (a test's store): its
        ``address`` names the collection only (on the default store)."""
        return cls(CollectionAddress(store.collection), store, LazySearcher(store))

    @property
    def name(self) -> str:
        """The collection's name (a folder of a mount or an MCP server of several)."""
        return self.address.collection

    def meaning_note(self, mode: str, under: str | None = None) -> str | None:
        """The results file's line while a dense pass is under way: how much of ``under`` is
        embedded (:meth:`semfs.ingest.search.Searcher.meaning_note`), else None."""
        return self.searcher().meaning_note(mode, under)

    def results_text(
        self,
        request: SearchRequest,
        hits: tuple[Hit, ...],
        *,
        names: tuple[str, ...] | None = None,
        where: str | None = None,
        tools: bool = False,
        status: str | None = None,
        meaning: bool = True,
    ) -> bytes:
        """The results file of ``hits`` for ``request``: what ``.search/QUERY/00-results.md``
        holds, `semfs search` prints and the MCP search tool returns. ``names``: the hits'
        link names (default: as :func:`~semfs.ingest.search.results.link_names` makes them);
        ``where``/``tools``: as :func:`~semfs.ingest.search.results.results_file` takes them;
        ``status`` and (unless ``meaning`` is False) the embedded share go under the title."""
        from semfs.ingest.search.results import link_names, results_file, with_status_line

        if names is None:
            names = link_names(hits, request.k)
        body = results_file(request, hits, names, where=where, tools=tools)
        note = self.meaning_note(request.mode, request.under) if meaning and request.text else None
        return with_status_line(body, "\n".join(line for line in (status, note) if line) or None)

    def close(self) -> None:
        """Close the store (a resident one stops serving first). Safe to call twice."""
        (self.resident or self.store).close()

    def __enter__(self) -> Opened:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_resident(
    address: CollectionAddress,
    must_exist: bool = True,
    through_owner: bool = True,
) -> Opened:
    """``address`` for a process that stays up with it (a mount, ``semfs mcp``, a follower):
    owned here when no other process owns it, else through its owner's socket, as
    :meth:`ResidentStore.open` says (``must_exist``, ``through_owner``)."""
    resident = ResidentStore.open(address, must_exist=must_exist, through_owner=through_owner)
    return Opened(address, resident.store, LazySearcher(resident.store), resident)


def open_direct(address: CollectionAddress) -> Opened:
    """``address`` opened for the length of a caller's use (the Python API): the embedded
    store held by this process, or its owner's through the socket while one serves it."""
    store = open_store(address)
    return Opened(address, store, LazySearcher(store))
