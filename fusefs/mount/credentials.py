"""Acting as the caller: a writable mount's calls into the source run with the credentials
of the process whose request they answer.

Rules a caller may rely on:

* :func:`acting_as` sets the running thread's filesystem uid, gid and supplementary groups
  to the caller's for the length of the block (Linux ``setfsuid``/``setfsgid`` and the raw
  ``setgroups`` system call, which, unlike glibc's wrappers of ``setuid`` and ``setgroups``,
  change only the calling thread), then restores the daemon's own. Every open, create,
  rename, unlink or chmod inside it is checked by the kernel of the source's filesystem
  exactly as if the caller had made it, and what it creates belongs to the caller.
* Acting as any user but root, the thread also lays down ``CAP_SYS_RESOURCE`` (the raw
  ``capset``, per thread like the rest): a non-zero filesystem uid already drops the file
  capabilities (so a caller's write clears set-uid bits as the kernel does for them), but
  not this one, which lets a write pass ext4's root-reserved blocks and disk quotas.
* A daemon that cannot take another user's credentials (not root, or another system than
  Linux on x86-64 or arm64) lets its own user through as itself and refuses every other
  user with EACCES: it never writes on someone's behalf with rights they do not have.
* No caller (no FUSE request: tests, the daemon's own threads): the daemon's credentials.

No FUSE import here: the caller passes who asks (``bindings.request_caller``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
from collections.abc import Iterator

from semfs.fusefs.mount.access import Caller, caller_groups
from semfs.ingest.portable import credential_syscalls

NGROUPS_MAX = 65536
_CAPABILITY_V3 = 0x20080522  # capability.h's version 3: two 32-bit words a set
CAP_SYS_RESOURCE = 24


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _libc() -> ctypes.CDLL | None:
    if credential_syscalls() is None:
        return None
    return ctypes.CDLL(None, use_errno=True)


_LIBC = _libc()
_NUMBERS = credential_syscalls()


def can_switch() -> bool:
    """Whether this process can take another user's filesystem credentials per thread."""
    return _LIBC is not None and os.geteuid() == 0


def _set(uid: int, gid: int, groups: list[int]) -> bool:
    """This thread's fs uid, fs gid and groups; False when the kernel refused any."""
    assert _LIBC is not None and _NUMBERS is not None
    setfsuid, setfsgid, setgroups = _NUMBERS[:3]
    array = (ctypes.c_uint * max(1, len(groups)))(*groups)
    if _LIBC.syscall(setgroups, ctypes.c_size_t(len(groups)), array) != 0:
        return False
    _LIBC.syscall(setfsgid, ctypes.c_uint(gid))
    _LIBC.syscall(setfsuid, ctypes.c_uint(uid))
    # Both return the previous value whatever happens: ask again (-1 changes nothing).
    return bool(
        _LIBC.syscall(setfsuid, ctypes.c_uint(0xFFFFFFFF)) == uid
        and _LIBC.syscall(setfsgid, ctypes.c_uint(0xFFFFFFFF)) == gid
    )


def _capabilities(change: tuple[_CapData, _CapData] | None = None) -> tuple[_CapData, _CapData]:
    """This thread's capability sets; with ``change``, set them first (False: refused)."""
    assert _LIBC is not None and _NUMBERS is not None
    capget, capset = _NUMBERS[3:]
    header = _CapHeader(_CAPABILITY_V3, 0)
    data = (_CapData * 2)()
    if change is not None:
        data[0], data[1] = change
        if _LIBC.syscall(capset, ctypes.byref(header), data) != 0:
            err = ctypes.get_errno()
            raise PermissionError(err, f"capset: {os.strerror(err)}")
    elif _LIBC.syscall(capget, ctypes.byref(header), data) != 0:
        err = ctypes.get_errno()
        raise PermissionError(err, f"capget: {os.strerror(err)}")
    return _CapData.from_buffer_copy(data[0]), _CapData.from_buffer_copy(data[1])


def _without(caps: tuple[_CapData, _CapData], cap: int) -> tuple[_CapData, _CapData]:
    low, high = (_CapData.from_buffer_copy(c) for c in caps)
    (low if cap < 32 else high).effective &= ~(1 << (cap % 32))
    return low, high


@contextlib.contextmanager
def acting_as(caller: Caller | None) -> Iterator[None]:
    """Run the block with ``caller``'s filesystem credentials (see the module's rules);
    raises ``PermissionError`` (EACCES) when that cannot be done."""
    euid = os.geteuid()
    if caller is None or (caller[0] == euid and (euid != 0 or caller[1] == os.getegid())):
        yield  # the daemon's own user (root acting for root keeps every right it has)
        return
    if not can_switch():
        if caller[0] == euid:
            yield  # the same user, another group: files get the daemon's group
            return
        raise PermissionError(errno.EACCES, "the daemon cannot act as another user")
    uid, gid, pid = caller
    groups = sorted(caller_groups(pid, uid, gid))[:NGROUPS_MAX] if pid > 0 else []
    own = (euid, os.getegid(), os.getgroups())
    caps = _capabilities() if uid != 0 else None
    try:
        if not _set(uid, gid, groups):
            raise PermissionError(errno.EACCES, "cannot take the caller's credentials")
        if caps is not None:
            # Read again: the fs uid has just dropped the file capabilities from them.
            _capabilities(_without(_capabilities(), CAP_SYS_RESOURCE))
        yield
    finally:
        # The daemon's own again, in this order: fs uid 0 first brings back the file
        # capabilities that a non-zero fs uid dropped, then the sets as they were.
        if not _set(*own):  # pragma: no cover - the kernel lets root take its own ids back
            os.abort()  # never serve another request with a caller's credentials
        if caps is not None:
            try:
                _capabilities(caps)
            except OSError:  # pragma: no cover - they are still in the permitted set
                os.abort()


__all__ = ["acting_as", "can_switch"]
