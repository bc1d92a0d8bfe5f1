"""`.search` explains itself, on a real mount: README.md in every search folder, a bad
parameter folder is ENOENT for the kernel and one log line for the user, the results file is
00-results.md whatever k, and tools that make a question folder before listing it work."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.mounting import Mount, ingest_hash, mounted, read_log, semfs

pytestmark = pytest.mark.mount


@pytest.fixture(scope="module")
def mount(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mount]:
    root = tmp_path_factory.mktemp("search-help")
    src = root / "src"
    (src / "deploy").mkdir(parents=True)
    (src / "keys.md").write_text("# API keys\n\nRotate an api key from the settings page.\n")
    (src / "deploy" / "vercel.md").write_text("# Vercel\n\nDeploy the docs on vercel.\n")
    ingest_hash(src, root / "store")
    expect = [".search/@k=500: not found", ".search/@bogus: not found"]
    with mounted(root / "mnt", "--store", str(root / "store"), expect_log=expect) as m:
        yield m


def test_search_folders_list_a_readme(mount: Mount) -> None:
    for folder in (".search", "deploy/.search", ".search/@keyword"):
        assert "README.md" in os.listdir(mount.path / folder)
    text = (mount.path / ".search" / "README.md").read_text()
    assert text.startswith("# .search: search by naming a question")
    assert "@k=N" in text and "@k=500" in text and "00-results.md" in text
    assert os.listdir(mount.path) == ["deploy", "keys.md"]  # still listed nowhere else


def test_a_bad_parameter_is_enoent_and_one_log_line(mount: Mount) -> None:
    for name in ("@k=500", "@bogus"):
        for _ in range(3):
            with pytest.raises(OSError) as caught:
                os.listdir(mount.path / ".search" / name / "api key")
            assert caught.value.errno == errno.ENOENT
        lines = [line for line in read_log(mount.log).splitlines() if f"/{name}: not found" in line]
        assert len(lines) == 1, lines
    log = read_log(mount.log)
    assert "k must be a whole number from 1 to 100, not '500'" in log
    assert "unknown parameter '@bogus'" in log


def test_the_results_file_is_00_whatever_k(mount: Mount) -> None:
    names = sorted(os.listdir(mount.path / ".search" / "@k=100" / "api key"))
    assert names[0] == "00-results.md" and names[1].startswith("001-")
    text = (mount.path / ".search" / "@k=100" / "api key" / "00-results.md").read_text()
    assert text.startswith("# Search: api key")


def test_making_a_question_folder_first_works(mount: Mount) -> None:
    question = mount.path / ".search" / "rotate a key"
    subprocess.run(["mkdir", "-p", str(question)], check=True)
    os.makedirs(question, exist_ok=True)
    assert "00-results.md" in os.listdir(question)


def test_guide_names_the_mount_and_its_search_folder(mount: Mount, tmp_path: Path) -> None:
    out = semfs("guide", f"{mount.path}/").stdout
    assert f'"{mount.path}/.search/rotate api key/00-results.md"' in out
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("# A\n\nalpha\n")
    ingest_hash(src, tmp_path / "store")
    with mounted(
        tmp_path / "mnt", "--store", str(tmp_path / "store"), "--search-dir", ".find"
    ) as m:
        out = semfs("guide", str(m.path)).stdout
        assert f'"{m.path}/.find/rotate api key/00-results.md"' in out
        assert ".search" not in out and ".find and .map.md are never listed" in out
        # An explicit --search-dir wins (a mount seen through another path, say).
        assert "/.q/" in semfs("guide", str(m.path), "--search-dir", ".q").stdout
    out = semfs("guide", "--search-dir", ".find").stdout
    assert '"DOCS/.find/rotate api key' in out and ".search" not in out
    r = semfs("guide", str(tmp_path), check=False)  # a folder, nothing mounted
    assert r.returncode == 1 and "not a semfs mount (nothing is mounted there)" in r.stderr
