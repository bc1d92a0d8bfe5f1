"""semfs.ingest.portable, each function's Linux and macOS branch, run here on Linux.

The macOS branches run with :data:`semfs.ingest.portable.SYSTEM` switched to ``darwin``. Where
a branch calls into libc, it runs against a Linux library that has the same call: libbsd's
``getpeereid``; glibc's ``getxattr``, which ignores the two arguments macOS's takes more (the
System V calling convention leaves extra arguments unread). ``renameatx_np`` has no Linux twin:
its flag mapping is tested, and the call itself is run with renameat2 standing in, by name.
What no test here can show is that macOS answers as its documentation says."""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from semfs.ingest import portable
from tests.helpers import REPO

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="runs on Linux")


@pytest.fixture
def macos(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(portable, "SYSTEM", "darwin")


def _libbsd() -> ctypes.CDLL:
    try:
        return ctypes.CDLL("libbsd.so.0", use_errno=True)
    except OSError:
        pytest.skip("libbsd.so.0 is not installed: no getpeereid on this Linux to call")


def test_the_system_is_read_through_one_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    assert portable.system() == "linux" and portable.is_linux() and not portable.is_macos()
    assert portable.per_thread_credentials() and portable.libfuse_internals_known()
    monkeypatch.setattr(portable, "SYSTEM", "darwin")
    assert portable.system() == "darwin" and portable.is_macos() and not portable.is_linux()
    assert not portable.per_thread_credentials() and not portable.libfuse_internals_known()


# --- sockets ---------------------------------------------------------------------------------


def test_peer_uid_linux() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        assert portable.peer_uid(a) == os.getuid()


def test_peer_uid_macos_calls_getpeereid(macos: None) -> None:
    lib = _libbsd()
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        assert portable.peer_uid(a, lib) == os.getuid()
    # A closed socket: getpeereid fails (EBADF), the answer is "unknown".
    closed = socket.socket(socket.AF_UNIX)
    closed.close()
    assert portable.peer_uid(closed, lib) is None


def test_peer_uid_macos_without_getpeereid_is_unknown(macos: None) -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        assert portable.peer_uid(a, ctypes.CDLL(None)) is None  # glibc has no getpeereid


def test_socket_path_limits_and_alias(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        alias = portable.socket_alias(fd, "daemon.sock")
        assert alias is not None
        (tmp_path / "daemon.sock").write_text("x")
        assert Path(alias).read_text() == "x"
        monkeypatch.setattr(portable, "SYSTEM", "darwin")
        assert portable.socket_alias(fd, "daemon.sock") is None
    finally:
        os.close(fd)


# --- processes -------------------------------------------------------------------------------


def test_process_groups_linux_reads_the_process_own_list() -> None:
    assert portable.process_groups(os.getpid(), os.getuid(), os.getgid()) == frozenset(
        os.getgroups()
    )
    assert portable.process_groups(2**22 + 17, 0, 0) == frozenset()  # no such process


def test_process_groups_macos_asks_the_directory(macos: None) -> None:
    import pwd

    uid, gid = os.getuid(), os.getgid()
    name = pwd.getpwuid(uid).pw_name
    assert portable.process_groups(1, uid, gid) == frozenset(os.getgrouplist(name, gid))
    assert gid in portable.process_groups(1, uid, gid)
    assert portable.process_groups(1, 2**31 - 7, 0) == frozenset()  # no such user


def test_is_zombie_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not portable.is_zombie(child.pid)
        child.kill()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
        assert portable.is_zombie(child.pid)
        monkeypatch.setattr(portable, "SYSTEM", "darwin")  # ps, as on macOS
        if shutil.which("ps") is None:
            pytest.skip("no ps command (procps) here")
        assert portable.is_zombie(child.pid)
        assert not portable.is_zombie(os.getpid())
    finally:
        child.kill()
        child.wait()


def test_sysctl_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    name = "kernel.pid_max"
    linux = portable.sysctl(name)
    assert linux.isdigit()
    assert portable.sysctl("no.such.setting") == "?"
    monkeypatch.setattr(portable, "SYSTEM", "darwin")  # the sysctl command, as on macOS
    if not any(os.access(os.path.join(d, "sysctl"), os.X_OK) for d in ("/usr/sbin", "/sbin")):
        pytest.skip("no sysctl command (procps) here")
    assert portable.sysctl(name) == linux  # the command's answer, never "?" for a real name
    assert portable.sysctl("no.such.setting") == "?"


def test_watch_count(macos: None) -> None:
    assert portable.watch_count() is None


def test_watch_count_linux() -> None:
    assert portable.watch_count() == 0  # this process holds no inotify descriptor


# --- memory ----------------------------------------------------------------------------------


def test_shared_mappings_and_page_dropping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mmap

    f = tmp_path / "data"
    f.write_bytes(b"x" * mmap.PAGESIZE * 4)
    with f.open("r+b") as fh, mmap.mmap(fh.fileno(), 0) as m:
        found = portable.shared_file_mappings(str(tmp_path) + "/")
        assert [(length, path) for _, length, path in found] == [(len(m), str(f))]
        drop = portable.drop_pages()
        assert drop is not None and drop(found[0][0], found[0][1]) == 0
        assert m[:1] == b"x"  # a shared file mapping reads the file again
        monkeypatch.setattr(portable, "SYSTEM", "darwin")
        assert portable.shared_file_mappings(str(tmp_path) + "/") == []
        assert portable.drop_pages() is None


# --- mounts ----------------------------------------------------------------------------------

MOUNTINFO = (
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "40 22 0:40 / /home/u/my\\040mnt rw,nosuid - fuse.semfs semfs:docs rw,user_id=1000\n"
    "41 22 0:41 / /tmp ro - tmpfs tmpfs rw\n"
)
MOUNT_OUTPUT = (
    "/dev/disk3s1s1 on / (apfs, sealed, local, read-only, journaled)\n"
    "semfs:docs on /Users/u/my mnt (macfuse, nodev, nosuid, synchronous, mounted by u)\n"
    "semfs:notes@localhost_6333 on /Volumes/notes (nfs, nodev, nosuid, mounted by u)\n"
    "map auto_home on /System/Volumes/Data/home (autofs, automounted, nobrowse)\n"
    "other:x on /Volumes/x (macfuse, nodev)\n"
)


def test_mounts_linux(tmp_path: Path) -> None:
    table = tmp_path / "mountinfo"
    table.write_text(MOUNTINFO)
    assert portable.mounts(table) == [
        portable.Mount("/dev/sda1", "/", "ext4", os.makedev(8, 1)),
        portable.Mount("semfs:docs", "/home/u/my mnt", portable.FSTYPE, os.makedev(0, 40)),
        portable.Mount("tmpfs", "/tmp", "tmpfs", os.makedev(0, 41)),
    ]
    root = next(m for m in portable.mounts() or [] if m.mountpoint == "/")
    assert root.device == os.stat("/").st_dev
    assert any(m.mountpoint == "/" for m in portable.mounts() or [])
    assert portable.mounts(tmp_path / "absent") is None


def test_mounts_macos(tmp_path: Path, macos: None) -> None:
    table = tmp_path / "mount.txt"
    table.write_text(MOUNT_OUTPUT.replace("/Volumes/notes", str(tmp_path)))
    assert portable.mounts(table) == [
        portable.Mount("/dev/disk3s1s1", "/", "apfs"),
        portable.Mount("semfs:docs", "/Users/u/my mnt", portable.FSTYPE),
        portable.Mount(  # a semfs mount's device is its mountpoint's: here, a real folder
            "semfs:notes@localhost_6333", str(tmp_path), portable.FSTYPE, tmp_path.stat().st_dev
        ),
        portable.Mount("map auto_home", "/System/Volumes/Data/home", "autofs"),
        portable.Mount("other:x", "/Volumes/x", "macfuse"),
    ]
    # The real `mount` command: Linux's prints the same `SOURCE on DIR type T (...)` shape
    # but with "type T": the parser reads its lines or skips them, never raises.
    assert isinstance(portable.mounts(), list)


def test_unmount_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    mnt = Path("/m")
    for command in portable.unmount_commands(mnt):
        assert os.path.basename(command[0]) in ("fusermount3", "fusermount", "umount")
        assert command[-1] == "/m"
    assert all("-z" in c or "-l" in c for c in portable.unmount_commands(mnt, lazy=True))
    assert portable.detach_command(mnt) == ["umount", "-l", "/m"]
    assert portable.unmount_hint(mnt) == "fusermount -u /m"
    monkeypatch.setattr(portable, "SYSTEM", "darwin")
    assert portable.unmount_commands(mnt) == [["umount", "/m"]]
    assert portable.unmount_commands(mnt, lazy=True) == [["diskutil", "unmount", "force", "/m"]]
    assert portable.detach_command(mnt) == ["umount", "-f", "/m"]
    assert portable.unmount_hint(mnt) == "umount /m"


# --- the FUSE library and options ------------------------------------------------------------


def test_fuse_library_linux() -> None:
    try:
        ctypes.CDLL(portable.LINUX_FUSE3)
    except OSError:
        assert portable.fuse_library() is None
    else:
        assert portable.fuse_library() == ("FUSE_LIBRARY_PATH", portable.LINUX_FUSE3)
    assert portable.install_hint() == portable.LINUX_INSTALL


def test_fuse_library_macos_prefers_macfuse_then_fuse_t(tmp_path: Path, macos: None) -> None:
    local, brew = tmp_path / "local", tmp_path / "brew"
    local.mkdir()
    brew.mkdir()
    dirs = (str(local), str(brew))
    assert portable.fuse_library(dirs) is None
    assert "macFUSE" in portable.install_hint() and "FUSE-T" in portable.install_hint()
    assert "\n" not in portable.install_hint()
    (brew / "libfuse-t.dylib").touch()
    assert portable.fuse_library(dirs) == ("FUSE_LIBRARY_PATH", str(brew / "libfuse-t.dylib"))
    (brew / "libfuse.2.dylib").touch()
    assert portable.fuse_library(dirs) == ("FUSE_LIBRARY_PATH", str(brew / "libfuse.2.dylib"))
    (local / "libfuse.2.dylib").touch()
    assert portable.fuse_library(dirs) == ("FUSE_LIBRARY_PATH", str(local / "libfuse.2.dylib"))


def test_mount_options_and_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    assert portable.mount_options("docs") == {"subtype": "semfs"}
    assert portable.limits({"allow_other": True}, None, False) == []
    monkeypatch.setattr(portable, "SYSTEM", "darwin")
    assert portable.mount_options("docs") == {"volname": "docs", "noappledouble": True}
    macfuse = portable.limits({"allow_other": True}, "/usr/local/lib/libfuse.2.dylib", False)
    assert len(macfuse) == 2 and "allow_other" in macfuse[0]
    assert all("\n" not in line for line in macfuse)
    fuse_t = portable.limits({"allow_other": True}, "/usr/local/lib/libfuse-t.dylib", True)
    assert fuse_t == []


# --- files -----------------------------------------------------------------------------------


def test_rename_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    both = portable.RENAME_NOREPLACE | portable.RENAME_EXCHANGE
    assert portable.rename_flags(both) == both
    monkeypatch.setattr(portable, "SYSTEM", "darwin")
    assert portable.rename_flags(portable.RENAME_NOREPLACE) == 0x4  # RENAME_EXCL
    assert portable.rename_flags(portable.RENAME_EXCHANGE) == 0x2  # RENAME_SWAP
    with pytest.raises(OSError) as e:
        portable.rename_flags(8)
    assert e.value.errno == errno.EINVAL


class _RenameatxStandIn:
    """glibc under macOS's name: renameatx_np takes the same arguments as renameat2."""

    def __init__(self) -> None:
        self.renameatx_np = ctypes.CDLL(None, use_errno=True).renameat2
        self.flags: list[int] = []
        real = self.renameatx_np

        def call(*args: object) -> int:
            flag = args[-1]
            assert isinstance(flag, ctypes.c_uint)
            self.flags.append(flag.value)
            # macOS's RENAME_EXCL (4) is Linux's RENAME_NOREPLACE (1) for the stand-in.
            return int(real(*args[:-1], ctypes.c_uint({4: 1, 2: 2, 0: 0}[flag.value])))

        self.renameatx_np = call


def test_rename_at_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").write_text("a")
    (tmp_path / "b").write_text("b")
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        with pytest.raises(FileExistsError):
            portable.rename_at(fd, "a", fd, "b", portable.RENAME_NOREPLACE)
        portable.rename_at(fd, "a", fd, "b", portable.RENAME_EXCHANGE)
        assert (tmp_path / "b").read_text() == "a"
        monkeypatch.setattr(portable, "SYSTEM", "darwin")
        with pytest.raises(OSError):  # glibc has no renameatx_np: refused, not crashed
            portable.rename_at(fd, "a", fd, "b", 0)
        lib = _RenameatxStandIn()
        with pytest.raises(FileExistsError):
            portable.rename_at(fd, "a", fd, "b", portable.RENAME_NOREPLACE, lib)  # type: ignore[arg-type]
        portable.rename_at(fd, "a", fd, "b", portable.RENAME_EXCHANGE, lib)  # type: ignore[arg-type]
        assert lib.flags == [0x4, 0x2]
        assert (tmp_path / "a").read_text() == "a"
    finally:
        os.close(fd)


def test_path_descriptors_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "f"
    f.write_text("x")
    for system in ("linux", "darwin"):
        monkeypatch.setattr(portable, "SYSTEM", system)
        assert (portable.path_flag() == os.O_PATH) == (system == "linux")
        fd = os.open(f, portable.path_flag() | os.O_NOFOLLOW)
        try:
            portable.fchmod(fd, 0o640)
            assert f.stat().st_mode & 0o777 == 0o640
            portable.fchown(fd, os.getuid(), os.getgid())  # to the owner it has: allowed
            assert (f.stat().st_uid, f.stat().st_gid) == (os.getuid(), os.getgid())
            portable.futimens(fd, (10**9, 2 * 10**9))
            assert f.stat().st_mtime_ns == 2 * 10**9
            portable.futimens(fd, None)
            assert f.stat().st_mtime_ns > 2 * 10**9
        finally:
            os.close(fd)
        f.chmod(0o644)


def test_openat2_only_on_linux(macos: None) -> None:
    assert portable.openat2_syscall() is None


def test_openat2_on_linux() -> None:
    assert portable.openat2_syscall() == 437


@pytest.fixture
def xattr_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder on a filesystem with user xattrs: the test's own, or, where that is a tmpfs
    without them (kernels before 6.6), one beside the checkout (build/, ignored by git)."""
    for parent in (tmp_path, REPO / "build"):
        parent.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(dir=parent))
        try:
            os.setxattr(folder, "user.semfs.probe", b"1")
        except OSError:
            shutil.rmtree(folder)
            continue
        try:
            yield folder
        finally:
            shutil.rmtree(folder)
        return
    pytest.skip("no user xattrs where the tests run, nor beside the checkout")


def test_get_xattr_both_ways(xattr_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmp_path = xattr_dir
    f = tmp_path / "f"
    f.write_text("x")
    os.setxattr(f, "user.semfs.pid", b"4242")
    assert portable.get_xattr(f, "user.semfs.pid") == b"4242"
    assert portable.get_xattr(f, "user.semfs.none") is None
    monkeypatch.setattr(portable, "SYSTEM", "darwin")  # libc's getxattr, macOS's arguments
    assert portable.get_xattr(f, "user.semfs.pid") == b"4242"
    assert portable.get_xattr(f, "user.semfs.none") is None
    assert portable.get_xattr(tmp_path / "absent", "user.semfs.pid") is None


def test_a_file_lock_is_one_holders(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    first = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    second = os.open(path, os.O_RDWR)
    try:
        assert portable.lock_file(first, wait=False)
        assert not portable.lock_file(second, wait=False)  # flock: per open file, not process
        portable.unlock_file(first)
        assert portable.lock_file(second, wait=True)
    finally:
        os.close(first)
        os.close(second)


def test_limits_and_faults_answer() -> None:
    limit = portable.open_files_limit()
    assert limit is None or limit > 0
    faults = portable.major_faults()
    assert isinstance(faults, int) and faults >= 0
