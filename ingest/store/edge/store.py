"""Embedded backend: Qdrant Edge in-process, one shard directory per collection.

Layout under the store path::

    STORE/COLLECTION/shard/       Qdrant Edge's files (segments, WAL, config)
    STORE/COLLECTION/lock         held by the process that owns the shard (shardlock)
    STORE/COLLECTION/owner.json   who has the shard open (pid, command), for error messages
    STORE/COLLECTION/daemon.sock  the owner's socket (see semfs.ingest.store.ipc)
    STORE/COLLECTION/manifest.json.gz  the tree manifest (semfs.ingest.store.edge.manifest_file)

The Store calls themselves are :class:`semfs.ingest.store.qdrant.QdrantStore`'s, spelled for a
shard by :class:`EdgeEngine`. What is Edge's own is here: the shard's config, creating it,
opening it under the collection's lock (:mod:`semfs.ingest.store.edge.shardlock`), and loading it
late. With a current manifest (:mod:`.manifest_file`) the shard loads on
first need (a read, a search, a write), and the manifest answers the tree and the meta until
then. A shard that changed since its last clean close (see :mod:`.shardprobe`)
loses its manifest at open: nothing vouches for it any more.

Edge locks its WAL, so one process owns a shard at a time.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from semfs.ingest.errors import (
    OwnerGoneError,
    StoreDamagedError,
    StoreLockedError,
    StoreNotFoundError,
    StoreUnavailableError,
    undecodable,
)
from semfs.ingest.store import QueryService, SparseQuery, Store
from semfs.ingest.store import qdrant as core
from semfs.ingest.store.diskspace import SpaceGuard, allocated_bytes
from semfs.ingest.store.edge import mapped, privacy, shardprobe
from semfs.ingest.store.edge.manifest_file import MANIFEST_NAME, ManifestFile
from semfs.ingest.store.edge.shardlock import ShardLock, locked, read_owner
from semfs.ingest.store.edge.warming import ReadPathWarmer
from semfs.ingest.store.manifest import Manifest
from semfs.ingest.store.schema import (
    DENSE,
    INDEXED_INTEGERS,
    INDEXED_KEYWORDS,
    INDEXED_TEXT,
    SPARSE,
    StoreMeta,
)
from semfs.ingest.store.tree_records import TreeRecords

logger = logging.getLogger(__name__)


# WAL segment size. Edge keeps the open segment and one closed one after a flush, so this
# bounds the WAL a flushed store keeps; Edge's default (32 MiB, allocated as it fills) would
# be several times the data of a small collection. A larger single write grows its segment.
WAL_SEGMENT_BYTES = 1024 * 1024
# Edge's vacuum rewrites a segment once this fraction of its points is deleted.
VACUUM_DELETED_RATIO = 0.2
# No HNSW graph (m=0): compact() turns a grown appendable segment into an immutable one
# with on-disk indexes in about a minute at 100k chunks, where building a graph took six;
# a search scans the vectors exactly, as it does in an appendable segment. At 100k chunks
# the immutable segment opens in ~1 s instead of ~20 and keeps ~15 MB of anonymous memory
# instead of ~240 (measured: the sparse, payload and full-text indexes stay on disk).
_NO_GRAPH = qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000)
# An immutable segment also keeps an int8 copy of its dense vectors (a quarter of their size,
# mmapped and read in whole at load), and a search scans that copy, not the float vectors: the
# exact scan of those faulted every page in, 214 MB of the daemon's RSS at 100k chunks. Cached,
# not Pinned: file pages the kernel can drop and share, not the daemon's own memory.
_INT8 = qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8, memory=qe.Memory.Cached)
# The int8 scan keeps RESCORE_OVERSAMPLING x the candidates and rescores them with the float
# vectors, so a retriever returns the candidates and scores of an exact scan and DBSF fuses
# the same numbers (Qdrant's rescoring; a segment without an int8 copy ignores this). At 100k
# hash-model chunks, 200 candidates: 2x changed the candidate list on 5 of 10 queries, 4x on
# none. Without rescoring the order changed on 5 of 5.
RESCORE_OVERSAMPLING = 4.0
# Chunks in one segment at most: compact() merges small segments only up to this. An ingest
# seals its appendable segment every writer.COMPACT_EVERY_CHUNKS so its RAM stays bounded,
# and this is the same size, so a sealed segment is never merged again: with a cap of twice
# it, the optimizer joined two sealed segments into one (13.5 s at the end of a 300k-chunk
# ingest, all of it rewriting what was already on disk), and without a cap it rewrote every
# sealed segment into one again and again. Small segments (a re-ingest's) still merge.
SEGMENT_CHUNKS = 25_000
# Segments Edge's merge optimizer lets be before it joins the smallest ones (its default, 0,
# is one per core). Its cap, max_segment_size, counts a segment's dense vectors, and a segment
# the keyword pass sealed has none yet: so at every compaction of a first ingest the optimizer
# joined all of them again, and at its end rewrote the whole collection (at 120k chunks, 1.4 GB
# of mapped files, VmHWM 1.8 GB; issue 45.4). With this many, a pass's sealed segments stay
# as they are (the dense pass rewrites them anyway); past it, the smallest are still merged.
MERGE_ABOVE_SEGMENTS = 64
# The appendable segment's size (KB) from which compact() seals it: None, Edge's default. Tests
# lower it to seal a few hundred chunks.
INDEXING_THRESHOLD_KB: int | None = None


def segment_kb(dimension: int) -> int:
    """Edge's ``max_segment_size`` (kilobytes of float vectors) for SEGMENT_CHUNKS chunks."""
    return SEGMENT_CHUNKS * dimension * 4 // 1024


