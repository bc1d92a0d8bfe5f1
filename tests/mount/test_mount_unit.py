"""fusefs without the kernel: tree, reader, operations, refresher, options, mount helper.

Real stores throughout (Qdrant Edge, and qdrant-client's local mode as the server stand-in);
the FUSE callbacks are called directly, as libfuse would.
"""

from __future__ import annotations

import ast
import dataclasses
import errno
import logging
import os
import random
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from semfs.fusefs.cli import fastmount
from semfs.fusefs.cli.group import cli
from semfs.fusefs.cli.mounthelper import translate
from semfs.fusefs.mount import kernelcache
from semfs.fusefs.mount.bindings import ENOATTR, FuseOSError, can_invalidate
from semfs.fusefs.mount.daemon import MountConfig, fuse_options, parse_options
from semfs.fusefs.mount.kernelcache import LONG_TIMEOUT, SHORT_TIMEOUT, KernelCache, changed_nodes
from semfs.fusefs.mount.ops import SemfsOperations
from semfs.fusefs.mount.start import check_mountpoint
from semfs.fusefs.mount.unmount import mount_fstype, unmount_commands
from semfs.fusefs.view.pins import GenerationPins
from semfs.fusefs.view.reader import (
    ChunksMissingError,
    CorruptDocumentError,
    DocumentReader,
    LRUCache,
)
from semfs.fusefs.view.refresh import TreeRefresher
from semfs.fusefs.view.tree import DIR, FILE, ROOT_INO, InodeMap, Node, Ownership, Tree
from semfs.ingest.errors import MountError
from semfs.ingest.pipeline import ingest
from semfs.ingest.store import DelegatingStore, Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.schema import ChunkRecord, DirectoryRecord, DocumentRecord, StoreMeta
from tests.helpers import SAMPLE_CORPUS, SEMFS
from tests.helpers.mounting import ingest_hash

OWNER = Ownership(uid=1234, gid=5678, mounted_at=1_000_000.0)


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


@pytest.fixture
def store(sample_copy: Path, store_dir: Path) -> Iterator[Store]:
    """The sample corpus ingested into a store of this test's own (free to change it)."""
    ingest_hash(sample_copy, store_dir)
    s = open_store(CollectionAddress(store=store_dir))
    yield s
    s.close()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, Path]]:
    """The sample corpus ingested once for the tests that only read: (store, source)."""
    root = tmp_path_factory.mktemp("shared")
    source = root / "src"
    shutil.copytree(SAMPLE_CORPUS, source)
    ingest_hash(source, root / "store")
    s = open_store(CollectionAddress(store=root / "store"))
    yield s, source
    s.close()


@pytest.fixture
def ro_store(shared: tuple[Store, Path]) -> Store:
    return shared[0]


@pytest.fixture
def ro_source(shared: tuple[Store, Path]) -> Path:
    return shared[1]


@pytest.fixture
def ops(ro_store: Store) -> SemfsOperations:
    tree = Tree.build(ro_store.list_documents(), InodeMap(), OWNER)
    return SemfsOperations(tree, DocumentReader(ro_store))


def fi(flags: int = os.O_RDONLY) -> Any:
    """A stand-in for libfuse's fuse_file_info (raw_fi=True): the fields open() sets."""
    return SimpleNamespace(flags=flags, fh=0, keep_cache=0, direct_io=0)


def read_all(ops: SemfsOperations, path: str, block: int = 4096) -> tuple[bytes, Any]:
    info = fi()
    ops.open(path, info)
    out = bytearray()
    while chunk := ops.read(path, block, len(out), info):
        out += chunk
    ops.release(path, info)
    return bytes(out), info


# -- tree -------------------------------------------------------------------------------


def test_tree_mirrors_the_records(ro_store: Store, ro_source: Path) -> None:
    tree = Tree.build(ro_store.list_documents(), InodeMap(), OWNER)
    files = source_files(ro_source)
    assert tree.files == len(files) == 42
    assert tree.total_bytes == sum(map(len, files.values()))
    for path, data in files.items():
        node = tree.lookup(path)
        assert node is not None and node.kind == FILE
        st = os.stat(ro_source / path)
        assert node.attrs["st_size"] == len(data)
        # The source's permission bits minus write, and its owner (recorded at ingest).
        assert node.attrs["st_mode"] == stat.S_IFREG | (st.st_mode & 0o555)
        assert node.attrs["st_nlink"] == 1
        assert abs(node.attrs["st_mtime"] - st.st_mtime_ns) < 1000
        assert (node.attrs["st_uid"], node.attrs["st_gid"]) == (st.st_uid, st.st_gid)
    source_dirs = {
        "",
        *(p.relative_to(ro_source).as_posix() for p in ro_source.rglob("*") if p.is_dir()),
    }
    for path in source_dirs:
        node = tree.lookup(path)
        assert node is not None and node.kind == DIR
        subdirs = sum(1 for c in node.children.values() if c.kind == DIR)
        assert node.attrs["st_nlink"] == 2 + subdirs
        assert node.attrs["st_mode"] == stat.S_IFDIR | 0o555
        assert list(node.children) == sorted(node.children)
    assert tree.root.ino == ROOT_INO
    assert len({at(tree, p).ino for p in [*files, *source_dirs]}) == len(files) + len(source_dirs)
    assert tree.lookup("nope") is None


