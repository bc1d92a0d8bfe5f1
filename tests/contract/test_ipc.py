"""The mounted daemon's socket (semfs.ingest.store.ipc): real Edge shards, real sockets, real
processes."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from semfs.ingest import errors
from semfs.ingest.errors import (
    SemfsError,
    StoreBusyError,
    StoreLockedError,
    StoreNotFoundError,
    StoreUnavailableError,
)
from semfs.ingest.pipeline import ingest
from semfs.ingest.store import MODES, SparseQuery
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.edge.store import EdgeStore, collection_dir
from semfs.ingest.store.ipc.client import RemoteStore, connect_daemon
from semfs.ingest.store.ipc.server import StoreServer
from semfs.ingest.store.ipc.wire import (
    CONNECT_TIMEOUT,
    MAX_MESSAGE,
    RECV_PIECE,
    SOCKET_NAME,
    TOKEN_NAME,
    recv_frame,
)
from semfs.ingest.store.schema import (
    ChunkPoint,
    ChunkRecord,
    DocumentRecord,
    OutlineEntry,
    ScoredChunk,
    StoreMeta,
)
from semfs.ingest.store.writelock import WRITE_LOCK, CollectionLock
from tests.helpers import SEMFS

DIM = 8
COLLECTION = "docs"

# A daemon stand-in: owns the shard and serves it until its stdin closes, like `semfs mount`.
DAEMON = """
import sys
from pathlib import Path
from semfs.ingest.store.edge.store import EdgeStore
from semfs.ingest.store.ipc.server import StoreServer
store = EdgeStore(Path(sys.argv[1]), sys.argv[2])
store.create(int(sys.argv[3]))
server = StoreServer(store, store.dir)
server.start()
print("ready", flush=True)
sys.stdin.read()
server.close()
store.close()
"""

# An ingest stand-in that takes the collection's write lock, writes, then hangs (kill -9'd).
WRITER = """
import sys
from pathlib import Path
from semfs.ingest.store.ipc.client import connect_daemon
from semfs.ingest.store.schema import StoreMeta
from semfs.ingest.store.writelock import WRITE_LOCK, CollectionLock
remote = connect_daemon(Path(sys.argv[1]), "docs")
CollectionLock(remote.lock_path(WRITE_LOCK), "first").acquire()
remote.write_meta(StoreMeta("hash:8", 8, generation=7))
print("wrote", flush=True)
sys.stdin.read()
"""


# --- helpers ---------------------------------------------------------------------------------


def _vector(seed: int) -> list[float]:
    return [float((seed * 7 + i * i * 3) % 13) - 6.0 + seed / 100 for i in range(DIM)]


def _points(path: str, gen: int, n: int, word: str) -> list[ChunkPoint]:
    points = []
    for i in range(n):
        text = f"{word} chunk {i} of {path}"
        rec = ChunkRecord(path, gen, i, i * 100, i * 100 + 99, i * 3 + 1, i * 3 + 3, text, "H")
        seed = i + 10 * gen + 100 * len(path)  # distinct vectors: no ties in rankings
        points.append(ChunkPoint(rec, _vector(seed), [i + 1, 1000 + gen], [seed / 1000, 1.25]))
    return points


def _ranked(hits: list[ScoredChunk]) -> list[tuple[float, str, int]]:
    """Hits by score, ties in a fixed order: the store ranks ties arbitrarily."""
    return sorted((-round(h.score, 6), h.record.path, h.record.index) for h in hits)


def _doc(path: str, gen: int, n: int) -> DocumentRecord:
    offsets = tuple(range(0, n * 100, 100))
    return DocumentRecord(path, 100 * n, 1700000000.25, "ab" * 32, n, gen, offsets)


@pytest.fixture
def served(store_dir: Path) -> Iterator[tuple[EdgeStore, StoreServer, list[str]]]:
    """An EdgeStore served in this process; the list records on_change calls (by thread)."""
    edge = EdgeStore(store_dir, COLLECTION)
    edge.create(DIM)
    changes: list[str] = []
    server = StoreServer(edge, edge.dir, on_change=lambda: changes.append("changed"))
    server.start()
    try:
        yield edge, server, changes
    finally:
        server.close()
        edge.close()


def _remote(coll_dir: Path) -> RemoteStore:
    remote = connect_daemon(coll_dir, COLLECTION)
    assert isinstance(remote, RemoteStore)
    return remote


@contextmanager
def _child(script: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """A python child running ``script``; ends (stdin closed, then killed) on exit."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _await_line(proc: subprocess.Popen[str], expected: str) -> None:
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline().strip()
    if line != expected:
        proc.kill()
        pytest.fail(f"child said {line!r}, not {expected!r}: {proc.stderr.read()}")


