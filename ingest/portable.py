"""Every call that differs by operating system, the Linux and the macOS way side by side.

semfs is tested on Linux (CI runs the whole suite there). The macOS ways here are written to
Apple's and macFUSE's/FUSE-T's documentation and run on Linux as far as Linux allows (each
function's test switches :data:`SYSTEM`), but have not been run on a Mac. Nothing else in
``ingest/`` or ``fusefs/`` reads ``/proc``, names a Linux-only constant or asks which system it
runs on (``tests/test_structure.py`` checks): a new difference gets a function here.

It lives in ``ingest/`` because the library needs it (the owner's socket checks its peer's
uid, the pipeline skips semfs mounts, the store reads filesystem types) and the library never
imports ``fusefs/``; the mount's own differences (unmounting, mount options, the FUSE library)
sit here too, so there is one place to read. It imports nothing of semfs.

Rules a caller may rely on: every function answers on any system, falling back to "unknown"
(None, empty) where a system has no such thing; none raises for a missing ``/proc`` file.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import platform
import re
import resource
import shutil
import socket
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

# The system the functions below answer for: ``sys.platform`` ("linux", "darwin", ...). Tests
# switch it (monkeypatch) to run the macOS branches on Linux.
SYSTEM = sys.platform
MACOS = "darwin"


def system() -> str:
    """``linux``, ``darwin`` or another ``sys.platform`` name (any Linux is ``linux``)."""
    return "linux" if SYSTEM.startswith("linux") else SYSTEM


def is_linux() -> bool:
    return system() == "linux"


def is_macos() -> bool:
    return system() == MACOS


# setfsuid, setfsgid, setgroups, capget, capset by machine (asm/unistd.h); the groups call
# must be the raw one: glibc's setgroups() changes every thread of the process, and capset is
# per thread only as a raw call too.
_CREDENTIAL_SYSCALLS = {
    "x86_64": (122, 123, 116, 125, 126),
    "aarch64": (151, 152, 159, 90, 91),
    "arm64": (151, 152, 159, 90, 91),
}


def lock_file(fd: int, wait: bool) -> bool:
    """Take an exclusive ``flock`` on the open file ``fd`` (released when it is closed, or by
    :func:`unlock_file`); ``wait`` False: True when taken, False when another holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def unlock_file(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)


def flock_holders(fd: int) -> list[int] | None:
    """The pids that hold a ``flock`` on the file open as ``fd`` (the kernel's
    ``/proc/locks``: the truth, whatever a note in the file says); None where unknown."""
    if not is_linux():
        return None
    try:
        st = os.fstat(fd)
        text = Path("/proc/locks").read_text()
    except OSError:
        return None
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    exact: list[int] = []
    same_inode: list[int] = []  # btrfs, overlayfs: stat's device is not the lock table's
    for line in text.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 08:02:131 0 EOF"; a waiter's line has "->".
        if len(fields) < 6 or fields[1] != "FLOCK" or not fields[4].isdigit():
            continue
        if fields[5] == key:
            exact.append(int(fields[4]))
        elif fields[5].rpartition(":")[2] == str(st.st_ino):
            same_inode.append(int(fields[4]))
    return exact or same_inode


def process_command(pid: int) -> str | None:
    """The command line of process ``pid`` (Linux ``/proc/PID/cmdline``), None if unknown."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    args = raw.decode("utf-8", "replace").split("\0")
    return " ".join(a for a in args if a) or None


def open_files_limit() -> int | None:
    """This process's soft limit on open files; None when there is none."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY or soft <= 0 else soft


def cpu_count() -> int:
    """The cores this process may run on (Linux: its affinity; macOS has none: all of them)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


# Linux counts per thread; elsewhere the process's count stands in for it.
_RUSAGE_WHO = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)


def major_faults() -> int:
    """This thread's major page faults so far (each one a read from disk); the process's
    where a system counts no thread's (macOS)."""
    return resource.getrusage(_RUSAGE_WHO).ru_majflt


def per_thread_credentials() -> bool:
    """Whether one thread can take another user's filesystem credentials alone: Linux's
    setfsuid/setfsgid and raw setgroups. macOS has pthread_setugid_np, which semfs does not
    use: a writable mount there acts for its own user only."""
    return is_linux()


def credential_syscalls() -> tuple[int, int, int, int, int] | None:
    """The system call numbers of setfsuid, setfsgid, setgroups, capget and capset on this
    machine, or None
    where one thread cannot take another user's credentials (:func:`per_thread_credentials`)
    or the machine is not in the table."""
    if not per_thread_credentials():
        return None
    return _CREDENTIAL_SYSCALLS.get(platform.machine())


