"""Section ``store``: bytes per chunk; Qdrant Edge vs qdrant-client local mode."""

from __future__ import annotations

from pathlib import Path

from semfs.ingest.store import SparseQuery, Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.schema import ChunkPoint, ChunkRecord

from .config import Config
from .harness import CannotMeasure, allocated_bytes, median, percentile, timed
from .results import CorpusInfo, Results, Row

# -- store ---------------------------------------------------------------------------------


def disk_row(info: CorpusInfo, store: Store) -> Row:
    disk = store.disk_bytes()
    chunks = store.count_chunks()
    if disk is None:
        raise CannotMeasure("the store backend cannot tell its size")
    src = info.bytes
    return Row(
        "store",
        "bytes on disk per chunk",
        info.name,
        value=disk / max(chunks, 1),
        unit="B/chunk",
        baseline="source bytes per chunk",
        baseline_value=src / max(chunks, 1),
        ratio=disk / max(src, 1),
        ratio_note="store ÷ source size",
        chunks=chunks,
        note=f"{disk / 1e6:.1f} MB allocated for {chunks} chunks (Store.disk_bytes)",
    )


def random_points(n: int, dim: int = 384, seed: int = 5) -> list[ChunkPoint]:
    """``n`` chunks with random unit vectors, ~30-term sparse vectors and ~500 B of text."""
    import numpy as np

    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((n, dim)).astype("float32")
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    words = " ".join(f"w{i}" for i in range(90))
    points = []
    for i in range(n):
        idx = np.unique(rng.integers(0, 30_000, 30))
        rec = ChunkRecord(f"d{i // 1000}/f{i // 10}.md", 1, i % 10, 0, 500, 1, 10, words, "H")
        points.append(ChunkPoint(rec, vecs[i].tolist(), idx.tolist(), [1.0] * len(idx)))
    return points


def compare_backends(cfg: Config, res: Results) -> None:
    """Qdrant Edge (the default) vs qdrant-client local mode, the same points and queries."""
    n = cfg.store_points
    points = random_points(n)
    # qdrant-client local mode scans every point in Python: ~0.1 s per 1000 points per query.
    queries = random_points(min(cfg.queries, 12) + 2, seed=99)
    figures: dict[str, dict[str, float]] = {}
    for backend in ("edge", "local"):
        path = cfg.workdir / "backends" / backend

        def opener(path: Path = path, backend: str = backend) -> Store:
            return (
                open_store(CollectionAddress(store=path))
                if backend == "edge"
                else open_store(CollectionAddress(url=f"file://{path}"))
            )

        with opener() as store:
            store.create(384)

            def upsert(store: Store = store) -> None:
                for i in range(0, n, 256):
                    store.upsert_chunks(points[i : i + 256])
                store.flush()

            up, _ = timed(upsert)
        reopen: list[float] = []
        query: list[float] = []
        for _ in range(3):
            took, store = timed(opener)
            reopen.append(took)
            store.close()
        with opener() as store:
            if store.count_chunks() != n:
                raise RuntimeError(f"{backend}: {store.count_chunks()} points, not {n}")
            for q in queries:
                sq = SparseQuery(q.sparse_indices, q.sparse_values)
                query.append(timed(store.query, q.dense, sq, "hybrid", 50)[0])
        figures[backend] = {
            "upsert_s": up,
            "reopen_s": median(reopen),
            "query_ms": median(query[2:]) * 1000,
            "query_p95_ms": percentile(query[2:], 95) * 1000,
            "disk_mb": allocated_bytes(path) / 1e6,
        }
    res.details["backends"] = figures
    e, loc = figures["edge"], figures["local"]
    base = "qdrant-client local mode (QdrantClient(path=...)), same points"
    note = f"{n} points, dim 384 random + ~30-term sparse, ~500 B payload text; batches of 256"
    for what, key, unit, scale in (
        ("Edge vs local: upsert all points", "upsert_s", "s", 1),
        ("Edge vs local: reopen", "reopen_s", "ms", 1000),
        ("Edge vs local: hybrid query p50", "query_ms", "ms", 1),
        ("Edge vs local: disk", "disk_mb", "MB", 1),
    ):
        res.add(
            Row(
                "store",
                what,
                f"random {n}",
                value=e[key] * scale,
                unit=unit,
                baseline=base,
                baseline_value=loc[key] * scale,
                ratio=e[key] / loc[key] if loc[key] else None,
                ratio_note="Edge ÷ local",
                chunks=n,
                note=note,
            )
        )
