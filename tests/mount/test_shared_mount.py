"""A mount shared with ``-o allow_other`` keeps each user to what the source lets them read,
under the changes issue 21 found open: a handle held across a re-ingest that makes a file
private, a document deleted while open, folder permission changes under ``--watch``, and the
recent queries of a search folder.

Real mounts, real re-ingests, and a real other user (nobody, through ``setpriv``), so these
run as root only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import NOBODY
from tests.helpers.mounting import mounted, semfs, wait_until

pytestmark = [
    pytest.mark.mount,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user"),
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) missing"),
]


def as_nobody(*cmd: str) -> subprocess.CompletedProcess[str]:
    """``cmd`` run as the user nobody, with no groups."""
    return subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *cmd],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _source(base: Path) -> Path:
    src = base / "src"
    src.mkdir()
    (src / "doc.md").write_text("# Doc\n\nthe public first version\n")
    (src / "gone.md").write_text("# Gone\n\nzebra crossing notes, soon deleted\n")
    (src / "other.md").write_text("# Other\n\nsomething else entirely\n")
    for p in src.iterdir():
        p.chmod(0o644)
    return src


def _watcher_caught_up(mnt: Path) -> None:
    """Wait for a watching mount's first pass (a change made during it is a race of its own)."""

    def synced() -> bool:
        names = os.listxattr(mnt)
        return "user.semfs.synced_at" in names and os.getxattr(mnt, "user.semfs.pending") == b"0"

    wait_until(synced, 30, "the watcher's first pass")


def _mount_args(store: Path, src: Path, how: str) -> list[str]:
    watch = ["--watch", str(src)] if how == "watch" else []
    return ["--store", str(store), "-o", "allow_other", *watch]


@pytest.mark.parametrize("how", ["ingest", "watch"])
def test_a_held_handle_opens_no_new_private_text_to_others(open_tmp: Path, how: str) -> None:
    src, store = _source(open_tmp), open_tmp / "store"
    semfs("ingest", str(src), "--store", str(store), "--model", "hash")
    with mounted(open_tmp / "mnt", *_mount_args(store, src, how)) as m:
        if how == "watch":
            _watcher_caught_up(m.path)
        doc = m.path / "doc.md"
        assert as_nobody("cat", str(doc)).stdout == "# Doc\n\nthe public first version\n"
        # root's handle: the kernel keeps the attributes of the version it reads.
        with open(doc, "rb") as held:
            assert held.read(5) == b"# Doc"
            private = "# Doc\n\nthe PRIVATE second version\n"
            (src / "doc.md").write_text(private)
            (src / "doc.md").chmod(0o600)
            if how == "ingest":
                semfs("ingest", str(src), "--store", str(store))
            wait_until(lambda: doc.read_text() == private, 10, "the new version")
            # nobody cannot open the private version, whatever the kernel still shows.
            cat = as_nobody("cat", str(doc))
            assert cat.returncode != 0 and "PRIVATE" not in cat.stdout, cat
            assert as_nobody("head", "-c", "1", str(doc)).stdout == ""
            # The handle opened before the change keeps reading its version.
            held.seek(0)
            assert held.read() == b"# Doc\n\nthe public first version\n"
        # Closed: other users read what the source grants them, as before.
        assert as_nobody("cat", str(m.path / "other.md")).returncode == 0
        assert as_nobody("cat", str(doc)).returncode != 0


@pytest.mark.parametrize("how", ["ingest", "watch"])
def test_a_document_deleted_while_open_is_gone_for_new_opens(open_tmp: Path, how: str) -> None:
    src, store = _source(open_tmp), open_tmp / "store"
    semfs("ingest", str(src), "--store", str(store), "--model", "hash")
    with mounted(open_tmp / "mnt", *_mount_args(store, src, how)) as m:
        if how == "watch":
            _watcher_caught_up(m.path)
        gone = m.path / "gone.md"
        with open(gone, "rb") as held:
            assert held.read(6) == b"# Gone"
            (src / "gone.md").unlink()
            if how == "ingest":
                semfs("ingest", str(src), "--store", str(store))
            # Not listed, not openable, not a search result, for anyone.
            wait_until(lambda: "gone.md" not in os.listdir(m.path), 10, "gone.md unlisted")
            assert not gone.exists()
            assert as_nobody("cat", str(gone)).returncode != 0
            query = m.path / ".search" / "zebra crossing notes"
            assert not [n for n in os.listdir(query) if n.endswith("gone.md")]
            assert "gone.md" not in (query / "00-results.md").read_text()
            # The handle opened before keeps reading it.
            held.seek(0)
            assert held.read() == b"# Gone\n\nzebra crossing notes, soon deleted\n"
        assert sorted(os.listdir(m.path)) == ["doc.md", "other.md"]


