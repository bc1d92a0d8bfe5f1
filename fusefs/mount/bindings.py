"""The FUSE bindings, imported in one place: mfusepy, else fusepy (same API, older).

Everything else in fusefs imports ``fuse`` from here, so swapping bindings touches one file.
mfusepy loads libfuse (2 or 3) through ctypes when imported; that is cheap and starts no
threads, so importing this module before daemonizing is safe.

libfuse 3 is preferred where it is installed (mfusepy alone picks libfuse 2 first): only
libfuse 3 exports ``fuse_invalidate_path``, which lets the mount keep long kernel cache
timeouts and still drop exactly the paths a refresh changed (see
:mod:`semfs.fusefs.mount.kernelcache`).
Under libfuse 2 (or fusepy) the mount falls back to short timeouts. ``FUSE_LIBRARY_PATH``
or ``FUSE_LIBRARY_NAME`` in the environment still choose the library. On macOS the library is
macFUSE's or FUSE-T's (``portable.fuse_library``); where none loads, importing this module
raises :class:`MountError` saying in one line what to install.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from semfs.ingest import portable
from semfs.ingest.errors import MountError


def _import_bindings() -> Any:
    chosen = "FUSE_LIBRARY_PATH" in os.environ or "FUSE_LIBRARY_NAME" in os.environ
    # By path where it can (no `ldconfig -p` subprocess on a mount's way up; on macOS a
    # Homebrew dylib is not on dlopen's default path).
    prefer3 = None if chosen else portable.fuse_library()
    if prefer3 is not None:
        os.environ[prefer3[0]] = prefer3[1]
    try:
        try:
            import mfusepy

            return mfusepy
        except ImportError:  # pragma: no cover - fusepy fallback
            import fuse as fusepy

            return fusepy
    except OSError:  # no libfuse: both bindings raise at import
        raise MountError(portable.install_hint()) from None
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

# libfuse 3.5 to 3.16.0 drop the cache_readdir and keep_cache flags a high-level opendir sets
# (libfuse issue 821, fixed in 3.16.1): they go on a copy of the request's fuse_file_info, and
# the reply is built from the original. On those versions the session's low-level opendir is
# wrapped (see _OpendirFlags), so the flags reach the reply. The wrapper hands the original
# to the high-level callback that runs inside it, on the same thread, through this.
_lowlevel_fi = threading.local()
# struct fuse_session (lib/fuse_i.h, private) on 64-bit Linux: mountpoint (char *) at 0, fd
# (int) at 12, then a few ints and a pointer, then the low-level ops table (at 40 in 3.14,
# which added a field before it; 32 before that). The table is told by its shape: the
# high-level library fills every entry but write, getlk, setlk and retrieve_reply.
_SESSION_FD = 12
_SESSION_OPS = (32, 40)
_OPS = 44  # entries of struct fuse_lowlevel_ops in 3.5 to 3.16
_OPS_EMPTY = frozenset({16, 31, 32, 37})
_OPS_OPENDIR = 20


def _ops_table(session: int) -> int | None:
    """The address of the session's low-level ops table, if exactly one candidate fits."""
    found = []
    for offset in _SESSION_OPS:
        slots = [p or 0 for p in (ctypes.c_void_p * _OPS).from_address(session + offset)]
        filled = [p for i, p in enumerate(slots) if i not in _OPS_EMPTY]
        if (
            all(slots[i] == 0 for i in _OPS_EMPTY)
            and all(filled)
            and max(filled) - min(filled) < 1 << 20  # all in libfuse's own code
        ):
            found.append(session + offset)
    return found[0] if len(found) == 1 else None


def _libfuse_version() -> tuple[int, ...]:
    lib = getattr(fuse, "_libfuse", None)
    if lib is None or not hasattr(lib, "fuse_pkgversion"):
        return ()
    lib.fuse_pkgversion.restype = ctypes.c_char_p
    try:
        return tuple(int(part) for part in lib.fuse_pkgversion().split(b".")[:3])
    except ValueError:
        return ()


class _OpendirFlags:
    """The session's low-level opendir, wrapped to expose the request's fuse_file_info."""

    _PROTO = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p)

    def __init__(self, fuse_ptr: int, mountpoints: frozenset[bytes]) -> None:
        self.installed = False
        lib = fuse._libfuse
        if not portable.libfuse_internals_known() or ctypes.sizeof(ctypes.c_void_p) != 8:
            return
        lib.fuse_get_session.restype = ctypes.c_void_p
        session = lib.fuse_get_session(ctypes.c_void_p(fuse_ptr))
        if not session:
            return
        fd = lib.fuse_session_fd(ctypes.c_void_p(session))
        stored = ctypes.c_char_p.from_address(session).value
        if (
            ctypes.c_int.from_address(session + _SESSION_FD).value != fd
            or stored not in mountpoints
        ):
            return  # not the layout we know: leave libfuse as it is
        table = _ops_table(session)
        if table is None:
            return
        self._slot = ctypes.c_void_p.from_address(table + 8 * _OPS_OPENDIR)
        original = self._slot.value
        if not original:
            return
        self._original = self._PROTO(original)
        self._callback = self._PROTO(self._opendir)  # referenced for the mount's life
        self._slot.value = ctypes.cast(self._callback, ctypes.c_void_p).value
        self.installed = True

    def _opendir(self, req: int, ino: int, llfi: int) -> None:
        # Never raises: the original always replies to the kernel.
        _adopt_worker_thread()
        _lowlevel_fi.value = llfi
        try:
            self._original(req, ino, llfi)
        finally:
            _lowlevel_fi.value = None


