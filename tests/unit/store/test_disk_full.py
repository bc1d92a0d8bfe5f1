"""A full store disk: one line and exit 1, never SIGBUS; the store stays readable and mountable.

Runs on a real tmpfs of a few MB (mounting one needs root; the test skips otherwise). tmpfs
is the hard case: there even reading a sparse page of Edge's memory-mapped files allocates it.
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.mounting import mounted, semfs, small_tmpfs

pytestmark = pytest.mark.mount

DISK_MB = 100


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path, DISK_MB) as disk:
        yield disk


def make_corpus(root: Path, files: int, words_per_file: int) -> None:
    """Deterministic prose-like files, too many for the small disk's store."""
    rng = random.Random(9)
    vocab = [f"{w}{i}" for i, w in enumerate(["alpha", "beta", "gamma", "delta"] * 500)]
    for n in range(files):
        path = root / f"part{n % 10}" / f"doc{n:04d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [f"# Document {n}\n"]
        for _ in range(words_per_file // 12):
            lines.append(" ".join(rng.choice(vocab) for _ in range(12)) + ".\n")
        path.write_text("".join(lines))


def fill(disk: Path) -> Path:
    """Fill the filesystem to its last block."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (1 << 20, 65536, 4096):
            while True:
                try:
                    f.write(b"\0" * size)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    assert os.statvfs(disk).f_bavail == 0
    return filler


def assert_disk_full_line(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    # The error is one line; a non-TTY run also logs its progress lines (fusefs/cli/progress.py).
    progress = re.compile(
        r"^(Embedding|Syncing|Reading): \d+/\d+ (chunks|files)|^Load(ing|ed) model "
    )
    lines = [line for line in proc.stderr.strip().splitlines() if not progress.match(line)]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("Error: store disk full: ") and "MB free, need about" in lines[0]


def documents(store: Path) -> int:
    out = semfs("status", "--store", str(store), "--json").stdout
    return int(json.loads(out)["documents"])


def test_ingest_stops_cleanly_and_the_store_stays_usable(small_disk: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    make_corpus(src, 500, 3000)  # ~14 MB of text: a ~100 MB store, more than the disk
    store = small_disk / "store"
    proc = semfs("ingest", str(src), "--store", str(store), "--model", "hash", check=False)
    assert_disk_full_line(proc)
    # Read-only commands work and see what was committed before the stop.
    held = documents(store)
    assert 0 < held < 500
    out = semfs("search", "alpha0 beta1", "--store", str(store), "--mode", "keyword", "--json")
    hits = json.loads(out.stdout)
    assert hits  # what was committed is searchable: every hit holds a query word
    for hit in hits:
        assert re.search(r"\b(alpha0|beta1)\b", (src / hit["path"]).read_text()), hit

    # The disk full to the last block: reading still works, writing says why it cannot.
    filler = fill(small_disk)
    assert documents(store) == held
    with mounted(tmp_path / "mnt", "--store", str(store), expect_log=["store disk full"]) as m:
        served = sorted(p for p in m.path.rglob("*.md"))
        assert len(served) == held
        for p in served[:20]:
            assert p.read_bytes() == (src / p.relative_to(m.path)).read_bytes()
        # Through the mounted daemon: one line, and the daemon lives on.
        proc = semfs("ingest", str(src), "--store", str(store), check=False)
        assert_disk_full_line(proc)
        assert m.proc.poll() is None and os.path.ismount(m.path)
        assert len(list(m.path.rglob("*.md"))) == held
    proc = semfs("ingest", str(src), "--store", str(store), check=False)
    assert_disk_full_line(proc)

    # Space again: the same store takes the rest, nothing lost on the way.
    filler.unlink()
    subprocess.run(["mount", "-o", "remount,size=400m", str(small_disk)], check=True)
    semfs("ingest", str(src), "--store", str(store))
    assert documents(store) == 500
    # Every document whole (its chunks in order, hashing to its sha256), the ones written
    # before the stop too; and the last file ingested is found by its own words.
    checked = json.loads(semfs("check", "--store", str(store), "--json").stdout)
    assert (checked["documents"], checked["problems"]) == (500, [])
    last = src / "part9" / "doc0499.md"
    words = " ".join(last.read_text().split("\n")[1].rstrip(".").split()[:12])
    out = semfs("search", words, "--store", str(store), "--mode", "keyword", "-k", "1", "--json")
    assert [h["path"] for h in json.loads(out.stdout)] == ["part9/doc0499.md"]
