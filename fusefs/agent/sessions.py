"""``semfs mcp --http``'s session table, which no token holder can fill for the others.

The MCP SDK keeps one table of sessions for everyone: at its limit every new session is
refused (503), the admin token's included, until one ends; a client that opens sessions and never
ends them (no DELETE) locks everyone out for the idle timeout, and for good if it pings them.
:class:`FairSessions` is the SDK's session manager with these rules instead, which a caller may
rely on:

* Each token has at most ``per_token`` sessions. A token at its cap that opens another loses
  its own session idle the longest (its id answers 404 from then on, as after an idle timeout);
  if none of its sessions is idle, only that token is refused (503).
* The whole table holds ``max_sessions``. When it is full, a scoped token's new session closes
  the longest-idle session of the token holding the most; the admin token is always admitted.
  So a token under its cap is refused only when every session in the table is busy.
* A session belongs to the exact token that opened it (the verifier's ``subject`` is the
  token's SHA-256): a revoked token's sessions close within :data:`SWEEP_SECONDS`, open GET
  streams included, even if the same name is given a new token.
* Refused sessions are logged at most once per :data:`LOG_EVERY` seconds, with a count per
  limit that fired (a token's own ``per_token``, or the table's ``max_sessions``), in place of
  the SDK's line per refusal (1,426 lines in 20 s, which named the table's 256 when the
  token's 16 had fired).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from semfs.fusefs.agent.connections import WholeBodies

logger = logging.getLogger(__name__)

# How often sessions of revoked tokens are looked for (a stat of the tokens file each time).
SWEEP_SECONDS = 1.0
LOG_EVERY = 1.0  # seconds between two "refused sessions" lines
# The SDK's own line for each refusal (the limit it names is the table's, whatever fired).
_SDK_REFUSAL = "Refusing to open a new session"


def _not_the_sdks_refusal(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith(_SDK_REFUSAL)


# The SDK's lines for what well-behaved clients do (issue 46): the standalone SSE stream's
# traceback when a client goes away (one per client exit), and pydantic's whole report (94
# lines) for each request of a method this SDK does not know (`server/discover`, which an
# `mcp` 2.x client sends on every connection; it is answered with an error, as it should be).
_SSE_WRITER = "Error in standalone SSE writer"
_UNKNOWN_REQUEST = "Failed to validate request"
_METHOD = re.compile(r"input_value='([^']{1,80})'")
_unknown_methods: set[str] = set()


def _client_exit(record: logging.LogRecord) -> bool:
    """Drop the SDK's traceback for a client that ended its event stream."""
    if str(record.msg) == _SSE_WRITER and record.exc_info:
        return not isinstance(record.exc_info[1], anyio.ClosedResourceError)
    return True


def _unknown_request(record: logging.LogRecord) -> bool:
    """The SDK's report of a request it could not validate, as one line, once per method."""
    if not str(record.msg).startswith(_UNKNOWN_REQUEST):
        return True
    found = _METHOD.search(record.getMessage())
    method = found.group(1) if found else "?"
    if method in _unknown_methods:
        return False
    _unknown_methods.add(method)
    record.msg = (
        "a client sent a request this server does not know (method %r): answered 'invalid "
        "request parameters' (logged once per method)"
    )
    record.args = (method,)
    return True


def quiet_sdk_logs() -> None:
    """Install the filters above on the SDK's loggers (the second logs on the root logger)."""
    from mcp.server import streamable_http

    logging.getLogger(streamable_http.__name__).addFilter(_client_exit)
    logging.getLogger().addFilter(_unknown_request)


