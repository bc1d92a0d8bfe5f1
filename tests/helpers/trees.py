"""What the tests of the tree, the reader and the FUSE callbacks share: the files' uid and
gid, records, node lookups, a chunk-counting store (a spy, not a mock)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from semfs.fusefs.view.tree import FileIds, Node, Tree
from semfs.ingest.store import DelegatingStore, Store
from semfs.ingest.store.schema import ChunkRecord, DocumentRecord

IDS = FileIds(uid=1234, gid=5678, mounted_at=1_000_000.0)


def source_files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def at(tree: Tree, path: str) -> Node:
    node = tree.lookup(path)
    assert node is not None, path
    return node


def record(path: str, size: int = 10, mtime: float = 1.5, gen: int = 1) -> DocumentRecord:
    return DocumentRecord(path, size, mtime, "0" * 64, 1, gen)


class CountingStore(DelegatingStore):
    """A real store, wrapped to count the chunks read through it (a spy, not a mock)."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.chunk_reads: list[int] = []

    def get_chunks(self, path: str, gen: int, indexes: Sequence[int]) -> list[ChunkRecord]:
        self.chunk_reads.extend(indexes)
        return self.inner.get_chunks(path, gen, indexes)

    def chunk_texts(self, path: str, gen: int, indexes: Sequence[int]) -> dict[int, str]:
        self.chunk_reads.extend(indexes)  # the reader's way in
        return self.inner.chunk_texts(path, gen, indexes)
