"""An ingest run by root over a folder another user can write stores nothing from outside it.

The attack of issue 21: user nobody, who owns a folder inside the source, swaps that folder
with a symlink to a root-only folder (``renameat2(RENAME_EXCHANGE)``, in a loop) while root
runs `semfs ingest`. Checking ``islink()`` and then ``open()``-ing the path loses that race
most of the time; opening every component beneath the source's fd with ``O_NOFOLLOW`` and
reading what ``fstat`` says was opened cannot lose it.

Issue 29: with any semfs mount on the machine, the walk resolved each folder's path to
compare it with the mounts, and a folder swapped meanwhile made that raise (EINVAL): the
whole ingest exited 1. So the race runs twice: alone, and beside a semfs mount.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from tests.helpers import NOBODY, SEMFS
from tests.helpers.mounting import ingest_hash, mounted

SECRET = "TOP SECRET, root only"
FILES = 40
RUNS = 4

# The attacker: swap two names of one folder until told to stop (the stop file appears).
RACER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
a, b, stop = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2]), sys.argv[3]
swaps = 0
while not os.path.exists(stop):
    if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
        sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
    swaps += 1
print(swaps)
"""


def _as_nobody() -> list[str]:
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def _python_for_nobody() -> str:
    """An interpreter user nobody may run (this venv's may live in root's home)."""
    for candidate in (sys.executable, "/usr/bin/python3"):
        probe = subprocess.run([*_as_nobody(), candidate, "-c", "pass"], capture_output=True)
        if probe.returncode == 0:
            return candidate
    pytest.skip("no Python interpreter that user nobody may run")


def _stored_text(store_path: Path) -> dict[str, str]:
    """Every document's stored text, by path (read back through the store interface)."""
    with open_store(CollectionAddress(store=store_path)) as store:
        out = {}
        for doc in store.list_documents():
            chunks = store.chunk_texts(doc.path, doc.gen, range(doc.chunks))
            out[doc.path] = "".join(chunks[i] for i in sorted(chunks))
        return out


@contextlib.contextmanager
def _a_semfs_mount(where: Path) -> Iterator[None]:
    """Some semfs mount on the machine (of a one-file collection elsewhere), for the block."""
    (where / "other").mkdir()
    (where / "other" / "a.md").write_text("other\n")
    ingest_hash(where / "other", where / "other-store")
    with mounted(where / "mnt", "--store", str(where / "other-store")):
        yield


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) not installed")
@pytest.mark.parametrize(
    "beside_a_mount", [False, pytest.param(True, marks=pytest.mark.mount)], ids=["alone", "mount"]
)
def test_a_folder_swapped_for_a_symlink_during_ingest_leaks_nothing(
    open_tmp: Path, tmp_path: Path, beside_a_mount: bool
) -> None:
    with _a_semfs_mount(tmp_path) if beside_a_mount else contextlib.nullcontext():
        _race(open_tmp)


def _race(open_tmp: Path) -> None:
    private = open_tmp / "private"
    private.mkdir(mode=0o700)
    src = open_tmp / "src"
    pub = src / "pub"
    pub.mkdir(parents=True)
    for i in range(FILES):
        (private / f"page-{i:02d}.md").write_text(f"# Page {i}\n\n{SECRET} {i}\n")
        (pub / f"page-{i:02d}.md").write_text(f"# Page {i}\n\npublic text {i}\n")
    os.symlink("../private", src / "swap")
    for path in (src, pub, src / "swap", *pub.iterdir()):
        os.lchown(path, NOBODY, NOBODY)
    python = _python_for_nobody()
    stop = open_tmp / "stop"
    store = open_tmp / "store"
    racer = subprocess.Popen(
        [*_as_nobody(), python, "-c", RACER, str(pub), str(src / "swap"), str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    leaked: dict[str, str] = {}
    try:
        time.sleep(0.2)
        assert racer.poll() is None, racer.communicate()
        for _ in range(RUNS):
            run = subprocess.run(
                [SEMFS, "ingest", str(src), "--store", str(store), "--model", "hash", "--json"],
                capture_output=True,
                text=True,
                timeout=120,
            )
            # A folder that moves under the walk is skipped with a reason; the rest goes in.
            assert run.returncode == 0, run.stderr
            texts = _stored_text(store)
            leaked.update({p: t for p, t in texts.items() if SECRET in t})
    finally:
        stop.touch()
        out, err = racer.communicate(timeout=30)
    assert racer.returncode == 0, err
    assert int(out) > 1000, "the racer barely ran: the test proves nothing"
    assert not leaked, f"root-only text stored under {sorted(leaked)[:5]}"
    # Without the race, the folder nobody owns is ingested whole (whichever name it has now).
    semfs_run = subprocess.run(
        [SEMFS, "ingest", str(src), "--store", str(store), "--model", "hash"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert semfs_run.returncode == 0, semfs_run.stderr
    texts = _stored_text(store)
    assert sum("public text" in t for t in texts.values()) == FILES, sorted(texts)
    assert not any(SECRET in t for t in texts.values())


def test_a_folder_replaced_by_a_link_after_the_scan_is_not_read(tmp_path: Path) -> None:
    """The same swap, made deterministic: between the scan and the read, for a full scan
    and for a watcher's batch (``scan_paths``); a link *file* inside the source still works."""
    from semfs.ingest.sources import read_document, scan, scan_paths

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "page.md").write_text(SECRET)
    src = tmp_path / "src"
    (src / "docs").mkdir(parents=True)
    (src / "docs" / "page.md").write_text("public\n")
    (src / "link.md").symlink_to("docs/page.md")
    full, _ = scan(src)
    batch, _ = scan_paths(src, ["docs/page.md", "link.md"])
    assert [f.path for f in full] == [f.path for f in batch] == ["docs/page.md", "link.md"]
    (src / "docs").rename(src / "was-docs")
    (src / "docs").symlink_to(outside)
    refused = "symlink to a directory (not followed)"
    for found in (full, batch):
        docs = {f.path: read_document(f, root=str(src.resolve())) for f in found}
        assert getattr(docs["docs/page.md"], "reason", "") == refused
        assert getattr(docs["link.md"], "reason", "") == refused
        # --follow-symlinks trusts the link file, never a folder on the way to it.
        assert getattr(read_document(found[0], root=None), "text", "") != SECRET
    (src / "docs").unlink()
    (src / "was-docs").rename(src / "docs")
    assert getattr(read_document(full[1], root=str(src.resolve())), "text", "") == "public\n"


@pytest.mark.mount
def test_the_walk_resolves_no_path_that_a_swap_could_break(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race of issue 29, made certain: beside a semfs mount, the walk resolved each
    folder's path, and a folder swapped between realpath's lstat and its readlink made it
    raise EINVAL, ending the ingest. Here realpath raises that for every path in the source,
    as the race does; the walk must not need it (it compares devices, by fd)."""
    from semfs.ingest.sources import scan, scan_paths

    src = tmp_path / "src"
    (src / "pub").mkdir(parents=True)
    (src / "pub" / "a.md").write_text("a\n")
    real_realpath = os.path.realpath

    def swapped(path: str | os.PathLike[str], *args: object, **kwargs: object) -> str:
        if os.fspath(path).startswith(str(src)):
            raise OSError(22, "Invalid argument", os.fspath(path))  # readlink met a folder
        return real_realpath(path)

    with _a_semfs_mount(tmp_path):
        monkeypatch.setattr(os.path, "realpath", swapped)
        files, skipped = scan(src)
        batch, _ = scan_paths(src, ["pub"])
    assert [f.path for f in files] == [f.path for f in batch] == ["pub/a.md"] and not skipped
