"""The mounted daemon's store socket: `semfs ingest` works while `semfs mount` owns the shard.

Qdrant Edge locks its WAL, so one process at a time opens an embedded shard. While a mount
runs, its daemon is that process; it serves its :class:`~semfs.ingest.store.Store` on
``COLLECTION/daemon.sock`` (:class:`StoreServer`), and an ingest that finds the shard locked
sends its calls there instead (:func:`connect_daemon` returns a :class:`RemoteStore`).

Wire format: a 4-byte big-endian length, then a JSON object. Request ``{"method", "args",
"kwargs"}``; reply ``{"ok": value}`` or ``{"error": {"type", "message"}}``. Values are encoded
explicitly by :func:`semfs.ingest.store.schema.encode` (the schema types' own payloads), never
pickled: a peer can send data, not code. Only the Store methods named in ``_READS`` and ``_WRITES``
can be called; ``tests/contract/test_ipc_coverage.py`` checks that they and
:class:`RemoteStore` cover every abstract Store method.

Searches: an owner that embeds queries (a mount, ``semfs mcp``, ``semfs ingest --watch``: a
:class:`~semfs.ingest.store.QueryService`) says so in its hello reply (``"queries"``: what runs
its model) and answers ``embed_query`` with the query's vector from its warm model; the client's
:class:`OwnerEmbedder` asks it, then ranks through the same store calls as a local search, so
the rankings are a local search's. The request is not a Store method, and only a string of at
most :data:`MAX_QUERY_CHARS` is embedded.

Owner only: the socket is mode 0600; a client must first send the random token kept in the
0600 file ``daemon.token`` beside it; on Linux the peer's uid (SO_PEERCRED) must also be ours
or root. Any number of connections may read; one at a time may write.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import secrets
import socket
import struct
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from semfs.ingest import errors
from semfs.ingest.errors import SemfsError, StoreLockedError, StoreUnavailableError
from semfs.ingest.store import QueryService, Store
from semfs.ingest.store.manifest import Manifest
from semfs.ingest.store.schema import (
    ChunkPoint,
    ChunkRecord,
    DirectoryRecord,
    DocumentRecord,
    ScoredChunk,
    SparseQuery,
    StoreMeta,
    Vector,
    decode,
    encode,
)

logger = logging.getLogger(__name__)

SOCKET_NAME = "daemon.sock"  # edge_store.DAEMON_SOCKET too (it imports us lazily)
TOKEN_NAME = "daemon.token"
CONNECT_TIMEOUT = 2.0
# Replies to a large upsert or a full scroll take a while; this only catches a hung daemon.
REPLY_TIMEOUT = 300.0
# Until a peer is authenticated it may send one small hello: garbage cannot make us allocate.
MAX_HELLO = 4096
MAX_MESSAGE = 1 << 30
# Longer texts are refused: a query is a line, and the model reads 256 tokens at most anyway.
MAX_QUERY_CHARS = 10_000
EMBED_QUERY = "embed_query"
# Who we are, for a client that must say what owns the store ("semfs ingest ./docs --watch").
_COMMAND = " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]])[:200]
# How often the accept loop looks at the stop flag; close() waits about this long.
ACCEPT_POLL = 0.5
# sun_path holds 108 bytes on Linux and 104 on macOS, the final NUL included.
MAX_SUN_PATH = 100

# The only Store methods a peer can call; nothing else is ever looked up by name.
_WRITES = frozenset(
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
    ]
)
_READS = frozenset(
    [
        "exists",
        "read_meta",
        "list_documents",
        "list_directories",
        "get_document",
        "get_chunks",
        "chunk_versions",
        "read_blob",
        "query",
        "count_chunks",
        "chunk_paths_matching",
        "split_line_paths",
        "disk_bytes",
        "flush",
    ]
)
_METHODS = _READS | _WRITES | {"close"}
# After these the daemon's view of the collection (its directory tree) is out of date.
_CHANGES = frozenset({"write_meta", "delete_documents", "put_directories", "delete_directories"})
# Error classes by name, to raise the same class on the client side.
_ERRORS: dict[str, type[SemfsError]] = {
    name: cls
    for name, cls in vars(errors).items()
    if isinstance(cls, type) and issubclass(cls, SemfsError)
}


class _ProtocolError(Exception):
    """The peer broke framing (oversized or truncated message): the stream cannot be resynced."""


# --- framing ---------------------------------------------------------------------------------


def _send(sock: socket.socket, message: Any) -> None:
    # json's default ensure_ascii escapes lone surrogates, so undecodable file names survive.
    data = json.dumps(message, separators=(",", ":")).encode("ascii")
    sock.sendall(struct.pack(">I", len(data)) + data)


def _recv_exact(sock: socket.socket, size: int) -> bytes | None:
    """``size`` bytes, or None at a clean end of stream before the first byte."""
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:], min(size - got, 1 << 20))
        if n == 0:
            if got == 0:
                return None
            raise _ProtocolError("connection closed in the middle of a message")
        got += n
    return bytes(buf)


def _recv_frame(sock: socket.socket, limit: int) -> bytes | None:
    """One message's bytes, or None when the peer closed the connection between messages."""
    header = _recv_exact(sock, 4)
    if header is None:
        return None
    (size,) = struct.unpack(">I", header)
    if size > limit:
        raise _ProtocolError(f"message of {size} bytes exceeds the limit of {limit}")
    body = _recv_exact(sock, size) if size else b""
    if body is None:
        raise _ProtocolError("connection closed in the middle of a message")
    return body