_RESCORED = qe.SearchParams(
    quantization=qe.QuantizationSearchParams(rescore=True, oversampling=RESCORE_OVERSAMPLING)
)


def collection_dir(store_dir: Path, collection: str) -> Path:
    return store_dir / collection


def set_aside(store_dir: Path, collection: str) -> Path:
    """Rename a collection's shard to ``shard.damaged-TIME`` (under its lock); the new path."""
    coll = collection_dir(store_dir, collection)
    with locked(coll, lambda owner: f"store {coll} is in use by {owner}"):
        aside = coll / time.strftime("shard.damaged-%Y%m%d-%H%M%S")
        os.rename(coll / "shard", aside)
        (coll / MANIFEST_NAME).unlink(missing_ok=True)
        (coll / shardprobe.CLEAN_FILE).unlink(missing_ok=True)
        return aside


# --- the engine: Qdrant Edge's spelling of the core's calls -----------------------------------


def _condition(c: core.Condition) -> qe.FieldCondition | qe.HasVectorCondition:
    if isinstance(c, core.HasVector):
        return qe.HasVectorCondition(c.name)
    if isinstance(c, core.Match):
        return qe.FieldCondition(c.key, match=qe.MatchValue(c.value))
    if isinstance(c, core.MatchAny):
        return qe.FieldCondition(c.key, match=qe.MatchAny(list(c.values)))
    if isinstance(c, core.Substring):
        return qe.FieldCondition(c.key, match=qe.MatchSubstring(c.text))
    return qe.FieldCondition(c.key, match=qe.MatchText(c.text))


def _filter(where: core.Where) -> qe.Filter:
    must_not: list[Any] | None = [_condition(c) for c in where.must_not] or None
    return qe.Filter(must=[_condition(c) for c in where.must], must_not=must_not)


def _point(p: core.Point) -> qe.Point:
    vectors: dict[str, Any] = {}
    if p.dense is not None:
        vectors[DENSE] = p.dense
    if p.sparse is not None:
        vectors[SPARSE] = qe.SparseVector(p.sparse.indices, p.sparse.values)
    return qe.Point(p.id, vectors, p.payload)


def stored_float(x: float) -> float:
    """The float Edge hands back for ``x`` in a payload. It keeps a payload as JSON and parses
    a number the fast way (serde_json without ``float_roundtrip``): the shortest decimal's
    digits as one integer, made a float, then scaled by a power of ten (1e308 at a time
    below 1e-308). Two roundings: about one mtime in six comes back a unit in the last
    place off. Checked against the engine by tests/unit/store/test_tree_records.py."""
    text = repr(x)
    negative = text.startswith("-")
    mantissa, _, exp = text.lstrip("-").partition("e")
    whole, _, frac = mantissa.partition(".")
    f = float(int(whole + frac))
    e = int(exp or 0) - len(frac)
    while e < -308 and f != 0.0:
        f /= 1e308
        e += 308
    if f != 0.0:
        f = f * float(f"1e{e}") if e >= 0 else f / float(f"1e{-e}")
    return -f if negative else f


