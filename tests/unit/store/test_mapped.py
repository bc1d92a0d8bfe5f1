"""Releasing a store's mapped pages: RSS drops, contents do not change (real mmaps, Linux)."""

from __future__ import annotations

import mmap
import sys
from pathlib import Path

import pytest

from semfs.ingest.store.edge.mapped import release_pages

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux madvise")

SIZE = 4 * 1024 * 1024


def resident_kb(path: Path) -> int:
    """RSS of this process's mappings of ``path``, from /proc/self/smaps."""
    total, current = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(maxsplit=5)
            if len(head) >= 5 and "-" in head[0] and ":" in head[3]:  # a mapping's first line
                current = len(head) == 6 and head[5].strip() == str(path)
            elif current and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total


def touch(m: mmap.mmap) -> int:
    return sum(m[i] for i in range(0, len(m), mmap.PAGESIZE))


def test_shared_pages_are_released_and_read_back_the_same(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    data = store / "page_0.dat"
    data.write_bytes(bytes(range(256)) * (SIZE // 256))
    with open(data, "r+b") as f, mmap.mmap(f.fileno(), SIZE, mmap.MAP_SHARED) as m:
        m[5] = 7  # a change not yet written back must survive too
        checksum = touch(m)
        assert resident_kb(data) >= SIZE // 1024 * 0.9
        assert release_pages(store) >= SIZE
        assert resident_kb(data) < 64
        assert touch(m) == checksum and m[5] == 7
    assert data.read_bytes()[5] == 7


def test_private_mappings_and_other_folders_are_left_alone(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    private, outside = tmp_path / "store" / "private.dat", tmp_path / "outside.dat"
    for path in (private, outside):
        path.write_bytes(b"\1" * SIZE)
    with (
        open(private, "r+b") as f,
        mmap.mmap(f.fileno(), SIZE, mmap.MAP_PRIVATE) as p,
        open(outside, "r+b") as g,
        mmap.mmap(g.fileno(), SIZE, mmap.MAP_SHARED) as o,
    ):
        p[0] = 9  # private: released, this change would be lost
        touch(p)
        touch(o)
        before = resident_kb(private), resident_kb(outside)
        assert release_pages(tmp_path / "store") == 0
        assert (resident_kb(private), resident_kb(outside)) == before
        assert p[0] == 9
