"""The FUSE callbacks without the kernel: called directly, as libfuse would, over real stores
(Qdrant Edge): read-only errno, precise lookup errors, reads, page-cache versions, the kernel
cache's invalidations, a handle's version kept across a re-ingest."""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from semfs.fusefs.mount import kernelcache
from semfs.fusefs.mount.bindings import ENOATTR, FuseOSError
from semfs.fusefs.mount.kernelcache import KernelCache, changed_nodes
from semfs.fusefs.mount.ops import SemfsOperations
from semfs.fusefs.view.pins import GenerationPins
from semfs.fusefs.view.reader import (
    DocumentReader,
)
from semfs.fusefs.view.tree import DIR, InodeMap, Node, Tree
from semfs.ingest.pipeline import ingest
from semfs.ingest.store import Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.schema import ChunkPoint
from tests.helpers.docfixtures import make_pdf
from tests.helpers.mounting import ingest_hash, wait_until
from tests.helpers.trees import IDS, at, record


@pytest.fixture
def store(sample_copy: Path, store_dir: Path) -> Iterator[Store]:
    """The sample corpus ingested into a store of this test's own (free to change it)."""
    ingest_hash(sample_copy, store_dir)
    s = open_store(CollectionAddress(store=store_dir))
    yield s
    s.close()


@pytest.fixture
def ops(ro_store: Store) -> SemfsOperations:
    tree = Tree.build(ro_store.list_documents(), InodeMap(), IDS)
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
    tree = Tree.build(store.list_documents(), inodes, IDS)
    ops = SemfsOperations(tree, DocumentReader(store), kernel=KernelCache(invalidate=False))
    ops.kernel.timeout = 60.0  # how long the kernel may keep a changed file's old size
    data, first = read_all(ops, "/index.mdx")
    assert data == (sample_copy / "index.mdx").read_bytes()
    assert first.keep_cache == 0  # nothing cached yet: either would do
    _, again = read_all(ops, "/index.mdx")
    assert (again.keep_cache, again.direct_io) == (1, 0)  # same version: pages kept
    (sample_copy / "index.mdx").write_bytes(b"new text\n")
    ingest(sample_copy, store, model="hash")
    ops.set_tree(Tree.build(store.list_documents(), inodes, IDS))
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
        Tree.build(store.list_documents(), InodeMap(), IDS), DocumentReader(store)
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
    old = Tree.build([record("a/x.md"), record("a/y.md"), record("b/z.md")], inodes, IDS)
    new = Tree.build([record("a/x.md"), record("a/w.md"), record("b/z.md")], inodes, IDS)
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


