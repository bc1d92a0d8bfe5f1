"""The library's exception types. The CLI turns each into one clear line."""

from __future__ import annotations


class SemfsError(Exception):
    """Base class: a failure the user can act on, with a message that says how."""


class StoreNotFoundError(SemfsError):
    """The store or collection does not exist (nothing ingested yet)."""


class StoreLockedError(SemfsError):
    """An embedded store is owned by another process (Qdrant Edge locks its WAL)."""

    # The holder's kind as its owner note says (semfs.ingest.store.ownerkind: "mount",
    # "mcp", ...; "" when unknown): a semfs process that serves others is only briefly
    # locked without serving (starting, or closing), so a newcomer may wait for it.
    kind: str = ""


class StoreFolderError(SemfsError):
    """A store folder (or a file semfs keeps in it) that another user owns or may write:
    refused, as ``ssh`` refuses such a ``~/.ssh`` (issue 46.2)."""


class StoreBusyError(StoreLockedError):
    """Another writer of the collection held its write lock longer than a caller would wait
    (:mod:`semfs.ingest.store.writelock`)."""


class StoreUnavailableError(SemfsError):
    """The store cannot be used: server unreachable, corrupt files, bad permissions."""


class OwnerGoneError(StoreUnavailableError):
    """The connection to the process that owns the store broke (it exited, or stopped
    answering): a resident client takes the store over or reaches its new owner
    (:mod:`semfs.ingest.resident`)."""


class SchemaVersionError(SemfsError):
    """The store was written at a schema version this code does not read."""


class ModelMismatchError(SemfsError):
    """The store was built with another embedding model; vectors are never mixed."""


class ModelUnavailableError(SemfsError):
    """The embedding model or its backend cannot run here (a library missing, an unknown
    backend, a model the backend does not support)."""


class SourceError(SemfsError):
    """The source directory cannot be ingested at all (missing, not a directory)."""


class SourceMismatchError(SemfsError):
    """The collection mirrors another folder: ingesting this one would delete its documents.
    ``mirrors`` is the folder it mirrors, ``source`` the one refused (each front end names its
    own way out: the CLI's ``--replace``, the Python API's ``replace_source=True``)."""

    def __init__(self, message: str, mirrors: str = "", source: str = "") -> None:
        super().__init__(message)
        self.mirrors = mirrors
        self.source = source


class StoreDamagedError(StoreUnavailableError):
    """The store's files are damaged: the engine crashed or the contents do not add up."""


class DiskFullError(SemfsError):
    """The store's disk has too little free space for a write (or, on tmpfs, an open)."""


class StoreOwnedError(StoreLockedError):
    """Another process owns the store and serves it; ``pid`` is that process, ``holder`` says
    which (``pid 123 (semfs mcp -c docs)``, as it recorded itself) and ``kind`` what it is:
    ``"mount"``, ``"watcher"``, ``"mcp"``, ``"ingest"`` or ``""``
    (:func:`semfs.ingest.store.ownerkind.owner_kind` reads it from the command line)."""

    def __init__(self, message: str, pid: int, holder: str = "", kind: str = "") -> None:
        super().__init__(message)
        self.pid = pid
        self.holder = holder or f"pid {pid}"
        self.kind = kind

    @property
    def is_mount(self) -> bool:
        """Whether the owner is a mount daemon."""
        return self.kind == "mount"

    @property
    def by_watcher(self) -> bool:
        """Whether the owner is `semfs ingest --watch` (not a mount, not `semfs mcp`)."""
        return self.kind == "watcher"

    @property
    def by_ingest(self) -> bool:
        """Whether the owner is a plain `semfs ingest`: a run that ends."""
        return self.kind == "ingest"


# The front ends' errors live here too, so that one raised in a store's owner crosses its
# socket (semfs.ingest.store.ipc rebuilds errors by class name from this module) as itself.


class MountError(SemfsError):
    """The mount cannot start (or stop); the message says why and what to do."""


class ToolInputError(SemfsError):
    """A tool was called with an argument it cannot use."""


class PatternError(SemfsError):
    """The pattern cannot be used: a bad regular expression, or empty."""


class SlowPatternError(SemfsError):
    """A pattern RE2 cannot run took too long on the backtracking engine."""


class PathError(SemfsError):
    """The path is not in the collection."""


class TokenError(SemfsError):
    """A token file cannot be used, or a token command was given something it cannot use."""


# What engine messages say when a shard's files hold bytes it cannot decode: damage that only
# a rebuild from the source folder replaces, not a store that is merely unavailable.
_UNDECODABLE = ("decode", "decompress", "corrupt", "checksum", "deserializ")


def not_text(what: str, text: str) -> ToolInputError | None:
    """The error for ``text`` (a query, a pattern, a file's text) when it is not Unicode that
    UTF-8 can hold: a byte that was not UTF-8 (a command line's surrogate escape) or a lone
    surrogate (JSON's ``"\\ud800"``); None when it is fine. Say what was wrong, not
    UnicodeEncodeError."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = ord(text[exc.start])
        where = f"at character {exc.start + 1}"
        if 0xDC80 <= bad <= 0xDCFF:
            return ToolInputError(
                f"{what} is not UTF-8 text: byte 0x{bad - 0xDC00:02x} {where} is not UTF-8"
            )
        return ToolInputError(
            f"{what} is not valid Unicode: a lone surrogate U+{bad:04X} {where} (send UTF-8 text)"
        )
    return None


def undecodable(exc: BaseException) -> bool:
    """Whether an engine error says the store's files hold bytes it cannot decode."""
    text = str(exc).lower()
    return any(word in text for word in _UNDECODABLE)


# The one line of an engine failure met mid-command (a panic, points it cannot decode).
_DAMAGED = (
    "the store is damaged: the engine cannot read it ({what}); `semfs check` names the "
    "damaged documents, `semfs check --rebuild SOURCE` sets the shard aside and ingests "
    "SOURCE afresh"
)


def engine_damage(exc: BaseException) -> str | None:
    """The damage line for ``exc`` when it is the engine's panic or an undecodable point,
    else None: every front end (the CLI, the mount's start) says it the same way."""
    if type(exc).__name__ == "PanicException" or undecodable(exc):
        return _DAMAGED.format(what=" ".join(str(exc).split()))
    return None
