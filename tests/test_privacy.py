"""Nothing private leaks: the store is owner-only, the mount grants no more than the source.

Real stores on disk, real mounts, real other users (nobody) where we are root.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conftest import SEMFS
from mounting import mounted, semfs


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
