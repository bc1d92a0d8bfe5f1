"""The FUSE bindings, imported in one place: mfusepy, else fusepy (same API, older).

Everything else in fusefs imports ``fuse`` from here, so swapping bindings touches one file.
mfusepy loads libfuse (2 or 3) through ctypes when imported; that is cheap and starts no
threads, so importing this module before daemonizing is safe.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Any, TypeVar

try:
    import mfusepy as fuse
except ImportError:  # pragma: no cover - fusepy fallback
    import fuse

F = TypeVar("F", bound=Callable[..., Any])

FuseOSError = fuse.FuseOSError
Operations = fuse.Operations
FUSE = fuse.FUSE
# macOS has ENOATTR for a missing xattr; Linux calls it ENODATA.
ENOATTR: int = getattr(errno, "ENOATTR", errno.ENODATA)


def overrides(parent: type) -> Callable[[F], F]:
    """mfusepy's check that a callback exists in ``Operations``; a no-op under fusepy."""
    check = getattr(fuse, "overrides", None)
    if check is None:
        return lambda method: method
    return check(parent)


def fuse_major_version() -> int:
    """The libfuse major version the bindings loaded (2 under fusepy, which supports no other)."""
    return int(getattr(fuse, "fuse_version_major", 2))


def fuse_exit() -> None:
    """Ask the running FUSE loop to stop (from inside a callback), like SIGTERM would."""
    fuse.fuse_exit()


__all__ = [
    "ENOATTR",
    "FUSE",
    "FuseOSError",
    "Operations",
    "fuse",
    "fuse_exit",
    "fuse_major_version",
    "overrides",
]