def test_inode_numbers_survive_rebuilds() -> None:
    inodes = InodeMap()
    first = Tree.build([record("a/b.md"), record("a/c.md"), record("d.md")], inodes, OWNER)
    second = Tree.build([record("a/c.md"), record("e/f.md")], inodes, OWNER)
    third = Tree.build([record("a/b.md"), record("a/c.md")], inodes, OWNER)
    ino = {p: at(first, p).ino for p in ("a", "a/b.md", "a/c.md", "d.md")}
    assert at(second, "a/c.md").ino == ino["a/c.md"]
    assert at(second, "a").ino == ino["a"]
    assert at(second, "e/f.md").ino not in ino.values()
    assert at(third, "a/b.md").ino == ino["a/b.md"]
    # A path that changes kind gets a new number: the kernel must not mistake one for the other.
    fourth = Tree.build([record("d.md/x")], inodes, OWNER)
    assert at(fourth, "d.md").ino != ino["d.md"]


def test_a_tree_makes_its_nodes_on_demand_the_same_in_any_order() -> None:
    """Nodes are made at first lookup or listing; numbers and contents do not depend on
    which comes first, and a node is made once."""
    paths = ["a/b/c.md", "a/d.md", "e.md", "f/g/h/i.md"]
    listed = Tree.build([record(p) for p in paths], InodeMap(), OWNER)
    looked_up = Tree.build([record(p) for p in paths], InodeMap(), OWNER)
    deep = at(looked_up, "f/g/h/i.md")  # before its folders
    assert at(looked_up, "f/g/h").children["i.md"] is deep
    assert at(looked_up, "a").children["b"] is at(looked_up, "a/b")

    def shape(tree: Tree) -> dict[str, tuple[str, int, dict[str, int], list[str]]]:
        return {n.path: (n.kind, n.ino, dict(n.attrs), list(n.children)) for n in tree.nodes()}

    assert shape(looked_up) == shape(listed)
    assert len(listed) == len(shape(listed)) == 4 + 6
    assert at(listed, "a").attrs["st_nlink"] == 3 and len(at(listed, "a").children) == 2
    assert "b" in at(listed, "a").children and "x" not in at(listed, "a").children


def test_folders_holding_what_others_cannot_read_are_guarded() -> None:
    """readable_by_all: a search there shows owner-only results."""
    private = dataclasses.replace(record("a/b/secret.md"), mode=0o640)
    public = dataclasses.replace(record("c/open.md"), mode=0o644)
    folders = [DirectoryRecord("d", 0o750, 0, 0, 0), DirectoryRecord("c", 0o755, 0, 0, 0)]
    tree = Tree.build(
        [private, public, record("d/x.md"), record("e.md")], InodeMap(), OWNER, folders
    )
    guarded = {n.path for n in tree.nodes() if n.kind == DIR and not tree.readable_by_all(n.path)}
    assert guarded == {"", "a", "a/b", "d"}


def test_unusable_and_clashing_paths_are_left_out(caplog: pytest.LogCaptureFixture) -> None:
    records = [record(p) for p in ("", "a//b", "../x", "/abs", "x/./y", "a", "a/b", "ok.md")]
    with caplog.at_level(logging.WARNING, logger="semfs.fusefs.view.tree"):
        tree = Tree.build(records, InodeMap(), OWNER)
    assert list(tree.root.children) == ["a", "ok.md"]
    assert at(tree, "a").kind == DIR
    assert tree.files == 2
    assert len(caplog.records) == 6


def test_directory_mtime_is_its_newest_document() -> None:
    tree = Tree.build([record("a/x", mtime=5.0), record("a/b/y", mtime=9.0)], InodeMap(), OWNER)
    assert at(tree, "a").attrs["st_mtime"] == 9 * 10**9
    assert at(tree, "a/b").attrs["st_mtime"] == 9 * 10**9
    empty = Tree.build([], InodeMap(), OWNER)
    assert empty.root.attrs["st_mtime"] == 1_000_000 * 10**9
    assert empty.root.attrs["st_nlink"] == 2


