"""``semfs mcp --http``'s connections, bounded against slow and abusive clients.

uvicorn alone does not bound them: ``limit_concurrency`` answers 503 to every new request once
that many connections are open (so slow clients lock out the normal ones, which is the attack),
``timeout_keep_alive`` runs only between two requests (and a byte of a body the server did not
read cancels it for good), and ``h11_max_incomplete_event_size`` bounds a request head's bytes
(16 KiB by default, kept) but not its time. Two attacks locked everyone out: 1,100 connections
each sending a header byte every 5 s (under a 1024 open-files limit every ``accept`` failed);
and 768 connections that each sent a whole head announcing a 4 MB body, got 401, then sent a
body byte every 4 s (each stayed open for good: 0 of 17 of the admin token's requests answered).
:class:`GuardedH11` is uvicorn's own h11 protocol (``uvicorn.Config(http=...)``) with these
rules, which a caller may rely on:

* **A whole request is bounded in time.** A connection has :data:`HEADER_SECONDS` from when it
  opens (or its last response ends) to send a request head, and :data:`REQUEST_SECONDS` from
  then to send the whole request, body included; past either it is closed. The head is at
  most 16 KiB (h11's bound) and the body at most the SDK's 4 MiB (413 past it).
* **An answer given before the body arrived ends the connection** (the 401 to a client without
  a token, a 413): the rest of the body is never waited for.
* At most :attr:`ConnectionGuard.cap` connections are open, kept below the open-files limit
  (:func:`connection_cap`), so ``accept`` does not run out of descriptors. **Connections
  without a valid bearer token** (not yet sent a head, or sent one without a token the server
  accepts) hold at most ``cap - reserve``: a quarter of the cap is kept for token holders, and
  past that share the oldest such connection is closed. Past the cap itself a new connection
  closes, in this order, the oldest connection without a token, the oldest connection (idle
  first) of the scoped token holding the most, the admin token's oldest idle one, or else itself.
  So a client with a token gets in whatever clients without one hold, and no scoped token
  can hold the slots the others need.
* Refused connections (closed at a bound, or accepts that failed for want of descriptors) are
  logged at most once a second, with a count and the bound, never with a traceback; neither is
  a token holder's request that ends mid-body (:class:`WholeBodies`: the application is never
  called with half a body).
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
from collections.abc import Callable
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from semfs.ingest import portable

logger = logging.getLogger(__name__)

# Time to send a whole request head: an agent's client sends it in one write.
HEADER_SECONDS = 10.0
# Time to send a whole request, from when the server starts waiting for its head: the 4 MiB
# body the SDK accepts takes under a second on a local link, and 30 s at about 1 Mbit/s.
REQUEST_SECONDS = 30.0
# Descriptors left for the rest of the server (the store's files, the model, the owner's
# socket and its clients, threads' pipes: about 12 when idle) and for one burst of accepts
# (ACCEPT_BURST): at least this many, or a quarter of the limit (1024 -> 768 connections).
RESERVED_FILES = 128
LOG_EVERY = 1.0  # seconds between two "refused" lines
# After an answer given before the body came, how long the rest is read and dropped (so that
# the client reads the answer rather than a reset) before the connection is closed.
LINGER_SECONDS = 2.0
# Connections asyncio may accept in one go (the listen backlog, and uvicorn's ``backlog``),
# before the guard sees any: part of the reserve.
ACCEPT_BURST = 64
# Who a connection is, by its last request head's bearer token: not known yet (no head), no
# valid token, or the token's subject (its SHA-256).
UNKNOWN, ANONYMOUS = None, ""


def connection_cap(limit: int | None = None) -> int:
    """How many HTTP connections may be open at once under the open-files limit ``limit``
    (default: this process's soft RLIMIT_NOFILE)."""
    if limit is None:
        limit = portable.open_files_limit() or 1 << 16
    if limit <= 0:
        limit = 1 << 16
    return max(8, limit - max(RESERVED_FILES, limit // 4))


class ConnectionGuard:
    """The shared state of one server's connections: which are open (oldest first), which
    have no valid token, which each token holds, which wait for a request head, and the
    refusals not logged yet. Runs on the event loop only.

    ``identify(token)`` is the subject of a bearer token the server accepts, else None;
    ``admin`` the admin token's subject.
    """

    def __init__(
        self,
        cap: int,
        identify: Callable[[str], str | None] | None = None,
        admin: str | None = None,
    ) -> None:
        self.cap = cap
        self.reserve = max(1, cap // 4)  # kept for connections with a token
        self.identify = identify or (lambda _token: None)
        self.admin = admin
        self.open: dict[GuardedH11, None] = {}  # insertion order: oldest first
        self.anonymous: dict[GuardedH11, None] = {}  # no valid token (yet)
        self.tokens: dict[str, dict[GuardedH11, None]] = {}
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
        self.open[proto] = None
        self.anonymous[proto] = None
        if len(self.anonymous) > self.cap - self.reserve:
            victim = next(p for p in self.anonymous if p is not proto)
            self.refused(
                f"{len(self.anonymous) - 1} without a token, at most {self.cap - self.reserve}:"
                " the oldest closed"
            )
            victim.close_now()
        elif len(self.open) > self.cap:
            victim = self._victim(proto)
            self.refused("at the connection cap, the oldest without a token (or idle) closed")
            victim.close_now()

    def _victim(self, proto: GuardedH11) -> GuardedH11:
        """Who makes room for ``proto`` at the cap (the module's order)."""
        victim = next((p for p in self.anonymous if p is not proto), None)
        if victim is not None:
            return victim
        scoped = [held for subject, held in self.tokens.items() if subject != self.admin and held]
        if scoped:
            most = max(scoped, key=len)
            return next((p for p in most if p in self.waiting), next(iter(most)))
        admins = self.tokens.get(self.admin or "", {})
        return next((p for p in admins if p in self.waiting), proto)

    def identified(self, proto: GuardedH11, token: str | None) -> None:
        """``proto`` sent a request head with bearer ``token`` (None: none)."""
        subject = self.identify(token) if token else None
        who = subject if subject is not None else ANONYMOUS
        if who == proto.who:
            return
        self._forget_who(proto)
        proto.who = who
        if who == ANONYMOUS:
            self.anonymous[proto] = None
        else:
            self.tokens.setdefault(who, {})[proto] = None

    def _forget_who(self, proto: GuardedH11) -> None:
        self.anonymous.pop(proto, None)
        if proto.who:
            held = self.tokens.get(proto.who)
            if held is not None:
                held.pop(proto, None)
                if not held:
                    del self.tokens[proto.who]

    def closed(self, proto: GuardedH11) -> None:
        self.open.pop(proto, None)
        self.waiting.pop(proto, None)
        self._forget_who(proto)


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with a whole-request deadline and the connection rules (module
    doc). Made per server by :func:`guarded_protocol`, which binds the ``guard``."""

    guard: ConnectionGuard

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.who: str | None = UNKNOWN
        self._timer: asyncio.TimerHandle | None = None
        self._started = 0.0  # when the server began to wait for the current request
        self._body_due = False  # the timer runs to the whole request's deadline
        self._seen: object = None  # the scope of the last request head identified

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_request()
        self.guard.admit(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        self.guard.closed(self)
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        state = self.conn.their_state
        if state is h11.IDLE or self.transport.is_closing():
            return  # no head yet: the head deadline runs
        if self.scope is not None and self.scope is not self._seen:
            self._seen = self.scope
            self.guard.waiting.pop(self, None)
            self.guard.identified(self, self._bearer())
        if state is h11.SEND_BODY:
            if not self._body_due:
                self._body_due = True
                self._stop_timer()
                due = max(0.0, self._started + REQUEST_SECONDS - self.loop.time())
                self._timer = self.loop.call_later(due, self._too_slow)
        else:  # the whole request is in
            self._stop_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if self.conn.their_state is h11.SEND_BODY:
            # Answered before the body came (401, 413): no more requests on this connection.
            # The answer is sent, then the connection closed within LINGER_SECONDS.
            self._stop_timer()
            self._timer = self.loop.call_later(LINGER_SECONDS, self._too_slow)
            if self.transport.can_write_eof():
                self.transport.write_eof()
        elif self.conn.their_state is h11.IDLE:
            self._await_request()

    def _bearer(self) -> str | None:
        for name, value in self.headers or ():
            if name == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                return token.strip() if scheme.lower() == "bearer" else None
        return None

    def _await_request(self) -> None:
        self._stop_timer()
        self._started = self.loop.time()
        self._body_due = False
        self._timer = self.loop.call_later(HEADER_SECONDS, self._too_slow)
        self.guard.waiting[self] = self._started

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _too_slow(self) -> None:
        self._timer = None
        self.close_now()

    def close_now(self) -> None:
        """Close without a word (what the client sent is not answered)."""
        self._stop_timer()
        self.guard.closed(self)
        if not self.transport.is_closing():
            self.transport.abort()


def guarded_protocol(
    cap: int | None = None,
    identify: Callable[[str], str | None] | None = None,
    admin: str | None = None,
) -> tuple[type[GuardedH11], ConnectionGuard]:
    """A protocol class for ``uvicorn.Config(http=...)`` bound to a new guard of ``cap``
    connections (default :func:`connection_cap`), and the guard; ``identify`` and ``admin``
    as :class:`ConnectionGuard` takes them."""
    guard = ConnectionGuard(cap if cap is not None else connection_cap(), identify, admin)
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


class WholeBodies:
    """ASGI middleware: the application is called with a request's whole body, at most
    ``max_body`` bytes (413 past it, as the SDK's own RequestBodyLimitMiddleware answers); a
    client that goes away mid-body is let go without a word (before, the SDK logged two
    ERROR lines and a traceback for each: 2.47 MB of log in 30 s from one token holder)."""

    def __init__(self, app: Any, max_body: int) -> None:
        self.app = app
        self.max_body = max_body
        self.dropped = 0  # requests whose client left mid-body

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_body:
            await _too_large(send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.dropped += 1
                logger.debug("a client left in the middle of its request's body")
                return
            body += message.get("body", b"")
            if len(body) > self.max_body:
                await _too_large(send)
                return
            if not message.get("more_body", False):
                break
        if _nested_too_deep(body):
            await _parse_error(send, "JSON nested deeper than the server parses")
            return
        whole = [{"type": "http.request", "body": bytes(body), "more_body": False}]

        async def replay() -> Any:
            return whole.pop() if whole else await receive()

        await self.app(scope, replay, send)


# More brackets than a request needs: parse it once here, where a RecursionError can be
# answered as what it is (the SDK's parse logs a traceback and answers 500).
_BRACKETS_CHECKED = 256


def _nested_too_deep(body: bytes | bytearray) -> bool:
    if body.count(b"[") + body.count(b"{") <= _BRACKETS_CHECKED:
        return False
    try:
        json.loads(body)
    except RecursionError:
        return True
    except ValueError:
        pass  # not JSON: the SDK says so
    return False


async def _parse_error(send: Any, why: str) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": f"Parse error: {why}"}}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 400,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _too_large(send: Any) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"text/plain; charset=utf-8")],
        }
    )
    await send({"type": "http.response.body", "body": b"Request body too large"})
