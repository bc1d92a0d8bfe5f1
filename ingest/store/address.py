"""Where a collection lives, and where this machine keeps what belongs to it.

A :class:`CollectionAddress` is the one value every layer passes for "this collection": the
embedded store's folder or a Qdrant server's URL (with its API key and how long to wait for
it), and the collection's name. The CLI builds one from ``--store/--url/--api-key/-c``, a
mount keeps one in its config, the Python API takes one; :func:`semfs.ingest.store.backends.
open_store` opens it through the ``BACKENDS`` table.

Rules a caller may rely on:

* :attr:`CollectionAddress.local_dir` is the one folder on this machine for the collection's
  own files besides the store's data: the watcher's state (``watch.json``), the skip memo
  (``skipped.json``), the MCP tokens, a background mount's log. For the embedded store it is
  the collection's folder beside its shard (``STORE/COLLECTION``); for a server, whose
  collection has no folder here, ``STORE/servers/SERVER/COLLECTION``, under the same
  ``--store`` (default :func:`~semfs.ingest.store.default_store_path`). ``SERVER`` is the
  server's host and port (a ``file:`` URL's path), never its credentials.
* :attr:`CollectionAddress.mount_source` is what a mount of it is called in the system's list
  of mounts (``semfs:docs``, ``semfs:docs@HOST:PORT``), so ``semfs collections rm`` finds it.
* The collection name is checked (:func:`~semfs.ingest.store.check_collection_name`) before
  it becomes part of a path: :attr:`local_dir` of ``../x`` raises :class:`SemfsError`.
* The API key is never shown: not in ``repr``, not in :attr:`where`, not in a path.
* An embedded collection may not be called ``servers`` (:data:`SERVERS_DIR`, where server
  collections keep their local files): :func:`check_embedded_name` refuses it in one line.
  A server's folder name is never ``.``, ``..`` or hidden (``http://..`` is ``server``).

Imports nothing but the store interface: a mount's start reads it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from semfs.ingest.errors import SemfsError
from semfs.ingest.store import DEFAULT_COLLECTION, check_collection_name, default_store_path

# The kernel's name of a semfs mount is the daemon's fsname (mount_source).
MOUNT_SOURCE_PREFIX = "semfs:"
SERVERS_DIR = "servers"  # STORE/servers/SERVER/COLLECTION: a server collection's local files
_UNSAFE_IN_SOURCE = re.compile(r"[^A-Za-z0-9_.:-]+")
_UNSAFE_IN_PATH = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class CollectionAddress:
    """One collection: on the embedded store at ``store`` (None: the default folder), or on the
    Qdrant server at ``url`` (a ``file:`` URL: qdrant-client's local mode, the tests' stand-in
    server)."""

    collection: str = DEFAULT_COLLECTION
    store: Path | None = None  # the embedded store's folder (--store); None: the default
    url: str | None = None  # a Qdrant server (--url)
    api_key: str | None = None  # never printed (see __repr__)
    timeout: float = 10.0  # seconds to reach a server

    def __post_init__(self) -> None:
        # A path given as a string, "~/x", or an empty --url (QDRANT_URL=""): one spelling each.
        if self.store is not None:
            object.__setattr__(self, "store", Path(self.store).expanduser())
        if not self.url:
            object.__setattr__(self, "url", None)

    def __repr__(self) -> str:  # the URL without its credentials, no API key
        url = f", url={self.where!r}" if self.url is not None else ""
        return f"CollectionAddress({self.collection!r}, store={self.store!r}{url})"

    def named(self, collection: str) -> CollectionAddress:
        """The collection ``collection`` at the same place (``semfs collections``)."""
        return dataclasses.replace(self, collection=collection)

    @property
    def store_dir(self) -> Path:
        """The embedded store's folder: ``store``, else the default. A server collection keeps
        its local files under it too (:attr:`local_dir`)."""
        return self.store if self.store is not None else default_store_path()

    @property
    def server(self) -> str | None:
        """The server's host and port (a ``file:`` URL's path), without credentials; None for
        the embedded store."""
        if self.url is None:
            return None
        parts = urlsplit(self.url)
        return parts.path if parts.scheme == "file" else parts.netloc.rpartition("@")[2]

    @property
    def local_dir(self) -> Path:
        """The folder of this collection's own files on this machine (see the module's rules).
        Not created here."""
        name = check_collection_name(self.collection)
        if self.server is None:
            return self.store_dir / check_embedded_name(name)
        # No ".", ".." or hidden name: http://.. would be the store folder itself.
        where = _UNSAFE_IN_PATH.sub("_", self.server).strip("_.") or "server"
        return self.store_dir / SERVERS_DIR / where / name

    @property
    def where(self) -> str:
        """Where the collection is, for messages: the store folder, or the server's URL without
        credentials."""
        if self.url is None:
            return str(self.store_dir)
        parts = urlsplit(self.url)
        if "@" in parts.netloc:
            parts = parts._replace(netloc=parts.netloc.rpartition("@")[2])
        return parts.geturl()

    @property
    def mount_source(self) -> str:
        """What a mount of this collection is called in the system's list of mounts:
        ``semfs:docs`` for the embedded store, ``semfs:docs@HOST:PORT`` for a server (no
        credentials, no path, except for a ``file:`` URL), so servers are told apart."""
        if self.server is None:
            return MOUNT_SOURCE_PREFIX + self.collection
        where = _UNSAFE_IN_SOURCE.sub("_", self.server).strip("_") or "server"
        return f"{MOUNT_SOURCE_PREFIX}{self.collection}@{where}"


def check_embedded_name(name: str) -> str:
    """``name``, unless it is the store folder's own ``servers`` (server collections' local
    files): then :class:`SemfsError` saying to choose another."""
    if name == SERVERS_DIR:
        raise SemfsError(
            f"the collection name {name!r} is reserved on an embedded store (its folder "
            f"STORE/{SERVERS_DIR}/ holds server collections' local files): choose another "
            "name with -c"
        )
    return name