# -- reader -----------------------------------------------------------------------------


def test_reader_ranges_are_the_source_bytes(ro_store: Store, ro_source: Path) -> None:
    reader = DocumentReader(ro_store)
    rnd = random.Random(3)
    for path, data in source_files(ro_source).items():
        doc = reader.document(record(path))
        assert doc is not None and doc.offsets is not None
        assert reader.read(doc, 0, len(data) + 10) == data
        for _ in range(5):
            offset = rnd.randrange(0, len(data) + 5)
            size = rnd.choice([1, 7, 100, 4096, 70000])
            assert reader.read(doc, offset, size) == data[offset : offset + size]
        assert reader.read(doc, len(data), 10) == b""


def test_a_read_fetches_only_the_chunks_it_covers(ro_store: Store, ro_source: Path) -> None:
    counting = CountingStore(ro_store)
    reader = DocumentReader(counting)
    path = "ai/model-context-protocol.mdx"  # the largest sample file: many chunks
    data = (ro_source / path).read_bytes()
    doc = reader.document(record(path))
    assert doc is not None and doc.offsets is not None and doc.chunks > 10
    middle = doc.offsets[5] + 3
    assert reader.read(doc, middle, 10) == data[middle : middle + 10]
    assert counting.chunk_reads == [5]
    span = doc.offsets[8] - doc.offsets[6]
    assert reader.read(doc, doc.offsets[6], span + 1) == data[doc.offsets[6] : doc.offsets[8] + 1]
    assert counting.chunk_reads == [5, 6, 7, 8]
    assert reader.read(doc, middle, 10) == data[middle : middle + 10]  # cached
    assert counting.chunk_reads == [5, 6, 7, 8]


def test_chunk_cache_is_bounded_by_bytes() -> None:
    cache: LRUCache[int, bytes] = LRUCache(max_weight=1000)
    for i in range(10):
        cache.put(i, b"x" * 300, 300)
    assert cache.weight <= 1000 and len(cache) == 3
    assert cache.get(0) is None and cache.get(9) is not None
    cache.put(99, b"y" * 2000, 2000)  # bigger than the bound: not cached at all
    assert cache.get(99) is None and cache.weight <= 1000


def test_reader_reports_a_replaced_version_and_corrupt_offsets(ro_store: Store) -> None:
    reader = DocumentReader(ro_store)
    doc = reader.document(record("index.mdx"))
    assert doc is not None and doc.offsets is not None
    gone = DocumentRecord(
        doc.path, doc.size, doc.mtime, doc.sha256, doc.chunks, doc.gen + 99, doc.offsets
    )
    with pytest.raises(ChunksMissingError):
        reader.read(gone, 0, 10)
    shifted = DocumentRecord(
        doc.path,
        doc.size,
        doc.mtime,
        doc.sha256,
        doc.chunks,
        doc.gen,
        tuple(o + 1 if i else 0 for i, o in enumerate(doc.offsets)),
    )
    with pytest.raises(CorruptDocumentError):
        DocumentReader(ro_store).read(shifted, 0, doc.size)


# -- operations -------------------------------------------------------------------------


def errno_of(call: Any, *args: Any) -> int:
    with pytest.raises(FuseOSError) as info:
        call(*args)
    return int(info.value.errno)


MUTATIONS: list[tuple[str, tuple[Any, ...]]] = [
    ("chmod", ("/index.mdx", 0o777)),
    ("chown", ("/index.mdx", 0, 0)),
    ("create", ("/new.md", 0o644, None)),
    ("fallocate", ("/index.mdx", 0, 0, 10, None)),
    ("link", ("/new.md", "/index.mdx")),
    ("mkdir", ("/newdir", 0o755)),
    ("mknod", ("/fifo", stat.S_IFIFO | 0o644, 0)),
    ("removexattr", ("/index.mdx", "user.semfs.sha256")),
    ("rename", ("/index.mdx", "/moved.mdx")),
    ("rmdir", ("/ai",)),
    ("setxattr", ("/index.mdx", "user.x", b"1", 0)),
    ("symlink", ("/link", "index.mdx")),
    ("truncate", ("/index.mdx", 0)),
    ("unlink", ("/index.mdx",)),
    ("utimens", ("/index.mdx", (0, 0))),
    ("write", ("/index.mdx", b"x", 0, None)),
]