def test_a_handle_checks_the_bytes_it_served_in_order(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """A whole file served in order through one handle is checked against its sha256: bytes
    the store changed (same length, so every chunk still fits its span) are named in the log
    with what to run; the same reads of a sound file, or out of order, log nothing."""
    doc = store.get_document("index.mdx")
    assert doc is not None
    ops = SemfsOperations(
        Tree.build(store.list_documents(), InodeMap(), IDS), DocumentReader(store)
    )

    def read(block: int, reverse: bool = False) -> None:
        info = fi()
        ops.open("/index.mdx", info)
        offsets = list(range(0, doc.size, block))
        for offset in reversed(offsets) if reverse else offsets:
            ops.read("/index.mdx", block, offset, info)
        ops.release("/index.mdx", info)

    with caplog.at_level(logging.ERROR):
        read(1000)
        assert not caplog.records  # sound
        chunk = store.get_chunks(doc.path, doc.gen, [doc.chunks - 1])[0]
        i = next(k for k, ch in enumerate(chunk.text) if ch.isalpha())
        bad = chunk.text[:i] + ("X" if chunk.text[i] != "X" else "Y") + chunk.text[i + 1 :]
        dim = store.read_meta().dimension  # type: ignore[union-attr]
        store.upsert_chunks(
            [ChunkPoint(dataclasses.replace(chunk, text=bad), [0.1] * dim, [1], [1.0])]
        )
        ops = SemfsOperations(
            Tree.build(store.list_documents(), InodeMap(), IDS), DocumentReader(store)
        )
        read(1000, reverse=True)
        assert not caplog.records  # out of order: not checked
        read(1000)
    assert [r.getMessage() for r in caplog.records] == [
        f"index.mdx: the bytes served do not match its sha256 (generation {doc.gen}): the store "
        "is damaged; run `semfs check`"
    ]


def test_resolvers_add_virtual_nodes_that_readdir_does_not_list(ops: SemfsOperations) -> None:
    virtual = Node(DIR, ".search", 999, {"st_mode": stat.S_IFDIR | 0o555, "st_nlink": 2})
    ops.resolvers.append(lambda rel: virtual if rel == ".search" else None)
    assert ops.getattr("/.search")["st_mode"] == stat.S_IFDIR | 0o555
    assert ".search" not in [e if isinstance(e, str) else e[0] for e in ops.readdir("/", 0)]
    assert errno_of(ops.getattr, "/.other") == errno.ENOENT


def test_a_handle_keeps_its_version_across_a_reingest(store: Store, sample_copy: Path) -> None:
    """Issue 9: no torn, padded or ESTALE read for a file held open while it is re-ingested."""
    inodes = InodeMap()
    pins = GenerationPins(store)
    reader = DocumentReader(store, cache_bytes=0)  # every read goes to the store
    ops = SemfsOperations(
        Tree.build(store.list_documents(), inodes, IDS),
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
    ops.set_tree(Tree.build(store.list_documents(), inodes, IDS))
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


@pytest.mark.parametrize(("rc", "warned"), [(-errno.EBADF, False), (-errno.EIO, True)])
def test_an_invalidation_after_the_kernel_let_go_is_not_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, rc: int, warned: bool
) -> None:
    """An unmount closes /dev/fuse before the session says it has exited: an invalidation sent
    then gets EBADF, which a mount's log named as a failure ("cannot invalidate  in the
    kernel: EBADF", seen in CI). A real failure (EIO) is still said."""
    monkeypatch.setattr(kernelcache, "session_exited", lambda _fuse: False)
    monkeypatch.setattr(kernelcache, "invalidate_path", lambda _fuse, _path: rc)
    kernel = KernelCache(invalidate=True)
    kernel.attach(1)  # a stand-in pointer: libfuse is never called here
    kernel._queue.put(("", 0, 0))
    wait_until(lambda: kernel.invalidations == 1, 30, "the invalidation sent")
    kernel._queue.put(("", 0, 0))  # and one more: the first one's outcome is logged by now
    wait_until(lambda: kernel.invalidations == 2, 30, "the second invalidation sent")
    kernel.detach()
    said = [r for r in caplog.records if "cannot invalidate" in r.getMessage()]
    assert bool(said) is warned


def test_a_pdf_held_open_across_a_reingest_keeps_its_new_original_once_released(
    tmp_path: Path,
) -> None:
    """A PDF's original (report.pdf) is stored beside its text view's record (report.pdf.md),
    with no record of its own. A handle on the old original deferred the deletion of its old
    generation; at its release the generation to keep was asked of get_document(report.pdf),
    which is None, and every generation of the original went, the new one too: every later
    open read ESTALE (seen in CI: a watched PDF changed while the kernel's release of the last
    read was still on its way)."""
    src = tmp_path / "src"
    src.mkdir()
    make_pdf(src / "report.pdf")
    ingest_hash(src, tmp_path / "store")
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        inodes = InodeMap()
        pins = GenerationPins(store)
        reader = DocumentReader(store, cache_bytes=0)  # every read goes to the store
        ops = SemfsOperations(
            Tree.build(store.list_documents(), inodes, IDS),
            reader,
            kernel=KernelCache(invalidate=False),
            pins=pins,
        )
        old = (src / "report.pdf").read_bytes()
        held = fi()
        ops.open("/report.pdf", held)
        assert ops.read("/report.pdf", len(old) + 1, 0, held) == old
        new = old + b"\n% changed\n"
        (src / "report.pdf").write_bytes(new)
        ingest(src, pins.guard(), model="hash")  # as the daemon's ipc server does
        ops.set_tree(Tree.build(store.list_documents(), inodes, IDS))
        ops.release("/report.pdf", held)  # after the commit: the deferred deletion runs now
        fresh = fi()
        ops.open("/report.pdf", fresh)
        assert ops.read("/report.pdf", len(new) + 1, 0, fresh) == new
        ops.release("/report.pdf", fresh)