@contextmanager
def _daemon(store_dir: Path, dim: int = 384) -> Iterator[subprocess.Popen[str]]:
    with _child(DAEMON, str(store_dir), COLLECTION, str(dim)) as proc:
        _await_line(proc, "ready")
        yield proc


def _eventually(check: Callable[[], Any], seconds: float = 5.0) -> Any:
    """``check()``'s result once it stops raising SemfsError (the server notices EOF async)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return check()
        except SemfsError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _raw(coll_dir: Path, token: str | None = None) -> socket.socket:
    """A bare connection, authenticated when ``token`` is given."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(coll_dir / SOCKET_NAME))
    if token is not None:
        _send_raw(sock, json.dumps({"hello": token, "pid": os.getpid()}).encode())
        assert "ok" in _recv_raw(sock)
    return sock


def _hung_up(sock: socket.socket) -> bool:
    """Whether the server closed: EOF, or a reset when it left our bytes unread."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _send_raw(sock: socket.socket, body: bytes) -> None:
    sock.sendall(struct.pack(">I", len(body)) + body)


def _recv_raw(sock: socket.socket) -> Any:
    header = sock.recv(4, socket.MSG_WAITALL)
    assert len(header) == 4, "server closed the connection"
    (size,) = struct.unpack(">I", header)
    return json.loads(sock.recv(size, socket.MSG_WAITALL))


def _write_docs(src: Path) -> None:
    (src / "guides").mkdir(parents=True)
    (src / "alpha.md").write_text("# Alpha\n\nRotating an api key is done in settings.\n")
    (src / "beta.md").write_text("# Beta\n\nCustom domains need a CNAME record.\n\nAnd TLS.\n")
    (src / "guides" / "gamma.md").write_text("# Gamma\n\nDeploy with one command.\n")


# --- in-process ------------------------------------------------------------------------------


def test_every_method_round_trips_like_the_store_itself(served: Any) -> None:
    edge, _server, changes = served
    remote = _remote(edge.dir)
    assert remote.backend == "embedded" and remote.collection == COLLECTION
    assert remote.location == f"{edge.dir} (through the mounted daemon, pid {os.getpid()})"
    assert remote.exists() is True
    remote.create(DIM)  # exists already: a no-op, as on the store

    meta = StoreMeta("hash:8", DIM, generation=3, dirty=True)
    remote.write_meta(meta)
    assert remote.read_meta() == edge.read_meta() == meta

    remote.upsert_chunks(_points("a/one.md", 1, 3, "apple") + _points("two.md", 1, 2, "pear"))
    remote.put_document(_doc("a/one.md", 1, 3))
    remote.put_document(_doc("two.md", 1, 2))
    got = remote.get_document("a/one.md")
    assert got == edge.get_document("a/one.md") == _doc("a/one.md", 1, 3)
    assert got is not None and tuple(got.offsets or ()) == (0, 100, 200)  # not compared by ==
    assert remote.get_document("missing.md") is None
    listed = sorted(remote.list_documents(), key=lambda d: d.path)
    assert listed == sorted(edge.list_documents(), key=lambda d: d.path)
    assert [tuple(d.offsets or ()) for d in listed] == [(0, 100, 200), (0, 100)]
    assert remote.get_chunks("a/one.md", 1, [2, 0]) == edge.get_chunks("a/one.md", 1, [2, 0])
    assert [c.index for c in remote.get_chunks("a/one.md", 1, [2, 0])] == [2, 0]

    sparse = SparseQuery([1, 1001], [1.0, 0.5])
    for mode in (m for m in MODES if m != "symbol"):  # a lookup by name: definitions() below
        for under in (None, "a"):
            mine = remote.query(_vector(1), sparse, mode, 10, under=under)
            theirs = edge.query(_vector(1), sparse, mode, 10, under=under)
            # All of them (limit above the count): a tie at the cut-off would pick either.
            assert mine and _ranked(mine) == _ranked(theirs)
    assert remote.query(_vector(1), SparseQuery([], []), "keyword", 4) == []
    # Code chunks carry their outline and the names they define, through the socket too.
    code = ChunkRecord(
        "c.py", 1, 0, 0, 30, 1, 2, "def f():\n    return 1\n", "def f",
        syntax="python",
        outline=(OutlineEntry(1, 2, 1, "def f", "def f():"),),
        symbols=("f",),
    )  # fmt: skip
    remote.upsert_chunks([ChunkPoint(code, _vector(7), [5], [1.0])])
    found = remote.definitions(["f", "g"], 10)
    assert found == edge.definitions(["f", "g"], 10) and [h.record for h in found] == [code]
    assert remote.definitions(["f"], 10, under="a") == [] == remote.definitions(["x"], 10)
    remote.delete_stale_chunks("c.py", None)

    assert remote.chunk_versions() == edge.chunk_versions() == {("a/one.md", 1), ("two.md", 1)}
    assert remote.count_chunks() == edge.count_chunks() == 5
    size = edge.disk_bytes()
    assert size is not None and size > 0 and remote.disk_bytes() == size  # nothing written between

    remote.upsert_chunks(_points("a/one.md", 2, 1, "quince"))
    remote.put_document(_doc("a/one.md", 2, 1))
    remote.delete_stale_chunks("a/one.md", 2)
    assert remote.chunk_versions() == {("a/one.md", 2), ("two.md", 1)}
    remote.delete_documents(["two.md"])
    remote.flush()
    assert remote.count_chunks() == edge.count_chunks() == 1
    assert [d.path for d in edge.list_documents()] == ["a/one.md"]
    # on_change runs after its reply, before this connection's next request is read.
    assert changes == ["changed", "changed"]

    remote.close()
    assert edge.count_chunks() == 1  # the daemon's store stays open
    with _remote(edge.dir) as again:
        assert again.count_chunks() == 1


def test_store_errors_come_back_as_the_same_class(store_dir: Path) -> None:
    empty = EdgeStore(store_dir, COLLECTION)  # no shard yet: reads raise StoreNotFoundError
    server = StoreServer(empty, empty.dir)
    server.start()
    try:
        with _remote(empty.dir) as remote:
            assert remote.exists() is False and remote.read_meta() is None
            with pytest.raises(StoreNotFoundError, match="run `semfs ingest DIR` first"):
                remote.get_chunks("x.md", 1, [0])
            remote.create(DIM)
            # A failure that is no SemfsError is reported, logged, and the server goes on.
            bad = _points("x.md", 1, 1, "w")[0]
            wrong_dim = ChunkPoint(bad.record, [1.0, 2.0], [1], [1.0])
            with pytest.raises(SemfsError, match="mounted daemon failed in upsert_chunks"):
                remote.upsert_chunks([wrong_dim])
            assert remote.count_chunks() == 0
    finally:
        server.close()
        empty.close()


class _FailingStore(EdgeStore):
    """A real store whose count_chunks raises ``error``, as an owner's store may."""

    error: SemfsError

    def count_chunks(self) -> int:
        raise self.error