def _error(exc: SemfsError) -> dict[str, Any]:
    # The nearest class the client knows: a subclass defined elsewhere degrades to its base.
    # Its plain attributes go along (StoreOwnedError's pid and holder), so it arrives whole.
    name = next(c.__name__ for c in type(exc).__mro__ if _ERRORS.get(c.__name__) is c)
    fields = {
        k: v
        for k, v in vars(exc).items()
        if not k.startswith("_") and isinstance(v, str | int | float | bool)
    }
    return {"error": {"type": name, "message": str(exc), "fields": fields}}


def _rebuild(err: dict[str, Any]) -> SemfsError:
    """The error a reply describes, as its own class with its attributes; built without its
    ``__init__``, whose arguments the wire does not name (StoreOwnedError takes a pid)."""
    cls = _ERRORS.get(str(err.get("type")), SemfsError)
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


def _peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end, where the OS tells (Linux SO_PEERCRED)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:  # macOS and the BSDs: the 0600 socket and the token must do
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def _trusted(uid: int | None) -> bool:
    return uid is None or uid in (os.getuid(), 0)


@contextlib.contextmanager
def _address(path: Path) -> Iterator[str]:
    """What to bind or connect to for ``path``: the path itself or, when it is too long for
    sun_path (a deep store folder), on Linux an alias through an open descriptor of its folder."""
    if len(os.fsencode(path)) <= MAX_SUN_PATH:
        yield str(path)
        return
    if not os.path.isdir("/proc/self/fd"):
        raise StoreUnavailableError(
            f"socket path too long for this system: {path}; use a store folder with a shorter path"
        )
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def _dial(path: Path) -> socket.socket | None:
    """A socket connected to ``path``, or None when nothing listens there (no file, stale)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT)
    try:
        with _address(path) as address:
            sock.connect(address)
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None
    except BaseException:
        sock.close()
        raise
    return sock


def _identity(path: Path) -> tuple[int, int, int, int]:
    """Tells our file from one put in its place (an inode number alone may be reused)."""
    st = os.lstat(path)
    return st.st_dev, st.st_ino, st.st_mode, st.st_ctime_ns


# --- server ----------------------------------------------------------------------------------


class StoreServer:
    """Serves a Store over a unix socket at ``coll_dir/daemon.sock``, in background threads.

    One thread accepts; each connection gets a thread that answers its requests in order.
    ``on_change`` runs in that thread right after the reply to ``write_meta`` or
    ``delete_documents`` is sent: the client never waits for the daemon's refresh (only that
    connection's next request does). ``close`` from a client is a no-op: the store is ours.
    """

    def __init__(
        self,
        store: Store,
        coll_dir: Path,
        on_change: Callable[[], None] | None = None,
        queries: QueryService | None = None,
    ) -> None:
        self.store = store
        self.queries = queries
        self.coll_dir = Path(coll_dir)
        self.socket_path = self.coll_dir / SOCKET_NAME
        self.token_path = self.coll_dir / TOKEN_NAME
        self._on_change = on_change
        self._token = secrets.token_hex(32)
        self._lock = threading.Lock()  # guards _conns and the writer slot
        self._conns: dict[socket.socket, threading.Thread] = {}
        self._writer: socket.socket | None = None
        self._writer_pid = -1
        self._stop = threading.Event()
        self._accepter: threading.Thread | None = None
        # The files to remove on close, if they are still ours then.
        self._owned: dict[Path, tuple[int, int, int, int]] = {}

    def start(self) -> None:
        if self._accepter is not None or self._stop.is_set():
            raise SemfsError("a StoreServer starts once")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.coll_dir.mkdir(parents=True, exist_ok=True)
            live = _dial(self.socket_path)
            if live is not None:
                live.close()
                raise StoreLockedError(f"a semfs daemon already serves {self.coll_dir}")
            # Leftovers of a daemon that was killed: nothing answers, so they are nobody's.
            self.socket_path.unlink(missing_ok=True)
            self.token_path.unlink(missing_ok=True)
            fd = os.open(self.token_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            try:
                os.write(fd, self._token.encode("ascii"))
            finally:
                os.close(fd)
            self._owned[self.token_path] = _identity(self.token_path)
            with _address(self.socket_path) as address:
                # Created 0600, so there is no moment when another user could connect.
                old = os.umask(0o177)
                try:
                    listener.bind(address)
                finally:
                    os.umask(old)
            os.chmod(self.socket_path, 0o600)  # whether bind honours umask varies by OS
            self._owned[self.socket_path] = _identity(self.socket_path)
            listener.listen(16)
            listener.settimeout(ACCEPT_POLL)
        except BaseException as exc:
            listener.close()
            self._remove_owned()
            if isinstance(exc, OSError):
                raise StoreUnavailableError(f"cannot serve {self.coll_dir}: {exc}") from exc
            raise
        self._accepter = threading.Thread(
            target=self._accept_loop, args=(listener,), name="semfs-ipc-accept", daemon=True
        )
        self._accepter.start()
        logger.info("serving %s on %s", self.coll_dir, self.socket_path)

    def close(self) -> None:
        """Stop accepting, end every connection (waiting a little for calls under way)."""
        self._stop.set()
        if self._accepter is not None:
            self._accepter.join(ACCEPT_POLL * 4)
        with self._lock:
            conns = dict(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)  # wakes its thread's recv with EOF
        for thread in conns.values():
            thread.join(5.0)
        self._remove_owned()

    def _remove_owned(self) -> None:
        for path, ident in self._owned.items():
            try:
                # A newer daemon's files are left alone; the token's content is the surest sign.
                mine = path != self.token_path or path.read_text() == self._token
                if mine and _identity(path) == ident:
                    path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                logger.warning("cannot remove %s: %s", path, exc)
        self._owned.clear()

    def _accept_loop(self, listener: socket.socket) -> None:
        with listener:
            while not self._stop.is_set():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                except OSError as exc:  # EMFILE and the like: keep serving, without spinning
                    logger.warning("accept failed on %s: %s", self.socket_path, exc)
                    self._stop.wait(ACCEPT_POLL)
                    continue
                thread = threading.Thread(
                    target=self._serve, args=(conn,), name="semfs-ipc-conn", daemon=True
                )
                with self._lock:  # close() sees every connection with its thread started
                    self._conns[conn] = thread
                    thread.start()

    def _serve(self, conn: socket.socket) -> None:
        pid = -1
        try:
            conn.settimeout(CONNECT_TIMEOUT)  # a peer that never says hello is dropped
            hello = self._handshake(conn)
            if hello is None:
                return
            pid = hello
            conn.settimeout(None)  # an ingest may embed for minutes between two calls
            queries = self._query_backend()
            _send(conn, {"ok": {"pid": os.getpid(), "queries": queries, "command": _COMMAND}})
            logger.info("process %d connected to %s", pid, self.socket_path)
            while (frame := _recv_frame(conn, MAX_MESSAGE)) is not None:
                if self._handle(conn, pid, frame) and self._on_change is not None:
                    try:
                        self._on_change()
                    except Exception:
                        logger.exception("refreshing after a change from process %d failed", pid)
        except (OSError, _ProtocolError) as exc:
            if not self._stop.is_set():
                logger.info("connection from process %d ended: %s", pid, exc)
        except Exception:  # a bug here must end one connection, never the daemon
            logger.exception("connection from process %d to %s failed", pid, self.socket_path)
        finally:
            with self._lock:
                self._conns.pop(conn, None)
                if self._writer is conn:  # also on EOF from a client that was kill -9'd
                    self._writer = None
            conn.close()

    def _handshake(self, conn: socket.socket) -> int | None:
        """The peer's pid when it is our user and knows the token; None to hang up on it."""
        uid = _peer_uid(conn)
        if not _trusted(uid):
            logger.warning("refused a connection to %s from uid %s", self.socket_path, uid)
            return None
        frame = _recv_frame(conn, MAX_HELLO)
        try:
            hello = json.loads(frame) if frame is not None else None
        except ValueError:
            hello = None
        token = hello.get("hello") if isinstance(hello, dict) else None
        if not isinstance(token, str) or not hmac.compare_digest(
            token.encode("utf-8", "replace"), self._token.encode("ascii")
        ):
            logger.warning("refused a connection to %s: wrong token", self.socket_path)
            return None
        pid = hello.get("pid") if isinstance(hello, dict) else None
        return pid if isinstance(pid, int) else -1

    def _query_backend(self) -> str | None:
        """What embeds queries here, for a client's hello; None when we do not embed them."""
        if self.queries is None:
            return None
        try:
            return self.queries.backend()
        except Exception as exc:  # the client then embeds its queries itself
            logger.warning("cannot embed queries for other processes: %s", exc)
            return None

    def _embed_query(self, args: list[Any]) -> list[float]:
        if self.queries is None:
            raise SemfsError("this process does not embed queries for others")
        if len(args) != 1 or not isinstance(args[0], str) or len(args[0]) > MAX_QUERY_CHARS:
            raise SemfsError(f"embed_query takes one text of at most {MAX_QUERY_CHARS} characters")
        return self.queries.embed(args[0])

    def _handle(self, conn: socket.socket, pid: int, frame: bytes) -> bool:
        """Answer one request; True when it changed what the daemon shows."""
        try:
            request = json.loads(frame)
            method = request["method"]
            if not isinstance(method, str) or method not in _METHODS | {EMBED_QUERY}:
                raise ValueError(f"no method {method!r}")
            args = decode(list(request.get("args", [])))
            kwargs = {str(k): decode(v) for k, v in dict(request.get("kwargs", {})).items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            logger.warning("bad request from process %d on %s: %s", pid, self.socket_path, exc)
            _send(conn, _error(SemfsError(f"bad request to the mounted daemon: {exc}")))
            return False
        try:
            if method in _WRITES:
                self._claim_writer(conn, pid)
            if method == EMBED_QUERY:
                result: Any = Vector(self._embed_query(args))  # float32, exactly
            elif method == "close":
                # The served store belongs to the daemon: a client's close only ends its
                # connection.
                result = None
            else:
                result = getattr(self.store, method)(*args, **kwargs)
            reply = {"ok": encode(result)}
        except SemfsError as exc:
            reply = _error(exc)
        except Exception as exc:
            logger.exception("%s from process %d failed on %s", method, pid, self.coll_dir)
            reply = _error(
                SemfsError(f"the mounted daemon failed in {method}: {type(exc).__name__}: {exc}")
            )
        _send(conn, reply)
        return method in _CHANGES and "ok" in reply

    def _claim_writer(self, conn: socket.socket, pid: int) -> None:
        with self._lock:
            if self._writer is None:
                self._writer, self._writer_pid = conn, pid
            elif self._writer is not conn:
                raise StoreLockedError(
                    f"{self.coll_dir}: another ingest is writing through the mounted daemon "
                    f"(pid {self._writer_pid}); wait for it to finish"
                )


# --- client ----------------------------------------------------------------------------------


def connect_daemon(coll_dir: Path, collection: str) -> RemoteStore | None:
    """A RemoteStore talking to the daemon serving ``coll_dir``, or None if none answers.

    None covers no socket, a stale socket (ECONNREFUSED) and a socket we may not use. A daemon
    that answers but refuses us (wrong token, another user) raises StoreLockedError.
    """
    coll_dir = Path(coll_dir)
    try:
        sock = _dial(coll_dir / SOCKET_NAME)
    except OSError as exc:
        logger.debug("no daemon answers on %s: %s", coll_dir / SOCKET_NAME, exc)
        return None
    if sock is None:
        return None
    refused = f"the semfs daemon serving {coll_dir} refused this process"
    try:
        uid = _peer_uid(sock)
        if not _trusted(uid):  # never send our data to another user's socket
            raise StoreLockedError(f"{refused}: its socket belongs to uid {uid}")
        token = (coll_dir / TOKEN_NAME).read_text().strip()
        _send(sock, {"hello": token, "pid": os.getpid()})
        frame = _recv_frame(sock, MAX_HELLO)
        reply = json.loads(frame) if frame is not None else None
        daemon_pid = int(reply["ok"]["pid"]) if isinstance(reply, dict) else None
        queries = reply["ok"].get("queries") if isinstance(reply, dict) else None
        command = reply["ok"].get("command") if isinstance(reply, dict) else None
    except (OSError, _ProtocolError, ValueError, KeyError, TypeError) as exc:
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
    remote.owner_command = command if isinstance(command, str) else ""
    return remote


class RemoteStore(Store):
    """The Store of a mounted daemon, called over its socket; one call at a time per instance."""

    backend = "embedded"

    def __init__(
        self, sock: socket.socket, coll_dir: Path, collection: str, daemon_pid: int
    ) -> None:
        self.collection = collection
        self.coll_dir = coll_dir
        self.daemon_pid = daemon_pid
        # What embeds queries in the owner (its hello said), or None when it does not.
        self.query_backend: str | None = None
        self.owner_command = ""  # the owner's command line, as it told us
        self._sock: socket.socket | None = sock
        self._lock = threading.Lock()

    @property
    def location(self) -> str:
        words = self.owner_command.split()
        owner = (
            "watcher (semfs ingest --watch)"
            if "ingest" in words and ("--watch" in words or "-w" in words)
            else "semfs mcp server"
            if "mcp" in words
            else "mounted daemon"
        )
        return f"{self.coll_dir} (through the {owner}, pid {self.daemon_pid})"

    def served_by(self) -> int | None:
        return self.daemon_pid

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        request = {
            "method": method,
            "args": [encode(a) for a in args],
            "kwargs": {k: encode(v) for k, v in kwargs.items()},
        }
        with self._lock:
            if self._sock is None:
                raise StoreUnavailableError(f"{self.location}: the connection is closed")
            try:
                _send(self._sock, request)
                frame = _recv_frame(self._sock, MAX_MESSAGE)
                if frame is None:
                    raise _ProtocolError("the daemon closed the connection")
                reply = json.loads(frame)
                if not isinstance(reply, dict):
                    raise ValueError(f"unexpected reply {reply!r:.80}")
            except (OSError, _ProtocolError, ValueError) as exc:
                self._sock.close()  # a half-read reply cannot be resynced
                self._sock = None
                msg = f"lost the connection to {self.location}: {exc}"
                raise StoreUnavailableError(msg) from exc
        if "ok" in reply:
            return decode(reply["ok"])
        err = reply.get("error")
        raise _rebuild(err if isinstance(err, dict) else {"message": str(reply)})

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
    ) -> list[ScoredChunk]:
        return self._call("query", Vector(dense), sparse, mode, limit, under=under)

    def chunk_paths_matching(
        self, substrings: Sequence[str], words: Sequence[str], under: str | None = None
    ) -> list[str]:
        return list(self._call("chunk_paths_matching", list(substrings), list(words), under))

    def split_line_paths(self, under: str | None = None) -> list[str]:
        # Computed by the daemon: sending every chunk's line span over the socket costs more.
        return list(self._call("split_line_paths", under))

    def count_chunks(self) -> int:
        return int(self._call("count_chunks"))

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

    def close(self) -> None:
        """Close the connection (releasing the writer slot); the daemon's store stays open."""
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None


