"""Unmounting, and reading what is mounted where: mountinfo, a stale mount, the daemon's pid.

``semfs umount`` refuses anything but a semfs mount (its type in mountinfo) unless forced,
runs fusermount3/fusermount (umount elsewhere), then waits for the daemon to exit. The
harnesses (tests, benchmarks) use :func:`force_unmount`, which never leaves a mount behind.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from semfs.fusefs.mount.ops import XATTR_PREFIX
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
    then ``umount -l``. For harnesses (tests, benchmarks) that must never leave a mount behind."""

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
            subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True, check=False)


def unmount_commands(mountpoint: Path, lazy: bool = False) -> list[list[str]]:
    """Commands to try in order: fusermount3/fusermount on Linux, umount elsewhere."""
    import shutil  # unmounting only: not on a mount's way up

    mnt = str(mountpoint)
    if sys.platform == "darwin":
        return [["diskutil", "unmount", "force", mnt]] if lazy else [["umount", mnt]]
    commands = [
        [exe, "-u", *(["-z"] if lazy else []), mnt]
        for exe in filter(None, (shutil.which("fusermount3"), shutil.which("fusermount")))
    ]
    return commands or [["umount", *(["-l"] if lazy else []), mnt]]


def daemon_pid(mountpoint: Path) -> int | None:
    """The pid of the semfs daemon serving ``mountpoint``, as its root xattr says."""
    getxattr = getattr(os, "getxattr", None)  # Linux only
    if getxattr is None:
        return None
    try:
        return int(getxattr(mountpoint, XATTR_PREFIX + "pid"))
    except (OSError, ValueError):
        return None


def mount_search_dir(mountpoint: Path) -> str | None:
    """The search folder the semfs mount at ``mountpoint`` answers, as its root xattr says
    (None from a mount that does not say: an older daemon, or no xattrs here)."""
    getxattr = getattr(os, "getxattr", None)  # Linux only
    if getxattr is None:
        return None
    try:
        return getxattr(mountpoint, XATTR_PREFIX + "search_dir").decode()
    except (OSError, UnicodeDecodeError):
        return None


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return fields[0] != "Z"  # a zombie has exited
    return True


# What the kernel calls a semfs mount: FUSE with our subtype (see daemon.fuse_options).
FSTYPE = "fuse.semfs"
MOUNTINFO = Path("/proc/self/mountinfo")
# How long `umount --lazy` waits before saying the daemon is still serving open files.
LAZY_WAIT = 1.0


def _unescape_mountinfo(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_fstype(path: Path, mountinfo: Path = MOUNTINFO) -> str | None:
    """The filesystem type mounted at ``path`` (the topmost mount), None when none is.

    Raises FileNotFoundError where there is no mountinfo (not Linux).
    """
    target = os.path.realpath(path) if not is_stale(path) else os.path.abspath(path)
    fstype = None
    for line in mountinfo.read_text(errors="surrogateescape").splitlines():
        fields = line.split(" ")
        if len(fields) < 7 or "-" not in fields[6:]:
            continue
        if _unescape_mountinfo(fields[4]) == target:
            fstype = fields[fields.index("-", 6) + 1]  # later lines are mounted on top
    return fstype


def check_semfs_mount(mnt: Path) -> None:
    """Refuse, with one line, a mountpoint that is not a semfs mount."""
    try:
        fstype = mount_fstype(mnt)
    except FileNotFoundError:  # no mountinfo (macOS): our root answers the pid xattr
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
        raise MountError(f"cannot unmount {mnt}: {errors[-1] if errors else 'no unmount tool'}")
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
