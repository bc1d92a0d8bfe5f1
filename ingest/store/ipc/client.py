"""The other processes' side of the socket: :func:`connect_daemon` returns a :class:`RemoteStore`.

An ingest (or a search, a status) that finds the shard owned sends its Store calls to the
owner instead (:func:`semfs.ingest.store.backends.open_store` does this). Before it sends
anything it checks that the socket is its own user's and proves itself with the owner's token.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from semfs.ingest.errors import OwnerGoneError, StoreLockedError, StoreUnavailableError
from semfs.ingest.store import KeywordStats, OwnerLink, Store
from semfs.ingest.store.ipc.wire import (
    EMBED_QUERY,
    HELD_OPEN,
    HELLO_WAIT,
    MAX_HELLO,
    MAX_MESSAGE,
    REPLY_TIMEOUT,
    SEARCH,
    SOCKET_NAME,
    TOKEN_NAME,
    ProtocolError,
    dial,
    peer_uid,
    rebuild_error,
    recv_frame,
    send,
    trusted,
)
from semfs.ingest.store.manifest import Manifest
from semfs.ingest.store.ownerkind import INGEST, MCP, WATCHER, owner_kind
from semfs.ingest.store.schema import (
    ChunkPoint,
    ChunkRecord,
    DenseVector,
    DirectoryRecord,
    DocumentRecord,
    ScoredChunk,
    ScoredId,
    SparseQuery,
    StoreMeta,
    Vector,
    decode,
    encode,
)

logger = logging.getLogger(__name__)

# How a client's messages name the owner it goes through, by kind.
_OWNER_LABELS: dict[str | None, str] = {
    WATCHER: "watcher (semfs ingest --watch)",
    MCP: "semfs mcp server",
    INGEST: "semfs ingest under way",
}


def connect_daemon(coll_dir: Path, collection: str) -> RemoteStore | None:
    """A RemoteStore talking to the daemon serving ``coll_dir``, or None if none answers.

    None covers no socket, a stale socket (ECONNREFUSED) and a socket we may not use. A daemon
    that answers but refuses us (wrong token, another user) raises StoreLockedError.
    """
    coll_dir = Path(coll_dir)
    try:
        sock = dial(coll_dir / SOCKET_NAME)
    except OSError as exc:
        logger.debug("no daemon answers on %s: %s", coll_dir / SOCKET_NAME, exc)
        return None
    if sock is None:
        return None
    refused = f"the semfs daemon serving {coll_dir} refused this process"
    try:
        uid = peer_uid(sock)
        if not trusted(uid):  # never send our data to another user's socket
            raise StoreLockedError(f"{refused}: its socket belongs to uid {uid}")
        token = (coll_dir / TOKEN_NAME).read_text().strip()
        send(sock, {"hello": token, "pid": os.getpid()})
        sock.settimeout(HELLO_WAIT)  # the owner may be in a long engine call (see HELLO_WAIT)
        frame = recv_frame(sock, MAX_HELLO)
        reply = json.loads(frame) if frame is not None else None
        daemon_pid = int(reply["ok"]["pid"]) if isinstance(reply, dict) else None
        queries = reply["ok"].get("queries") if isinstance(reply, dict) else None
        searches = reply["ok"].get("searches") if isinstance(reply, dict) else None
        command = reply["ok"].get("command") if isinstance(reply, dict) else None
        embeds = reply["ok"].get("embeds") if isinstance(reply, dict) else None
    except (OSError, ProtocolError, ValueError, KeyError, TypeError) as exc:
        sock.close()
        raise StoreLockedError(f"{refused}: {exc}") from exc
    except BaseException:
        sock.close()
        raise
    if daemon_pid is None:
        sock.close()
        raise StoreLockedError(f"{refused}: the token in {coll_dir / TOKEN_NAME} is not its own")
    sock.settimeout(REPLY_TIMEOUT)
    remote = RemoteStore(sock, coll_dir, collection, daemon_pid)
    remote.query_backend = queries if isinstance(queries, str) else None
    remote.searches = searches is True
    remote.command = command if isinstance(command, str) else ""
    remote.embeds = embeds is True
    return remote


class RemoteStore(Store, OwnerLink):
    """The Store of a mounted daemon, called over its socket; one call at a time per instance.
    Its owner is its :class:`OwnerLink`: what the owner declared in its hello."""

    backend = "embedded"

    def __init__(
        self, sock: socket.socket, coll_dir: Path, collection: str, daemon_pid: int
    ) -> None:
        self.collection = collection
        self.coll_dir = coll_dir
        self.pid = daemon_pid
        # What embeds queries in the owner (its hello said), or None when it does not.
        self.query_backend: str | None = None
        self.searches = False  # whether the owner runs whole searches (search())
        self.command = ""  # the owner's command line, as it told us
        # Whether the owner gives the chunks we write their dense vectors (it said so).
        self.embeds = False
        self._sock: socket.socket | None = sock
        self._lock = threading.Lock()

    @property
    def location(self) -> str:
        owner = _OWNER_LABELS.get(owner_kind(self.command), "mounted daemon")
        return f"{self.coll_dir} (through the {owner}, pid {self.pid})"

    @property
    def address(self) -> str:
        return str(self.coll_dir)

    def owner_link(self) -> OwnerLink:
        return self

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        request = {
            "method": method,
            "args": [encode(a) for a in args],
            "kwargs": {k: encode(v) for k, v in kwargs.items()},
        }
        with self._lock:
            if self._sock is None:
                raise OwnerGoneError(f"{self.location}: the connection is closed")
            try:
                send(self._sock, request)
                frame = recv_frame(self._sock, MAX_MESSAGE)
                if frame is None:
                    raise ProtocolError("the daemon closed the connection")
                reply = json.loads(frame)
                if not isinstance(reply, dict):
                    raise ValueError(f"unexpected reply {reply!r:.80}")
            except (OSError, ProtocolError, ValueError) as exc:
                self._sock.close()  # a half-read reply cannot be resynced
                self._sock = None
                msg = f"lost the connection to {self.location}: {exc}"
                raise OwnerGoneError(msg) from exc
        if "ok" in reply:
            return decode(reply["ok"])
        err = reply.get("error")
        raise rebuild_error(err if isinstance(err, dict) else {"message": str(reply)})

    def exists(self) -> bool:
        return bool(self._call("exists"))

    def create(self, dimension: int) -> None:
        self._call("create", dimension)

    def read_meta(self) -> StoreMeta | None:
        return self._call("read_meta")

    def write_meta(self, meta: StoreMeta) -> None:
        self._call("write_meta", meta)

    def list_documents(self) -> list[DocumentRecord]:
        return self._call("list_documents")

    def get_document(self, path: str) -> DocumentRecord | None:
        return self._call("get_document", path)

    def put_document(self, record: DocumentRecord) -> None:
        self._call("put_document", record)

    def delete_documents(self, paths: Sequence[str]) -> None:
        self._call("delete_documents", list(paths))

    def list_directories(self) -> list[DirectoryRecord]:
        return self._call("list_directories")

    def put_directories(self, records: Sequence[DirectoryRecord]) -> None:
        self._call("put_directories", list(records))

    def delete_directories(self, paths: Sequence[str]) -> None:
        self._call("delete_directories", list(paths))

    def upsert_chunks(self, points: Sequence[ChunkPoint]) -> None:
        self._call("upsert_chunks", list(points))

    def get_chunks(self, path: str, gen: int, indexes: Sequence[int]) -> list[ChunkRecord]:
        return self._call("get_chunks", path, gen, list(indexes))

    def chunk_vectors(self, path: str, gen: int, indexes: Sequence[int]) -> dict[int, list[float]]:
        return self._call("chunk_vectors", path, gen, list(indexes))

    def delete_stale_chunks(self, path: str, keep_gen: int | None) -> None:
        self._call("delete_stale_chunks", path, keep_gen)

    def chunk_versions(self) -> set[tuple[str, int]]:
        return self._call("chunk_versions")

    def put_blob(self, path: str, gen: int, data: bytes) -> None:
        self._call("put_blob", path, gen, data)

    def read_blob(self, path: str, gen: int, indexes: Sequence[int]) -> dict[int, bytes]:
        return self._call("read_blob", path, gen, list(indexes))

    def query(
        self,
        dense: list[float],
        sparse: SparseQuery,
        mode: str,
        limit: int,
        under: str | None = None,
        similarities: bool = True,
    ) -> list[ScoredChunk]:
        return self._call(
            "query", Vector(dense), sparse, mode, limit, under=under, similarities=similarities
        )

    def query_ids(
        self,
        dense: list[float],
        sparse: SparseQuery,
        mode: str,
        limit: int,
        under: str | None = None,
    ) -> list[ScoredId]:
        return list(self._call("query_ids", Vector(dense), sparse, mode, limit, under=under))

    def chunks_by_id(self, ids: Sequence[str]) -> dict[str, ChunkRecord]:
        return dict(self._call("chunks_by_id", list(ids)))

    def definitions(
        self, names: Sequence[str], limit: int, under: str | None = None
    ) -> list[ScoredChunk]:
        return list(self._call("definitions", list(names), limit, under=under))

    def chunk_paths_matching(
        self,
        substrings: Sequence[str],
        words: Sequence[str],
        under: str | Sequence[str] | None = None,
        paths: Sequence[str] | None = None,
    ) -> list[str]:
        folders = under if isinstance(under, str | None) else list(under)
        return list(
            self._call(
                "chunk_paths_matching",
                list(substrings),
                list(words),
                folders,
                None if paths is None else list(paths),
            )
        )

    def split_line_paths(self, under: str | None = None) -> list[str]:
        # Computed by the daemon: sending every chunk's line span over the socket costs more.
        return list(self._call("split_line_paths", under))

    def count_chunks(self) -> int:
        return int(self._call("count_chunks"))

    def set_dense(self, vectors: Sequence[DenseVector]) -> int:
        return int(self._call("set_dense", list(vectors)))

    def chunks_without_dense(
        self,
        limit: int,
        after: str | None = None,
        under: str | None = None,
        paths: Sequence[str] | None = None,
    ) -> tuple[list[ChunkRecord], str | None]:
        listed = None if paths is None else list(paths)
        chunks, cursor = self._call("chunks_without_dense", limit, after, under, listed)
        return list(chunks), cursor

    def dense_by_hash(self, hashes: Sequence[str]) -> dict[str, list[float]]:
        return dict(self._call("dense_by_hash", list(hashes)))

    def embedding_counts(self, under: str | None = None) -> tuple[int, int]:
        embedded, total = self._call("embedding_counts", under)
        return int(embedded), int(total)

    def keyword_stats(self, sparse: SparseQuery, under: str | None = None) -> KeywordStats | None:
        found = self._call("keyword_stats", sparse, under)
        if found is None:
            return None
        chunks, holding, best = found
        return KeywordStats(int(chunks), tuple(map(int, holding)), tuple(map(float, best)))

    def lock_path(self, name: str) -> Path | None:
        return self.coll_dir / name  # the owner's folder: on this machine, like its socket

    def disk_bytes(self) -> int | None:
        return self._call("disk_bytes")

    def compact(self) -> bool:
        return bool(self._call("compact"))

    def read_manifest(self) -> Manifest | None:
        """None: a client of the daemon lists the records; only a mount needs the manifest."""
        return None

    def write_manifest(self, generation: int) -> None:
        self._call("write_manifest", generation)

    def flush(self) -> None:
        self._call("flush")

    def embed_query(self, text: str) -> list[float]:
        """``text``'s dense vector, embedded by the owner's model (see ``query_backend``)."""
        vector = self._call(EMBED_QUERY, text)
        if not isinstance(vector, list):
            raise StoreUnavailableError(f"{self.location}: embed_query answered {vector!r:.80}")
        return [float(x) for x in vector]

    def held_open(self) -> frozenset[str]:
        """The files the owner's writable mount holds open for writing (none when it has no
        writable mount): an ingest through it leaves them as they are until closed."""
        paths = self._call(HELD_OPEN)
        return frozenset(str(p) for p in paths) if isinstance(paths, list) else frozenset()

    def search(self, fields: dict[str, Any]) -> list[dict[str, Any]]:
        """A whole search run by the owner (when ``searches``): the request's fields
        (:meth:`semfs.ingest.request.SearchRequest.hit_fields`); its hits as plain values."""
        rows = self._call(SEARCH, **fields)
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise StoreUnavailableError(f"{self.location}: search answered {rows!r:.80}")
        return rows

    def close(self) -> None:
        """Close the connection (releasing the writer slot); the daemon's store stays open."""
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None
