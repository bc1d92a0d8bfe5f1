"""The FUSE bindings, imported in one place: mfusepy, else fusepy (same API, older).

Everything else in fusefs imports ``fuse`` from here, so swapping bindings touches one file.
mfusepy loads libfuse (2 or 3) through ctypes when imported; that is cheap and starts no
threads, so importing this module before daemonizing is safe.

libfuse 3 is preferred where it is installed (mfusepy alone picks libfuse 2 first): only
libfuse 3 exports ``fuse_invalidate_path``, which lets the mount keep long kernel cache
timeouts and still drop exactly the paths a refresh changed (see :mod:`fusefs.kernelcache`).
Under libfuse 2 (or fusepy) the mount falls back to short timeouts. ``FUSE_LIBRARY_PATH``
or ``FUSE_LIBRARY_NAME`` in the environment still choose the library.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
import threading
from collections.abc import Callable
from ctypes.util import find_library
from typing import Any, TypeVar

# libfuse 3's soname on Linux. dlopen finds it through the loader's cache; find_library runs
# `ldconfig -p` in a subprocess (10-50 ms, and mfusepy would run it again), on a mount's way up.
_LINUX_FUSE3 = "libfuse3.so.3"


def _libfuse3() -> tuple[str, str] | None:
    """The environment variable and value that make mfusepy load libfuse 3, if installed."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(_LINUX_FUSE3)
        except OSError:
            return None
        return "FUSE_LIBRARY_PATH", _LINUX_FUSE3
    return ("FUSE_LIBRARY_NAME", "fuse3") if find_library("fuse3") is not None else None


def _import_bindings() -> Any:
    chosen = "FUSE_LIBRARY_PATH" in os.environ or "FUSE_LIBRARY_NAME" in os.environ
    prefer3 = None if chosen else _libfuse3()
    if prefer3 is not None:
        os.environ[prefer3[0]] = prefer3[1]
    try:
        import mfusepy

        return mfusepy
    except ImportError:  # pragma: no cover - fusepy fallback
        import fuse as fusepy

        return fusepy
    finally:
        if prefer3 is not None:  # read once at import: children need not inherit our choice
            del os.environ[prefer3[0]]


fuse = _import_bindings()

# libfuse's log messages as ctypes sees them: level, printf format, va_list (a pointer on
# x86-64 and arm64, where the ABI passes it by reference).
_LOG_FUNC = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
# libfuse 3.14's fuse_main_real leaves max_threads unset and complains on every mount; the
# loop then uses its default (10 threads), so the line says nothing a user can act on.
_NOISE = (b"Ignoring invalid max threads value",)


def _quiet_known_noise() -> Any:
    """Route libfuse 3's log through a filter dropping :data:`_NOISE`, else to stderr as before."""
    lib = getattr(fuse, "_libfuse", None)
    if lib is None or not hasattr(lib, "fuse_set_log_func"):
        return None
    libc = ctypes.CDLL(None)
    libc.vsnprintf.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_void_p]

    def log(level: int, fmt: bytes, args: int) -> None:
        buf = ctypes.create_string_buffer(2048)
        libc.vsnprintf(buf, len(buf), fmt, args)
        if not buf.value.startswith(_NOISE):
            os.write(2, buf.value)

    callback = _LOG_FUNC(log)
    lib.fuse_set_log_func(callback)
    return callback  # kept referenced for as long as libfuse may call it


_log_callback = _quiet_known_noise()

F = TypeVar("F", bound=Callable[..., Any])

FuseOSError = fuse.FuseOSError
Operations = fuse.Operations

# Each callback arrives on a libfuse worker thread that Python did not create, so ctypes
# makes a Python thread state for the call and frees it after: measured, that was about a
# third of a warm `grep -r`'s time in the daemon. The first callback on each worker thread
# takes one more reference, so its state lives as long as the thread. libfuse keeps at most
# max_threads (10) workers and rarely retires one: a retired thread leaves one small state.
_thread_adopted = threading.local()
_gil_ensure = ctypes.pythonapi.PyGILState_Ensure
_gil_ensure.restype = ctypes.c_int


def _adopt_worker_thread() -> None:
    if not getattr(_thread_adopted, "done", False):
        _gil_ensure()  # never released: keeps this thread's state (we hold the GIL here)
        _thread_adopted.done = True


_FuseBase: Any = fuse.FUSE


class _AdoptingFUSE(_FuseBase):
    """mfusepy's FUSE, whose every callback goes through ``_wrapper``: adopt the thread there."""

    def _wrapper(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        _adopt_worker_thread()
        return super()._wrapper(func, *args, **kwargs)


# fusepy's _wrapper is a staticmethod with another signature: leave it as it is.
_mfusepy = callable(getattr(_FuseBase, "_wrapper", None)) and not isinstance(
    _FuseBase.__dict__.get("_wrapper"), staticmethod
)
FUSE: Any = _AdoptingFUSE if _mfusepy else _FuseBase
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


def _libfuse() -> Any:
    return getattr(fuse, "_libfuse", None)


def can_invalidate() -> bool:
    """Whether the loaded libfuse can drop a path from the kernel's caches (libfuse >= 3.1)."""
    lib = _libfuse()
    return lib is not None and fuse_major_version() >= 3 and hasattr(lib, "fuse_invalidate_path")


def current_fuse() -> int | None:
    """The ``struct fuse *`` of the mount whose callback is running (call it from ``init``).

    libfuse's context is per request thread; the pointer itself stays valid until the
    loop ends (see :class:`fusefs.kernelcache.KernelCache` for how its users stop then).
    """
    lib = _libfuse()
    if lib is None:
        return None
    context = lib.fuse_get_context()
    return int(context.contents.fuse) if context and context.contents.fuse else None


def session_exited(fuse_ptr: int) -> bool:
    """Whether the mount's loop has ended (it is being torn down: stop calling into it)."""
    lib = _libfuse()
    lib.fuse_get_session.restype = ctypes.c_void_p  # a pointer: the default int truncates it
    session = lib.fuse_get_session(ctypes.c_void_p(fuse_ptr))
    return bool(lib.fuse_session_exited(ctypes.c_void_p(session)))


def invalidate_path(fuse_ptr: int, path: str) -> int:
    """libfuse's ``fuse_invalidate_path``: drop ``path``'s attributes and cached pages.

    Returns 0, or a negative errno; -ENOENT means the kernel does not hold the path.
    """
    lib = _libfuse()
    raw = os.fsencode(path)
    return int(lib.fuse_invalidate_path(ctypes.c_void_p(fuse_ptr), ctypes.c_char_p(raw)))


__all__ = [
    "ENOATTR",
    "FUSE",
    "FuseOSError",
    "Operations",
    "can_invalidate",
    "current_fuse",
    "fuse",
    "fuse_exit",
    "fuse_major_version",
    "invalidate_path",
    "overrides",
    "session_exited",
]
