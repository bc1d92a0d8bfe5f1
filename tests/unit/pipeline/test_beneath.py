"""SourceFolder (semfs.ingest.beneath): every call stays beneath the folder, no link followed.

Real folders and real links, no mount: what a writable mount and the MCP write tool rely on.
Every test runs twice: with ``openat2`` (Linux 5.6 and later) and with the ``O_NOFOLLOW`` walk
that older kernels and macOS use (forced here on Linux), against the same planted links.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from semfs.ingest import beneath
from semfs.ingest.beneath import RENAME_NOREPLACE, SourceFolder


@pytest.fixture(params=["openat2", "walk"], autouse=True)
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which way paths are resolved: openat2, or the O_NOFOLLOW walk of a kernel without it
    (what beneath falls back to after openat2's first ENOSYS)."""
    if request.param == "openat2":
        if beneath._SYS_OPENAT2 is None:
            pytest.skip("no openat2 on this system")
        monkeypatch.setattr(beneath, "_openat2_works", None)
    else:
        monkeypatch.setattr(beneath, "_openat2_works", False)
    return str(request.param)


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[SourceFolder]:
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "a" / "f.md").write_text("inside\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("outside\n")
    (src / "up").symlink_to(outside)  # a folder's place: absolute
    (src / "rel").symlink_to("../outside")  # and relative
    (src / "a" / "leak.md").symlink_to(outside / "secret.md")  # a file's place
    source = SourceFolder(src)
    yield source
    source.close()


@pytest.mark.parametrize("via", ["up", "rel"])
def test_a_link_in_a_folders_place_is_never_followed(folder: SourceFolder, via: str) -> None:
    outside = folder.path.parent / "outside"
    for call in (
        lambda: folder.open(f"{via}/new.md", os.O_WRONLY | os.O_CREAT, 0o644),
        lambda: folder.open(f"{via}/secret.md", os.O_RDONLY),
        lambda: folder.unlink(f"{via}/secret.md"),
        lambda: folder.mkdir(f"{via}/d", 0o755),
        lambda: folder.rename("a/f.md", f"{via}/moved.md"),
        lambda: folder.chmod(f"{via}/secret.md", 0o777),
        lambda: folder.lstat(f"{via}/secret.md"),
    ):
        with pytest.raises(OSError) as info:
            call()
        assert info.value.errno in (errno.ELOOP, errno.ENOTDIR, errno.EXDEV), info.value
    assert sorted(os.listdir(outside)) == ["secret.md"]
    assert (outside / "secret.md").stat().st_mode & 0o777 != 0o777


def test_the_last_component_is_the_link_itself(folder: SourceFolder) -> None:
    with pytest.raises(OSError) as info:
        folder.open("a/leak.md", os.O_WRONLY | os.O_TRUNC)
    assert info.value.errno == errno.ELOOP
    with pytest.raises(OSError) as info:
        folder.chmod("a/leak.md", 0o600)
    assert info.value.errno == errno.EOPNOTSUPP
    assert folder.readlink("a/leak.md").endswith("outside/secret.md")
    folder.unlink("a/leak.md")  # removes the link, not its target
    assert (folder.path.parent / "outside" / "secret.md").read_text() == "outside\n"


def test_renameat2_flags_are_kept(folder: SourceFolder) -> None:
    fd = folder.open("a/g.md", os.O_WRONLY | os.O_CREAT, 0o644)
    os.close(fd)
    with pytest.raises(FileExistsError):
        folder.rename("a/g.md", "a/f.md", RENAME_NOREPLACE)
    assert (folder.path / "a" / "f.md").read_text() == "inside\n"
    folder.rename("a/g.md", "a/h.md", RENAME_NOREPLACE)
    assert sorted(os.listdir(folder.path / "a")) == ["f.md", "h.md", "leak.md"]


def _snapshot(top: Path) -> dict[str, tuple[int, bytes]]:
    """Every name under ``top`` with its mode and (for a file) its bytes, links not followed."""
    found = {}
    for path in sorted(top.rglob("*")):
        st = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        found[path.relative_to(top).as_posix()] = (st.st_mode, data)
    return found


DEPTH = ("a", "b", "c")  # the folders of a/b/c/f.md


@pytest.mark.parametrize("target", ["outside", "inside"])
@pytest.mark.parametrize("position", range(len(DEPTH) + 1))
def test_a_planted_link_in_any_position_of_the_path_is_never_followed(
    tmp_path: Path, resolver: str, position: int, target: str
) -> None:
    """A link in place of the first, a middle or the last folder of ``a/b/c/f.md``, or of the
    file itself, to a folder outside the source or to another one inside it, where following
    it would succeed. Before: openat2 with RESOLVE_NO_MAGICLINKS alone followed a link in a
    middle folder (up/sub/new.md created outside/sub/new.md), and no test ran the walk."""
    src = tmp_path / "src"
    deep = src.joinpath(*DEPTH)
    deep.mkdir(parents=True)
    (deep / "f.md").write_text("inside\n")
    (src / "top.md").write_text("top\n")
    # Where the link leads: a tree that holds the rest of the path, so a follow succeeds.
    there = tmp_path / "outside" if target == "outside" else src / "other"
    rest = DEPTH[position + 1 :] if position < len(DEPTH) else ()
    there.joinpath(*rest).mkdir(parents=True)
    there.joinpath(*rest, "f.md").write_text("elsewhere\n")
    if position < len(DEPTH):
        planted = src.joinpath(*DEPTH[: position + 1])
        shutil.rmtree(planted)
        link = there if target == "outside" else os.path.relpath(there, planted.parent)
        planted.symlink_to(link)
    else:
        (deep / "f.md").unlink()
        (deep / "f.md").symlink_to(there / "f.md")
    before = _snapshot(there)
    folder = SourceFolder(src)
    rel, new = "a/b/c/f.md", "a/b/c/new.md"
    calls = {
        "create": lambda: os.close(folder.open(new, os.O_WRONLY | os.O_CREAT, 0o644)),
        "read": lambda: os.close(folder.open(rel, os.O_RDONLY)),
        "truncate": lambda: folder.truncate(rel, 0),
        "mkdir": lambda: folder.mkdir("a/b/c/d", 0o755),
        "unlink": lambda: folder.unlink(rel),
        "rename to": lambda: folder.rename("top.md", new),
        "rename from": lambda: folder.rename(rel, "moved.md"),
        "link": lambda: folder.link("top.md", new),
        "symlink": lambda: folder.symlink("x", new),
        "chmod": lambda: folder.chmod(rel, 0o777),
        "chown": lambda: folder.chown(rel, os.getuid(), os.getgid()),
        "utimens": lambda: folder.utimens(rel, (0, 0)),
        "lstat": lambda: folder.lstat(rel),
        "listdir": lambda: folder.listdir("a/b/c"),
    }
    if position == len(DEPTH):  # the file is the link; its folder is real
        for what in ("lstat", "chown", "utimens"):  # these act on the link itself
            calls[what]()
        calls = {w: c for w, c in calls.items() if w in ("read", "truncate", "chmod")}
        calls["write"] = lambda: os.close(folder.open(rel, os.O_WRONLY | os.O_APPEND))
    try:
        for what, call in calls.items():
            with pytest.raises(OSError) as info:
                call()
            assert info.value.errno in (errno.ELOOP, errno.ENOTDIR, errno.EOPNOTSUPP), (
                what,
                info.value,
            )
    finally:
        folder.close()
    assert _snapshot(there) == before, f"{resolver}: something changed behind the link"