def libfuse_internals_known() -> bool:
    """Whether the libfuse 3 session layout the bindings peek at (opendir's flags, libfuse
    3.5 to 3.16) is the one they were written against: Linux's libfuse, not macFUSE/FUSE-T."""
    return is_linux()


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


# --- sockets ---------------------------------------------------------------------------------

# Linux: getsockopt(SOL_SOCKET, SO_PEERCRED) -> struct ucred {pid, uid, gid}.
_SO_PEERCRED = 17
# macOS has no SO_PEERCRED; getpeereid(3) (libc, a BSD call) gives the peer's effective uid.


def peer_uid(sock: socket.socket, lib: ctypes.CDLL | None = None) -> int | None:
    """The uid of the process at the other end of a Unix socket, None where the OS cannot say.

    Linux: ``SO_PEERCRED``. macOS: ``getpeereid`` from libc (``lib``: tests pass libbsd, which
    has the same call, to run it on Linux)."""
    if is_linux():
        option = getattr(socket, "SO_PEERCRED", _SO_PEERCRED)
        creds = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
        return int(struct.unpack("3i", creds)[1])
    if not is_macos():
        return None
    try:
        getpeereid = (lib or _libc()).getpeereid
    except (AttributeError, OSError):
        return None
    uid, gid = ctypes.c_uint32(), ctypes.c_uint32()
    if getpeereid(sock.fileno(), ctypes.byref(uid), ctypes.byref(gid)) != 0:
        return None
    return int(uid.value)


def socket_alias(dir_fd: int, name: str) -> str | None:
    """A short name for ``name`` in the folder open as ``dir_fd`` (a socket path too long for
    sun_path), None where the system has none: Linux's ``/proc/self/fd``; macOS has no such
    alias (its ``/dev/fd`` names the descriptor, not a folder to look in)."""
    if is_linux() and os.path.isdir("/proc/self/fd"):
        return f"/proc/self/fd/{dir_fd}/{name}"
    return None


# --- processes -------------------------------------------------------------------------------


def process_groups(pid: int, uid: int, gid: int) -> frozenset[int]:
    """The supplementary groups of process ``pid`` (user ``uid``, primary group ``gid``);
    empty when unknown.

    Linux: the process's own list in ``/proc/PID/status``. macOS has no ``/proc``: the groups
    of the user as the directory service has them (``os.getgrouplist``), which a process that
    dropped or changed its groups would not match."""
    if is_linux():
        try:
            with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
                for line in f:
                    if line.startswith("Groups:"):
                        return frozenset(int(g) for g in line.split()[1:])
        except (OSError, ValueError):
            pass
        return frozenset()
    import pwd  # not on a mount's way up: only when an answer depends on groups

    try:
        return frozenset(os.getgrouplist(pwd.getpwuid(uid).pw_name, gid))
    except (KeyError, OSError):
        return frozenset()


