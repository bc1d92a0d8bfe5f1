"""semfs from Python: open a collection, ingest a folder into it, search it, read it.

The front door for a script or a notebook, as ``llm.get_model()`` is llm's::

    from semfs.ingest.collection import open_collection

    with open_collection("docs") as docs:           # the embedded store's "docs"
        docs.ingest("./my-docs")                    # what `semfs ingest ./my-docs` does
        for hit in docs.search("how do I rotate an api key"):
            print(hit.rank, hit.path, hit.strength_label)

It is the library the command line runs, not a copy of it: :meth:`Collection.ingest` is
:func:`semfs.ingest.pipeline.ingest`, :meth:`Collection.search` is
:meth:`semfs.ingest.search.Searcher.search` with a
:class:`~semfs.ingest.request.SearchRequest`, :meth:`Collection.status` is what
``semfs status --json`` prints. ``docs/python-api.md`` is the guide (a test runs its examples).

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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semfs.ingest.errors import SemfsError, SourceMismatchError, StoreNotFoundError
from semfs.ingest.request import SearchRequest
from semfs.ingest.store import DEFAULT_COLLECTION, Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import missing_collection, open_store

if TYPE_CHECKING:
    from semfs.ingest.pipeline import IngestReport
    from semfs.ingest.search import Hit, Searcher
    from semfs.ingest.store.schema import DocumentRecord


def open_collection(address: CollectionAddress | str = DEFAULT_COLLECTION) -> Collection:
    """The collection at ``address`` (a :class:`CollectionAddress`, or a collection name on the
    default embedded store), opened; close it, or use it in a ``with`` block."""
    if isinstance(address, str):
        address = CollectionAddress(address)
    return Collection(address)


class Collection:
    """One open collection: search it, ingest into it, read what it holds."""

    def __init__(self, address: CollectionAddress) -> None:
        self.address = address
        self.store: Store = open_store(address)
        self._searcher: Searcher | None = None

    def search(self, query: str | SearchRequest, **options: Any) -> list[Hit]:
        """The documents that best answer ``query``, best first, with their answering lines:
        what `semfs search` prints. ``query`` is a :class:`SearchRequest`, or its text with the
        request's other fields as keywords (``k=5``, ``mode="keyword"``, ``under="deploy"``,
        ``min_score=0.2``, ``more=True``)."""
        request = query if isinstance(query, SearchRequest) else SearchRequest(query, **options)
        if isinstance(query, SearchRequest) and options:
            raise TypeError("give the options in the SearchRequest, or a text and options")
        return self._search().search(request)

    def ingest(self, source: str | os.PathLike[str], **options: Any) -> IngestReport:
        """Make the collection mirror the folder ``source``: what `semfs ingest SOURCE` does,
        with :func:`semfs.ingest.pipeline.ingest`'s keyword options (``model``, ``include``,
        ``exclude``, ``dry_run``, ...). Returns what changed."""
        from semfs.ingest.pipeline import ingest
        from semfs.ingest.skipmemo import memo_file

        options.setdefault("skip_memo", memo_file(self.address))
        try:
            report = ingest(Path(source), self.store, **options)
        except SemfsError as exc:
            _for_python(exc, self.address)
            raise
        self._searcher = None  # a first ingest chose the model the searcher loads
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
        record = self.store.get_document(path)
        if record is None:
            raise StoreNotFoundError(
                f"no document {path!r} in collection {self.address.collection!r}"
            )
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
        """Close the store (safe to call twice)."""
        self.store.close()

    def __enter__(self) -> Collection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Collection {self.address.collection!r} at {self.address.where}>"

    def _search(self) -> Searcher:
        if self._searcher is None:
            from semfs.ingest.search import Searcher

            if self.store.read_meta() is None:
                raise _for_python(missing_collection(self.address), self.address)
            self._searcher = Searcher(self.store)
        return self._searcher


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
