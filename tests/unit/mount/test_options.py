"""A mount's options and checks before it starts: libfuse's options, the mountpoint, the
unmount commands, the filesystem type read from the list of mounts, the kernel's timeouts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from semfs.fusefs.mount.bindings import can_invalidate
from semfs.fusefs.mount.daemon import MountConfig, fuse_options, parse_options
from semfs.fusefs.mount.kernelcache import LONG_TIMEOUT, SHORT_TIMEOUT
from semfs.fusefs.mount.start import _absolute, check_mountpoint
from semfs.fusefs.mount.unmount import mount_fstype, unmount_commands
from semfs.ingest.errors import MountError
from semfs.ingest.store.address import CollectionAddress


def test_parse_and_fuse_options(tmp_path: Path) -> None:
    assert parse_options(["allow_other,uid=5", "attr_timeout=3", "uid=7"]) == {
        "allow_other": True,
        "uid": "7",
        "attr_timeout": "3",
    }
    cfg = MountConfig(tmp_path, options={"attr_timeout": "3", "allow_other": True})
    opts = fuse_options(cfg)
    assert opts["ro"] is True and opts["use_ino"] is True
    assert opts["attr_timeout"] == "3" and opts["allow_other"] is True
    assert opts["fsname"] == "semfs:docs"
    with pytest.raises(MountError, match="read-only"):
        fuse_options(MountConfig(tmp_path, options={"rw": True}))
    # --writable: read-write with short kernel caches, and only over a watched folder.
    with pytest.raises(MountError, match="--writable needs --watch"):
        fuse_options(MountConfig(tmp_path, writable=True))
    rw = fuse_options(MountConfig(tmp_path, watch=tmp_path, writable=True, options={"rw": True}))
    assert rw["ro"] is False and "rw" not in rw and rw["default_permissions"] is True
    assert rw["entry_timeout"] == rw["attr_timeout"] == SHORT_TIMEOUT


def test_mountpoint_checks(tmp_path: Path) -> None:
    with pytest.raises(MountError, match="does not exist"):
        check_mountpoint(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(MountError, match="not a directory"):
        check_mountpoint(tmp_path / "file")
    with pytest.raises(MountError, match="not empty"):
        check_mountpoint(tmp_path)
    check_mountpoint(tmp_path, allow_nonempty=True)
    with pytest.raises(MountError, match="already a mount point"):
        check_mountpoint(Path("/proc"))


@pytest.mark.skipif(sys.platform == "darwin", reason="diskutil there, not fusermount")
def test_unmount_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Whether fusermount is installed is this machine's business (-m "not mount" runs where
    # it is not): PATH decides here, with an executable that is found and never run.
    monkeypatch.setenv("PATH", str(tmp_path))
    assert unmount_commands(Path("/mnt/x")) == [["umount", "/mnt/x"]]
    assert unmount_commands(Path("/mnt/x"), lazy=True) == [["umount", "-l", "/mnt/x"]]
    fusermount = tmp_path / "fusermount3"
    fusermount.write_text("#!/bin/sh\nexit 1\n")
    fusermount.chmod(0o755)
    assert unmount_commands(Path("/mnt/x")) == [[str(fusermount), "-u", "/mnt/x"]]
    assert unmount_commands(Path("/mnt/x"), lazy=True) == [[str(fusermount), "-u", "-z", "/mnt/x"]]


def test_mount_fstype_reads_mountinfo(tmp_path: Path) -> None:
    spaced = tmp_path / "my docs"
    spaced.mkdir()
    escaped = str(spaced).replace(" ", "\\040")
    info = tmp_path / "mountinfo"
    info.write_text(
        f"36 35 0:40 / {escaped} rw,relatime shared:1 - tmpfs tmpfs rw\n"
        f"37 36 0:41 / {escaped} ro,nosuid - fuse.semfs semfs:docs ro,user_id=0\n"
        f"38 35 0:42 / {tmp_path} rw - ext4 /dev/sda1 rw\n"
    )
    assert mount_fstype(spaced, info) == "fuse.semfs"  # the topmost of the two
    assert mount_fstype(tmp_path, info) == "ext4"
    assert mount_fstype(tmp_path / "elsewhere", info) is None


def test_long_kernel_timeouts_only_where_changes_are_invalidated(tmp_path: Path) -> None:
    opts = fuse_options(MountConfig(mountpoint=tmp_path))
    expected = LONG_TIMEOUT if can_invalidate() else SHORT_TIMEOUT
    assert opts["entry_timeout"] == opts["attr_timeout"] == expected
    assert (
        fuse_options(MountConfig(mountpoint=tmp_path, options={"attr_timeout": "2"}))[
            "attr_timeout"
        ]
        == "2"
    )


def test_a_mount_of_several_collections_finds_each_from_the_daemons_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon runs from /: `--store store --collections a,b` names each store absolutely."""
    monkeypatch.chdir(tmp_path)
    at = CollectionAddress("a", store=Path("store"))
    cfg = _absolute(MountConfig(Path("mnt"), at, collections=(at, at.named("b"))))
    assert [a.store for a in cfg.addresses] == [tmp_path / "store"] * 2
    assert [a.collection for a in cfg.addresses] == ["a", "b"]
