"""A writable mount shared with another user (root's daemon, `-o allow_other`, user nobody via
setpriv): what nobody writes is nobody's, under nobody's rules, and nobody cannot take what
the others need (issue 39: set-id bits, root-reserved blocks, every descriptor, names semfs
shows in every folder).

Each test mounts its own source; every attacker is a real process of another user.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers.mounting import Mount, mounted, small_ext4, wait_until

pytestmark = pytest.mark.mount

HANG = 60.0  # only catches a hang
NOBODY, OTHER = 65534, 65533
HOLD = (  # opens PATH until refused, prints how many and the errno, holds them until stdin ends
    "import os, sys\n"
    "fds = []\n"
    "try:\n"
    "    while len(fds) < 100000:\n"
    "        fds.append(os.open(sys.argv[1], os.O_RDONLY))\n"
    "except OSError as exc:\n"
    "    print(len(fds), exc.errno, flush=True)\n"
    "sys.stdin.read()\n"
)


def _setpriv(uid: int) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]


def _as(uid: int, *command: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_setpriv(uid), *command],
        capture_output=True,
        text=True,
        timeout=HANG,
        **kwargs,  # type: ignore[arg-type]
    )


def _sh(uid: int, script: str) -> subprocess.CompletedProcess[str]:
    return _as(uid, "sh", "-c", script)


@pytest.fixture(autouse=True)
def _root_and_setpriv() -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to act as another user")


@contextmanager
def _shared_mount(
    base: Path, src: Path, *, open_files: int | None = None, expect_log: tuple[str, ...] = ()
) -> Iterator[Mount]:
    args = ("--store", str(base / "store"), "--watch", str(src), "--writable", "-m", "hash")
    with mounted(
        base / "mnt",
        *args,
        "-o",
        "allow_other",
        open_files=open_files,
        expect_log=expect_log,
    ) as m:
        wait_until(lambda: any(m.path.iterdir()), HANG, "the mount")
        yield m


def _source(base: Path) -> Path:
    src = base / "src"
    src.mkdir(mode=0o777)
    src.chmod(0o777)
    (src / "page.md").write_text("# Page\n\nA page everyone reads.\n")
    (src / "page.md").chmod(0o644)
    return src


def test_a_write_through_the_mount_is_its_writers_and_clears_set_id_bits(open_tmp: Path) -> None:
    """A write through the mount keeps the rule a write to the source has: the writer's
    write clears set-uid and set-gid, and what they make is theirs. Before: nobody's append
    to a set-uid file of root's that nobody may write failed with "I/O error" (the kernel's
    clearing of the bit came to the daemon as nobody's chmod, which the source refused)."""
    src = _source(open_tmp)
    program = src / "tool"
    program.write_bytes(b"#!/bin/sh\necho root\n")
    os.chown(program, 0, NOBODY)
    program.chmod(0o4775)  # root's set-uid program, writable by nobody's group
    mine = src / "mine.sh"
    mine.write_text("#!/bin/sh\n")
    os.chown(mine, NOBODY, NOBODY)
    mine.chmod(0o6755)
    private = src / "private"
    private.write_text("root only\n")
    private.chmod(0o4755)  # root's, and nobody may not write it
    with _shared_mount(open_tmp, src) as m:
        wrote = _sh(NOBODY, f"echo id >> {m.path}/tool")
        assert wrote.returncode == 0, wrote.stderr
        assert _sh(NOBODY, f"echo more >> {m.path}/mine.sh").returncode == 0
        # Neither a write nor a bare chmod clears (or sets) a bit of a file nobody may not write.
        assert _sh(NOBODY, f"echo x >> {m.path}/private").returncode != 0
        assert _sh(NOBODY, f"chmod 755 {m.path}/private").returncode != 0
        assert _sh(NOBODY, f"chmod 4775 {m.path}/tool").returncode != 0
        refused = _sh(NOBODY, f"chown 0 {m.path}/mine.sh")
        assert refused.returncode != 0 and "not permitted" in refused.stderr
        assert _sh(NOBODY, f"echo new > {m.path}/new.md").returncode == 0
    st = program.stat()
    assert program.read_bytes() == b"#!/bin/sh\necho root\nid\n"
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o775), oct(st.st_mode)
    st = mine.stat()
    assert (st.st_uid, st.st_gid) == (NOBODY, NOBODY) and mine.read_text().endswith("more\n")
    assert stat.S_IMODE(st.st_mode) & (stat.S_ISUID | stat.S_ISGID) == 0, oct(st.st_mode)
    assert stat.S_IMODE(private.stat().st_mode) == 0o4755
    st = (src / "new.md").stat()
    assert (st.st_uid, st.st_gid) == (NOBODY, NOBODY)


