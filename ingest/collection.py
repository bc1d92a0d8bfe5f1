"""semfs from Python: open a collection, ingest a folder into it, search it, read it, follow
a folder; list and remove collections.

The front door for a script or a notebook, as ``llm.get_model()`` is llm's; ``import semfs``
gives these names (the ``semfs`` package re-exports them)::

    import semfs

    with semfs.open_collection("docs") as docs:     # the embedded store's "docs"
        docs.ingest("./my-docs")                    # what `semfs ingest ./my-docs` does
        for hit in docs.search("how do I rotate an api key"):
            print(hit.rank, hit.path, hit.strength_label)

It is the library the command line runs, not a copy of it: :meth:`Collection.ingest` is
:func:`semfs.ingest.pipeline.ingest`, :meth:`Collection.search` is
:meth:`semfs.ingest.search.Searcher.search` with a
:class:`~semfs.ingest.request.SearchRequest`, :meth:`Collection.results_text` is a mount's
``00-results.md`` (:func:`semfs.ingest.search.results.results_file`, the one renderer),
:meth:`Collection.similar` is ``.similar/PATH/``, :meth:`Collection.watch` is `semfs ingest
--watch` in a thread, :meth:`Collection.status` is what ``semfs status --json`` prints,
:func:`collections` and :func:`remove` are `semfs collections list` and `rm`.
``docs/python-api.md`` is the guide (a test runs its examples).

Rules a caller may rely on:

* :func:`open_collection` takes a :class:`~semfs.ingest.store.address.CollectionAddress` (or a
  collection name on the default store): an embedded store, or a Qdrant server with ``url``.
* While a :class:`Collection` is open, this process holds the embedded store, unless a
  mount, ``semfs mcp`` or a watcher owns it: then every call goes through that owner, as
  ``semfs ingest`` and ``semfs search`` do beside a mount. Close it (or use ``with``).
* Errors are :class:`~semfs.ingest.errors.SemfsError` subclasses with a one-line message.
* A collection that does not exist yet can be opened, and :meth:`Collection.ingest` makes it;
  :meth:`~Collection.search`, :meth:`~Collection.status` and :meth:`~Collection.read` of one
  that does not exist raise :class:`~semfs.ingest.errors.StoreNotFoundError`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semfs.ingest.errors import (
    SemfsError,
    SourceMismatchError,
    StoreLockedError,
    StoreNotFoundError,
)
from semfs.ingest.focus import uses_of
from semfs.ingest.opened import open_direct
from semfs.ingest.request import SearchRequest
from semfs.ingest.store import DEFAULT_COLLECTION, DEFAULT_K, Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import (
    capabilities,
    missing_collection,
    open_catalog,
)

if TYPE_CHECKING:
    from semfs.ingest.report import IngestReport
    from semfs.ingest.search import Hit, Searcher
    from semfs.ingest.sources import IngestRequest
    from semfs.ingest.store.schema import DocumentRecord
    from semfs.ingest.watch import SourceWatcher


def open_collection(address: CollectionAddress | str = DEFAULT_COLLECTION) -> Collection:
    """The collection at ``address`` (a :class:`CollectionAddress`, or a collection name on the
    default embedded store), opened; close it, or use it in a ``with`` block."""
    return Collection(_address(address))


def open_collections(addresses: Iterable[CollectionAddress | str]) -> Collections:
    """Several collections opened as one (:class:`Collections`), each with its own store, model
    and owner: ``open_collections(["docs", "code"])``, or every one of a store with
    ``open_collections(collections())``. Close it, or use it in a ``with`` block."""
    return Collections([_address(a) for a in addresses])


def collections(where: CollectionAddress | None = None) -> list[str]:
    """The names of the collections on the store ``where`` names (its collection is not used;
    default: the embedded store's default folder), sorted: `semfs collections list`."""
    with open_catalog(where or CollectionAddress()) as catalog:
        return sorted(catalog.names())


def remove(address: CollectionAddress | str) -> None:
    """Remove the collection at ``address`` and everything it holds (the source folder is not
    touched): `semfs collections rm -y`. Refused while a mount, `semfs mcp` or a watcher owns
    it (:class:`~semfs.ingest.errors.StoreLockedError`); a missing one is
    :class:`~semfs.ingest.errors.StoreNotFoundError`."""
    address = _address(address)
    with open_catalog(address) as catalog:
        catalog.require(address.collection)
    refuse_if_followed(address)
    with open_catalog(address) as catalog:
        catalog.remove(address.collection)
    if not capabilities(address).in_store_folder:
        # A server collection's local files (watch state, skip memo, tokens, log) are kept
        # on this machine: they go with it (the embedded store's went with its folder).
        shutil.rmtree(address.local_dir, ignore_errors=True)


def refuse_if_followed(address: CollectionAddress) -> None:
    """Raise :class:`StoreLockedError` while a watcher follows ``address``: a watcher of a
    server collection holds no lock, its state file says it runs."""
    from semfs.ingest.syncstate import load_state, state_file

    state = load_state(state_file(address))
    if state is not None and state.running:
        raise StoreLockedError(
            f"collection {address.collection!r} is followed by pid {state.pid} "
            f"({state.source}): stop it first"
        )


def _address(address: CollectionAddress | str) -> CollectionAddress:
    return CollectionAddress(address) if isinstance(address, str) else address


class Collection:
    """One open collection: search it, ingest into it, read what it holds."""

    def __init__(self, address: CollectionAddress) -> None:
        self.address = address
        self.opened = open_direct(address)
        self.store: Store = self.opened.store
        self._searcher = self.opened.searcher
        self._watchers: list[SourceWatcher] = []

    def search(self, query: str | SearchRequest, **options: Any) -> list[Hit]:
        """The documents that best answer ``query``, best first, with their answering lines:
        what `semfs search --json` lists. ``query`` is a :class:`SearchRequest`, or its text
        with the request's other fields as keywords (``k=5``, ``mode="keyword"``,
        ``under="deploy"``, ``min_score=0.2``, ``more=True``)."""
        return self._search().search(_request(query, options))

    def results_text(self, query: str | SearchRequest, **options: Any) -> str:
        """The results file of ``query`` (as :meth:`search` takes it): what a mount's
        ``.search/QUERY/00-results.md`` holds and `semfs search` prints, the ranked documents
        then the lines that answer."""
        request = _request(query, options)
        hits = tuple(self._search().search(request))
        return self.opened.results_text(request, hits).decode("utf-8", "surrogateescape")

    def similar(self, path: str, k: int = DEFAULT_K, under: str | None = None) -> list[Hit]:
        """The ``k`` documents nearest in meaning to the document ``path`` (itself left out),
        ``under`` a folder: what a mount's ``.similar/PATH/`` lists. No model runs."""
        record = self._document(path)
        request = SearchRequest(record.path, k=k, mode="semantic", under=under)
        return self._search().similar(record.path, record.gen, request)

    def watch(self, source: str | os.PathLike[str], **options: Any) -> SourceWatcher:
        """Keep the collection mirroring the folder ``source`` in a background thread: a full
        pass, then a small batch per burst of changes, their dense vectors after each batch
        (`semfs ingest SOURCE --watch`). ``options``: :class:`~semfs.ingest.sources.
        SourceOptions`' fields (``include``, ``exclude``, ``model``, ...). Returns the started
        :class:`~semfs.ingest.watch.SourceWatcher`: ``stop()`` it, or use it in a ``with``
        block; :meth:`close` stops every one still running."""
        from semfs.ingest.densepass import embed_missing
        from semfs.ingest.embedding.embedder import load_embedder
        from semfs.ingest.pipeline import resolve_model
        from semfs.ingest.sources import SourceOptions, check_source
        from semfs.ingest.syncstate import state_file
        from semfs.ingest.watch import SourceWatcher

        check_source(Path(source))
        settings = SourceOptions(**options)
        embedder = load_embedder(resolve_model(self.store, settings.model))
        store = self.store

        def embed(_report: object, _state: object) -> None:  # the batch's dense vectors
            embed_missing(store, embedder)

        watcher = SourceWatcher(
            Path(source),
            store,
            settings,
            embedder=embedder,
            state_file=state_file(self.address),
            on_batch=embed,
        )
        watcher.start()
        self._watchers.append(watcher)
        self._searcher.reset()  # a first pass chooses the model the searcher loads
        return watcher

    def ingest(
        self,
        source: str | os.PathLike[str],
        request: IngestRequest | None = None,
        **options: Any,
    ) -> IngestReport:
        """Make the collection mirror the folder ``source``: what `semfs ingest SOURCE` does,
        as ``request`` says (an :class:`~semfs.ingest.sources.IngestRequest`), or its fields
        by name (``model``, ``include``, ``exclude``, ``dry_run``, ...). Returns what
        changed."""
        from semfs.ingest.pipeline import ingest
        from semfs.ingest.skipmemo import memo_file
        from semfs.ingest.sources import IngestRequest

        if request is None:
            request = IngestRequest.of(**options)
        elif options:
            raise TypeError("give the options in the IngestRequest, or by name, not both")
        if request.skip_memo is None:
            request = replace(request, skip_memo=memo_file(self.address))
        try:
            report = ingest(Path(source), self.store, request)
        except SemfsError as exc:
            _for_python(exc, self.address)
            raise
        self._searcher.reset()  # a first ingest chose the model the searcher loads
        return report

    def status(self) -> dict[str, Any]:
        """What the collection holds and how fresh it is: `semfs status --json`'s object."""
        from semfs.ingest.status import store_info

        meta = self.store.read_meta()
        if meta is None:
            raise _for_python(missing_collection(self.address), self.address)
        return store_info(self.store, meta, self.address.collection)

    def documents(self) -> list[DocumentRecord]:
        """Every committed document's record (path, size, mtime, title, chunks, ...), by path."""
        manifest = self.store.read_manifest()
        records = list(manifest.documents) if manifest is not None else self.store.list_documents()
        return sorted(records, key=lambda r: r.path)

    def read(self, path: str) -> bytes:
        """The bytes of the document ``path`` (as :meth:`documents` names it), exactly as
        ingested: what a mount serves there (a PDF's original, or its text view
        ``report.pdf.md``; ``.decode()`` a text)."""
        record = self._document(path)
        uses_of(self.store).documents([record.path])  # embedded first (semfs.ingest.focus)
        if record.as_is:  # stored as it is (an image, an unopenable PDF): its bytes' parts
            record = record.original_record() or record
        indexes = range(len(record.offsets or ()) or record.chunks)
        if record.blob:
            parts = self.store.read_blob(path, record.gen, indexes)
        else:
            texts = self.store.chunk_texts(path, record.gen, indexes)
            parts = {i: text.encode("utf-8") for i, text in texts.items()}
        data = b"".join(parts[i] for i in sorted(parts))
        if len(parts) != len(indexes) or len(data) != record.size:
            raise SemfsError(f"{path!r} changed while it was read: read it again")
        return data

    def close(self) -> None:
        """Stop the watchers :meth:`watch` started, then close the store (safe to call
        twice)."""
        while self._watchers:
            self._watchers.pop().stop()
        self.opened.close()

    def __enter__(self) -> Collection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Collection {self.address.collection!r} at {self.address.where}>"

    def _search(self) -> Searcher:
        if self.store.read_meta() is None:
            raise _for_python(missing_collection(self.address), self.address)
        return self._searcher()

    def _document(self, path: str) -> DocumentRecord:
        record = self.store.get_document(path)
        if record is None:
            raise StoreNotFoundError(
                f"no document {path!r} in collection {self.address.collection!r}"
            )
        return record


class Collections(AbstractContextManager["Collections"]):
    """Several open collections as one, as one mount of them shows them: each is a top-level
    folder, so a path's first part names its collection (``docs/guide/keys.md``). The methods
    are :class:`Collection`'s, over all of them: :meth:`search` searches each with its own
    searcher and model and merges the hits as `semfs search -c docs -c code` does
    (:func:`~semfs.ingest.search.several.merge_hits`); ``under="docs/guide"`` searches one.
    Ingesting and watching name one collection: ``collections["docs"].ingest(DIR)``."""

    def __init__(self, addresses: Iterable[CollectionAddress]) -> None:
        self.members: dict[str, Collection] = {}
        try:
            for address in addresses:
                if address.collection not in self.members:
                    self.members[address.collection] = Collection(address)
        except BaseException:
            self.close()
            raise
        if not self.members:
            raise SemfsError("open_collections: name one collection or more")

    def __getitem__(self, name: str) -> Collection:
        return self.members[name]

    @property
    def names(self) -> list[str]:
        return list(self.members)

    def search(self, query: str | SearchRequest, **options: Any) -> list[Hit]:
        """The documents of all the collections (or of the one ``under`` names first) that
        best answer ``query``, best first; each path begins with its collection."""
        from semfs.ingest.search.several import prefixed

        return list(prefixed(self._found(_request(query, options))[0]))

    def results_text(self, query: str | SearchRequest, **options: Any) -> str:
        """The results file of ``query``: byte for byte what `semfs search -c A -c B` prints."""
        from semfs.ingest.search.several import several_results

        request = _request(query, options)
        found, inner, names = self._found(request)
        notes = []
        for name in names:
            note = self.members[name].opened.meaning_note(inner.mode, inner.under)
            if note:
                notes.append(f"{name}: {note}")
        return several_results(inner, found, names, notes).decode("utf-8", "surrogateescape")

    def similar(self, path: str, k: int = DEFAULT_K, under: str | None = None) -> list[Hit]:
        """The ``k`` documents nearest to ``path`` (``docs/guide/keys.md``) in its own
        collection (a model's vectors are comparable only with its own), ``under`` a folder of
        it."""
        name, rel = self._split(path)
        return [
            replace(h, path=f"{name}/{h.path}") for h in self.members[name].similar(rel, k, under)
        ]

    def status(self) -> dict[str, dict[str, Any]]:
        """Each collection's :meth:`Collection.status`, by name."""
        return {name: c.status() for name, c in self.members.items()}

    def documents(self) -> list[DocumentRecord]:
        """Every collection's documents, each path after its collection, in the order named."""
        return [
            replace(r, path=f"{name}/{r.path}")
            for name, c in self.members.items()
            for r in c.documents()
        ]

    def read(self, path: str) -> bytes:
        """The bytes of the document ``path`` (``docs/guide/keys.md``)."""
        name, rel = self._split(path)
        return self.members[name].read(rel)

    def close(self) -> None:
        """Close every collection (safe to call twice)."""
        for member in self.members.values():
            member.close()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Collections {', '.join(map(repr, self.members))}>"

    def _split(self, path: str) -> tuple[str, str]:
        name, _, rel = path.strip("/").partition("/")
        if name not in self.members or not rel:
            raise StoreNotFoundError(
                f"no document {path!r}: a path begins with its collection "
                f"({', '.join(self.members)})"
            )
        return name, rel

    def _found(
        self, request: SearchRequest
    ) -> tuple[list[tuple[str, Hit]], SearchRequest, list[str]]:
        """(the merged hits with their collections, the request each ran, the collections)."""
        from semfs.ingest.search.several import merge_hits

        names = self.names
        if request.under:
            name, _, rel = request.under.partition("/")
            if name not in self.members:
                raise SemfsError(
                    f"under={request.under!r}: its first part names a collection "
                    f"({', '.join(self.members)})"
                )
            names, request = [name], replace(request, under=rel or None)
        each = {name: self.members[name].search(request) for name in names}
        # Who comes first: the first hit of the collection that stands best (the nearest; in
        # a keyword search the best BM25 match with the IDF of all), as `semfs search -c A -c B`.
        standing = {
            name: self.members[name]._searcher.standing(request)
            if len(names) > 1 and each[name]
            else None
            for name in names
        }
        return merge_hits(each, request.k, standing), request, names


# The command line's ways out, as a Python caller takes them: an error raised through the API
# names the API's call, not a command to run (issue 46).
_WAYS_OUT = (
    ("run `semfs ingest DIR` first", "ingest a folder into it first: collection.ingest(DIR)"),
    ("Drop --model to use the store's model", "Leave out model= to use the store's model"),
    ("ingest into another --collection", "ingest into another collection"),
)


def _for_python(exc: SemfsError, address: CollectionAddress) -> SemfsError:
    """``exc`` with its message's way out in the API's terms (the same error, its fields kept)."""
    if isinstance(exc, SourceMismatchError) and exc.source:
        exc.args = (
            f"collection {address.collection!r} mirrors {exc.mirrors}, not {exc.source}: to "
            f"mirror {exc.source} instead (deleting what is not in it), call "
            f"ingest({exc.source!r}, replace_source=True); or open another collection "
            "(open_collection(NAME))",
        )
        return exc
    message = str(exc)
    for cli, api in _WAYS_OUT:
        message = message.replace(cli, api)
    if message != str(exc):
        exc.args = (message,)
    return exc


def _request(query: str | SearchRequest, options: dict[str, Any]) -> SearchRequest:
    if isinstance(query, SearchRequest):
        if options:
            raise TypeError("give the options in the SearchRequest, or a text and options")
        return query
    return SearchRequest(query, **options)