def process_umask() -> int | None:
    """This process's umask, read without changing it (which would race with the threads
    creating files meanwhile): Linux's ``/proc/self/status``; None where the system does not
    tell (macOS)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return None


def is_zombie(pid: int) -> bool:
    """Whether ``pid`` has exited and waits to be reaped (Linux ``/proc/PID/stat``; macOS:
    ``ps``). False when unknown."""
    if is_linux():
        with contextlib.suppress(OSError, IndexError):
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            return fields[0] == "Z"
        return False
    ps = shutil.which("ps")
    if ps is None:
        return False
    try:
        out = subprocess.run(
            [ps, "-o", "stat=", "-p", str(pid)], capture_output=True, text=True, check=False
        ).stdout
    except OSError:
        return False
    return out.strip().startswith("Z")


def sysctl(name: str) -> str:
    """A kernel setting by its sysctl name (``fs.inotify.max_user_watches``), ``?`` if unknown.
    Linux: ``/proc/sys``; macOS: the ``sysctl -n`` command."""
    if is_linux():
        try:
            return Path("/proc/sys", *name.split(".")).read_text().strip()
        except OSError:
            return "?"
    exe = shutil.which("sysctl") or "/usr/sbin/sysctl"
    try:
        done = subprocess.run([exe, "-n", name], capture_output=True, text=True, check=False)
    except OSError:
        return "?"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "?"


def watch_count() -> int | None:
    """Watches held by this process's inotify descriptors (Linux ``/proc``); None elsewhere
    (macOS's FSEvents has no per-folder watches to count)."""
    if not is_linux():
        return None
    total = 0
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":
                continue
            with open(f"/proc/self/fdinfo/{fd}") as f:
                total += sum(1 for line in f if line.startswith("inotify wd:"))
        except OSError:
            continue
    return total


# --- memory ----------------------------------------------------------------------------------

_MADV_DONTNEED = 4  # the same number on Linux and macOS; only Linux drops a shared file's pages


def shared_file_mappings(prefix: str) -> list[tuple[int, int, str]]:
    """(start, length, path) of this process's shared mappings of files under ``prefix``;
    empty where unknown (macOS has no ``/proc/self/maps``)."""
    if not is_linux():
        return []
    try:
        with open("/proc/self/maps") as maps:
            lines = maps.readlines()
    except OSError:
        return []
    found = []
    for line in lines:
        parts = line.split(maxsplit=5)
        if len(parts) < 6 or not parts[5].startswith(prefix) or parts[1][3] != "s":
            continue
        start, end = (int(x, 16) for x in parts[0].split("-"))
        found.append((start, end - start, parts[5].strip()))
    return found


def drop_pages() -> Callable[[int, int], int] | None:
    """``madvise(addr, length, MADV_DONTNEED)`` where it unmaps a shared file mapping's
    resident pages (Linux); None elsewhere (on macOS it leaves them)."""
    if not is_linux():
        return None
    fn = _libc().madvise
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return lambda addr, length: int(fn(addr, length, _MADV_DONTNEED))


# --- mounts ----------------------------------------------------------------------------------


class Mount(NamedTuple):
    source: str  # the fsname: semfs:COLLECTION for a semfs mount
    mountpoint: str
    fstype: str  # a semfs mount is FSTYPE on every system
    device: int | None = None  # st_dev of what is mounted; None when unknown


# What a semfs mount's type reads as here, on every system (Linux: FUSE with our subtype).
FSTYPE = "fuse.semfs"
MOUNTINFO = Path("/proc/self/mountinfo")
# macOS `mount` lists a macFUSE mount as macfuse (osxfuse before 4.0) and a FUSE-T one as nfs
# (FUSE-T serves NFS locally) or fuse-t; neither shows a subtype, so the fsname tells.
_MACOS_FUSE_TYPES = ("macfuse", "osxfuse", "fuse-t", "fusefs", "nfs")
_SOURCE_PREFIX = "semfs:"


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[Mount]:
    """Linux's /proc/self/mountinfo, in its order (a later line is mounted on top)."""
    found = []
    for line in text.splitlines():
        fields = line.split(" ")
        if len(fields) < 7 or "-" not in fields[6:]:
            continue
        sep = fields.index("-", 6)
        if len(fields) < sep + 3:
            continue
        major, _, minor = fields[2].partition(":")
        device = os.makedev(int(major), int(minor)) if major.isdigit() and minor.isdigit() else None
        found.append(
            Mount(_unescape(fields[sep + 2]), _unescape(fields[4]), fields[sep + 1], device)
        )
    return found


_MOUNT_LINE = re.compile(r"^(?P<source>.*?) on (?P<mnt>.*) \((?P<type>[^,()]+)(?:,[^()]*)?\)$")


def parse_mount_output(text: str) -> list[Mount]:
    """macOS ``mount`` output (``SOURCE on MOUNTPOINT (TYPE, OPTION, ...)``), in its order.
    A FUSE mount whose fsname starts ``semfs:`` reads as :data:`FSTYPE`; its device is its
    mountpoint's ``st_dev`` (the output has none), None if that stat fails."""
    found = []
    for line in text.splitlines():
        m = _MOUNT_LINE.match(line.strip())
        if m is None:
            continue
        source, fstype = m["source"], m["type"].strip()
        if source.startswith(_SOURCE_PREFIX) and fstype.startswith(_MACOS_FUSE_TYPES):
            fstype = FSTYPE
        device = None
        if fstype == FSTYPE:
            with contextlib.suppress(OSError):
                device = os.stat(m["mnt"]).st_dev
        found.append(Mount(source, m["mnt"], fstype, device))
    return found


def mounts(table: Path | None = None) -> list[Mount] | None:
    """What is mounted where, None where it cannot be read. Linux: ``/proc/self/mountinfo``
    (or ``table``, a file in its format); macOS: the ``mount`` command's output (or ``table``,
    a file holding such output)."""
    if is_linux():
        try:
            text = (table or MOUNTINFO).read_text(errors="surrogateescape")
        except OSError:
            return None
        return parse_mountinfo(text)
    if not is_macos():
        return None
    if table is not None:
        try:
            return parse_mount_output(table.read_text(errors="surrogateescape"))
        except OSError:
            return None
    try:
        done = subprocess.run(
            [shutil.which("mount") or "/sbin/mount"], capture_output=True, check=False
        )
    except OSError:
        return None
    if done.returncode != 0:
        return None
    return parse_mount_output(done.stdout.decode(errors="surrogateescape"))


def unmount_commands(mountpoint: Path, lazy: bool = False) -> list[list[str]]:
    """Commands to try in order to unmount a FUSE mount as its user. Linux: fusermount3, else
    fusermount (``-z``: lazy), else umount; macOS: umount, or ``diskutil unmount force`` for
    a busy one (macOS has no lazy unmount: force is the nearest)."""
    mnt = str(mountpoint)
    if is_macos():
        return [["diskutil", "unmount", "force", mnt]] if lazy else [["umount", mnt]]
    commands = [
        [exe, "-u", *(["-z"] if lazy else []), mnt]
        for exe in filter(None, (shutil.which("fusermount3"), shutil.which("fusermount")))
    ]
    return commands or [["umount", *(["-l"] if lazy else []), mnt]]


def detach_command(mountpoint: Path) -> list[str]:
    """The last resort for a mount still busy: Linux ``umount -l``, macOS ``umount -f``."""
    return ["umount", "-f" if is_macos() else "-l", str(mountpoint)]


def unmount_hint(mountpoint: Path) -> str:
    """The system's own command to unmount ``mountpoint``, for a message."""
    return f"umount {mountpoint}" if is_macos() else f"fusermount -u {mountpoint}"


# --- the FUSE library and mount options ------------------------------------------------------

# libfuse 3's soname on Linux: dlopen finds it through the loader's cache, no subprocess.
LINUX_FUSE3 = "libfuse3.so.3"
# macFUSE installs libfuse.2.dylib (and libfuse.dylib) in /usr/local/lib; FUSE-T installs
# libfuse-t.dylib there too. Homebrew on Apple silicon puts libraries in /opt/homebrew/lib.
MACOS_LIBRARY_DIRS = ("/usr/local/lib", "/opt/homebrew/lib")
MACOS_LIBRARIES = ("libfuse.2.dylib", "libfuse.dylib", "libfuse-t.dylib")
MACOS_INSTALL = (
    "no FUSE library found: install macFUSE (brew install --cask macfuse) or FUSE-T "
    "(brew tap macos-fuse-t/homebrew-cask && brew install fuse-t), then run semfs mount again"
)
LINUX_INSTALL = "no FUSE library found: install fuse3 (sudo apt install fuse3 libfuse3-3)"


def fuse_library(dirs: tuple[str, ...] = MACOS_LIBRARY_DIRS) -> tuple[str, str] | None:
    """The environment variable and value that point mfusepy at the FUSE library to load, or
    None to let it search. Linux: libfuse 3 when installed (only it can invalidate kernel
    cache entries). macOS: macFUSE's libfuse.2.dylib, else FUSE-T's libfuse-t.dylib, by path
    (a dylib in /opt/homebrew/lib is not on dlopen's default path)."""
    if is_linux():
        try:
            ctypes.CDLL(LINUX_FUSE3)
        except OSError:
            return None
        return "FUSE_LIBRARY_PATH", LINUX_FUSE3
    if is_macos():
        for name in MACOS_LIBRARIES:
            for folder in dirs:
                if os.path.exists(os.path.join(folder, name)):
                    return "FUSE_LIBRARY_PATH", os.path.join(folder, name)
        return None
    from ctypes.util import find_library  # the BSDs: find_library is cheap there

    return ("FUSE_LIBRARY_NAME", "fuse3") if find_library("fuse3") is not None else None


def install_hint() -> str:
    """One line: what to install when no FUSE library loads."""
    return MACOS_INSTALL if is_macos() else LINUX_INSTALL


def mount_options(volume: str) -> dict[str, object]:
    """FUSE options that differ by system. Linux: the subtype, so the type reads fuse.semfs.
    macOS (macFUSE): the Finder's volume name, and no ._ AppleDouble files written into a
    read-only tree (noappledouble); FUSE-T ignores what it does not know."""
    if is_linux():
        return {"subtype": "semfs"}
    if is_macos():
        return {"volname": volume, "noappledouble": True}
    return {}


def limits(options: dict[str, object], library: str | None, can_invalidate: bool) -> list[str]:
    """One line for each thing the mount cannot do here (empty on Linux, where the mount
    says itself what libfuse 2 lacks). ``library``: the FUSE library loaded.

    macOS: allow_other needs macFUSE to allow it for users other than root (FUSE-T does not
    check); without kernel cache invalidation the mount keeps short cache timeouts."""
    if not is_macos():
        return []
    lines = []
    if "allow_other" in options and "fuse-t" not in (library or ""):
        lines.append(
            "allow_other: macFUSE must allow it for users other than root (older macFUSE: "
            "sudo sysctl -w vfs.generic.osxfuse.tunables.allow_other=1); FUSE-T does not ask"
        )
    if not can_invalidate:
        lines.append("no kernel cache invalidation here: changes show within a second")
    return lines


# --- files -----------------------------------------------------------------------------------

# rename flags as the writable mount takes them (Linux's renameat2 values, which FUSE passes on).
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
# macOS renameatx_np(2): RENAME_SWAP 0x2, RENAME_EXCL 0x4.
_MACOS_RENAME = {RENAME_NOREPLACE: 0x4, RENAME_EXCHANGE: 0x2}


def path_flag() -> int:
    """The open flag for a descriptor that only names a file or folder. Linux ``O_PATH``
    (no read permission needed); macOS has none: ``O_RDONLY``, so a folder must be readable."""
    return int(getattr(os, "O_PATH", os.O_RDONLY)) if is_linux() else os.O_RDONLY


def rename_flags(flags: int) -> int:
    """``flags`` (RENAME_NOREPLACE, RENAME_EXCHANGE) as this system's rename call takes them."""
    if is_linux():
        return flags
    out = 0
    for ours, theirs in _MACOS_RENAME.items():
        if flags & ours:
            out |= theirs
    if flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE):
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
    return out


