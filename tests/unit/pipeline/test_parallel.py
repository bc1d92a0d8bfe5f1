"""Files read in parallel (issue 38.2): the bounded stream of :mod:`semfs.ingest.parallel`,
the pool of bounded extraction workers, and an ingest with N readers giving the store one
reader gives."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from semfs.ingest import formats, parallel
from semfs.ingest.embedding.embedder import HashEmbedder
from semfs.ingest.formats import worker
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Searcher
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from tests.helpers.docfixtures import make_all, make_bad
from tests.helpers.mounting import ingest_hash

WAIT = 60.0  # seconds a test waits for threads that should meet at once (never reached)


def test_the_stream_keeps_the_order_and_takes_a_bounded_number_ahead() -> None:
    taken: list[int] = []

    def items() -> Any:
        for i in range(50):
            taken.append(i)
            yield i

    # Each even item ends only once the next one has: results come done out of order.
    ended = [threading.Event() for _ in range(50)]

    def work(i: int) -> int:
        if i % 2 == 0:
            assert ended[i + 1].wait(WAIT), f"item {i + 1} never ran beside item {i}"
        ended[i].set()
        return i * i

    got = []
    for item, result in parallel.stream(items(), work, jobs=4, window=6):
        # What has been taken is what was given plus at most the window.
        assert len(taken) <= len(got) + 1 + 6
        got.append((item, result))
    assert got == [(i, i * i) for i in range(50)]


def test_the_stream_runs_jobs_at_once() -> None:
    meet = threading.Barrier(3, timeout=WAIT)  # three calls must be under way together

    def work(i: int) -> str:
        meet.wait()
        return threading.current_thread().name

    names = [name for _i, name in parallel.stream(range(9), work, jobs=3)]
    assert len(set(names)) == 3 and threading.current_thread().name not in names


def test_unordered_gives_each_result_once_and_one_job_uses_no_thread() -> None:
    got = parallel.stream(range(20), str, jobs=3, ordered=False)
    assert sorted(got) == sorted((i, str(i)) for i in range(20))
    names = {n for _i, n in parallel.stream(range(3), lambda _: threading.current_thread().name)}
    assert names == {threading.current_thread().name}


def test_an_error_reaches_the_caller_in_its_turn_and_leaving_stops_the_rest() -> None:
    done: list[int] = []

    def work(i: int) -> int:
        if i == 3:
            raise ValueError("three")
        done.append(i)
        return i

    got = []
    with pytest.raises(ValueError, match="three"):
        for i, _ in parallel.stream(range(1000), work, jobs=2, window=4):
            got.append(i)
    assert got == [0, 1, 2]
    assert len(done) < 20  # the rest of the thousand were never started


def _extracts_all(pool: worker.WorkerPool, files: list[Path], jobs: int) -> None:
    """``files`` extracted by ``pool``'s children, ``jobs`` at once, as in this process."""
    work = [(p.name, p.read_bytes()) for p in files]
    results = list(
        parallel.stream(work, lambda w: pool.extract(formats.format_of(w[0]), *w), jobs=jobs)
    )
    for (name, data), got in results:
        assert got == formats.extract(name, data, isolated=False), name


def test_the_pool_never_runs_more_children_than_its_jobs(tmp_path: Path) -> None:
    make_all(tmp_path)
    files = sorted(p for p in tmp_path.iterdir() if formats.format_of(p.name))
    pool = worker.WorkerPool(jobs=2)
    try:
        _extracts_all(pool, files * 2, jobs=6)
        assert 1 <= pool.started <= 2
    finally:
        pool.close()


def test_the_pools_children_are_bounded_in_memory_together(tmp_path: Path) -> None:
    """Issue 46 attack 8: each child's cap alone let `-j 64` take 128 GiB. However many jobs
    are asked (at start or by widen), no more children run than fit in the pool's total."""
    make_all(tmp_path)
    files = sorted(p for p in tmp_path.iterdir() if formats.format_of(p.name))
    memory = worker.MEMORY_BYTES
    pool = worker.WorkerPool(jobs=8, memory=memory, total=2 * memory + memory // 2)
    try:
        assert pool.jobs == 2
        pool.widen(64)
        assert pool.jobs == 2
        _extracts_all(pool, files * 3, jobs=8)
        assert 1 <= pool.started <= 2
    finally:
        pool.close()
    # A machine with less than one child's cap still extracts, one file at a time.
    assert worker.WorkerPool(jobs=4, memory=memory, total=memory // 2).jobs == 1
    assert worker.WorkerPool(jobs=3, memory=memory, total=100 * memory).jobs == 3
    assert worker.total_memory() > 0


def _contents(store_dir: Path) -> dict[str, Any]:
    """Everything a reader can see of a store: records, chunks, vectors, originals."""
    out: dict[str, Any] = {}
    with open_store(CollectionAddress(store=store_dir)) as store:
        for d in sorted(store.list_documents(), key=lambda d: d.path):
            chunks = store.get_chunks(d.path, d.gen, range(d.chunks))
            vectors = store.chunk_vectors(d.path, d.gen, range(d.chunks))
            blob = None
            original = d.original_record()
            if original is not None and original.blob:
                parts = store.read_blob(original.path, d.gen, range(len(original.offsets or ())))
                blob = b"".join(parts[i] for i in sorted(parts))
            out[d.path] = (d, [(c, vectors.get(c.index)) for c in chunks], blob)
        out["dirs"] = sorted(store.list_directories(), key=lambda r: r.path)
        searcher = Searcher(store, embedder=HashEmbedder())
        for mode in ("keyword", "hybrid"):  # the BM25 vectors, the dense ones
            hits = searcher.search(
                SearchRequest("turbine gasket quarterly report", k=20, mode=mode)
            )
            out[mode] = [(h.path, round(h.score, 6)) for h in hits]
            assert out[mode], mode
    return out


def test_n_readers_give_the_store_one_reader_gives(tmp_path: Path) -> None:
    src = tmp_path / "src"
    make_all(src / "converted")
    make_bad(src / "bad")
    for i in range(12):
        (src / "notes" / f"n{i}.md").parent.mkdir(parents=True, exist_ok=True)
        (src / "notes" / f"n{i}.md").write_text(f"# Note {i}\n\nThe turbine gasket {i}.\n" * 20)
    one, four = tmp_path / "one", tmp_path / "four"
    reports = [ingest_hash(src, one, jobs=1), ingest_hash(src, four, jobs=4)]
    for r in reports:
        r.seconds = r.keywords_seconds = 0.0
    assert reports[0] == reports[1]
    assert reports[0].added and reports[0].unsearched  # converted, text and refused files
    assert _contents(one) == _contents(four)
    shutil.rmtree(four)
