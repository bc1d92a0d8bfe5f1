"""Nothing private leaks: the store is owner-only, the mount grants no more than the source.

Real stores on disk, real mounts, real other users (nobody) where we are root.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers import NOBODY, SEMFS
from tests.helpers.mounting import mounted, semfs, wait_until


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def modes_under(top: Path) -> dict[str, set[str]]:
    """Permission bits of everything under ``top``, by kind: {"d": {"700"}, "f": {"600"}}."""
    out: dict[str, set[str]] = {}
    for root, dirs, files in os.walk(top):
        for name in [*dirs, *files]:
            st = os.lstat(os.path.join(root, name))
            kind = "d" if stat.S_ISDIR(st.st_mode) else "s" if stat.S_ISSOCK(st.st_mode) else "f"
            out.setdefault(kind, set()).add(f"{stat.S_IMODE(st.st_mode):o}")
    st = os.stat(top)
    out.setdefault("d", set()).add(f"{stat.S_IMODE(st.st_mode):o}")
    return out


@pytest.mark.mount
def test_the_store_is_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    src, store = tmp_path / "src", tmp_path / "store"
    src.mkdir()
    (src / "a.md").write_text("# A\n\nsecret plans\n")
    with umask(0):
        semfs("ingest", str(src), "--store", str(store), "--model", "hash")
        modes = modes_under(store)
        assert modes == {"d": {"700"}, "f": {"600"}}, modes
        # Writes through a mounted daemon: the engine creates files in the daemon process.
        with mounted(tmp_path / "mnt", "--store", str(store)):
            for i in range(30):
                (src / f"new-{i}.md").write_text(f"# New {i}\n\nmore secret plans {i}\n")
            semfs("ingest", str(src), "--store", str(store))
            modes = modes_under(store)
            assert modes.pop("s") == {"600"}  # the daemon's socket
            assert modes == {"d": {"700"}, "f": {"600"}}, modes
        modes = modes_under(store)
        assert modes.pop("s", {"600"}) == {"600"}
        assert modes == {"d": {"700"}, "f": {"600"}}, modes


def test_an_exposed_store_warns_once(open_tmp: Path) -> None:
    src, store = open_tmp / "src", open_tmp / "store"
    src.mkdir()
    (src / "a.md").write_text("hello\n")
    semfs("ingest", str(src), "--store", str(store), "--model", "hash")
    quiet = semfs("status", "--store", str(store))
    assert "readable by other users" not in quiet.stderr
    subprocess.run(["chmod", "-R", "go+rX", str(store)], check=True)
    loud = subprocess.run(
        [SEMFS, "status", "--store", str(store)], capture_output=True, text=True, check=True
    )
    warnings = [line for line in loud.stderr.splitlines() if "readable by other users" in line]
    assert len(warnings) == 1, loud.stderr
    assert "WARNING" in warnings[0] and f"chmod -R go= {store / 'docs'}" in warnings[0]
    # The store still works, and the advice is enough:
    assert "documents: 1" in loud.stdout
    subprocess.run(["chmod", "-R", "go=", str(store / "docs")], check=True)
    assert "readable" not in semfs("status", "--store", str(store)).stderr


def _tree(root: Path) -> dict[str, tuple[str, int, int]]:
    """Every entry below ``root``: kind, permission bits, uid/gid."""
    out = {}
    for path in sorted(root.rglob("*")):
        st = os.lstat(path)
        kind = "d" if stat.S_ISDIR(st.st_mode) else "f"
        out[path.relative_to(root).as_posix()] = (kind, stat.S_IMODE(st.st_mode), st.st_uid)
    return out


def _as_nobody(*cmd: str) -> int:
    """The exit status of ``cmd`` run as the user nobody (a user with no special rights)."""
    return subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *cmd],
        capture_output=True,
        check=False,
    ).returncode


def _private_source(base: Path) -> Path:
    src = base / "src"
    for rel, mode in [
        ("public.md", 0o644),
        ("private.md", 0o600),
        ("group.md", 0o640),
        ("script.sh", 0o755),
        ("secret/inner.md", 0o644),
        ("open/deeper/page.md", 0o644),
    ]:
        path = src / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {rel}\n\ntext of {rel}\n")
        path.chmod(mode)
    (src / "secret").chmod(0o700)
    (src / "empty" / "nested-empty").mkdir(parents=True)
    (src / "empty").chmod(0o750)
    (src / "open").chmod(0o755)
    return src


@pytest.mark.mount
def test_the_mount_serves_the_source_modes_and_owners(open_tmp: Path) -> None:
    src = _private_source(open_tmp)
    store = open_tmp / "store"
    semfs("ingest", str(src), "--store", str(store), "--model", "hash")
    with mounted(open_tmp / "mnt", "--store", str(store)) as m:
        diff = subprocess.run(["diff", "-r", str(src), str(m.path)], capture_output=True, text=True)
        assert (diff.returncode, diff.stdout, diff.stderr) == (0, "", "")  # empty folders too
        source, served = _tree(src), _tree(m.path)
        assert served.keys() == source.keys()
        for rel, (kind, mode, uid) in source.items():
            assert served[rel] == (kind, mode & 0o555, uid), rel
        assert stat.S_IMODE(os.stat(m.path).st_mode) == stat.S_IMODE(os.stat(src).st_mode) & 0o555


@pytest.mark.mount
@pytest.mark.skipif(os.geteuid() != 0, reason="trying another user (setpriv) needs root")
def test_another_user_gets_what_the_source_grants_it(open_tmp: Path) -> None:
    src = _private_source(open_tmp)
    store = open_tmp / "store"
    semfs("ingest", str(src), "--store", str(store), "--model", "hash")
    with mounted(open_tmp / "mnt", "--store", str(store), "-o", "allow_other") as m:
        # The kernel grants nobody exactly what the source grants nobody.
        checks = [
            ("cat", "public.md"),
            ("cat", "private.md"),
            ("cat", "group.md"),
            ("cat", "secret/inner.md"),
            ("ls", "secret"),
            ("ls", "empty"),
            ("cat", "open/deeper/page.md"),
        ]
        for tool, rel in checks:
            assert _as_nobody(tool, str(m.path / rel)) == _as_nobody(tool, str(src / rel)), rel
        assert _as_nobody("cat", str(m.path / "private.md")) != 0
        assert _as_nobody("cat", str(m.path / "public.md")) == 0
        # Search results quote documents: where nobody may read everything, nobody searches.
        assert _as_nobody("ls", str(m.path / ".search" / "text")) != 0
        assert _as_nobody("cat", str(m.path / ".search" / "text" / "00-results.md")) != 0
        assert os.listdir(m.path / ".search" / "text")  # the owner does
        assert _as_nobody("ls", str(m.path / "open" / ".search" / "text")) == 0


@pytest.mark.mount
def test_empty_folders_come_and_go(tmp_path: Path, store_dir: Path) -> None:
    src = tmp_path / "src"
    (src / "a" / "b").mkdir(parents=True)
    (src / "c").mkdir()
    (src / "c" / "x.md").write_text("x\n")
    semfs("ingest", str(src), "--model", "hash")
    with mounted(tmp_path / "mnt", "--store", str(store_dir)) as m:
        assert sorted(os.listdir(m.path)) == ["a", "c"] and os.listdir(m.path / "a") == ["b"]
        (src / "a" / "b").rmdir()
        (src / "d").mkdir()
        semfs("ingest", str(src))
        wait_until(
            lambda: subprocess.run(["diff", "-r", str(src), str(m.path)]).returncode == 0,
            3.0,
            "the mount shows the new folders",
        )
        assert os.listdir(m.path / "a") == [] and os.listdir(m.path / "d") == []


@pytest.mark.mount
def test_store_and_mount_inside_the_source_are_left_out(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("# A\n\nalpha\n")
    store = src / "store"
    # (--exclude: the test harness keeps the mount's log beside the mountpoint.)
    cmd = ["ingest", str(src), "--store", str(store), "-m", "hash", "--exclude", "*.log", "--json"]
    first = json.loads(semfs(*cmd).stdout)
    assert first["added"] == 1
    second = json.loads(semfs(*cmd).stdout)
    assert (second["added"], second["updated"], second["deleted"]) == (0, 0, 0)
    # The collection folder (STORE/COLLECTION) is what holds the data and the daemon token.
    assert second["skipped"] == [{"path": "store/docs", "reason": "a semfs store (not ingested)"}]
    (src / "mnt").mkdir()
    with mounted(src / "mnt", "--store", str(store)) as m:
        during = json.loads(semfs(*cmd).stdout)
        assert (during["added"], during["updated"], during["deleted"]) == (0, 0, 0)
        assert {"path": "mnt", "reason": "a semfs mount (not ingested)"} in during["skipped"]
        again = json.loads(semfs(*cmd).stdout)
        assert (again["added"], again["updated"], again["deleted"]) == (0, 0, 0)
        # No level deeper on every ingest: the mount is not part of the source it mirrors.
        assert sorted(os.listdir(m.path)) == ["a.md", "store"]