def rename_at(
    old_dir: int, old: str, new_dir: int, new: str, flags: int, lib: ctypes.CDLL | None = None
) -> None:
    """rename with flags, relative to folder descriptors. Linux ``renameat2``; macOS
    ``renameatx_np`` (10.12 and later); elsewhere EOPNOTSUPP."""
    name = "renameat2" if is_linux() else "renameatx_np" if is_macos() else ""
    call = getattr(lib or _libc(), name, None) if name else None
    if call is None:
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP), new)
    if call(
        old_dir, os.fsencode(old), new_dir, os.fsencode(new), ctypes.c_uint(rename_flags(flags))
    ):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), new)


def fchmod(fd: int, mode: int) -> None:
    """chmod the file ``fd`` names (opened with :func:`path_flag`). Linux: through
    ``/proc/self/fd`` (an O_PATH descriptor refuses fchmod); macOS: fchmod itself."""
    if is_linux():
        os.chmod(f"/proc/self/fd/{fd}", mode)
    else:
        os.fchmod(fd, mode)


def fchown(fd: int, uid: int, gid: int) -> None:
    """chown the file ``fd`` names (opened with :func:`path_flag`), as :func:`fchmod`."""
    if is_linux():
        os.chown(f"/proc/self/fd/{fd}", uid, gid)
    else:
        os.fchown(fd, uid, gid)


