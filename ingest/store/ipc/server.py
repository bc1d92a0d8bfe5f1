"""The owner's side of the socket: :class:`StoreServer` serves a Store to other processes.

Owner only: the socket is mode 0600; a client must first send the random token kept in the
0600 file ``daemon.token`` beside it; where the system tells the peer's uid, it must also be ours
or root. Any number of connections may read and write: writers of one collection take turns
on its write lock (:mod:`semfs.ingest.store.writelock`), whatever process they run in.

Searches: an owner that embeds queries (a :class:`~semfs.ingest.store.QueryService`) says so
in its hello reply (``"queries"``: what runs its model) and answers ``embed_query`` with the
query's vector from its warm model; one that also searches says ``"searches": true`` and answers
``search`` (:data:`~.wire.SEARCH_ARGS`) with the hits, one request for a client's whole search.
Neither request is a Store method, and only a query of at most :data:`~.wire.MAX_QUERY_CHARS`
is taken.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from semfs.ingest.errors import SemfsError, StoreLockedError, StoreUnavailableError
from semfs.ingest.store import QueryService, Store
from semfs.ingest.store.ipc.wire import (
    CONNECT_TIMEOUT,
    EMBED_QUERY,
    HELD_OPEN,
    MAX_HELLO,
    MAX_MESSAGE,
    MAX_QUERY_CHARS,
    METHODS,
    SEARCH,
    SEARCH_ARGS,
    SOCKET_NAME,
    TOKEN_NAME,
    ProtocolError,
    dial,
    error_reply,
    peer_uid,
    recv_frame,
    send,
    socket_address,
    trusted,
)
from semfs.ingest.store.ownerkind import command_line
from semfs.ingest.store.schema import Vector, decode, encode

logger = logging.getLogger(__name__)

# Who we are, for a client that must say what owns the store ("semfs ingest ./docs --watch").
_COMMAND = command_line()[:200]
# How often the accept loop looks at the stop flag; close() waits about this long.
ACCEPT_POLL = 0.5
# After these the daemon's view of the collection (its directory tree) is out of date.
_CHANGES = frozenset({"write_meta", "delete_documents", "put_directories", "delete_directories"})


def _identity(path: Path) -> tuple[int, ...]:
    """Tells our file from one put in its place (an inode number alone may be reused)."""
    st = os.lstat(path)
    return st.st_dev, st.st_ino, st.st_mode, st.st_ctime_ns


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
        embeds: bool = False,
        held: Callable[[], Collection[str]] | None = None,
    ) -> None:
        self.store = store
        self.queries = queries
        self.embeds = embeds  # we give the chunks others write their dense vectors
        self.held = held  # the files our writable mount holds open for writing
        self.coll_dir = Path(coll_dir)
        self.socket_path = self.coll_dir / SOCKET_NAME
        self.token_path = self.coll_dir / TOKEN_NAME
        self._on_change = on_change
        self._token = secrets.token_hex(32)
        self._lock = threading.Lock()  # guards _conns
        self._conns: dict[socket.socket, threading.Thread] = {}
        self._stop = threading.Event()
        self._accepter: threading.Thread | None = None
        # The files to remove on close, if they are still ours then: by identity (see
        # _identity), by (device, inode) for the moment between a rename and the record of
        # its result, or None for a name only we use (removed whatever is there).
        self._owned: dict[Path, tuple[int, ...] | None] = {}

    def start(self) -> None:
        if self._accepter is not None or self._stop.is_set():
            raise SemfsError("a StoreServer starts once")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.coll_dir.mkdir(parents=True, exist_ok=True)
            live = dial(self.socket_path)
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
            self._bind(listener)
            listener.settimeout(ACCEPT_POLL)
            # Inside the try: a stop landing here still removes what start() made.
            self._accepter = threading.Thread(
                target=self._accept_loop, args=(listener,), name="semfs-ipc-accept", daemon=True
            )
            self._accepter.start()
            logger.info("serving %s on %s", self.coll_dir, self.socket_path)
        except BaseException as exc:
            self._stop.set()
            listener.close()
            self._remove_owned()
            if isinstance(exc, OSError):
                raise StoreUnavailableError(f"cannot serve {self.coll_dir}: {exc}") from exc
            raise

    def _bind(self, listener: socket.socket) -> None:
        """Listen at ``daemon.sock``, owning the file from the moment it exists.

        A stop (SIGTERM becomes KeyboardInterrupt) may land between any two lines here, and
        whatever file exists by then must be in ``_owned`` so that the cleanup removes it. So
        the socket is bound under a name only we use, recorded before the bind, and renamed
        into place once it listens (clients never meet a socket that refuses them); its
        (device, inode) is recorded under the final name before the rename.
        """
        tmp = self.coll_dir / f".{SOCKET_NAME}.{os.getpid()}.{secrets.token_hex(4)}"
        self._owned[tmp] = None
        with socket_address(tmp) as address:
            # Created 0600, so there is no moment when another user could connect.
            old = os.umask(0o177)
            try:
                listener.bind(address)
            finally:
                os.umask(old)
        os.chmod(tmp, 0o600)  # whether bind honours umask varies by OS
        listener.listen(16)
        bound = os.lstat(tmp)
        self._owned[self.socket_path] = (bound.st_dev, bound.st_ino)
        os.rename(tmp, self.socket_path)
        self._owned[self.socket_path] = _identity(self.socket_path)
        del self._owned[tmp]

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
                if mine and (ident is None or _identity(path)[: len(ident)] == ident):
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
            # A peer that does not say hello within CONNECT_TIMEOUT in all is dropped (before,
            # it was per recv: 300 peers sending a byte a second held 300 threads).
            hello = self._handshake(conn, time.monotonic() + CONNECT_TIMEOUT)
            if hello is None:
                return
            pid = hello
            conn.settimeout(None)  # an ingest may embed for minutes between two calls
            queries = self._query_backend()
            searches = (
                queries is not None and self.queries is not None and bool(self.queries.search)
            )
            welcome = {
                "pid": os.getpid(),
                "queries": queries,
                "searches": searches,
                "embeds": self.embeds,
            }
            send(conn, {"ok": {**welcome, "command": _COMMAND}})
            logger.info("process %d connected to %s", pid, self.socket_path)
            while (frame := recv_frame(conn, MAX_MESSAGE)) is not None:
                changed = self._handle(conn, pid, frame)
                if changed and self._on_change is not None:
                    try:
                        self._on_change()
                    except Exception:
                        logger.exception("refreshing after a change from process %d failed", pid)
        except (OSError, ProtocolError) as exc:
            if not self._stop.is_set():
                logger.info("connection from process %d ended: %s", pid, exc)
        except Exception:  # a bug here must end one connection, never the daemon
            logger.exception("connection from process %d to %s failed", pid, self.socket_path)
        finally:
            with self._lock:
                self._conns.pop(conn, None)
            conn.close()

    def _handshake(self, conn: socket.socket, deadline: float) -> int | None:
        """The peer's pid when it is our user and knows the token, said by ``deadline``;
        None to hang up on it."""
        uid = peer_uid(conn)
        if not trusted(uid):
            logger.warning("refused a connection to %s from uid %s", self.socket_path, uid)
            return None
        frame = recv_frame(conn, MAX_HELLO, deadline)
        try:
            hello = json.loads(frame) if frame is not None else None
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
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

    def _search(self, args: list[Any], kwargs: dict[str, Any]) -> list[dict[str, Any]]:
        search = self.queries.search if self.queries is not None else None
        if search is None:
            raise SemfsError("this process does not search for others")
        if args or set(kwargs) - set(SEARCH_ARGS) or "query" not in kwargs:
            raise SemfsError(f"search takes keyword arguments of {', '.join(SEARCH_ARGS)}")
        for name, value in kwargs.items():
            if type(value) not in SEARCH_ARGS[name]:
                raise SemfsError(f"search: {name} cannot be {type(value).__name__}")
        if len(kwargs["query"]) > MAX_QUERY_CHARS:
            raise SemfsError(f"search takes a query of at most {MAX_QUERY_CHARS} characters")
        return search(kwargs)

    def _handle(self, conn: socket.socket, pid: int, frame: bytes) -> bool:
        """Answer one request; True when it changed what the daemon shows."""
        try:
            request = json.loads(frame)
            method = request["method"]
            if not isinstance(method, str) or method not in METHODS | {
                EMBED_QUERY,
                SEARCH,
                HELD_OPEN,
            }:
                raise ValueError(f"no method {method!r}")
            args = decode(list(request.get("args", [])))
            kwargs = {str(k): decode(v) for k, v in dict(request.get("kwargs", {})).items()}
        except RecursionError:
            exc = ValueError("JSON nested deeper than the parser goes")
            logger.warning("bad request from process %d on %s: %s", pid, self.socket_path, exc)
            send(conn, error_reply(SemfsError(f"bad request to the mounted daemon: {exc}")))
            return False
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            logger.warning("bad request from process %d on %s: %s", pid, self.socket_path, exc)
            send(conn, error_reply(SemfsError(f"bad request to the mounted daemon: {exc}")))
            return False
        try:
            if method == EMBED_QUERY:
                result: Any = Vector(self._embed_query(args))  # float32, exactly
            elif method == HELD_OPEN:
                result = sorted(self.held()) if self.held is not None else []
            elif method == SEARCH:
                result = self._search(args, kwargs)
            elif method == "close":
                # The served store belongs to the daemon: a client's close only ends its
                # connection.
                result = None
            else:
                result = getattr(self.store, method)(*args, **kwargs)
            reply = {"ok": encode(result)}
        except SemfsError as exc:
            reply = error_reply(exc)
        except Exception as exc:
            logger.exception("%s from process %d failed on %s", method, pid, self.coll_dir)
            reply = error_reply(
                SemfsError(f"the mounted daemon failed in {method}: {type(exc).__name__}: {exc}")
            )
        send(conn, reply)
        return method in _CHANGES and "ok" in reply