class FairSessions(StreamableHTTPSessionManager):
    """The SDK's StreamableHTTPSessionManager, with the admission rules of the module doc.

    ``admin`` is the admin token's subject; ``alive()`` the subjects of the tokens valid now
    (the admin token's included).
    """

    def __init__(
        self,
        *args: Any,
        admin: str,
        alive: Callable[[], set[str]],
        per_token: int,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.admin = admin
        self.alive = alive
        self.per_token = per_token
        self._refusals: Counter[str] = Counter()
        self._flush: asyncio.TimerHandle | None = None
        logging.getLogger(StreamableHTTPSessionManager.__module__).addFilter(_not_the_sdks_refusal)
        # The whole body before the SDK sees the request: one that ends mid-body is dropped
        # quietly (the SDK logs a traceback for each).
        self.asgi_app = WholeBodies(self._handle_request, self.max_request_body_size)  # type: ignore[assignment]

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        async with super().run():
            assert self._task_group is not None
            self._task_group.start_soon(self._sweep_revoked)
            yield

    def _subject(self, session_id: str) -> str | None:
        who = self._session_owners.get(session_id)
        return who.get("subject") if who is not None else None

    def _idle_since(self, session_id: str) -> float:
        """When the session would time out if nothing happens (smaller: idle longer);
        ``inf`` while a request of its is under way or it is still opening."""
        transport = self._server_instances.get(session_id)
        idle = getattr(transport, "idle_scope", None)  # the SDK's CancelScope, when it has one
        if transport is None or idle is None or transport.is_terminated:
            return math.inf
        return float(idle.deadline)

    def _longest_idle(self, subject: str | None) -> str | None:
        """The session of ``subject`` (None: anyone's) idle the longest, or None."""
        candidates = [
            sid
            for sid in self._server_instances
            if (subject is None or self._subject(sid) == subject)
            and self._idle_since(sid) < math.inf
        ]
        return min(candidates, key=self._idle_since, default=None)

    def _close(self, session_id: str, why: str) -> None:
        """Forget the session now (its id answers 404) and end it: its idle scope is what the
        SDK's session task waits on, so cancelling it ends the session as a timeout does."""
        transport = self._server_instances.pop(session_id, None)
        subject = self._subject(session_id)
        self._session_owners.pop(session_id, None)
        logger.info("closing session %s of %s: %s", session_id[:8], (subject or "?")[:8], why)
        if transport is None:
            return
        if transport.idle_scope is not None:
            transport.idle_scope.cancel()
        elif self._task_group is not None:
            self._task_group.start_soon(transport.terminate)

    def _admit_session(self, requestor: Any) -> Any:
        subject = requestor.get("subject") if requestor is not None else None
        if subject is None:  # no token (the SDK's auth lets none through): its own rules
            return super()._admit_session(requestor)
        held = Counter(self._subject(sid) for sid in self._server_instances)
        if held[subject] >= self.per_token:
            victim = self._longest_idle(subject)
            if victim is not None:
                self._close(victim, f"its token opened more than {self.per_token} sessions")
            elif subject != self.admin:
                # All of its own sessions are busy: refuse it, and only it.
                name = requestor.get("client_id") or subject[:8]
                self._refuse(f"token {name!r} has all {self.per_token} of its sessions busy")
                return None
        full = self.max_sessions is not None and len(self._server_instances) >= self.max_sessions
        if full and subject != self.admin:
            victim = None
            for other, _count in held.most_common():
                if other != self.admin and (victim := self._longest_idle(other)):
                    break
            if victim is None:
                self._refuse(f"the table's {self.max_sessions} sessions are all busy")
                return None
            self._close(victim, "the session table is full")
        # The admin token is admitted past the table's limit: lift it for this one call.
        limit, self.max_sessions = self.max_sessions, None
        try:
            return super()._admit_session(requestor)
        finally:
            self.max_sessions = limit

    def _refuse(self, why: str) -> None:
        """Count a refused session (logged within LOG_EVERY seconds, per limit)."""
        self._refusals[why] += 1
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(LOG_EVERY, self._log_refusals)

    def _log_refusals(self) -> None:
        refusals, self._refusals, self._flush = self._refusals, Counter(), None
        total = sum(refusals.values())
        logger.warning(
            "refused %d new session%s in the last %g s (%s)",
            total,
            "" if total == 1 else "s",
            LOG_EVERY,
            "; ".join(f"{count}: {why}" for why, count in refusals.most_common()),
        )

    async def _sweep_revoked(self) -> None:
        while True:
            await anyio.sleep(SWEEP_SECONDS)
            try:
                alive = self.alive()
            except Exception as exc:  # a damaged tokens file: keep the sessions, say so
                logger.warning("cannot read the tokens to close revoked sessions: %s", exc)
                continue
            for sid in list(self._server_instances):
                subject = self._subject(sid)
                if subject is not None and subject not in alive:
                    self._close(sid, "its token was revoked")