# One of every error class the front ends raise: each arrives as itself, attributes included.
MOVED_ERRORS = [
    errors.StoreOwnedError("owned by pid 7", 7, "pid 7 (semfs ingest --watch docs)", "watcher"),
    errors.MountError("the mount point is not empty"),
    errors.ToolInputError("k must be 1 to 50"),
    errors.PatternError("bad regular expression"),
    errors.SlowPatternError("pattern too slow, narrow it"),
    errors.PathError("no such file"),
    errors.TokenError("no token named 'ci'"),
]


def test_every_error_class_crosses_the_socket_as_itself(store_dir: Path) -> None:
    # Any class in errors.py is rebuilt by name on the client's side: one defined elsewhere
    # would arrive as its nearest base found there.
    assert all(vars(errors)[type(e).__name__] is type(e) for e in MOVED_ERRORS)
    store = _FailingStore(store_dir, COLLECTION)
    store.create(DIM)
    server = StoreServer(store, store.dir)
    server.start()
    try:
        with _remote(store.dir) as remote:
            for sent in MOVED_ERRORS:
                store.error = sent
                with pytest.raises(SemfsError) as info:
                    remote.count_chunks()
                got = info.value
                assert type(got) is type(sent) and str(got) == str(sent)
                assert vars(got) == vars(sent)
            owned = MOVED_ERRORS[0]
            store.error = owned
            with pytest.raises(errors.StoreOwnedError) as info:
                remote.count_chunks()
            got_owned = (
                info.value.pid,
                info.value.kind,
                info.value.is_mount,
                info.value.by_watcher,
            )
            assert got_owned == (7, "watcher", False, True)
    finally:
        server.close()
        store.close()