def _raising(func: Any, exc: BaseException) -> Callable[..., Any]:
    """A stand-in for ``func`` that raises ``exc`` again (mfusepy reads the callback's name)."""

    def again(*args: Any, **kwargs: Any) -> Any:
        raise exc

    again.__name__ = func.__name__
    return again


class _AdoptingFUSE(_FuseBase):
    """mfusepy's FUSE, whose every callback goes through ``_wrapper``: adopt the thread there."""

    def __init__(self, operations: Any, mountpoint: str, *args: Any, **kwargs: Any) -> None:
        # Resolved now: once mounted, resolving it waits for the mount's own init.
        self._mountpoints = frozenset(
            {os.fsencode(mountpoint), os.fsencode(os.path.realpath(mountpoint))}
        )
        self._opendir_flags: _OpendirFlags | None = None
        super().__init__(operations, mountpoint, *args, **kwargs)  # runs the loop

    def _wrapper(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        if not getattr(_thread_adopted, "done", False):
            _adopt_worker_thread()
        # A callback that returns goes straight back (a grep makes two per file); one that
        # raises takes mfusepy's own path: errno, logging, stopping the loop on a fatal one.
        try:
            return func(*args, **kwargs) or 0
        except BaseException as exc:
            failed = exc
        return super()._wrapper(_raising(func, failed), *args, **kwargs)

    def init_fuse_3(self, conn: Any, config: Any) -> None:
        if (3, 5) <= _libfuse_version() < (3, 16, 1):
            fuse_ptr = current_fuse()
            if fuse_ptr is not None:
                self._opendir_flags = _OpendirFlags(fuse_ptr, self._mountpoints)
        super().init_fuse_3(conn, config)

    def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
        # mfusepy drops rename's flags (mv -n's RENAME_NOREPLACE would replace): a
        # writable mount's operations take them (rename2); a read-only one refuses anyway.
        rename2 = getattr(self.operations, "rename2", None)
        if not flags or rename2 is None:
            return int(super().rename_fuse_3(old, new, flags))
        return int(
            rename2(
                old.decode(self.encoding, self.errors),
                new.decode(self.encoding, self.errors),
                flags,
            )
        )

    def opendir(self, path: bytes, fip: Any) -> int:
        # mfusepy hands opendir no fuse_file_info, even with raw_fi: pass it, as to open, so
        # the operations can let the kernel cache the listing (cache_readdir, keep_cache).
        if not self.raw_fi:
            return int(super().opendir(path, fip))
        fi = fip.contents
        fi.fh = self.operations.opendir(path.decode(self.encoding, self.errors), fi)
        llfi = getattr(_lowlevel_fi, "value", None)
        if llfi is not None and (fi.cache_readdir or fi.keep_cache):
            reply = fuse.fuse_file_info.from_address(llfi)
            reply.cache_readdir = fi.cache_readdir
            reply.keep_cache = fi.keep_cache
        return 0


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


def library_path() -> str | None:
    """The FUSE library the bindings loaded, where they say."""
    return getattr(fuse, "_libfuse_path", None)


def can_invalidate() -> bool:
    """Whether the loaded libfuse can drop a path from the kernel's caches (libfuse >= 3.1)."""
    lib = _libfuse()
    return lib is not None and fuse_major_version() >= 3 and hasattr(lib, "fuse_invalidate_path")


def current_fuse() -> int | None:
    """The ``struct fuse *`` of the mount whose callback is running (call it from ``init``).

    libfuse's context is per request thread; the pointer itself stays valid until the
    loop ends (see :class:`semfs.fusefs.mount.kernelcache.KernelCache` for how its users stop then).
    """
    lib = _libfuse()
    if lib is None:
        return None
    context = lib.fuse_get_context()
    return int(context.contents.fuse) if context and context.contents.fuse else None


def request_caller() -> tuple[int, int, int] | None:
    """(uid, gid, pid) of the process whose request the running callback answers, or None
    outside a request (libfuse's context is per request thread)."""
    lib = _libfuse()
    if lib is None:
        return None
    context = lib.fuse_get_context()
    if not context:
        return None
    ctx = context.contents
    return int(ctx.uid), int(ctx.gid), int(ctx.pid)


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
    "library_path",
    "overrides",
    "request_caller",
    "session_exited",
]
