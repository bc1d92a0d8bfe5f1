"""The owner's socket, as bytes: framing, the methods a peer may call, errors, addresses.

Wire format: a 4-byte big-endian length, then a JSON object. Request ``{"method", "args",
"kwargs"}``; reply ``{"ok": value}`` or ``{"error": {"type", "message"}}``. Values are encoded
explicitly by :func:`semfs.ingest.store.schema.encode` (the schema types' own payloads), never
pickled: a peer can send data, not code. Only the Store methods named in :data:`READS` and
:data:`WRITES` can be called, plus the owner's own requests (:data:`EMBED_QUERY`,
:data:`SEARCH`);
``tests/contract/test_ipc_coverage.py`` checks that they and
:class:`~semfs.ingest.store.ipc.client.RemoteStore` cover every abstract Store method.

Shared by :mod:`.server` and :mod:`.client`; imports neither, and is cheap to import.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from semfs.ingest import errors, portable
from semfs.ingest.errors import SemfsError, StoreUnavailableError

# The owner's socket and token, in the collection's folder (the only place these names are
# defined: backends looks for the socket before importing the client).
SOCKET_NAME = "daemon.sock"
TOKEN_NAME = "daemon.token"
# A peer's whole hello (connect, peer check, hello frame): in total, however it trickles.
CONNECT_TIMEOUT = 2.0
# How long a client waits for the owner's hello. An owner answers from a thread of its own,
# but the engine holds the GIL in some calls (an ingest's compaction: 15 s at 33k chunks on a
# busy machine), and a client refused then would only have to try again.
HELLO_WAIT = 60.0
# Replies to a large upsert or a full scroll take a while; this only catches a hung daemon.
REPLY_TIMEOUT = 300.0
# Until a peer is authenticated it may send one small hello: garbage cannot make us allocate.
MAX_HELLO = 4096
MAX_MESSAGE = 1 << 30
# Longer texts are refused: a query is a line, and the model reads 256 tokens at most anyway.
MAX_QUERY_CHARS = 10_000
EMBED_QUERY = "embed_query"
# A whole search run by the owner: keyword arguments only, each of these types (a bool is not
# an int here). Its reply is the hits as plain values.
SEARCH = "search"
SEARCH_ARGS: dict[str, tuple[type, ...]] = {
    "query": (str,),
    "k": (int,),
    "mode": (str,),
    "under": (str, type(None)),
    "min_score": (float, int, type(None)),
    "more": (bool,),
}
# The files a writable mount of the owner holds open for writing: an ingest beside it leaves
# them as they are until they are closed (the watcher's rule). Reply: a list of paths.
HELD_OPEN = "held_open"
# sun_path holds 108 bytes on Linux and 104 on macOS, the final NUL included.
MAX_SUN_PATH = 100

# The only Store methods a peer can call; nothing else is ever looked up by name.
WRITES = frozenset(
    [
        "create",
        "write_meta",
        "put_document",
        "delete_documents",
        "put_directories",
        "delete_directories",
        "upsert_chunks",
        "delete_stale_chunks",
        "put_blob",
        "compact",
        "write_manifest",
        "set_dense",
    ]
)
READS = frozenset(
    [
        "exists",
        "read_meta",
        "list_documents",
        "list_directories",
        "get_document",
        "get_chunks",
        "chunk_vectors",
        "chunk_versions",
        "read_blob",
        "query",
        "query_ids",
        "chunks_by_id",
        "definitions",
        "count_chunks",
        "chunks_without_dense",
        "dense_by_hash",
        "embedding_counts",
        "keyword_stats",
        "chunk_paths_matching",
        "split_line_paths",
        "disk_bytes",
        "flush",
    ]
)
METHODS = READS | WRITES | {"close"}
# Error classes by name, to raise the same class on the client side.
ERRORS: dict[str, type[SemfsError]] = {
    name: cls
    for name, cls in vars(errors).items()
    if isinstance(cls, type) and issubclass(cls, SemfsError)
}


class ProtocolError(Exception):
    """The peer broke framing (oversized or truncated message): the stream cannot be resynced."""


# --- framing ---------------------------------------------------------------------------------


def send(sock: socket.socket, message: Any) -> None:
    # json's default ensure_ascii escapes lone surrogates, so undecodable file names survive.
    data = json.dumps(message, separators=(",", ":")).encode("ascii")
    sock.sendall(struct.pack(">I", len(data)) + data)


# A frame's body is read in pieces of at most this, each kept only once it has arrived: a peer
# that announces a large frame and sends little makes us hold only what it sent.
RECV_PIECE = 1 << 20


def _recv_exact(sock: socket.socket, size: int, deadline: float | None = None) -> bytes | None:
    """``size`` bytes, or None at a clean end of stream before the first byte.

    Memory grows with what arrives, never with what was announced: the pieces are received
    one at a time (at most :data:`RECV_PIECE` each) and joined at the end. With a
    ``deadline`` (``time.monotonic()``), the whole read ends by then (TimeoutError), however
    the bytes trickle in.
    """
    pieces: list[bytes] = []
    got = 0
    while got < size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the peer was too slow to send its message")
            sock.settimeout(left)
        piece = sock.recv(min(size - got, RECV_PIECE))
        if not piece:
            if got == 0:
                return None
            raise ProtocolError("connection closed in the middle of a message")
        pieces.append(piece)
        got += len(piece)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def recv_frame(sock: socket.socket, limit: int, deadline: float | None = None) -> bytes | None:
    """One message's bytes, or None when the peer closed the connection between messages;
    with a ``deadline`` (``time.monotonic()``), the whole message by then (TimeoutError)."""
    header = _recv_exact(sock, 4, deadline)
    if header is None:
        return None
    (size,) = struct.unpack(">I", header)
    if size > limit:
        raise ProtocolError(f"message of {size} bytes exceeds the limit of {limit}")
    body = _recv_exact(sock, size, deadline) if size else b""
    if body is None:
        raise ProtocolError("connection closed in the middle of a message")
    return body


def error_reply(exc: SemfsError) -> dict[str, Any]:
    # The nearest class the client knows: a subclass defined elsewhere degrades to its base.
    # Its plain attributes go along (StoreOwnedError's pid and holder), so it arrives whole.
    name = next(c.__name__ for c in type(exc).__mro__ if ERRORS.get(c.__name__) is c)
    fields = {
        k: v
        for k, v in vars(exc).items()
        if not k.startswith("_") and isinstance(v, str | int | float | bool)
    }
    return {"error": {"type": name, "message": str(exc), "fields": fields}}


def rebuild_error(err: dict[str, Any]) -> SemfsError:
    """The error a reply describes, as its own class with its attributes; built without its
    ``__init__``, whose arguments the wire does not name (StoreOwnedError takes a pid)."""
    cls = ERRORS.get(str(err.get("type")), SemfsError)
    exc = cls.__new__(cls)
    Exception.__init__(exc, str(err.get("message", "")))
    fields = err.get("fields")
    if isinstance(fields, dict):
        exc.__dict__.update(
            (str(k), v)
            for k, v in fields.items()
            if not str(k).startswith("_") and isinstance(v, str | int | float | bool)
        )
    return exc


# --- sockets ---------------------------------------------------------------------------------


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end, where the OS tells (see ``portable.peer_uid``);
    where it cannot, the 0600 socket and the token must do."""
    return portable.peer_uid(sock)


def trusted(uid: int | None) -> bool:
    return uid is None or uid in (os.getuid(), 0)


@contextlib.contextmanager
def socket_address(path: Path) -> Iterator[str]:
    """What to bind or connect to for ``path``: the path itself or, when it is too long for
    sun_path (a deep store folder), where the system has one an alias through an open
    descriptor of its folder."""
    if len(os.fsencode(path)) <= MAX_SUN_PATH:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        alias = portable.socket_alias(fd, path.name)
        if alias is None:
            raise StoreUnavailableError(
                f"socket path too long for this system: {path}; "
                "use a store folder with a shorter path"
            )
        yield alias
    finally:
        os.close(fd)


def dial(path: Path) -> socket.socket | None:
    """A socket connected to ``path``, or None when nothing listens there (no file, stale)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT)
    try:
        with socket_address(path) as address:
            sock.connect(address)
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None
    except BaseException:
        sock.close()
        raise
    return sock
