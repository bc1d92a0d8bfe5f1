"""semfs: a collection of documents as a directory, and the same from Python.

``import semfs`` is the front door, as ``import llm`` is llm's: a collection opened by its
address, searched, ingested into, followed, listed and removed, in a few lines each
(docs/python-api.md; a test runs it)::

    import semfs

    with semfs.open_collection("docs") as docs:
        docs.ingest("./my-docs")
        print(docs.results_text("how do I rotate an api key"))

Every name here is the library's own, re-exported, so that a script needs one import; the
modules stay where they are (``semfs.ingest.collection``, ``semfs.ingest.request``, ...) and
each old import keeps working. The names load on first use (PEP 562): ``import semfs.fusefs``
(the command line, the mount) runs this file first and must not pay for the store or the
model.

Layout: this file is the ``semfs`` package's ``__init__`` and lives in ``ingest/front/``
(``package-dir`` in pyproject.toml maps ``semfs`` here, ``semfs.ingest`` to ``ingest/`` and
``semfs.fusefs`` to ``fusefs/``), so the repository keeps its two top-level folders and the
front door is the library's: it imports nothing of ``semfs.fusefs`` (ARCHITECTURE.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from semfs.ingest import __version__
    from semfs.ingest.collection import (
        Collection,
        Collections,
        collections,
        open_collection,
        open_collections,
        remove,
    )
    from semfs.ingest.errors import (
        DiskFullError,
        ModelMismatchError,
        ModelUnavailableError,
        SchemaVersionError,
        SemfsError,
        SourceError,
        SourceMismatchError,
        StoreDamagedError,
        StoreLockedError,
        StoreNotFoundError,
        StoreUnavailableError,
    )
    from semfs.ingest.report import IngestReport
    from semfs.ingest.request import DEFAULT_MODE, SearchRequest
    from semfs.ingest.search import Hit
    from semfs.ingest.sources import IngestRequest, SourceOptions
    from semfs.ingest.store import DEFAULT_K, MODES
    from semfs.ingest.store.address import CollectionAddress

# Each name of the front door -> the module that defines it.
_HOMES = {
    "__version__": "semfs.ingest",
    "Collection": "semfs.ingest.collection",
    "collections": "semfs.ingest.collection",
    "open_collection": "semfs.ingest.collection",
    "Collections": "semfs.ingest.collection",
    "open_collections": "semfs.ingest.collection",
    "remove": "semfs.ingest.collection",
    "CollectionAddress": "semfs.ingest.store.address",
    "SearchRequest": "semfs.ingest.request",
    "DEFAULT_K": "semfs.ingest.store",
    "DEFAULT_MODE": "semfs.ingest.request",
    "MODES": "semfs.ingest.store",
    "Hit": "semfs.ingest.search",
    "IngestReport": "semfs.ingest.report",
    "SourceOptions": "semfs.ingest.sources",
    "IngestRequest": "semfs.ingest.sources",
    **dict.fromkeys(
        (
            "SemfsError",
            "StoreNotFoundError",
            "StoreLockedError",
            "StoreUnavailableError",
            "StoreDamagedError",
            "SchemaVersionError",
            "ModelMismatchError",
            "ModelUnavailableError",
            "SourceError",
            "SourceMismatchError",
            "DiskFullError",
        ),
        "semfs.ingest.errors",
    ),
}
# The front door (each name's home in _HOMES).
__all__ = [
    "DEFAULT_K",
    "DEFAULT_MODE",
    "MODES",
    "Collection",
    "CollectionAddress",
    "Collections",
    "DiskFullError",
    "Hit",
    "IngestReport",
    "IngestRequest",
    "ModelMismatchError",
    "ModelUnavailableError",
    "SchemaVersionError",
    "SearchRequest",
    "SemfsError",
    "SourceError",
    "SourceMismatchError",
    "SourceOptions",
    "StoreDamagedError",
    "StoreLockedError",
    "StoreNotFoundError",
    "StoreUnavailableError",
    "__version__",
    "collections",
    "open_collection",
    "open_collections",
    "remove",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'semfs' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
