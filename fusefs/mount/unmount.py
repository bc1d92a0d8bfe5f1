"""Unmounting, and reading what is mounted where: the mounts, a stale mount, the daemon's pid.

``semfs umount`` refuses anything but a semfs mount (its type in the system's list of mounts)
unless forced, runs the system's unmount command (``portable.unmount_commands``), then waits
for the daemon to exit. The
harnesses (tests, benchmarks) use :func:`force_unmount`, which never leaves a mount behind.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import time
from pathlib import Path

from semfs.fusefs.mount.ops import XATTR_PREFIX
from semfs.ingest import portable
from semfs.ingest.errors import MountError


def is_stale(path: Path) -> bool:
    """A FUSE mount whose daemon is gone: stat or opening the root fails with ENOTCONN.

    stat alone is not enough: the kernel answers it from its attribute cache (for minutes
    on a semfs mount), while opening a directory always asks the daemon.
    """
    try:
        os.stat(path)
        if os.path.ismount(path):
            os.close(os.open(path, os.O_RDONLY | os.O_DIRECTORY))
    except OSError as exc:
        return exc.errno == errno.ENOTCONN
    return False


def force_unmount(mountpoint: Path) -> None:
    """Unmount whatever is at ``mountpoint`` by every means, quietly: each tool, then lazily,
    then detached (``portable.detach_command``). For harnesses (tests, benchmarks) that must
    never leave a mount behind."""

    def busy() -> bool:
        return os.path.ismount(mountpoint) or is_stale(mountpoint)

    for lazy in (False, True):
        for command in unmount_commands(mountpoint, lazy):
            if not busy():
                return
            with contextlib.suppress(OSError):
                subprocess.run(command, capture_output=True, check=False)
    if busy():
        with contextlib.suppress(OSError):
            subprocess.run(portable.detach_command(mountpoint), capture_output=True, check=False)


def unmount_commands(mountpoint: Path, lazy: bool = False) -> list[list[str]]:
    """Commands to try in order (see ``portable.unmount_commands``)."""
    return portable.unmount_commands(mountpoint, lazy)


def daemon_pid(mountpoint: Path) -> int | None:
    """The pid of the semfs daemon serving ``mountpoint``, as its root xattr says."""
    value = portable.get_xattr(mountpoint, XATTR_PREFIX + "pid")
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


def mount_search_dir(mountpoint: Path) -> str | None:
    """The search folder the semfs mount at ``mountpoint`` answers, as its root xattr says
    (None from a mount that does not say: an older daemon, or no xattrs here)."""
    return _root_xattr(mountpoint, "search_dir")


def mount_collections(mountpoint: Path) -> list[str]:
    """The collections a mount of several shows as its top-level folders (``semfs mount
    --collections``), as its root xattr says; empty for a mount of one."""
    value = _root_xattr(mountpoint, "collections")
    return value.split(",") if value else []


def _root_xattr(mountpoint: Path, name: str) -> str | None:
    value = portable.get_xattr(mountpoint, XATTR_PREFIX + name)
    try:
        return None if value is None else value.decode()
    except UnicodeDecodeError:
        return None


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not portable.is_zombie(pid)  # a zombie has exited


# What the system's list calls a semfs mount: FUSE with our subtype (see daemon.fuse_options).
FSTYPE = portable.FSTYPE
# How long `umount --lazy` waits before saying the daemon is still serving open files.
LAZY_WAIT = 1.0


def mount_fstype(path: Path, table: Path | None = None) -> str | None:
    """The filesystem type mounted at ``path`` (the topmost mount), None when none is.

    Raises FileNotFoundError where the system's list of mounts cannot be read.
    """
    target = os.path.realpath(path) if not is_stale(path) else os.path.abspath(path)
    found = portable.mounts(table)
    if found is None:
        raise FileNotFoundError(errno.ENOENT, "no list of mounts here")
    fstype = None
    for mount in found:
        if mount.mountpoint == target:
            fstype = mount.fstype  # later lines are mounted on top
    return fstype


def check_semfs_mount(mnt: Path) -> None:
    """Refuse, with one line, a mountpoint that is not a semfs mount."""
    try:
        fstype = mount_fstype(mnt)
    except FileNotFoundError:  # no list of mounts: our root answers the pid xattr
        if is_stale(mnt) or daemon_pid(mnt) is not None:
            return
        fstype = "another" if os.path.ismount(mnt) else None
    if fstype is None:
        raise MountError(f"{mnt} is not mounted")
    if fstype != FSTYPE:
        raise MountError(
            f"{mnt} is a {fstype} mount, not semfs: not unmounting it (--force to do it anyway)"
        )


def unmount(
    mountpoint: Path, lazy: bool = False, force: bool = False, wait: float = 10.0
) -> str | None:
    """Unmount a semfs mount, then wait (up to ``wait`` s) for its daemon to exit.

    Refuses anything but a semfs mount unless ``force``. Returns a line to tell the user
    when the daemon is still running afterwards (a lazy detach leaves it serving the files
    still open), else None.
    """
    mnt = mountpoint.absolute()
    stale = is_stale(mnt)
    if force:
        if not stale and not os.path.ismount(mnt):
            raise MountError(f"{mnt} is not mounted")
    else:
        check_semfs_mount(mnt)
    pid = None if stale else daemon_pid(mnt)
    errors = []
    for command in unmount_commands(mnt, lazy):
        try:
            proc = subprocess.run(command, capture_output=True, text=True, check=False)
        except OSError as exc:
            errors.append(f"{command[0]}: {exc.strerror}")
            continue
        if proc.returncode == 0:
            break
        errors.append((proc.stderr or proc.stdout).strip() or f"{command[0]} failed")
    else:
        why = errors[-1] if errors else "no unmount tool"
        if not lazy and "busy" in why.lower():
            # Something has a file or its working folder there: say who, and what detaches now.
            why += (
                f" (a process has a file or folder open there: `fuser -vm {mnt}` lists it; "
                f"`semfs umount --lazy {mnt}` detaches it now)"
            )
        raise MountError(f"cannot unmount {mnt}: {why}")
    if pid is None:
        return None
    # A lazy detach returns at once and the daemon serves open files until they close:
    # waiting the full time would only hide that.
    deadline = time.monotonic() + (min(wait, LAZY_WAIT) if lazy else wait)
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not process_alive(pid):
        return None
    if lazy:
        return (
            f"detached {mnt}; its daemon (pid {pid}) keeps serving the files still open "
            "there and exits when the last one is closed"
        )
    return f"unmounted {mnt}, but its daemon (pid {pid}) is still running after {wait:.0f} s"