def test_a_callers_write_stops_at_the_blocks_reserved_for_root(open_tmp: Path) -> None:
    """Before: the daemon kept CAP_SYS_RESOURCE while writing for nobody, who wrote 6.29 MB
    past ext4's root-reserved blocks through the mount."""
    with small_ext4(open_tmp, 16, reserved_percent=50) as disk:
        src = _source(disk)
        fs = os.statvfs(src)
        free_for_users = fs.f_bavail * fs.f_frsize
        assert fs.f_bfree > fs.f_bavail + 1000  # thousands of blocks only root may fill
        with _shared_mount(open_tmp, src) as m:
            dd = _as(NOBODY, "dd", "if=/dev/zero", f"of={m.path}/fill.bin", "bs=64k")
            assert dd.returncode != 0 and "No space left on device" in dd.stderr, dd.stderr
            written = (src / "fill.bin").stat().st_size
            # Root still has its reserve: it writes where nobody could not.
            (m.path / "root.bin").write_bytes(b"\0" * (1 << 20))
        assert (src / "root.bin").stat().st_size == 1 << 20
    assert 0 < written <= free_for_users, (written, free_for_users)


def test_one_user_cannot_take_every_open_file_of_the_mount(open_tmp: Path) -> None:
    """Before: two nobody processes held 19,983 handles against the daemon's 20,000, and then
    root's `cat` through the mount failed with "Too many open files"."""
    src = _source(open_tmp)
    limit = 512
    # The module's rules, not the class under test: an eighth of 512 kept back (64), a
    # quarter of the other 448 for each user.
    per_user = 112
    holders: list[subprocess.Popen[str]] = []

    def hold(uid: int) -> tuple[int, int]:
        proc = subprocess.Popen(
            [*_setpriv(uid), sys.executable, "-c", HOLD, str(mnt / "page.md")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        holders.append(proc)
        assert proc.stdout is not None
        count, err = proc.stdout.readline().split()
        return int(count), int(err)

    mnt = open_tmp / "mnt"
    with _shared_mount(
        open_tmp, src, open_files=limit, expect_log=(r"open files of the mount: refused",)
    ) as m:
        try:
            first, second = hold(NOBODY), hold(NOBODY)
            # Together at the user's bound, each refused with "Too many open files".
            assert first[1] == second[1] == errno.EMFILE
            assert first[0] + second[0] == per_user
            # Root (the mount's owner) and another user still open files through the mount.
            for _ in range(3):
                assert (m.path / "page.md").read_text().startswith("# Page")
            other = _as(OTHER, "cat", f"{m.path}/page.md")
            assert other.returncode == 0, other.stderr
            third = hold(OTHER)
            assert third == (per_user, errno.EMFILE)
        finally:
            for proc in holders:
                assert proc.stdin is not None
                proc.stdin.close()
                proc.wait(HANG)
        # Their files closed, nobody opens again.
        assert _as(NOBODY, "cat", f"{m.path}/page.md").returncode == 0
        log = m.log_text()
    assert "user 65534 holds" in log and f"its bound of {per_user}" in log


# Each attack, and the error: semfs's own (EROFS) wherever the kernel asks it; "File exists"
# where the kernel answers itself, since every folder shows that name already.
RESERVED_ATTACKS = {
    "mkdir {mnt}/pub/fake && mv -T {mnt}/pub/fake {mnt}/pub/.search": "Read-only file system",
    "echo fake > {mnt}/pub/fake.md && mv {mnt}/pub/fake.md {mnt}/pub/.map.md": "Read-only",
    "ln -s ../page.md {mnt}/pub/.map.2.md": "Read-only file system",
    "ln {mnt}/pub/own.md {mnt}/pub/.map.3.md": "Read-only file system",
    "echo x > {mnt}/pub/.map.md": "Read-only file system",
    "mkdir {mnt}/.similar": "File exists",
}


@pytest.mark.parametrize("attack", RESERVED_ATTACKS)
def test_no_writer_makes_a_name_semfs_shows_in_every_folder(open_tmp: Path, attack: str) -> None:
    """Before: `rename(pub/fake, pub/.search)` succeeded, and root then read nobody's
    fabricated 00-results.md in pub/.search/."""
    src = _source(open_tmp)
    (src / "pub").mkdir(mode=0o777)
    (src / "pub").chmod(0o777)
    (src / "pub" / "own.md").write_text("# Own\n\nnobody's page\n")
    os.chown(src / "pub" / "own.md", NOBODY, NOBODY)  # a hard link needs its own file
    with _shared_mount(open_tmp, src) as m:
        done = _sh(NOBODY, attack.format(mnt=m.path))
    assert done.returncode != 0 and RESERVED_ATTACKS[attack] in done.stderr, done.stderr
    names = {p.name for p in src.rglob("*")}
    assert not names & {".search", ".similar", ".map.md", ".map.2.md", ".map.3.md"}, names