class OwnerEmbedder:
    """Embeds queries with the model of the process that owns the store (over its socket),
    for a :class:`~semfs.ingest.search.Searcher` whose store is that owner's
    (:func:`owner_embedder`). Should the owner fail to answer, ``fallback()`` makes a local
    query embedder, used from then on (logged once). Documents are never embedded here."""

    def __init__(self, store: RemoteStore, name: str, fallback: Callable[[], Any]) -> None:
        self.name = name
        self.store = store
        self._fallback = fallback
        self._local: Any = None
        self._lock = threading.Lock()

    @property
    def query_backend(self) -> str:
        if self._local is not None:
            return str(getattr(self._local, "query_backend", "this process's model"))
        return f"{self.store.query_backend}, in the owner (pid {self.store.daemon_pid})"

    @property
    def loaded(self) -> bool:
        return True  # the owner's model is warm, or loads there

    def _local_embedder(self) -> Any:
        with self._lock:
            if self._local is None:
                self._local = self._fallback()
            return self._local

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> list[list[float]]:
        if self._local is None:
            try:
                return [self.store.embed_query(t) for t in texts]
            except SemfsError as exc:
                logger.warning(
                    "the owner of %s cannot embed queries (%s): embedding them here",
                    self.store.coll_dir,
                    exc,
                )
        result: list[list[float]] = self._local_embedder().encode(texts, batch_size)
        return result

    @property
    def dimension(self) -> int:
        return int(self._local_embedder().dimension)

    @property
    def max_tokens(self) -> int:
        return int(self._local_embedder().max_tokens)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        counts: list[int] = self._local_embedder().count_tokens(texts)
        return counts


def owner_embedder(store: Store, name: str, fallback: Callable[[], Any]) -> OwnerEmbedder | None:
    """An :class:`OwnerEmbedder` when ``store`` is an owner's that embeds queries, else None."""
    if isinstance(store, RemoteStore) and store.query_backend is not None:
        return OwnerEmbedder(store, name, fallback)
    return None