def test_files_are_owner_only_and_removed_on_close(store_dir: Path) -> None:
    edge = EdgeStore(store_dir, COLLECTION)
    edge.create(DIM)
    server = StoreServer(edge, edge.dir)
    server.start()
    try:
        for name in (SOCKET_NAME, TOKEN_NAME):
            mode = os.lstat(edge.dir / name).st_mode
            assert stat.S_IMODE(mode) == 0o600, name
        assert stat.S_ISSOCK(os.lstat(edge.dir / SOCKET_NAME).st_mode)
        # A live server is not replaced: a second one refuses to start.
        with pytest.raises(StoreLockedError, match="already serves"):
            StoreServer(edge, edge.dir).start()
        assert _remote(edge.dir).count_chunks() == 0
    finally:
        server.close()
        edge.close()
    assert not (edge.dir / SOCKET_NAME).exists() and not (edge.dir / TOKEN_NAME).exists()
    assert connect_daemon(edge.dir, COLLECTION) is None


def test_clients_see_the_daemon_go_away(served: Any) -> None:
    edge, server, _changes = served
    remote = _remote(edge.dir)
    assert remote.count_chunks() == 0
    # A newer daemon's token (same name, another file) is not removed by the old one's close.
    token_file = edge.dir / TOKEN_NAME
    token_file.unlink()
    token_file.write_text("newer")
    server.close()
    with pytest.raises(StoreUnavailableError, match="lost the connection"):
        remote.count_chunks()
    with pytest.raises(StoreUnavailableError, match="connection is closed"):
        remote.count_chunks()
    assert token_file.read_text() == "newer"
    assert not (edge.dir / SOCKET_NAME).exists()
    assert connect_daemon(edge.dir, COLLECTION) is None
    assert edge.count_chunks() == 0  # the store itself is the daemon's to close


def test_wrong_token_is_refused(served: Any) -> None:
    edge, _server, _changes = served
    token_file = edge.dir / TOKEN_NAME
    token = token_file.read_text()
    with _raw(edge.dir) as sock:
        _send_raw(sock, json.dumps({"hello": "0" * 64, "pid": 1}).encode())
        assert _hung_up(sock)  # hung up without a word
    token_file.write_text("f" * 64)
    with pytest.raises(StoreLockedError, match="refused this process"):
        connect_daemon(edge.dir, COLLECTION)
    token_file.write_text(token)
    assert _remote(edge.dir).exists()


def test_garbage_does_not_stop_the_server(served: Any) -> None:
    edge, _server, _changes = served
    with _raw(edge.dir) as sock:  # before the handshake: dropped
        sock.sendall(b"\xff\xff\xff\xff" + os.urandom(200))
        assert _hung_up(sock)
    with _raw(edge.dir) as sock:  # no hello at all: dropped after the handshake timeout
        assert _hung_up(sock)
    token = (edge.dir / TOKEN_NAME).read_text()
    with _raw(edge.dir, token) as sock:  # authenticated but nonsense: an error, then served
        for body in (
            os.urandom(64).replace(b"{", b"x"),
            b'{"method": "__class__"}',
            b'{"method": "store"}',
            b'{"method": "query", "args": [{"$": "pickle", "v": "x"}]}',
            b'{"method": "get_chunks", "args": ["x.md", 1, {"$": "f32", "v": "***"}]}',
            b"[1, 2]",
        ):
            _send_raw(sock, body)
            reply = _recv_raw(sock)
            assert reply["error"]["type"] == "SemfsError", body
        _send_raw(sock, b'{"method": "count_chunks"}')
        assert _recv_raw(sock) == {"ok": 0}
        _send_raw(sock, b'{"method": "close"}')  # a no-op for the served store
        assert _recv_raw(sock) == {"ok": None}
        sock.sendall(b"\x7f\xff\xff\xff")  # an absurd length: this connection is dropped
        assert _hung_up(sock)
    with _remote(edge.dir) as remote:
        assert remote.count_chunks() == 0 and edge.exists()