def futimens(fd: int, times: tuple[int, int] | None) -> None:
    """Set (atime, mtime) in ns (None: now) of the file ``fd`` names, as :func:`fchmod`."""
    target: int | str = f"/proc/self/fd/{fd}" if is_linux() else fd
    if times is None:
        os.utime(target)
    else:
        os.utime(target, ns=times)


# openat2(2): Linux 5.6 and later, the same number on every architecture; macOS has none.
_SYS_OPENAT2 = 437


def openat2_syscall() -> int | None:
    """The syscall number of openat2, None where the system has no openat2."""
    return _SYS_OPENAT2 if is_linux() else None


def get_xattr(path: Path, name: str, lib: ctypes.CDLL | None = None) -> bytes | None:
    """An extended attribute of ``path`` (following links), None if absent or unreadable.
    Linux: ``os.getxattr``; macOS: libc's getxattr, which takes a position and options more
    (Python's os has no xattr calls there)."""
    if is_linux():
        try:
            return os.getxattr(path, name)
        except OSError:
            return None
    if not is_macos():
        return None
    try:
        call = (lib or _libc()).getxattr
    except (AttributeError, OSError):
        return None
    call.restype = ctypes.c_ssize_t
    p, n = os.fsencode(path), name.encode()
    size = call(p, n, None, ctypes.c_size_t(0), ctypes.c_uint32(0), ctypes.c_int(0))
    if size < 0:
        return None
    buf = ctypes.create_string_buffer(max(int(size), 1))
    got = call(p, n, buf, ctypes.c_size_t(len(buf)), ctypes.c_uint32(0), ctypes.c_int(0))
    return None if got < 0 else buf.raw[:got]