def stored_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` as Edge hands it back (record payloads are flat: floats are top-level)."""
    return {k: stored_float(v) if isinstance(v, float) else v for k, v in payload.items()}


def _payload(fields: list[str] | None) -> qe.PayloadSelector | bool:
    return True if fields is None else qe.PayloadSelector.Include(fields)


class EdgeEngine(core.Engine):
    """The calls of :class:`~semfs.ingest.store.qdrant.Engine` on one Edge shard."""

    def __init__(self, shard: qe.EdgeShard) -> None:
        self.shard = shard

    def retrieve(
        self, ids: Sequence[str], fields: list[str] | None = None, with_dense: bool = False
    ) -> Sequence[core.Record]:
        point_ids: list[qe.PointId] = list(ids)
        return self.shard.retrieve(
            point_ids, with_payload=_payload(fields), with_vector=[DENSE] if with_dense else False
        )

    def scroll(
        self,
        where: core.Where,
        fields: list[str] | None,
        offset: Any,
        limit: int = core.SCROLL_PAGE,
        with_dense: bool = False,
    ) -> tuple[Sequence[core.Record], Any]:
        request = qe.ScrollRequest(
            offset=offset,
            limit=limit,
            filter=_filter(where),
            with_payload=_payload(fields),
            with_vector=[DENSE] if with_dense else False,
        )
        return self.shard.scroll(request)

    def upsert(self, points: Sequence[core.Point]) -> None:
        self.shard.update(qe.UpdateOperation.upsert_points([_point(p) for p in points]))

    def set_vectors(self, dense: Sequence[tuple[str, list[float]]]) -> None:
        vectors = [qe.PointVectors(point_id, {DENSE: vec}) for point_id, vec in dense]
        self.shard.update(qe.UpdateOperation.update_vectors(vectors))

    def delete(self, ids: Sequence[str]) -> None:
        point_ids: list[qe.PointId] = list(ids)
        self.shard.update(qe.UpdateOperation.delete_points(point_ids))

    def delete_where(self, where: core.Where) -> None:
        self.shard.update(qe.UpdateOperation.delete_points_by_filter(_filter(where)))

    def count(self, where: core.Where) -> int:
        return int(self.shard.count(qe.CountRequest(filter=_filter(where), exact=True)))

    def fuse(self, query: core.FusedQuery) -> Sequence[core.ScoredPoint]:
        flt = _filter(query.where)
        prefetches = []
        if query.dense is not None:
            dense = qe.Query.Nearest(query.dense, using=DENSE)
            prefetches.append(
                qe.Prefetch(limit=query.candidates, query=dense, filter=flt, params=_RESCORED)
            )
        if query.sparse is not None:
            vector = qe.SparseVector(query.sparse.indices, query.sparse.values)
            sparse = qe.Query.Nearest(vector, using=SPARSE)
            prefetches.append(qe.Prefetch(limit=query.candidates, query=sparse, filter=flt))
        request = qe.QueryRequest(
            limit=query.limit,
            prefetches=prefetches,
            query=qe.Fusion.Dbsf(),  # type: ignore[arg-type]  # stub omits the variants
            filter=flt,
            with_payload=query.with_payload,
            with_vector=[DENSE] if query.with_dense else None,
        )
        return self.shard.query(request)

    def sparse_best(
        self, queries: Sequence[tuple[SparseQuery, core.Where]]
    ) -> list[tuple[float, dict[int, float]] | None]:
        requests = [
            qe.QueryRequest(
                limit=1,
                query=qe.Query.Nearest(
                    qe.SparseVector(sparse.indices, sparse.values), using=SPARSE
                ),
                filter=_filter(where),
                with_payload=False,
                with_vector=[SPARSE],
            )
            for sparse, where in queries
        ]
        found = self.shard.query_batch(qe.QueryBatchRequest(requests))
        return [
            (float(points[0].score), core.sparse_weights(points[0].vector)) if points else None
            for points in found
        ]

    def flush(self) -> None:
        self.shard.flush()


# --- the store: a shard's config, lock and lifetime -------------------------------------------


def _small_wal(shard_dir: Path) -> None:
    """Give a new, still empty shard a small WAL segment size.

    The Python binding does not take Edge's ``wal_options`` yet, but Edge reads them from
    ``edge_config.json`` at load. The WAL ``create`` made holds nothing and still has the
    default size, so it is removed and the load makes one with the new size.
    """
    path = shard_dir / "edge_config.json"
    config = json.loads(path.read_text())
    config["wal_options"] = {
        "segment_capacity": WAL_SEGMENT_BYTES,
        "segment_queue_len": 0,
        "retain_closed": 1,
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(config))
    os.replace(tmp, path)
    shutil.rmtree(shard_dir / "wal")


def _config(dimension: int) -> qe.EdgeConfig:
    return qe.EdgeConfig(
        # Cold: vectors stay on disk (mmap) instead of being read in at every open, which
        # would put the whole vector file between `semfs mount` and its first ls.
        vectors={
            DENSE: qe.EdgeVectorParams(
                size=dimension,
                distance=qe.Distance.Cosine,
                memory=qe.Memory.Cold,
                quantization_config=_INT8,
            )
        },
        # Cold sparse index, payload and id tracker: once compact() has made the segments
        # immutable, they stay on disk and are paged in as read. An appendable segment keeps
        # them in RAM whatever this says.
        sparse_vectors={
            SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf, memory=qe.Memory.Cold)
        },
        payload_memory=qe.Memory.Cold,
        id_tracker_memory=qe.Memory.Cold,
        hnsw_config=_NO_GRAPH,
        # Vacuum a segment once a fifth of its points are deleted (Edge's default), also in
        # small collections (Edge's default waits for 1000 points).
        optimizers=qe.EdgeOptimizersConfig(
            deleted_threshold=VACUUM_DELETED_RATIO,
            vacuum_min_vector_number=100,
            max_segment_size=segment_kb(dimension),
            default_segment_number=MERGE_ABOVE_SEGMENTS,
            indexing_threshold=INDEXING_THRESHOLD_KB,
        ),
    )


def _index(shard: qe.EdgeShard, have: Collection[str] = ()) -> None:
    """The payload indexes (those not in ``have``: a store made before one existed gets it).
    On disk, like the text index: in an immutable segment they are then mmapped. ``path`` is
    the tenant key: compact() then stores a document's chunks next to each other, so reading
    a file cold faults in its own payload pages, not ten pages shared with chunks of other
    files."""
    for name in INDEXED_KEYWORDS:
        if name not in have:
            params = qe.KeywordIndexParams(memory=qe.Memory.Cold, is_tenant=name == "path")
            shard.update(qe.UpdateOperation.create_field_index(name, params))
    for name in INDEXED_INTEGERS:
        if name not in have:
            shard.update(
                qe.UpdateOperation.create_field_index(
                    name, qe.IntegerIndexParams(lookup=True, range=True, memory=qe.Memory.Cold)
                )
            )
    # Word tokens, lowercased: what Qdrant uses on a field without an index, so a filter
    # means the same on stores made before this index existed. On disk: it is large.
    text = qe.TextIndexParams(tokenizer=qe.TokenizerType.Word, lowercase=True, on_disk=True)
    for name in INDEXED_TEXT:
        if name not in have:
            shard.update(qe.UpdateOperation.create_field_index(name, text))


class EdgeStore(core.QdrantStore):
    backend = "embedded"
    space: SpaceGuard

    def __init__(self, store_dir: Path, collection: str) -> None:
        self.collection = collection
        self.store_dir = store_dir
        self.dir = collection_dir(store_dir, collection)
        self.shard_dir = self.dir / "shard"
        self._shard: qe.EdgeShard | None = None
        self._engine: EdgeEngine | None = None  # the engine of _shard
        # Guards creation and close; Edge's own calls are thread-safe.
        self._lock = threading.Lock()
        self.ownership = ShardLock(store_dir, self.dir)
        self.space = SpaceGuard(self.shard_dir, str(self.dir))
        self.manifest = ManifestFile(self.dir)
        # The records this process writes, from the first write of a session on (see
        # _drop_manifest): the manifest at its end is built without a scroll.
        self.tree = TreeRecords(stored_payload)
        self._session_lock = threading.Lock()
        # The manifest read at open, while the shard waits to load: it answers read_meta and
        # read_manifest until then (no write can happen before the shard loads).
        self._early: Manifest | None = None
        self._load_lock = threading.Lock()
        self._load_pending = False  # opened from the manifest: the shard loads on first need
        self._closed = False
        self._load_error: BaseException | None = None
        self.warmer = ReadPathWarmer(self.shard_dir)
        if (self.shard_dir / "edge_config.json").exists():
            privacy.warn_if_exposed(self.dir)
            self.ownership.take()
            try:
                # Also with a manifest: a damaged store is refused at open, not at first read.
                if shardprobe.needs_probe(self.dir, self.shard_dir):
                    self.space.check_open()  # the probe opens the shard (in a child)
                    # Changed behind our back (a kill, an edit): the manifest may not describe
                    # it, and its records must be counted (semfs.ingest.store.check) before a mount
                    # shows them. The probe's clean close is one: later opens need no probe.
                    self._drop_manifest()
                    shardprobe.probe(self.shard_dir, str(self.dir))
                    shardprobe.mark_clean(self.dir, self.shard_dir)
                else:
                    self._early = self.manifest.read()
                if self._early is None:
                    self._shard = self._load()
            except BaseException:
                self.ownership.release()
                raise
            if self._early is not None:
                self.manifest.on_disk_meta = self._early.meta
                self._load_pending = True
            self.ownership.write_owner()

    def _ready(self) -> qe.EdgeShard | None:
        """The shard, loading it now if opening deferred that (raising why it cannot)."""
        if self._load_pending:
            with self._load_lock:
                if self._load_pending:
                    try:
                        self._shard = self._load()
                    except BaseException as exc:  # every later call raises it again
                        self._load_error = exc
                        self.ownership.release()
                    self._load_pending = False
                    self._early = None  # from now on the shard itself answers
        if self._load_error is not None:
            raise self._load_error
        if self._closed:
            # A call under way as the owner ends (its socket's calls get a few seconds): an
            # answer from no shard would be an empty success (`semfs search` printed `[]`).
            raise OwnerGoneError(f"store {self.dir} was closed: the process that owned it ended")
        return self._shard

    def _open_engine(self) -> EdgeEngine | None:
        shard = self._ready()
        if shard is None:
            return None
        engine = self._engine
        if engine is None or engine.shard is not shard:
            engine = self._engine = EdgeEngine(shard)
        return engine

    def _missing(self) -> StoreNotFoundError:
        return StoreNotFoundError(
            f"no collection {self.collection!r} in {self.store_dir}: run `semfs ingest DIR` first"
        )

    @property
    def shard(self) -> qe.EdgeShard:
        """The loaded shard (StoreNotFoundError when there is none)."""
        engine = self._open_engine()
        if engine is None:
            raise self._missing()
        return engine.shard

    def _drop_manifest(self) -> None:
        # Edge locks the shard, so every write is this process's: the current manifest, read
        # before the first write drops it, plus the writes make the next one exact. Under a
        # lock: no other write may drop it between the read and the start.
        with self._session_lock:
            if not self.tree.known and self.manifest.may_exist and self._ready() is not None:
                current = self.read_manifest()  # the file, checked against the shard's meta
                with contextlib.suppress(ValueError):  # a column it cannot decode: scroll
                    if current is not None:
                        self.tree.start(current.documents, current.directories)
            self.manifest.drop()

    def read_manifest(self) -> Manifest | None:
        early = self._early
        if early is not None:
            return early
        if self._ready() is None:
            return None
        manifest = self.manifest.read()
        return manifest if manifest is not None and manifest.matches(self.read_meta()) else None

    def _keep_manifest(self, meta: StoreMeta) -> None:
        if self.manifest.write(meta, lambda: self._manifest_bytes(meta)):
            # The file starts the next session: a mount's daemon does not hold the records.
            self.tree.forget()

    @property
    def location(self) -> str:
        return str(self.dir)

    def lock_path(self, name: str) -> Path | None:
        return self.dir / name

    def _load(self) -> qe.EdgeShard:
        # Only when the engine opens the shard: a store opened from its manifest answers
        # `semfs status` and a mount's listings on a full disk, before (or without) this.
        self.space.check_open()
        try:
            shard = qe.EdgeShard.load(str(self.shard_dir))
        except BaseException as exc:
            # One handler: pyo3's PanicException is a BaseException, and a handler's raise is
            # not caught by the handlers after it.
            if type(exc).__name__ == "PanicException" or undecodable(exc):
                raise StoreDamagedError(
                    f"store {self.dir} is damaged: the engine cannot open it "
                    f"({' '.join(str(exc).split())}); it must be rebuilt: `semfs check --rebuild "
                    "SOURCE` sets the shard aside and ingests SOURCE afresh"
                ) from exc
            if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit
                raise
            if "WouldBlock" in str(exc):
                raise StoreLockedError(self.ownership.refusal(read_owner(self.dir))) from exc
            raise StoreUnavailableError(f"cannot open store {self.dir}: {exc}") from exc
        # The load read some page files whole, mostly zeros that a mount would keep resident.
        mapped.release_pages(self.shard_dir)
        return shard

    def exists(self) -> bool:
        return self._early is not None or self._ready() is not None

    def create(self, dimension: int) -> None:
        with self._lock:
            shard = self._ready()
            if shard is not None:
                have = shard.info().payload_schema
                if any(n not in have for n in (*INDEXED_KEYWORDS, *INDEXED_INTEGERS)):
                    self._drop_manifest()
                    _index(shard, have)  # an index added since this store was made
                return
            self._drop_manifest()  # a leftover of a shard that was deleted
            config = _config(dimension)
            if not self.ownership.held:
                self.ownership.take()
            self.space.check_write(0)
            try:
                self.shard_dir.mkdir(parents=True, exist_ok=True)
                qe.EdgeShard.create(str(self.shard_dir), config).close()
                _small_wal(self.shard_dir)
                shard = qe.EdgeShard.load(str(self.shard_dir))
            except Exception as exc:
                raise StoreUnavailableError(f"cannot create store {self.dir}: {exc}") from exc
            _index(shard)
            self._shard = shard
            self.tree.start((), ())  # a new shard holds no records
            self.ownership.write_owner()
            privacy.make_private(self.dir)  # in case anything was created before the umask

    def read_meta(self) -> StoreMeta | None:
        early = self._early
        if early is not None:  # the shard has not loaded, so nothing was written since
            return early.meta
        return super().read_meta()

    def chunk_texts(self, path: str, gen: int, indexes: Sequence[int]) -> dict[int, str]:
        with self.warmer.after_faults():  # a cold read path: warm it whole
            return super().chunk_texts(path, gen, indexes)

    def disk_bytes(self) -> int | None:
        return allocated_bytes(self.shard_dir)

    def compact(self) -> bool:
        # Edge's optimizers rewrite segments with many deleted points (vacuum) and merge
        # small ones; the flush after it lets the WAL drop what the segments now hold.
        shard = self._ready()
        if shard is None:
            return False
        # A rewrite copies the live points of a segment before the old one is deleted.
        self.space.check_write(allocated_bytes(self.shard_dir / "segments"))
        changed = bool(shard.optimize())
        shard.flush()
        return changed

    def serve_writers(
        self,
        on_change: Callable[[], None] | None = None,
        served: Store | None = None,
        queries: QueryService | None = None,
        embeds: bool = False,
        held: Callable[[], Collection[str]] | None = None,
    ) -> Callable[[], None] | None:
        """Serve this shard on ``COLLECTION/daemon.sock``: we hold its lock, so others cannot.
        A collection not created yet (a first ingest) is locked now, its folders owner-only."""
        # Imported here, in a daemon's init(), not on its way up.
        from semfs.ingest.store.ipc.server import StoreServer

        with self._lock:
            if not self.ownership.held:
                self.ownership.take()
                self.ownership.write_owner()

        server = StoreServer(
            served or self,
            self.dir,
            on_change=on_change,
            queries=queries,
            embeds=embeds,
            held=held,
        )
        server.start()
        return server.close

    def flush(self) -> None:
        if self._shard is not None:  # nothing to flush in a shard that has not loaded
            self._shard.flush()

    def close(self) -> None:
        self.warmer.stop()  # a warm-up in flight stops at its next file
        self.tree.forget()
        with self._load_lock:  # never under a load in flight; a pending one is not needed
            self._load_pending = False
        with self._lock:
            self._closed = True
            if self._shard is None:
                if self.ownership.held:  # served before its shard was made (a first ingest)
                    self.ownership.forget_owner()
                self.ownership.release()
                return
            self._shard.flush()
            self._shard.close()
            self._shard = None
            shardprobe.mark_clean(self.dir, self.shard_dir)
            self.space.keep_reserve()
            self.ownership.release()
            self.ownership.forget_owner()