def test_each_user_lists_only_their_own_recent_queries(open_tmp: Path) -> None:
    src, store = _source(open_tmp), open_tmp / "store"
    semfs("ingest", str(src), "--store", str(store), "--model", "hash")
    with mounted(open_tmp / "mnt", "--store", str(store), "-o", "allow_other") as m:
        search = m.path / ".search"
        assert os.listdir(search / "root salary review")  # root asks
        mine = as_nobody("ls", str(search / "public first version"))
        assert mine.returncode == 0 and "doc.md" in mine.stdout, mine
        theirs = as_nobody("ls", "-1", str(search))
        assert theirs.returncode == 0, theirs
        listed = theirs.stdout.splitlines()
        assert "public first version" in listed and "root salary review" not in listed
        listed = os.listdir(search)
        assert "root salary review" in listed and "public first version" not in listed


def test_watch_follows_folder_and_file_permission_changes(open_tmp: Path) -> None:
    src, store = _source(open_tmp), open_tmp / "store"
    (src / "sub").mkdir(mode=0o755)
    (src / "sub" / "page.md").write_text("# Page\n\ninside a folder\n")
    (src / "sub" / "page.md").chmod(0o644)
    semfs("ingest", str(src), "--store", str(store), "--model", "hash")
    with mounted(open_tmp / "mnt", *_mount_args(store, src, "watch")) as m:
        _watcher_caught_up(m.path)
        page, other = m.path / "sub" / "page.md", m.path / "other.md"

        def nobody_reads(path: Path) -> bool:
            return as_nobody("cat", str(path)).returncode == 0

        assert nobody_reads(page) and nobody_reads(other)
        (src / "sub").chmod(0o700)  # the folder's mode
        wait_until(lambda: not nobody_reads(page), 10, "sub/ closed to nobody")
        os.chown(src / "sub", NOBODY, -1)  # the folder's owner
        wait_until(lambda: nobody_reads(page), 10, "sub/ open to its new owner")
        os.chown(src / "sub", 0, NOBODY)  # the folder's group
        (src / "sub").chmod(0o750)
        wait_until(lambda: nobody_reads(page), 10, "sub/ open to its group")
        (src / "other.md").chmod(0o600)  # a file's mode
        wait_until(lambda: not nobody_reads(other), 10, "other.md closed to nobody")
        os.chown(src / "other.md", NOBODY, -1)  # a file's owner
        wait_until(lambda: nobody_reads(other), 10, "other.md open to its new owner")
        assert stat_of(m.path / "sub") == stat_of(src / "sub")


def stat_of(path: Path) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_mode & 0o555, st.st_uid, st.st_gid


def _planted_links(base: Path) -> Path:
    """Issue 29's reproduction: a private folder, a drop folder anyone may write, and links
    nobody planted there to a file in the private folder and to one in an open sibling."""
    src = base / "src"
    for name in ("private", "drop", "open"):
        (src / name).mkdir(parents=True)
    (src / "private" / "p.md").write_text("# P\n\nPRIVATE salary table\n")
    (src / "open" / "o.md").write_text("# O\n\nOPEN but elsewhere\n")
    (src / "drop" / "mine.md").write_text("# Mine\n\nthe drop's own page\n")
    for f in (src / "private" / "p.md", src / "open" / "o.md", src / "drop" / "mine.md"):
        f.chmod(0o644)
    (src / "private").chmod(0o700)
    (src / "drop").chmod(0o777)
    for link, target in (("x.md", "../private/p.md"), ("y.md", "../open/o.md")):
        planted = as_nobody("ln", "-s", target, str(src / "drop" / link))
        assert planted.returncode == 0, planted.stderr
    return src


def test_a_link_reads_nothing_its_reader_could_not_read_in_the_source(open_tmp: Path) -> None:
    """Before: nobody got "Permission denied" from src/drop/x.md and PRIVATE from the mount."""
    src, store = _planted_links(open_tmp), open_tmp / "store"
    assert as_nobody("cat", str(src / "drop" / "x.md")).returncode != 0
    semfs("ingest", str(src), "--store", str(store), "--model", "hash")
    with mounted(open_tmp / "mnt", "--store", str(store), "-o", "allow_other") as m:
        cat = as_nobody("cat", str(m.path / "drop" / "x.md"))
        assert cat.returncode != 0 and "PRIVATE" not in cat.stdout, cat
        grep = as_nobody("grep", "-r", "PRIVATE", str(m.path / "drop"))
        assert "PRIVATE" not in grep.stdout, grep
        # What the source lets nobody read, the mount does too; the owner reads the file.
        assert as_nobody("cat", str(m.path / "drop" / "mine.md")).returncode == 0
        assert "PRIVATE" in (m.path / "private" / "p.md").read_text()