def test_a_hello_that_trickles_in_is_dropped_at_its_deadline(served: Any) -> None:
    """The hello has CONNECT_TIMEOUT in all, not per recv. Before: a peer sending a byte of
    its hello every 0.25 s was served in the end (300 such peers held 300 daemon threads)."""
    edge, _server, _changes = served
    token = (edge.dir / TOKEN_NAME).read_text()
    body = json.dumps({"hello": token, "pid": os.getpid()}).encode()
    data = struct.pack(">I", len(body)) + body
    assert len(data) * 0.25 > 4 * CONNECT_TIMEOUT  # the trickle outlasts the deadline
    with _raw(edge.dir) as sock:
        sent = 0
        for byte in data:
            if select.select([sock], [], [], 0.25)[0]:
                break  # the server spoke or hung up
            try:
                sock.sendall(bytes([byte]))
            except OSError:  # hung up meanwhile
                break
            sent += 1
        assert sent < len(data), "the whole hello was taken, a byte at a time"
        assert _hung_up(sock)


def test_a_frame_is_read_in_pieces_of_at_most_one_mib() -> None:
    """What a peer announces is never asked of recv at once: each recv asks RECV_PIECE at
    most, so the memory held grows with what arrives (resident memory cannot show the size
    asked for: the kernel fills only what came)."""
    asked: list[int] = []

    class Recording(socket.socket):
        def recv(self, size: int, *flags: int) -> bytes:
            asked.append(size)
            return super().recv(size, *flags)

    left, right = socket.socketpair()
    reader = Recording(fileno=right.detach())
    payload = os.urandom(3 * RECV_PIECE + 5)

    def write() -> None:
        left.sendall(struct.pack(">I", len(payload)) + payload)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert recv_frame(reader, MAX_MESSAGE) == payload
    finally:
        writer.join(30)
        left.close()
        reader.close()
    assert RECV_PIECE == 1 << 20 and asked[0] == 4
    assert max(asked) <= RECV_PIECE and sum(asked) >= len(payload), asked


def test_writers_take_turns_on_the_write_lock_not_the_connection(served: Any) -> None:
    """Every connection may write (the daemon's own watcher and the write tool write too, so
    a slot per connection excluded only some writers, and an idle client held it for ten
    minutes): writers of a collection take turns on its write lock, in any process."""
    edge, _server, _changes = served
    first, second = _remote(edge.dir), _remote(edge.dir)
    assert first.lock_path(WRITE_LOCK) == edge.lock_path(WRITE_LOCK) == edge.dir / WRITE_LOCK
    held = CollectionLock(first.lock_path(WRITE_LOCK), "first")
    held.acquire()
    first.write_meta(StoreMeta("hash:8", DIM, generation=1))
    waiting = CollectionLock(second.lock_path(WRITE_LOCK), "first")
    with pytest.raises(StoreBusyError, match=f"pid {os.getpid()}"):
        waiting.acquire(timeout=0.3)
    assert second.read_meta() == StoreMeta("hash:8", DIM, generation=1)  # reads are fine
    held.release()
    first.close()  # an idle connection holds nothing
    with waiting.held_for(timeout=5):
        second.write_meta(StoreMeta("hash:8", DIM, generation=4))
    assert edge.read_meta() == StoreMeta("hash:8", DIM, generation=4)
    second.close()


def test_a_killed_writer_releases_the_write_lock(served: Any) -> None:
    edge, _server, _changes = served
    with _child(WRITER, str(edge.dir)) as proc:
        _await_line(proc, "wrote")
        assert edge.read_meta() == StoreMeta("hash:8", DIM, generation=7)
        with _remote(edge.dir) as other:
            lock = CollectionLock(other.lock_path(WRITE_LOCK), "first")
            assert not lock.try_acquire()
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            with lock.held_for(timeout=10):  # flock goes with the process
                other.write_meta(StoreMeta("hash:8", DIM, generation=8))
    assert edge.read_meta() == StoreMeta("hash:8", DIM, generation=8)


