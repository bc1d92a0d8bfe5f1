"""Growth a local user can cause: a file held open across re-ingests keeps its old versions'
chunks (the reader of that handle needs them), and once the handle is closed the daemon
deletes and compacts them, so the store comes back near its size without `semfs compact`.

A real mount, real re-ingests through it, the store's real files on disk.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from semfs.ingest.store.diskspace import allocated_bytes
from tests.helpers.mounting import mounted, semfs, wait_until

pytestmark = pytest.mark.mount

RE_INGESTS = 5


def _write(src: Path, version: int) -> None:
    paragraphs = [
        f"## Section {i}\n\nVersion {version} of paragraph {i}: " + "words to embed " * 40
        for i in range(150)
    ]
    (src / "big.md").write_text("# Big\n\n" + "\n\n".join(paragraphs) + "\n")


def test_old_versions_held_open_are_reclaimed_once_closed(tmp_path: Path) -> None:
    src, store = tmp_path / "src", tmp_path / "store"
    src.mkdir()
    (src / "small.md").write_text("# Small\n\nunchanged\n")
    _write(src, 0)
    semfs("ingest", str(src), "--store", str(store), "--model", "hash")
    with mounted(tmp_path / "mnt", "--store", str(store)) as m:
        semfs("ingest", str(src), "--store", str(store))  # settles the first run's pages
        base = allocated_bytes(store)
        with open(m.path / "big.md", "rb") as held:
            assert held.read(5) == b"# Big"
            for version in range(1, RE_INGESTS + 1):
                _write(src, version)
                semfs("ingest", str(src), "--store", str(store))
            grown = allocated_bytes(store)
            assert grown > 2 * base, (base, grown)  # the old versions are all kept
            held.seek(0)
            assert b"Version 0 of paragraph 149" in held.read()
        # Closed: deleted, then compacted by the daemon itself, without `semfs compact`.
        wait_until(lambda: allocated_bytes(store) < grown * 0.75, 30, "the store compacted")
        assert "Version 5 of paragraph 149" in (m.path / "big.md").read_text()
    # Nothing was left for `semfs compact` to do.
    assert semfs("compact", "--store", str(store)).stdout.startswith("already compact")
