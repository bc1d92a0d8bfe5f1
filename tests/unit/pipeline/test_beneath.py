"""SourceFolder (semfs.ingest.beneath): every call stays beneath the folder, no link followed.

Real folders and real links, no mount: what a writable mount and the MCP write tool rely on.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from semfs.ingest.beneath import RENAME_NOREPLACE, SourceFolder


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