def test_concurrent_readers(served: Any) -> None:
    edge, _server, _changes = served
    with _remote(edge.dir) as writer:
        writer.upsert_chunks(_points("r.md", 1, 4, "read"))
        writer.put_document(_doc("r.md", 1, 4))
    results: list[int] = []

    def read() -> None:
        with _remote(edge.dir) as remote:
            results.extend(len(remote.get_chunks("r.md", 1, range(4))) for _ in range(20))

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == [4] * 80


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="long socket paths need Linux")
def test_socket_path_longer_than_sun_path(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    edge = EdgeStore(deep, COLLECTION)
    edge.create(DIM)
    server = StoreServer(edge, edge.dir)
    server.start()
    try:
        assert len(str(edge.dir / SOCKET_NAME)) > 108
        assert _remote(edge.dir).exists()
    finally:
        server.close()
        edge.close()


# --- across processes ------------------------------------------------------------------------


def test_ingest_through_a_daemon_in_another_process(store_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    _write_docs(src)
    with _daemon(store_dir) as proc:
        store = open_store(CollectionAddress(COLLECTION, store=store_dir))
        assert isinstance(store, RemoteStore)
        assert f"pid {proc.pid}" in store.location
        with store:
            report = ingest(src, store, model="hash")
            assert sorted(report.added) == ["alpha.md", "beta.md", "guides/gamma.md"]
            assert report.chunks_embedded >= 3

            (src / "alpha.md").write_text("# Alpha\n\nKeys are rotated from the dashboard.\n")
            (src / "guides" / "gamma.md").unlink()
            report = ingest(src, store, model="hash")
            assert report.updated == ["alpha.md"] and report.deleted == ["guides/gamma.md"]
            assert report.chunks_embedded > 0 and report.unchanged == ["beta.md"]

            assert sorted(d.path for d in store.list_documents()) == ["alpha.md", "beta.md"]
            alpha = store.get_document("alpha.md")
            assert alpha is not None and alpha.offsets
            chunks = store.get_chunks("alpha.md", alpha.gen, range(alpha.chunks))
            assert "dashboard" in "".join(c.text for c in chunks)
            meta = store.read_meta()
            assert meta is not None and meta.model == "hash" and not meta.dirty

            report = ingest(src, store, model="hash")  # nothing changed: nothing written
            assert report.unchanged == ["alpha.md", "beta.md"] and report.chunks_embedded == 0
        assert proc.poll() is None  # the daemon lives on

    # The daemon has exited: the writes are in its shard, which this process can now open.
    with open_store(CollectionAddress(COLLECTION, store=store_dir)) as direct:
        assert isinstance(direct, EdgeStore)
        assert sorted(d.path for d in direct.list_documents()) == ["alpha.md", "beta.md"]
        alpha = direct.get_document("alpha.md")
        assert alpha is not None
        texts = [c.text for c in direct.get_chunks("alpha.md", alpha.gen, range(alpha.chunks))]
        assert "dashboard" in "".join(texts)


def _cli_ingest(src: Path, store_dir: Path) -> dict[str, Any]:
    env = {**os.environ, "SEMFS_STORE": str(store_dir)}
    cli = subprocess.run(
        [SEMFS, "ingest", str(src), "--model", "hash", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stderr
    out: dict[str, Any] = json.loads(cli.stdout)
    return out


def test_cli_ingest_twice_while_mounted(store_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    _write_docs(src)
    with _daemon(store_dir) as proc:
        out = _cli_ingest(src, store_dir)
        assert out["added"] == 3 and out["chunks_embedded"] >= 3
        (src / "beta.md").write_text("# Beta\n\nDomains are verified with a TXT record.\n")
        out = _cli_ingest(src, store_dir)
        assert out["updated_paths"] == ["beta.md"] and out["added"] == 0
        assert out["chunks_embedded"] > 0
        assert proc.poll() is None
    with open_store(CollectionAddress(COLLECTION, store=store_dir)) as direct:
        beta = direct.get_document("beta.md")
        assert beta is not None
        texts = [c.text for c in direct.get_chunks("beta.md", beta.gen, range(beta.chunks))]
        assert "TXT record" in "".join(texts)


def test_opening_a_served_store_leaves_its_shard_alone(store_dir: Path) -> None:
    with (
        _daemon(store_dir, dim=DIM),
        open_store(CollectionAddress(COLLECTION, store=store_dir)) as first,
    ):
        first.upsert_chunks(_points("a.md", 1, 2, "word"))
        first.put_document(_doc("a.md", 1, 2))
        first.write_meta(StoreMeta("hash:8", DIM, generation=1))
        first.flush()
        open_store(
            CollectionAddress(COLLECTION, store=store_dir)
        ).close()  # a second ingest, status...
        first.write_meta(StoreMeta("hash:8", DIM, generation=2))  # the daemon flushes here
        assert first.count_chunks() == 2
    with open_store(CollectionAddress(COLLECTION, store=store_dir)) as direct:
        assert direct.read_meta() == StoreMeta("hash:8", DIM, generation=2)


def test_stale_socket_of_a_killed_daemon(store_dir: Path) -> None:
    coll_dir = collection_dir(store_dir, COLLECTION)
    with _daemon(store_dir, dim=DIM) as proc:
        with pytest.raises(StoreLockedError):
            EdgeStore(store_dir, COLLECTION)  # the daemon owns the shard
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert (coll_dir / SOCKET_NAME).exists() and (coll_dir / TOKEN_NAME).exists()
    assert connect_daemon(coll_dir, COLLECTION) is None
    with open_store(CollectionAddress(COLLECTION, store=store_dir)) as store:
        assert isinstance(store, EdgeStore)  # the lock died with the process
        server = StoreServer(store, coll_dir)
        server.start()  # replaces the stale files
        try:
            assert _remote(coll_dir).exists()
        finally:
            server.close()
    assert not (coll_dir / SOCKET_NAME).exists()


def _rss(pid: int) -> int:
    """Resident bytes of process ``pid`` (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads the daemon's RSS in /proc")
def test_a_peer_announcing_a_huge_frame_makes_no_huge_allocation(store_dir: Path) -> None:
    """Before: each peer that announced a frame of 512 MiB (up to 1 GiB allowed) made the
    daemon allocate and zero it at once: +1.5 GiB of RSS for these three."""
    peers = 3
    with _daemon(store_dir, dim=DIM) as proc:
        coll = store_dir / COLLECTION
        token = (coll / TOKEN_NAME).read_text()
        before = _rss(proc.pid)
        socks = [_raw(coll, token) for _ in range(peers)]
        try:
            for sock in socks:
                sock.sendall(struct.pack(">I", 512 << 20) + b'{"method": ')  # and no more
            # The daemon meets the announcements at once; look at its RSS for a while.
            grown = 0
            for _ in range(20):
                time.sleep(0.1)
                grown = max(grown, _rss(proc.pid) - before)
            assert grown < 64 << 20, f"the daemon grew by {grown >> 20} MiB"
            with _remote(coll) as remote:  # and it still answers
                assert remote.count_chunks() == 0
        finally:
            for sock in socks:
                sock.close()


def test_the_socket_file_is_ours_from_the_moment_it_exists(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop (SIGTERM becomes KeyboardInterrupt) landing right after the bind leaves no
    file: before, daemon.sock stayed behind (it was recorded as ours only lines later)."""
    edge = EdgeStore(store_dir, COLLECTION)
    edge.create(DIM)
    real_bind = socket.socket.bind
    bound: list[str] = []

    def bind_then_stop(self: socket.socket, address: Any) -> None:
        real_bind(self, address)
        if self.family == socket.AF_UNIX:
            bound.append(str(address))
            raise KeyboardInterrupt  # the signal arrives the moment the file exists

    try:
        monkeypatch.setattr(socket.socket, "bind", bind_then_stop)
        with pytest.raises(KeyboardInterrupt):
            StoreServer(edge, edge.dir).start()
        monkeypatch.undo()
        assert len(bound) == 1
        assert [p.name for p in edge.dir.iterdir() if "sock" in p.name or "token" in p.name] == []
        # And the store can be served again.
        server = StoreServer(edge, edge.dir)
        server.start()
        server.close()
    finally:
        edge.close()