@pytest.mark.parametrize(("name", "args"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_every_mutation_is_erofs(ops: SemfsOperations, name: str, args: tuple[Any, ...]) -> None:
    before = ops.tree
    assert errno_of(getattr(ops, name), *args) == errno.EROFS
    assert ops.tree is before
    assert ops.getattr("/index.mdx")["st_size"] > 0


def test_lookup_errors_are_precise(ops: SemfsOperations) -> None:
    assert errno_of(ops.getattr, "/nope") == errno.ENOENT
    assert errno_of(ops.getattr, "/ai/nope/deeper") == errno.ENOENT
    assert errno_of(ops.readdir, "/index.mdx", 0) == errno.ENOTDIR
    assert errno_of(ops.opendir, "/index.mdx") == errno.ENOTDIR
    assert errno_of(ops.readlink, "/index.mdx") == errno.EINVAL
    assert errno_of(ops.getxattr, "/index.mdx", "user.nope") == ENOATTR == errno.ENODATA
    assert errno_of(ops.access, "/index.mdx", os.W_OK) == errno.EROFS
    assert errno_of(ops.access, "/index.mdx", os.X_OK) == errno.EACCES
    assert ops.access("/ai", os.R_OK | os.X_OK) == 0
    assert errno_of(ops.open, "/index.mdx", fi(os.O_WRONLY)) == errno.EROFS
    assert errno_of(ops.open, "/index.mdx", fi(os.O_RDONLY | os.O_TRUNC)) == errno.EROFS
    assert errno_of(ops.open, "/ai", fi()) == errno.EISDIR
    assert errno_of(ops.read, "/index.mdx", 10, 0, SimpleNamespace(fh=12345)) == errno.ESTALE


def test_readdir_getattr_xattrs(ops: SemfsOperations, ro_source: Path) -> None:
    entries = ops.readdir("/", 0)
    names = [e if isinstance(e, str) else e[0] for e in entries]
    assert names == [".", "..", *sorted(os.listdir(ro_source))]
    for entry in entries:
        assert not isinstance(entry, str) and entry[1]["st_ino"] > 0
    st = ops.getattr("/ai")
    assert stat.S_ISDIR(st["st_mode"])
    sha = ops.getxattr("/index.mdx", "user.semfs.sha256")
    assert len(sha) == 64
    assert set(ops.listxattr("/index.mdx")) == {
        "user.semfs.sha256",
        "user.semfs.generation",
        "user.semfs.chunks",
    }
    assert int(ops.getxattr("/", "user.semfs.pid")) == os.getpid()
    assert ops.statfs("/")["f_files"] == len(ops.tree)


class SkewedClock:
    """The ``time`` module with its monotonic clock moved on at will: the kernel's timeout
    passes when the test says so, however slowly a loaded machine runs the steps between."""

    def __init__(self) -> None:
        self.skew = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.skew

    def monotonic_ns(self) -> int:
        return time.monotonic_ns() + round(self.skew * 1e9)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def test_open_read_and_page_cache_versions(
    store: Store, sample_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = SkewedClock()
    monkeypatch.setattr(kernelcache, "time", clock)
    inodes = InodeMap()
    tree = Tree.build(store.list_documents(), inodes, OWNER)
    ops = SemfsOperations(tree, DocumentReader(store), kernel=KernelCache(invalidate=False))
    ops.kernel.timeout = 60.0  # how long the kernel may keep a changed file's old size
    data, first = read_all(ops, "/index.mdx")
    assert data == (sample_copy / "index.mdx").read_bytes()
    assert first.keep_cache == 0  # nothing cached yet: either would do
    _, again = read_all(ops, "/index.mdx")
    assert (again.keep_cache, again.direct_io) == (1, 0)  # same version: pages kept
    (sample_copy / "index.mdx").write_bytes(b"new text\n")
    ingest(sample_copy, store, model="hash")
    ops.set_tree(Tree.build(store.list_documents(), inodes, OWNER))
    data, changed = read_all(ops, "/index.mdx")
    assert data == b"new text\n"
    assert changed.direct_io == 1  # the kernel may still clamp to the old size: bypass it
    clock.skew += ops.kernel.timeout  # the kernel's timeout has run out
    data, changed = read_all(ops, "/index.mdx")
    assert data == b"new text\n"
    assert (changed.keep_cache, changed.direct_io) == (0, 0)  # settled: old pages dropped
    read_all(ops, "/quickstart.mdx")
    _, other_again = read_all(ops, "/quickstart.mdx")
    assert other_again.keep_cache == 1


def test_store_failure_is_eio_and_logged(store: Store, caplog: pytest.LogCaptureFixture) -> None:
    ops = SemfsOperations(
        Tree.build(store.list_documents(), InodeMap(), OWNER), DocumentReader(store)
    )
    info = fi()
    ops.open("/index.mdx", info)
    store.close()
    with caplog.at_level(logging.ERROR, logger="semfs.fusefs.mount.ops"):
        assert errno_of(ops.read, "/index.mdx", 100, 0, info) == errno.EIO
    assert any("read /index.mdx failed" in r.getMessage() for r in caplog.records)
    assert ops.getattr("/index.mdx")["st_size"] > 0  # the tree still answers


def test_a_swap_invalidates_folders_whose_entries_changed_now_and_once_more_later() -> None:
    """A folder whose attributes stay the same is still invalidated when an entry of it
    comes or goes (its cached listing changes), and once more after LISTING_SETTLE."""
    inodes = InodeMap()
    old = Tree.build([record("a/x.md"), record("a/y.md"), record("b/z.md")], inodes, OWNER)
    new = Tree.build([record("a/x.md"), record("a/w.md"), record("b/z.md")], inodes, OWNER)
    assert at(old, "a").attrs == at(new, "a").attrs
    assert sorted(n.path for n in changed_nodes(old, new)) == ["a", "a/w.md", "a/y.md"]
    kernel = KernelCache(invalidate=True)  # never attached: the queue is only filled
    kernel.swap(old, new, lambda: None)
    queued = []
    while not kernel._queue.empty():
        item = kernel._queue.get()
        assert item is not None
        queued.append((item[0], item[1] == -1))
    assert sorted(queued) == [("a", False), ("a", True), ("a/w.md", False), ("a/y.md", False)]
    assert kernel.published == 1
    kernel.listing_closed("b", 1)  # listed from the tree shown now: nothing to do
    assert kernel._queue.empty()
    kernel.listing_closed("a", 0)  # listed before the swap: again
    assert kernel._queue.get() == ("a", 0, 0)


def test_a_handle_checks_the_bytes_it_served_once_it_reads(ops: SemfsOperations) -> None:
    """The sha256 check starts with a handle's first read (a warm grep's handles never read
    through the daemon) and still covers a whole file served in order."""
    unread, read = fi(), fi()
    ops.open("/index.mdx", unread)
    ops.open("/index.mdx", read)
    assert ops._handles[unread.fh].served is None  # type: ignore[attr-defined]
    handle = ops._handles[read.fh]
    size = ops.getattr("/index.mdx")["st_size"]
    offset = 0
    while chunk := ops.read("/index.mdx", 1000, offset, read):
        offset += len(chunk)
    assert offset == size
    assert handle.served.verified is True  # type: ignore[attr-defined]
    ops.release("/index.mdx", unread)
    ops.release("/index.mdx", read)


def test_resolvers_add_virtual_nodes_that_readdir_does_not_list(ops: SemfsOperations) -> None:
    virtual = Node(DIR, ".search", 999, {"st_mode": stat.S_IFDIR | 0o555, "st_nlink": 2})
    ops.resolvers.append(lambda rel: virtual if rel == ".search" else None)
    assert ops.getattr("/.search")["st_mode"] == stat.S_IFDIR | 0o555
    assert ".search" not in [e if isinstance(e, str) else e[0] for e in ops.readdir("/", 0)]
    assert errno_of(ops.getattr, "/.other") == errno.ENOENT


# -- refresher --------------------------------------------------------------------------


@pytest.fixture
def small_copy(tmp_path: Path) -> Path:
    """Three files of the sample: qdrant-client's local mode is slow to write."""
    dst = tmp_path / "small"
    for rel in ("index.mdx", "quickstart.mdx", "ai/llmstxt.mdx"):
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(SAMPLE_CORPUS / rel, dst / rel)
    return dst


@pytest.mark.parametrize("backend", ["embedded", "server"])
def test_refresher_follows_the_store(small_copy: Path, tmp_path: Path, backend: str) -> None:
    """The polling path the server backend relies on, driven directly against a real store."""
    sample_copy = small_copy
    url = f"file://{tmp_path / 'qdrant'}" if backend == "server" else None
    store = open_store(CollectionAddress(store=tmp_path / "store", url=url))
    try:
        ingest(sample_copy, store, model="hash")
        trees: list[Tree] = []
        refresher = TreeRefresher(store, InodeMap(), OWNER, publish=trees.append)
        first = refresher.load()
        assert trees == [first]
        assert refresher.check() is False  # nothing changed: no listing, no new tree
        ino = at(first, "quickstart.mdx").ino

        (sample_copy / "index.mdx").write_text("changed\n")
        (sample_copy / "ai" / "llmstxt.mdx").unlink()
        (sample_copy / "new" / "deep").mkdir(parents=True)
        (sample_copy / "new" / "deep" / "file.md").write_text("# New\n\nhello\n")
        ingest(sample_copy, store, model="hash")
        assert refresher.check() is True
        tree = trees[-1]
        assert at(tree, "index.mdx").attrs["st_size"] == len("changed\n")
        assert tree.lookup("ai/llmstxt.mdx") is None
        assert tree.lookup("new/deep/file.md") is not None
        assert at(tree, "quickstart.mdx").ino == ino
        assert refresher.check() is False

        # A run under way (dirty) commits documents one by one: every check lists them.
        meta = store.read_meta()
        assert meta is not None
        store.write_meta(StoreMeta(meta.model, meta.dimension, meta.generation + 1, dirty=True))
        assert refresher.check() is False  # same records: no new tree
        store.delete_documents(["index.mdx"])
        assert refresher.check() is True
        assert trees[-1].lookup("index.mdx") is None
    finally:
        store.close()


# -- options, checks, helper, CLI -------------------------------------------------------


def test_parse_and_fuse_options(tmp_path: Path) -> None:
    assert parse_options(["allow_other,uid=5", "attr_timeout=3", "uid=7"]) == {
        "allow_other": True,
        "uid": "7",
        "attr_timeout": "3",
    }
    cfg = MountConfig(tmp_path, options={"attr_timeout": "3", "allow_other": True})
    opts = fuse_options(cfg)
    assert opts["ro"] is True and opts["use_ino"] is True
    assert opts["attr_timeout"] == "3" and opts["allow_other"] is True
    assert opts["fsname"] == "semfs:docs"
    with pytest.raises(MountError, match="read-only"):
        fuse_options(MountConfig(tmp_path, options={"rw": True}))
    # --writable: read-write with short kernel caches, and only over a watched folder.
    with pytest.raises(MountError, match="--writable needs --watch"):
        fuse_options(MountConfig(tmp_path, writable=True))
    rw = fuse_options(MountConfig(tmp_path, watch=tmp_path, writable=True, options={"rw": True}))
    assert rw["ro"] is False and "rw" not in rw and rw["default_permissions"] is True
    assert rw["entry_timeout"] == rw["attr_timeout"] == SHORT_TIMEOUT


def test_mountpoint_checks(tmp_path: Path) -> None:
    with pytest.raises(MountError, match="does not exist"):
        check_mountpoint(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(MountError, match="not a directory"):
        check_mountpoint(tmp_path / "file")
    with pytest.raises(MountError, match="not empty"):
        check_mountpoint(tmp_path)
    check_mountpoint(tmp_path, allow_nonempty=True)
    with pytest.raises(MountError, match="already a mount point"):
        check_mountpoint(Path("/proc"))


@pytest.mark.skipif(sys.platform == "darwin", reason="diskutil there, not fusermount")
def test_unmount_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Whether fusermount is installed is this machine's business (-m "not mount" runs where
    # it is not): PATH decides here, with an executable that is found and never run.
    monkeypatch.setenv("PATH", str(tmp_path))
    assert unmount_commands(Path("/mnt/x")) == [["umount", "/mnt/x"]]
    assert unmount_commands(Path("/mnt/x"), lazy=True) == [["umount", "-l", "/mnt/x"]]
    fusermount = tmp_path / "fusermount3"
    fusermount.write_text("#!/bin/sh\nexit 1\n")
    fusermount.chmod(0o755)
    assert unmount_commands(Path("/mnt/x")) == [[str(fusermount), "-u", "/mnt/x"]]
    assert unmount_commands(Path("/mnt/x"), lazy=True) == [[str(fusermount), "-u", "-z", "/mnt/x"]]


def test_mount_helper_translates_mount8_arguments() -> None:
    args = translate(
        [
            "/srv/store",
            "/mnt/docs",
            "-o",
            "rw,noauto,user,_netdev,collection=acme,allow_other,x-systemd.automount,attr_timeout=2",
        ]
    )
    assert args == [
        "mount",
        "/mnt/docs",
        "--store",
        "/srv/store",
        "--collection",
        "acme",
        "-o",
        "allow_other,attr_timeout=2",
    ]
    assert translate(["http://q:6333", "/mnt/d", "-o", "collection=c", "-v"]) == [
        "-v",
        "mount",
        "/mnt/d",
        "--url",
        "http://q:6333",
        "--collection",
        "c",
    ]
    assert translate(["qdrant", "/mnt/d", "-ourl=http://q:6333,api_key=k", "-t", "semfs"]) == [
        "mount",
        "/mnt/d",
        "--url",
        "http://q:6333",
        "--api-key",
        "k",
    ]
    assert translate(["/s", "/m", "-f", "-o", "collection=x"]) is None  # mount -f: fake
    with pytest.raises(SystemExit):
        translate(["/only-one"])


def test_commands_have_help() -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["mount", "--help"], catch_exceptions=False)
    assert result.exit_code == 0
    assert "Example:" in result.output and "mount.semfs" in result.output
    assert "noauto,user,collection=docs" in result.output
    result = runner.invoke(cli, ["umount", "--help"], catch_exceptions=False)
    assert result.exit_code == 0 and "Example:" in result.output


def test_umount_of_something_not_mounted_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["umount", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output.strip() == f"Error: {tmp_path} is not mounted"


def test_mount_fstype_reads_mountinfo(tmp_path: Path) -> None:
    spaced = tmp_path / "my docs"
    spaced.mkdir()
    escaped = str(spaced).replace(" ", "\\040")
    info = tmp_path / "mountinfo"
    info.write_text(
        f"36 35 0:40 / {escaped} rw,relatime shared:1 - tmpfs tmpfs rw\n"
        f"37 36 0:41 / {escaped} ro,nosuid - fuse.semfs semfs:docs ro,user_id=0\n"
        f"38 35 0:42 / {tmp_path} rw - ext4 /dev/sda1 rw\n"
    )
    assert mount_fstype(spaced, info) == "fuse.semfs"  # the topmost of the two
    assert mount_fstype(tmp_path, info) == "ext4"
    assert mount_fstype(tmp_path / "elsewhere", info) is None


def test_umount_refuses_a_non_semfs_mount_in_one_line() -> None:
    result = CliRunner().invoke(cli, ["umount", "/proc"])
    assert result.exit_code == 1
    assert result.output.strip() == (
        "Error: /proc is a proc mount, not semfs: not unmounting it (--force to do it anyway)"
    )


def test_a_handle_keeps_its_version_across_a_reingest(store: Store, sample_copy: Path) -> None:
    """Issue 9: no torn, padded or ESTALE read for a file held open while it is re-ingested."""
    inodes = InodeMap()
    pins = GenerationPins(store)
    reader = DocumentReader(store, cache_bytes=0)  # every read goes to the store
    ops = SemfsOperations(
        Tree.build(store.list_documents(), inodes, OWNER),
        reader,
        kernel=KernelCache(invalidate=False),
        pins=pins,
    )
    old = (sample_copy / "index.mdx").read_bytes()
    held = fi()
    ops.open("/index.mdx", held)
    assert held.direct_io == 0
    head = ops.read("/index.mdx", 100, 0, held)
    new = b"rewritten while open\n" * 500
    (sample_copy / "index.mdx").write_bytes(new)
    (sample_copy / "quickstart.mdx").unlink()
    gone = fi()
    ops.open("/quickstart.mdx", gone)
    ingest(sample_copy, pins.guard(), model="hash")  # as the daemon's ipc server does
    ops.set_tree(Tree.build(store.list_documents(), inodes, OWNER))
    assert ops.getattr("/index.mdx")["st_size"] == len(old)  # the size the handle reads
    fresh = fi()
    ops.open("/index.mdx", fresh)
    assert fresh.direct_io == 1  # another version than the page cache holds: bypass it
    out = bytearray(head)
    while chunk := ops.read("/index.mdx", 4096, len(out), held):
        out += chunk
    assert bytes(out) == old  # from the store: the old generation was kept
    assert ops.read("/index.mdx", len(new) + 1, 0, fresh) == new
    assert ops.tree.lookup("quickstart.mdx") is not None  # deleted, but open: kept
    ops.release("/index.mdx", held)
    ops.release("/index.mdx", fresh)
    assert ops.getattr("/index.mdx")["st_size"] == len(new)
    assert {g for p, g in store.chunk_versions() if p == "index.mdx"} == {
        store.get_document("index.mdx").gen  # type: ignore[union-attr]
    }
    ops.release("/quickstart.mdx", gone)
    assert store.get_document("quickstart.mdx") is None
    assert not [v for v in store.chunk_versions() if v[0] == "quickstart.mdx"]


def test_long_kernel_timeouts_only_where_changes_are_invalidated(tmp_path: Path) -> None:
    opts = fuse_options(MountConfig(mountpoint=tmp_path))
    expected = LONG_TIMEOUT if can_invalidate() else SHORT_TIMEOUT
    assert opts["entry_timeout"] == opts["attr_timeout"] == expected
    assert (
        fuse_options(MountConfig(mountpoint=tmp_path, options={"attr_timeout": "2"}))[
            "attr_timeout"
        ]
        == "2"
    )


def _click_params(args: list[str]) -> dict[str, Any]:
    command = cli.commands["mount"]
    with command.make_context("mount", list(args)) as ctx:
        return dict(ctx.params)


@pytest.mark.parametrize(
    "args",
    [
        ["MNT"],
        ["MNT", "--store", "STORE", "--log-file", "LOG"],
        ["--store=STORE", "MNT", "-c", "notes", "-f", "-o", "allow_other,uid=1", "-o", "debug"],
        ["MNT", "--collection=x", "--foreground", "--search-dir", ".find", "--log-file=LOG"],
        ["MNT", "--url", "http://q:6333", "--api-key=secret", "--no-views"],
        ["MNT", "-w", "src", "--include", "*.md", "--include=*.txt", "-m", "hash"],
        ["MNT", "--watch=src", "--exclude", "drafts/", "--follow-symlinks"],
    ],
)
def test_plain_mount_arguments_parse_without_click_as_click_does(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`semfs mount`'s click-free start (semfs.fusefs.cli.fastmount) passes what click would."""
    for name in ("SEMFS_STORE", "SEMFS_COLLECTION", "QDRANT_URL", "QDRANT_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "STORE").mkdir()
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path)
    assert fastmount.parse(args, os.environ) is not None
    assert fastmount.parse(args, os.environ) == _click_params(args)
    monkeypatch.setenv("SEMFS_STORE", "elsewhere")
    monkeypatch.setenv("SEMFS_COLLECTION", "c2")
    monkeypatch.setenv("QDRANT_URL", "http://elsewhere:6333")
    assert fastmount.parse(args, os.environ) == _click_params(args)


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--help"],
        ["MNT", "-h"],
        ["MNT", "OTHER"],
        ["MNT", "-k", "3"],
        ["MNT", "--mode=keyword"],
        ["MNT", "--connect-timeout", "5"],
        ["MNT", "--watch", "FILE"],  # click: a file, not a folder
        ["MNT", "--no-views=yes"],
        ["MNT", "-fo", "debug"],
        ["MNT", "--store"],
        ["MNT", "--store", "--log-file"],
        ["MNT", "--store", "FILE"],  # click: a file, not a folder
        ["MNT", "--log-file", "."],  # click: a folder, not a file
        ["MNT", "--", "x"],
        ["MNT", "--store="],
    ],
)
def test_mount_arguments_the_fast_start_is_unsure_of_go_to_click(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("QDRANT_URL", raising=False)
    monkeypatch.delenv("QDRANT_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text("x")
    assert fastmount.parse(args, os.environ) is None
    assert fastmount.parse(["MNT"], {"SEMFS_STORE": ""}) is None


def test_the_mount_start_does_not_import_click() -> None:
    """What a plain `semfs mount` imports before it forks (the console script's own path);
    the daemon imports the engine when it opens the store."""
    code = (
        "import sys\n"
        "from semfs.fusefs import cli\nfrom semfs.fusefs.cli import fastmount\n"
        "assert fastmount.parse(['/mnt/x'], {}) is not None\n"
        "import semfs.fusefs.mount.logfile, semfs.fusefs.mount.start\n"
        "ours = ('click', 'semfs', 'qdrant_edge', 'zipfile', 'uuid', 'tree_sitter')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ours))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded = set(ast.literal_eval(out))
    assert {
        "semfs.fusefs.cli",
        "semfs.fusefs.cli.fastmount",
        "semfs.fusefs.mount.daemon",
        "semfs.fusefs.mount.start",
        "semfs.fusefs.mount.logfile",
    } <= loaded
    assert (
        not {"click", "semfs.fusefs.cli.group", "semfs.fusefs.cli.common", "qdrant_edge"} & loaded
    )
    # Nor what only a search or a followed folder needs: each module is paid at every start.
    reading = {"semfs.ingest.sources", "semfs.ingest.formats", "zipfile", "uuid"}
    reading |= {"semfs.ingest.syntax", "tree_sitter"}  # the code parser: only an ingest
    assert not (reading | {"semfs.ingest.search"}) & loaded


@pytest.mark.mount
def test_the_console_script_leaves_help_and_usage_errors_to_click(tmp_path: Path) -> None:
    """`semfs mount` through the installed script: what the fast start does not take is
    click's, word for word."""

    def mount(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([SEMFS, "mount", *args], capture_output=True, text=True, timeout=60)

    shown = mount("--help")
    assert shown.returncode == 0 and shown.stdout.startswith("Usage: semfs mount [OPTIONS]")
    assert "Example:" in shown.stdout
    bad = mount(str(tmp_path), "--bogus")
    assert bad.returncode == 2 and "No such option '--bogus'" in bad.stderr
    missing = mount()
    assert missing.returncode == 2 and "Missing argument 'MOUNTPOINT'" in missing.stderr
