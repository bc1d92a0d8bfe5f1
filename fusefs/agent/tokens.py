"""Who may use ``semfs mcp --http``: bearer tokens, and the folders each one may see.

Files, in the collection's local folder
(:attr:`~semfs.ingest.store.address.CollectionAddress.local_dir`: ``STORE/COLLECTION/``; for a
Qdrant server ``STORE/servers/SERVER/COLLECTION/``), all owner-only (0600, the folder 0700):

* ``mcp.token``: the admin token, made on first use; it sees the whole collection. Another
  file can stand in for it (``--token-file``). Its text is the token, so that a client can be
  given it with ``Authorization: Bearer $(cat mcp.token)``.
* ``mcp-tokens.json``: the scoped tokens (``semfs token create NAME --under DIR``): a name, the
  folders it may see and the SHA-256 of the token, never the token itself; the token is
  printed once, when made.

Rules a caller may rely on:

* A token file that another user may read or that is not ours is refused, as ssh refuses such
  a key: a token anyone can read protects nothing.
* :meth:`TokenVerifier.verify_token` is the MCP SDK's ``TokenVerifier`` protocol: it compares
  in constant time and reads ``mcp-tokens.json`` again when it changed, so ``semfs token
  revoke`` takes effect on the next request without a restart.
* A grant's ``under`` is a tuple of collection-relative folders; ``()`` is everything. On a
  server of several collections (:func:`several_token_folder`'s tokens, ``semfs token create
  --several``) each folder's first part names its collection: ``docs`` is all of it.
  ``write`` (``semfs token create --write``) lets it use the write tool in those folders.
  A server of several also takes each served collection's own scoped tokens (``semfs token
  create NAME -c docs --under guide``), as grants below that collection (``docs/guide``): a
  user who made a token for ``docs`` expects it to see the same folders of ``docs`` there,
  and nothing of another collection.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.provider import AccessToken

from semfs.fusefs.agent.grep import normalize_path
from semfs.ingest.errors import TokenError
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import capabilities

ADMIN_TOKEN = "mcp.token"
SCOPED_TOKENS = "mcp-tokens.json"
ADMIN = "admin"  # the admin token's name in grants and listings
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class Grant:
    """What one token may see: ``under`` folders (``()``: the whole collection); ``write``:
    it may also write files there (the admin token's right to write is the server's)."""

    name: str
    under: tuple[str, ...] = ()
    write: bool = False

    @property
    def everything(self) -> bool:
        return not self.under


def token_folder(address: CollectionAddress) -> Path:
    """Where a collection's token files live: its local folder. A server collection's tokens
    made before it (in ``STORE/servers/HOST_PORT_COLLECTION``) are moved there on first use,
    so a client given the admin token keeps working."""
    folder = address.local_dir
    if not capabilities(address).in_store_folder and address.url and not folder.exists():
        parts = urlsplit(address.url)
        where = re.sub(r"[^A-Za-z0-9.-]+", "_", parts.netloc or parts.path).strip("_") or "local"
        legacy = address.store_dir / "servers" / f"{where}_{address.collection}"
        if legacy.is_dir() and not legacy.is_symlink():
            _private_folder(folder.parent)
            os.rename(legacy, folder)
    return folder


def several_token_folder(address: CollectionAddress) -> Path:
    """Where the tokens of a server of several collections (``semfs mcp --collections``) live:
    the folder that holds the collections' own folders (the embedded store's folder, or
    ``STORE/servers/SERVER/``). Their grants' folders begin with a collection's name."""
    return address.local_dir.parent


def _private_folder(folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)


def read_private(path: Path) -> str:
    """``path``'s text, or :class:`TokenError` when it is a symlink, not a regular file, not
    ours, or readable by others (checked on the open file: nothing can swap it in between)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise TokenError(f"token file {path} is a symlink: give the file itself") from exc
        raise
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise TokenError(f"token file {path} is not a regular file")
        if st.st_uid != os.getuid():
            raise TokenError(f"token file {path} belongs to uid {st.st_uid}, not to you")
        if st.st_mode & 0o077:
            raise TokenError(
                f"token file {path} can be read by others (mode {stat.S_IMODE(st.st_mode):04o}): "
                f"chmod 600 {path}"
            )
        return f.read(1 << 20).decode("utf-8", "replace")


