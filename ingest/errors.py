"""The library's exception types. The CLI turns each into one clear line."""

from __future__ import annotations


class SemfsError(Exception):
    """Base class: a failure the user can act on, with a message that says how."""


class StoreNotFoundError(SemfsError):
    """The store or collection does not exist (nothing ingested yet)."""


class StoreLockedError(SemfsError):
    """An embedded store is owned by another process (Qdrant Edge locks its WAL)."""


class StoreUnavailableError(SemfsError):
    """The store cannot be used: server unreachable, corrupt files, bad permissions."""


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
    """The collection mirrors another folder: ingesting this one would delete its documents."""


class StoreDamagedError(StoreUnavailableError):
    """The store's files are damaged: the engine crashed or the contents do not add up."""


class DiskFullError(SemfsError):
    """The store's disk has too little free space for a write (or, on tmpfs, an open)."""
