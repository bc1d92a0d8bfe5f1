"""``semfs mcp --http``'s connections, bounded against slow and abusive clients.

uvicorn alone does not bound them: ``limit_concurrency`` answers 503 to every new request once
that many connections are open (so slow clients lock out the normal ones, which is the attack),
``timeout_keep_alive`` runs only between two requests, and ``h11_max_incomplete_event_size``
bounds a request head's bytes (16 KiB by default, kept) but not its time. Without a bound,
1,100 connections that each send a header byte every 5 s under a 1024 open-files limit made
every ``accept`` fail (EMFILE), every normal request time out, and asyncio log a traceback per
failed accept. :class:`GuardedH11` is uvicorn's own h11 protocol (``uvicorn.Config(http=...)``)
with these rules, which a caller may rely on:

* A connection has :data:`HEADER_SECONDS` from when it opens (or its last response ends) to
  send a whole request head; then it is closed.
* At most :attr:`ConnectionGuard.cap` connections are open, kept below the open-files limit
  (:func:`connection_cap`), so ``accept`` does not run out of descriptors. A connection past
  the cap closes the connection that has waited longest for its request head, else itself: a
  client that sends its request at once gets in whatever slow clients hold.
* Refused connections (closed at the cap, or accepts that failed for want of descriptors) are
  logged at most once a second, with a count, and never with a traceback.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger(__name__)

# Time to send a whole request head: an agent's client sends it in one write.
HEADER_SECONDS = 10.0
# Descriptors left for the rest of the server (the store's files, the model, the owner's
# socket and its clients, threads' pipes: about 12 when idle) and for one burst of accepts
# (ACCEPT_BURST): at least this many, or a quarter of the limit (1024 -> 768 connections).
RESERVED_FILES = 128
LOG_EVERY = 1.0  # seconds between two "refused" lines
# Connections asyncio may accept in one go (the listen backlog, and uvicorn's ``backlog``),
# before the guard sees any: part of the reserve.
ACCEPT_BURST = 64


def connection_cap(limit: int | None = None) -> int:
    """How many HTTP connections may be open at once under the open-files limit ``limit``
    (default: this process's soft RLIMIT_NOFILE)."""
    if limit is None:
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if limit == resource.RLIM_INFINITY or limit <= 0:
        limit = 1 << 16
    return max(8, limit - max(RESERVED_FILES, limit // 4))


class ConnectionGuard:
    """The shared state of one server's connections: who waits for a request head since
    when (oldest first), and the refusals not logged yet. Runs on the event loop only."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.open: set[GuardedH11] = set()
        self.waiting: dict[GuardedH11, float] = {}  # insertion order: longest waiting first
        self._refused = 0
        self._flush: asyncio.TimerHandle | None = None

    def refused(self, why: str = "") -> None:
        """Count one refused connection; the count is logged within LOG_EVERY seconds."""
        self._refused += 1
        if self._flush is None:
            loop = asyncio.get_running_loop()
            self._flush = loop.call_later(LOG_EVERY, self._log, why)

    def _log(self, why: str) -> None:
        count, self._refused, self._flush = self._refused, 0, None
        logger.warning(
            "refused %d HTTP connection%s in the last %g s%s (%d open, at most %d)",
            count,
            "" if count == 1 else "s",
            LOG_EVERY,
            f": {why}" if why else "",
            len(self.open),
            self.cap,
        )

    def admit(self, proto: GuardedH11) -> None:
        self.open.add(proto)
        if len(self.open) <= self.cap:
            return
        victim = next((p for p in self.waiting if p is not proto), proto)
        self.refused("at the connection cap, the one waiting longest for its request closed")
        victim.close_now()


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with a request-head deadline and a connection cap (module doc).

    Made per server by :func:`guarded_protocol`, which binds the ``guard``.
    """

    guard: ConnectionGuard

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()
        self.guard.admit(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_arrived()
        self.guard.open.discard(self)
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:
            self._head_arrived()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._await_head()

    def _await_head(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(HEADER_SECONDS, self._head_too_slow)
            self.guard.waiting[self] = self.loop.time()

    def _head_arrived(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        self.guard.waiting.pop(self, None)

    def _head_too_slow(self) -> None:
        self._head_timer = None
        self.guard.waiting.pop(self, None)
        self.close_now()

    def close_now(self) -> None:
        """Close without a word (the client has not sent a request to answer)."""
        self._head_arrived()
        self.guard.open.discard(self)
        if not self.transport.is_closing():
            self.transport.abort()


def guarded_protocol(cap: int | None = None) -> tuple[type[GuardedH11], ConnectionGuard]:
    """A protocol class for ``uvicorn.Config(http=...)`` bound to a new guard of ``cap``
    connections (default :func:`connection_cap`), and the guard."""
    guard = ConnectionGuard(cap if cap is not None else connection_cap())
    return type("GuardedH11", (GuardedH11,), {"guard": guard}), guard


def quiet_accept_errors(loop: asyncio.AbstractEventLoop, guard: ConnectionGuard) -> None:
    """Accepts that fail for want of descriptors are counted as refusals (asyncio retries
    them a second later) instead of logged with a traceback each; other errors as before."""

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS):
            guard.refused(f"out of file descriptors ({exc.strerror})")
            return
        loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