def _write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``, owner-only from the first byte (temp file, rename)."""
    _private_folder(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def new_token() -> str:
    return "semfs_" + secrets.token_urlsafe(32)


def admin_token(path: Path) -> tuple[str, bool]:
    """The token in ``path``, made (owner-only) when there is none; and whether it was made."""
    try:
        text = read_private(path)
    except FileNotFoundError:
        token = new_token()
        _private_folder(path.parent)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        except FileExistsError:  # another server made it first: use that one
            return admin_token(path)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        return token, True
    token = text.strip()
    if len(token) < 16:
        raise TokenError(f"token file {path} holds no token (16 characters at least)")
    return token, False


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class ScopedTokens:
    """The scoped tokens of one collection (``mcp-tokens.json``). Thread-safe. ``collection``:
    the grants are that collection's, served by a server of several, so each folder is put
    below it (``guide`` -> ``docs/guide``)."""

    def __init__(self, folder: Path, collection: str | None = None) -> None:
        self.path = folder / SCOPED_TOKENS
        self._prefix = f"{collection}/" if collection else ""
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._by_digest: dict[str, Grant] = {}

    def _read(self) -> list[dict[str, Any]]:
        try:
            data = json.loads(read_private(self.path))
        except FileNotFoundError:
            return []
        except (ValueError, OSError) as exc:
            raise TokenError(f"cannot read {self.path}: {exc}") from exc
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list):
            raise TokenError(f"{self.path} is damaged: remove it and create the tokens again")
        return tokens

    def _write(self, tokens: list[dict[str, Any]]) -> None:
        _write_private(self.path, json.dumps({"tokens": tokens}, indent=2) + "\n")

    def create(self, name: str, under: tuple[str, ...], write: bool = False) -> str:
        """A new token for ``name`` that sees ``under`` only (and writes there, with
        ``write``); returns the token (shown once)."""
        if not _NAME.fullmatch(name) or name == ADMIN:
            raise TokenError(
                f"token name {name!r}: use letters, digits, '.', '_' or '-' (at most 64), "
                f"not {ADMIN!r}"
            )
        if not under:
            raise TokenError("give the folders the token may see: --under DIR (repeatable)")
        folders = tuple(sorted({normalize_path(u) for u in under}))
        if "" in folders:
            raise TokenError("--under / is the whole collection: use the admin token for that")
        with self._lock:
            tokens = self._read()
            if any(t.get("name") == name for t in tokens):
                raise TokenError(f"a token named {name!r} exists: revoke it first")
            token = new_token()
            tokens.append(
                {
                    "name": name,
                    "under": list(folders),
                    "write": write,
                    "sha256": _digest(token),
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                }
            )
            self._write(tokens)
        return token

    def list(self) -> list[dict[str, Any]]:
        """Name, folders and creation time of each token (no digests)."""
        with self._lock:
            return [
                {
                    "name": t["name"],
                    "under": list(t["under"]),
                    "write": bool(t.get("write")),
                    "created": t.get("created", ""),
                }
                for t in self._read()
            ]

    def revoke(self, name: str) -> bool:
        with self._lock:
            tokens = self._read()
            kept = [t for t in tokens if t.get("name") != name]
            if len(kept) == len(tokens):
                return False
            self._write(kept)
            return True

    def grant(self, token: str) -> Grant | None:
        """The grant of ``token``, read from the file again when it changed."""
        wanted = _digest(token)
        for digest, grant in self._current().items():
            if hmac.compare_digest(digest, wanted):
                return grant
        return None

    def digests(self) -> set[str]:
        """The SHA-256 of every token valid now (read again when the file changed)."""
        return set(self._current())

    def _current(self) -> dict[str, Grant]:
        with self._lock:
            try:
                st = os.stat(self.path)
                seen = (st.st_ino, st.st_mtime_ns, st.st_size)
            except FileNotFoundError:
                seen = None
            if seen != self._seen:
                self._by_digest = {
                    t["sha256"]: Grant(
                        t["name"],
                        tuple(self._prefix + u for u in t["under"]),
                        bool(t.get("write")),
                    )
                    for t in (self._read() if seen is not None else [])
                }
                self._seen = seen
            return self._by_digest


class TokenVerifier:
    """The MCP SDK's ``TokenVerifier``: the admin token, or a scoped one (of the first of
    ``scoped`` that knows it), or None."""

    def __init__(self, admin: str, *scoped: ScopedTokens) -> None:
        self._admin = admin
        self.admin_subject = _digest(admin)
        self.scoped = scoped

    def alive(self) -> set[str]:
        """The subjects (token digests) valid now: a session of any other is closed."""
        alive = {self.admin_subject}
        for tokens in self.scoped:
            # A damaged or unsafe file grants nothing (the start-up checked it).
            with contextlib.suppress(TokenError):
                alive |= tokens.digests()
        return alive

    def grant(self, token: str) -> Grant | None:
        """The grant of ``token``: the admin token's, a scoped one's, or None."""
        if hmac.compare_digest(token.encode(), self._admin.encode()):
            return Grant(ADMIN)
        for tokens in self.scoped:
            try:
                grant = tokens.grant(token)
            except TokenError:
                continue  # a damaged or unsafe file grants nothing (the start-up checked it)
            if grant is not None:
                return grant
        return None

    def subject_of(self, token: str) -> str | None:
        """The subject of a token the server accepts (what a session is tied to), else None:
        what the connection guard sorts connections by."""
        return _digest(token) if self.grant(token) is not None else None

    async def verify_token(self, token: str) -> AccessToken | None:
        grant = self.grant(token)
        if grant is None:
            return None
        # client_id/subject: the SDK ties a session to the token that opened it; the subject
        # is the token's digest, so that a new token under a revoked one's name is another.
        return AccessToken(
            token=token,
            client_id=grant.name,
            subject=_digest(token),
            scopes=[],
            claims={"under": list(grant.under), "write": grant.write},
        )


def grant_of(token: AccessToken | None) -> Grant | None:
    """The grant an authenticated request carries (None: not an HTTP request with a token)."""
    if token is None:
        return None
    claims = token.claims or {}
    return Grant(token.client_id, tuple(claims.get("under") or []), bool(claims.get("write")))
