"""A writable mount (`semfs mount MNT --watch SRC --writable`) driven by real tools.

Each tool test checks the bytes in the source, the bytes through the mount, and that a
search through the mount finds the new text. The tool tests share one mount (each in its
own folder) to keep the suite lean; the permission, full-disk and crash tests mount their
own.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import REPO as REPO_ROOT
from tests.helpers.docfixtures import make_pdf
from tests.helpers.mounting import Mount, mounted, small_tmpfs, wait_until

pytestmark = pytest.mark.mount

HANG = 60.0  # only catches a hang: a loaded machine is slow, never this slow
# A lookup the daemon answers takes milliseconds; this catches one held up by another's file.
STALL = 5.0
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def _args(store: Path, src: Path, *more: str) -> tuple[str, ...]:
    return ("--store", str(store), "--watch", str(src), "--writable", "-m", "hash", *more)


def _linked(folder: Path, rel: str, mnt: Path) -> bool:
    """Whether a result link of the query ``folder`` leads to ``mnt/rel``."""
    try:
        names = os.listdir(folder)
    except OSError:  # a new ranking renames the links while we look: ask again
        return False
    for name in names:
        try:
            target = os.readlink(folder / name)
        except OSError:
            continue
        if os.path.normpath(folder / target) == str(mnt / rel):
            return True
    return False


def found(mnt: Path, word: str, rel: str) -> bool:
    """Whether a keyword search through the mount for ``word`` lists ``rel``."""
    return _linked(mnt / ".search" / "@keyword" / "@k=50" / word, rel, mnt)


def wait_found(mnt: Path, word: str, rel: str) -> None:
    wait_until(lambda: found(mnt, word, rel), HANG, f"a search hit for {word} in {rel}")


def same_bytes(src: Path, mnt: Path, rel: str, data: bytes) -> None:
    assert (src / rel).read_bytes() == data
    assert (mnt / rel).read_bytes() == data


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Mount, Path]]:
    base = tmp_path_factory.mktemp("writable")
    src = base / "src"
    src.mkdir()
    (src / "start.md").write_text("# Start\nThe first note mentions quokka.\n")
    make_pdf(src / "report.pdf")
    with mounted(base / "mnt", *_args(base / "store", src)) as m:
        wait_until(lambda: found(m.path, "quokka", "start.md"), HANG, "the first pass")
        yield m, src


def test_cp_writes_through_and_is_found(shared: tuple[Mount, Path], tmp_path: Path) -> None:
    m, src = shared
    (m.path / "cp").mkdir()
    original = tmp_path / "notes.md"
    original.write_text("# Notes\nThe capybara sleeps in the sun.\n")
    subprocess.run(["cp", str(original), str(m.path / "cp" / "notes.md")], check=True)
    same_bytes(src, m.path, "cp/notes.md", original.read_bytes())  # at once: from the source
    wait_found(m.path, "capybara", "cp/notes.md")


def test_mv_renames_at_once_and_the_search_follows(shared: tuple[Mount, Path]) -> None:
    m, src = shared
    (m.path / "mv").mkdir()
    data = b"The axolotl regrows its limbs.\n"
    (m.path / "mv" / "draft.md").write_bytes(data)
    wait_found(m.path, "axolotl", "mv/draft.md")
    subprocess.run(
        ["mv", str(m.path / "mv" / "draft.md"), str(m.path / "mv" / "final.md")], check=True
    )
    assert not (m.path / "mv" / "draft.md").exists() and not (src / "mv" / "draft.md").exists()
    same_bytes(src, m.path, "mv/final.md", data)
    wait_found(m.path, "axolotl", "mv/final.md")
    wait_until(lambda: not found(m.path, "axolotl", "mv/draft.md"), HANG, "the old name's removal")


def test_sed_in_place_is_indexed_with_the_new_text(shared: tuple[Mount, Path]) -> None:
    m, src = shared
    (m.path / "sed").mkdir()
    (m.path / "sed" / "page.md").write_text("The pangolin eats ants.\n")
    subprocess.run(["sed", "-i", "s/pangolin/okapi/", str(m.path / "sed" / "page.md")], check=True)
    same_bytes(src, m.path, "sed/page.md", b"The okapi eats ants.\n")
    wait_found(m.path, "okapi", "sed/page.md")
    wait_until(lambda: not found(m.path, "pangolin", "sed/page.md"), HANG, "the old text's removal")


def test_rsync_copies_a_tree_byte_for_byte(shared: tuple[Mount, Path]) -> None:
    m, src = shared
    subprocess.run(["rsync", "-a", f"{REPO_ROOT / 'docs'}/", f"{m.path / 'rsync'}/"], check=True)
    subprocess.run(["diff", "-r", str(REPO_ROOT / "docs"), str(m.path / "rsync")], check=True)
    subprocess.run(["diff", "-r", str(REPO_ROOT / "docs"), str(src / "rsync")], check=True)
    (m.path / "rsync" / "extra.md").write_text("The narwhal tusk is a tooth.\n")
    subprocess.run(
        ["rsync", "-a", str(m.path / "rsync" / "extra.md"), str(m.path / "rsync" / "copy.md")],
        check=True,
    )
    same_bytes(src, m.path, "rsync/copy.md", b"The narwhal tusk is a tooth.\n")
    wait_found(m.path, "narwhal", "rsync/copy.md")


def test_tar_extracts_a_tree_byte_for_byte(shared: tuple[Mount, Path], tmp_path: Path) -> None:
    m, src = shared
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "deep.md").write_text("The wombat digs burrows.\n")
    (tree / "a" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (tree / "a" / "run.sh").chmod(0o750)
    archive = tmp_path / "t.tar"
    subprocess.run(["tar", "-C", str(tree), "-cf", str(archive), "."], check=True)
    (m.path / "tar").mkdir()
    subprocess.run(["tar", "-C", str(m.path / "tar"), "-xpf", str(archive)], check=True)
    subprocess.run(["diff", "-r", str(tree), str(m.path / "tar")], check=True)
    # Its root, as `tar x` into the mount's root sets it: the source folder itself.
    st = src.stat()
    os.chown(m.path, st.st_uid, st.st_gid)
    os.utime(m.path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (src / "tar" / "a" / "run.sh").stat().st_mode & 0o777 == 0o750
    same_bytes(src, m.path, "tar/a/b/deep.md", b"The wombat digs burrows.\n")
    wait_found(m.path, "wombat", "tar/a/b/deep.md")


def test_git_init_and_commit_work_in_the_mount(shared: tuple[Mount, Path]) -> None:
    m, src = shared
    repo = m.path / "repo"
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(repo.parent),
    }

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
        ).stdout

    repo.mkdir()
    git("init", "-q")
    (repo / "log.md").write_text("The ibex climbs the dam.\n")
    git("add", "log.md")
    git("commit", "-qm", "first")
    (repo / "log.md").write_text("The ibex climbs the dam.\nThe tapir swims.\n")
    git("commit", "-qam", "second")
    assert git("log", "--format=%s").split() == ["second", "first"]
    git("fsck", "--strict")
    assert git("status", "--porcelain") == ""
    assert git("show", "HEAD~1:log.md") == "The ibex climbs the dam.\n"
    same_bytes(src, m.path, "repo/log.md", b"The ibex climbs the dam.\nThe tapir swims.\n")
    wait_found(m.path, "tapir", "repo/log.md")


def test_an_editors_atomic_save_replaces_the_file(shared: tuple[Mount, Path]) -> None:
    m, src = shared
    (m.path / "edit").mkdir()
    target = m.path / "edit" / "todo.md"
    target.write_text("Feed the marmot.\n")
    target.chmod(0o640)
    wait_found(m.path, "marmot", "edit/todo.md")
    # As vim and VS Code save: a temporary file beside it, fsync, then rename over it.
    tmp = m.path / "edit" / ".todo.md.swp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
    os.write(fd, b"Feed the marmot.\nWalk the dingo.\n")
    os.fsync(fd)
    os.close(fd)
    os.rename(tmp, target)
    same_bytes(src, m.path, "edit/todo.md", b"Feed the marmot.\nWalk the dingo.\n")
    assert not (src / "edit" / ".todo.md.swp").exists()
    assert (src / "edit" / "todo.md").stat().st_mode & 0o777 == 0o640
    wait_found(m.path, "dingo", "edit/todo.md")


def test_a_file_open_for_writing_is_indexed_only_once_closed(shared: tuple[Mount, Path]) -> None:
    m, _src = shared
    (m.path / "held").mkdir()
    with open(m.path / "held" / "long.log", "w") as f:
        f.write("The first half names the gecko.\n")
        f.flush()
        assert (m.path / "held" / "long.log").read_text() == "The first half names the gecko.\n"
        # A change made after ours, and searchable: its batch came after our write.
        (m.path / "held" / "other.md").write_text("The heron waits.\n")
        wait_found(m.path, "heron", "held/other.md")
        assert not found(m.path, "gecko", "held/long.log")
        f.write("The second half names the lemur.\n")
    wait_found(m.path, "lemur", "held/long.log")
    assert found(m.path, "gecko", "held/long.log")


def test_racing_writes_end_with_the_last_closed_version_indexed(shared: tuple[Mount, Path]) -> None:
    m, _src = shared
    (m.path / "race").mkdir()
    path = m.path / "race" / "counter.md"
    for i in range(30):
        path.write_text(f"version {i} of the counter\n" * (i + 1))
    last = hashlib.sha256(path.read_bytes()).hexdigest().encode()

    def indexed() -> bytes | None:
        try:
            return os.getxattr(path, "user.semfs.sha256")
        except OSError:
            return None

    wait_until(lambda: indexed() == last, HANG, "the last version indexed")


def test_one_long_word_stalls_no_other_call(shared: tuple[Mount, Path]) -> None:
    # Issue 39.3: a 512 KiB word written through the mount held the daemon's GIL in BM25
    # (quadratic in a word's length) while it was indexed: every FUSE call waited, a stat 58.7 s.
    m, _src = shared
    (m.path / "word").mkdir()
    slowest = [0.0]
    done = threading.Event()

    def lookups() -> None:  # names the kernel has not cached: each lookup reaches the daemon
        for i in range(1_000_000):
            if done.is_set():
                return
            began = time.monotonic()
            with contextlib.suppress(FileNotFoundError):
                os.stat(m.path / "word" / f"absent-{i}")
            slowest[0] = max(slowest[0], time.monotonic() - began)
            time.sleep(0.02)

    path = m.path / "word" / "one.log"
    data = b"y" * (1024 * 1024) + b"\n"  # twice the report's word: a clear stall before
    digest = hashlib.sha256(data).hexdigest().encode()

    def indexed() -> bool:
        try:
            return os.getxattr(path, "user.semfs.sha256") == digest
        except OSError:
            return False

    looker = threading.Thread(target=lookups)
    looker.start()
    try:
        path.write_bytes(data)
        wait_until(indexed, HANG, "the word indexed")
    finally:
        done.set()
        looker.join()
    assert slowest[0] < STALL, f"a lookup took {slowest[0]:.1f} s while the word was indexed"
    wait_found(m.path, "y" * 64, "word/one.log")  # a search finds it by its first 64 characters


def test_search_folders_and_text_views_stay_read_only(shared: tuple[Mount, Path]) -> None:
    m, src = shared
    view = m.path / "report.pdf.md"
    wait_until(view.exists, HANG, "the PDF's text view")
    for attempt in (
        lambda: view.write_text("x"),
        view.unlink,
        lambda: os.rename(view, m.path / "stolen.md"),
        lambda: os.chmod(view, 0o600),
        lambda: (m.path / ".search" / "quokka" / "new.md").write_text("x"),
        lambda: os.rename(m.path / "start.md", m.path / ".search" / "quokka" / "start.md"),
    ):
        with pytest.raises(OSError) as info:
            attempt()
        assert info.value.errno == errno.EROFS
    assert not (src / "report.pdf.md").exists() and (src / "start.md").exists()
    # The original itself is the source's file: writable.
    with open(m.path / "report.pdf", "ab") as f:
        f.write(b"\n")
    assert (src / "report.pdf").read_bytes().endswith(b"\n")


def test_without_writable_the_mount_is_read_only(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("alpha\n")
    args = ("--store", str(tmp_path / "store"), "--watch", str(src), "-m", "hash")
    with mounted(tmp_path / "mnt", *args) as m:
        wait_until((m.path / "a.md").exists, HANG, "the first pass")
        for attempt in (
            lambda: (m.path / "b.md").write_text("x"),
            lambda: (m.path / "a.md").write_text("x"),
            lambda: os.mkdir(m.path / "d"),
            (m.path / "a.md").unlink,
        ):
            with pytest.raises(OSError) as info:
                attempt()
            assert info.value.errno == errno.EROFS
    assert sorted(os.listdir(src)) == ["a.md"]


def test_kill_9_of_the_daemon_loses_nothing_closed(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    data = os.urandom(3 << 20)
    with mounted(tmp_path / "mnt", *_args(tmp_path / "store", src)) as m:
        with open(m.path / "big.bin", "wb") as f:
            f.write(data)
        (m.path / "note.md").write_text("closed before the kill\n")
        os.kill(m.pid, signal.SIGKILL)
        m.proc.wait(HANG)
    assert (src / "big.bin").read_bytes() == data
    assert (src / "note.md").read_text() == "closed before the kill\n"


def test_a_full_disk_reaches_the_writer(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path, 4) as disk:
        src = disk / "src"
        src.mkdir()
        # The filler files are not indexed: a batch reading one would keep its blocks taken
        # after the unlink below, until the batch closed it.
        args = _args(tmp_path / "store", src, "--exclude", "*.bin")
        with mounted(tmp_path / "mnt", *args) as m:
            with pytest.raises(OSError) as info, open(m.path / "fill.bin", "wb") as f:
                for _ in range(16):
                    f.write(b"\0" * (1 << 20))
                    f.flush()
            assert info.value.errno == errno.ENOSPC
            proc = subprocess.run(
                ["dd", "if=/dev/zero", f"of={m.path / 'dd.bin'}", "bs=1M", "count=8"],
                capture_output=True,
                text=True,
            )
            assert proc.returncode != 0 and "No space left on device" in proc.stderr
            (m.path / "fill.bin").unlink()
            (m.path / "dd.bin").unlink()
            (m.path / "after.md").write_text("room again\n")
            assert (src / "after.md").read_text() == "room again\n"


def _as_nobody(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NOBODY, "sh", "-c", script], capture_output=True, text=True)


def test_nobody_cannot_change_what_the_source_refuses_them(open_tmp: Path) -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to act as another user")
    # The source one folder deeper than the mount: a relative link planted in it leads the
    # daemon (were it to follow) somewhere else than the kernel (which follows it from MNT).
    src = open_tmp / "deep" / "src"
    src.mkdir(mode=0o755, parents=True)
    src.parent.chmod(0o755)
    (src / "owned.md").write_text("root's note\n")
    (src / "owned.md").chmod(0o644)
    (src / "shared.md").write_text("everyone may write this, for now\n")
    (src / "shared.md").chmod(0o666)
    (src / "open").mkdir()
    (src / "open").chmod(0o1777)  # as /tmp: anyone creates, only owners delete
    (src / "open" / "dir").mkdir()
    (src / "open" / "dir").chmod(0o777)
    outside = open_tmp / "deep" / "outside"
    outside.mkdir()
    outside.chmod(0o777)
    # Long kernel caches: what the kernel believes stays as it was first seen, so the daemon's
    # own checks are what stands between nobody and the source once the source changes.
    # open/ is not indexed: no refresh of the tree invalidates what the kernel holds of it.
    opts = "allow_other,attr_timeout=3600,entry_timeout=3600"
    mnt = open_tmp / "mnt"
    with mounted(mnt, *_args(open_tmp / "store", src, "--exclude", "open", "-o", opts)) as m:
        wait_until((m.path / "owned.md").exists, HANG, "the mount")
        attacks = {
            "create": f"echo x > {mnt}/new.md",
            "write": f"echo x >> {mnt}/owned.md",
            "truncate": f": > {mnt}/owned.md",
            "rename": f"mv {mnt}/owned.md {mnt}/open/taken.md",
            "delete": f"rm -f {mnt}/owned.md",
            "chmod": f"chmod 666 {mnt}/owned.md",
            "mkdir": f"mkdir {mnt}/d",
            "rmdir": f"rmdir {mnt}/open/dir",  # the sticky bit refuses it
        }
        for what, script in attacks.items():
            assert _as_nobody(script).returncode != 0, what
        # The kernel saw shared.md writable by all (cached); the source then closed it.
        assert _as_nobody(f"ls -l {mnt}/shared.md {mnt}/open/dir").returncode == 0
        (src / "shared.md").chmod(0o644)
        assert _as_nobody(f"echo x >> {mnt}/shared.md").returncode != 0
        # A link planted in the source where the kernel saw a folder leads nowhere.
        (src / "open" / "dir").rmdir()
        (src / "open" / "dir").symlink_to("../../outside")
        assert _as_nobody(f"echo x > {mnt}/open/dir/planted").returncode != 0
        assert not (outside / "planted").exists()
        # What the source allows, nobody may do, and what they create is theirs.
        assert _as_nobody(f"echo mine > {mnt}/open/mine.md").returncode == 0
        st = (src / "open" / "mine.md").stat()
        assert (st.st_uid, st.st_gid) == (65534, 65534)
    assert (src / "owned.md").read_text() == "root's note\n"
    assert (src / "shared.md").read_text() == "everyone may write this, for now\n"
    assert sorted(os.listdir(src)) == ["open", "owned.md", "shared.md"]
    assert sorted(os.listdir(src / "open")) == ["dir", "mine.md"]


def test_listings_show_dot_entries_and_not_the_text_views(shared: tuple[Mount, Path]) -> None:
    """`ls -a` shows `.` and `..` (entries with inode 0 are hidden by glibc); a converted file's
    text view is not listed, only reachable by name, so `git add .` in the mount commits the
    source folder's own files and never generated text (issue 41)."""
    m, src = shared
    listed = subprocess.run(
        ["ls", "-a", str(m.path)], capture_output=True, text=True, check=True
    ).stdout.split()
    assert listed[:2] == [".", ".."] and "report.pdf" in listed, listed
    assert "report.pdf.md" not in listed and "report.pdf.md" not in os.listdir(m.path)
    wait_until((m.path / "report.pdf.md").exists, HANG, "the PDF's text view, by name")
    assert (m.path / "report.pdf.md").read_text().strip()

    repo = m.path / "git-views"
    repo.mkdir()
    shutil.copyfile(src / "report.pdf", repo / "report.pdf")
    (repo / "notes.md").write_text("# Notes\n")
    wait_until((repo / "report.pdf.md").exists, HANG, "the copy's text view")
    git = ["git", "-c", "init.defaultBranch=main", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True, timeout=60)
    subprocess.run([*git, "add", "."], check=True, timeout=60)
    tracked = subprocess.run(
        [*git, "ls-files"], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    assert tracked == ["notes.md", "report.pdf"], tracked
    shutil.rmtree(src / "git-views")
