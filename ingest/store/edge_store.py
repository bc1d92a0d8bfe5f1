"""Embedded backend: Qdrant Edge in-process, one shard directory per collection.

Layout under the store path::

    STORE/COLLECTION/shard/       Qdrant Edge's files (segments, WAL, config)
    STORE/COLLECTION/owner.json   who has the shard open (pid, command), for error messages
    STORE/COLLECTION/daemon.sock  a mounted daemon's write socket (see semfs.ingest.store.ipc)
    STORE/COLLECTION/manifest.json.gz  the tree manifest (semfs.ingest.store.manifest), when current

The manifest is a file, not a point, so that a mount reads its tree (and the meta) without
the engine loading the shard, which takes ~0.1 s for 2k chunks and seconds at 100k (and
holds the GIL meanwhile). With a current manifest the shard loads on first need (a read,
a search, a write). Every write first deletes the file (and syncs the folder),
and ingest writes a new one last. A shard that changed since its last clean close (see
:mod:`semfs.ingest.store.shardprobe`) loses its manifest at open: nothing vouches for it any more.

Edge locks its WAL, so one process owns a shard at a time.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import resource
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from semfs.ingest.errors import (
    SemfsError,
    StoreDamagedError,
    StoreLockedError,
    StoreNotFoundError,
    StoreUnavailableError,
)
from semfs.ingest.store import (
    FUSION_CANDIDATES,
    LineSpan,
    QueryService,
    SparseQuery,
    Store,
    check_collection_name,
    mapped,
    privacy,
    shardprobe,
    similarity,
)
from semfs.ingest.store.catalog import Catalog
from semfs.ingest.store.diskspace import SpaceGuard, allocated_bytes, chunk_bytes
from semfs.ingest.store.manifest import Manifest
from semfs.ingest.store.schema import (
    DENSE,
    DOC_TREE_FIELDS,
    INDEXED_INTEGERS,
    INDEXED_KEYWORDS,
    INDEXED_TEXT,
    KIND_BLOB,
    KIND_CHUNK,
    KIND_DIR,
    KIND_DOC,
    SPARSE,
    ChunkPoint,
    ChunkRecord,
    DirectoryRecord,
    DocumentRecord,
    ScoredChunk,
    StoreMeta,
    blob_id,
    blob_part,
    blob_payloads,
    chunk_id,
    dir_id,
    doc_id,
    meta_id,
)

logger = logging.getLogger(__name__)

SCROLL_PAGE = 1024
MANIFEST_NAME = "manifest.json.gz"


def _match(key: str, value: str | int) -> qe.FieldCondition:
    return qe.FieldCondition(key, match=qe.MatchValue(value))


# What a file read fetches of a chunk (see EdgeStore.chunk_texts).
_TEXT_ONLY = qe.PayloadSelector.Include(["index", "text"])
# What a file read goes through in Edge's layout: the payload and the id tracker. An
# immutable segment maps them with random-access advice, so a read that finds them out of the
# page cache faults them in one 4 KiB page at a time, one disk round trip each; a cold
# `grep -r` at 100k chunks did ~1.7 a file. A read that faults starts one sequential pass over
# these files instead (see EdgeStore._warm_read_path), at most once a WARM_INTERVAL_S.
_READ_PATH = ("segments/*/payload_storage/*", "segments/*/id_tracker.*")
WARM_INTERVAL_S = 60.0
_WARM_PIECE = 1024 * 1024


# Linux counts per thread; elsewhere the process's count stands in for it.
_RUSAGE_WHO = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)


def _major_faults() -> int:
    """This thread's major page faults so far (each one a read from disk)."""
    return resource.getrusage(_RUSAGE_WHO).ru_majflt


def _read_through(path: Path, buf: bytearray) -> None:
    """Read ``path``'s data (not its holes) into the page cache, in big sequential reads."""
    fd = os.open(path, os.O_RDONLY)
    try:
        offset = 0
        while True:
            try:
                offset = os.lseek(fd, offset, os.SEEK_DATA)
            except OSError:  # ENXIO: no data past offset
                return
            end = os.lseek(fd, offset, os.SEEK_HOLE)
            while offset < end:
                n = os.preadv(fd, [buf], offset)
                if n <= 0:
                    return
                offset += n
    finally:
        os.close(fd)


def _chunk_filter(under: str | None) -> qe.Filter:
    must: list[Any] = [_match("kind", KIND_CHUNK)]
    if under:
        must.append(_match("dirs", under))
    return qe.Filter(must=must)


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
_RESCORED = qe.SearchParams(
    quantization=qe.QuantizationSearchParams(rescore=True, oversampling=RESCORE_OVERSAMPLING)
)


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


def _text_index() -> qe.TextIndexParams:
    # Word tokens, lowercased: what Qdrant uses on a field without an index, so a filter
    # means the same on stores made before this index existed. On disk: it is large.
    return qe.TextIndexParams(tokenizer=qe.TokenizerType.Word, lowercase=True, on_disk=True)


def collection_dir(store_dir: Path, collection: str) -> Path:
    return store_dir / collection


# What the engine says when a shard's files hold bytes it cannot decode: damage that only a
# rebuild from the source folder replaces, not a store that is merely unavailable.
_UNDECODABLE = ("decode", "decompress", "corrupt", "checksum", "deserializ")


def _undecodable(exc: BaseException) -> bool:
    text = str(exc).lower()
    return any(word in text for word in _UNDECODABLE)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace_file(path: Path, data: bytes) -> None:
    """Write ``path`` so that a reader (or a crash) sees the old file, none, or all of it."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def read_owner(coll_dir: Path) -> str:
    """A description of the process that holds the shard, as far as it told us."""
    try:
        info = json.loads((coll_dir / "owner.json").read_text())
        return f"pid {info['pid']} ({info['command']})"
    except (OSError, ValueError, KeyError):
        return "another process"


def set_aside(store_dir: Path, collection: str) -> Path:
    """Rename a collection's shard to ``shard.damaged-TIME`` (under its lock); the new path."""
    coll = collection_dir(store_dir, collection)
    fd = os.open(coll / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            raise StoreLockedError(f"store {coll} is in use by {read_owner(coll)}") from exc
        aside = coll / time.strftime("shard.damaged-%Y%m%d-%H%M%S")
        os.rename(coll / "shard", aside)
        (coll / MANIFEST_NAME).unlink(missing_ok=True)
        (coll / shardprobe.CLEAN_FILE).unlink(missing_ok=True)
        return aside
    finally:
        os.close(fd)


class EdgeStore(Store):
    backend = "embedded"

    def __init__(self, store_dir: Path, collection: str) -> None:
        self.collection = collection
        self.store_dir = store_dir
        self.dir = collection_dir(store_dir, collection)
        self.shard_dir = self.dir / "shard"
        self._shard: qe.EdgeShard | None = None
        # Guards creation and close; Edge's own calls are thread-safe.
        self._lock = threading.Lock()
        self._owner_fd: int | None = None
        self.space = SpaceGuard(self.shard_dir, str(self.dir))
        self.manifest_path = self.dir / MANIFEST_NAME
        # Guards the manifest file and the three fields below.
        self._manifest_lock = threading.Lock()
        self._writes = 0  # writes started by this instance: a manifest built across one is stale
        self._manifest_on_disk = True  # unknown until the first write deletes it
        self._on_disk_meta: StoreMeta | None = None  # the meta of the manifest on disk, if known
        # The manifest read at open, while the shard waits to load: it answers read_meta and
        # read_manifest until then (no write can happen before the shard loads).
        self._early: Manifest | None = None
        self._load_lock = threading.Lock()
        self._load_pending = False  # opened from the manifest: the shard loads on first need
        self._load_error: BaseException | None = None
        # The read-path warm-up (see _warm_read_path): guarded by _warm_lock.
        self._warm_lock = threading.Lock()
        self._warming = False
        self._warmed_at = float("-inf")
        self._closing = False
        if (self.shard_dir / "edge_config.json").exists():
            privacy.warn_if_exposed(self.dir)
            self._take_ownership()
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
                    self._early = self._read_manifest_file()
                if self._early is None:
                    self._shard = self._load()
            except BaseException:
                self._release_ownership()
                raise
            if self._early is not None:
                self._on_disk_meta = self._early.meta
                self._load_pending = True
            self._write_owner()

    def _ready(self) -> qe.EdgeShard | None:
        """The shard, loading it now if opening deferred that (raising why it cannot)."""
        if self._load_pending:
            with self._load_lock:
                if self._load_pending:
                    try:
                        self._shard = self._load()
                    except BaseException as exc:  # every later call raises it again
                        self._load_error = exc
                        self._release_ownership()
                    self._load_pending = False
                    self._early = None  # from now on the shard itself answers
        if self._load_error is not None:
            raise self._load_error
        return self._shard

    def _read_manifest_file(self) -> Manifest | None:
        try:
            data = self.manifest_path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.warning("cannot read %s: %s", self.manifest_path, exc)
            return None
        manifest = Manifest.decode(data, str(self.manifest_path))
        return None if manifest is None or manifest.meta.dirty else manifest

    def _drop_manifest(self) -> None:
        """Before every write: no manifest may describe records this write changes."""
        with self._manifest_lock:
            self._writes += 1
            self._on_disk_meta = None
            if not self._manifest_on_disk:
                return
            try:
                self.manifest_path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise StoreUnavailableError(f"cannot remove {self.manifest_path}: {exc}") from exc
            else:
                _fsync_dir(self.dir)
            self._manifest_on_disk = False

    def read_manifest(self) -> Manifest | None:
        early = self._early
        if early is not None:
            return early
        if self._ready() is None:
            return None
        manifest = self._read_manifest_file()
        return manifest if manifest is not None and manifest.matches(self.read_meta()) else None

    def write_manifest(self, generation: int) -> None:
        meta = self.read_meta()
        if meta is None or meta.dirty or meta.generation != generation:
            return
        with self._manifest_lock:
            if self._on_disk_meta == meta:
                return  # the file on disk is current
            writes = self._writes
        flt = qe.Filter(must=[_match("kind", KIND_DOC)])
        docs = [DocumentRecord.from_payload(p) for p in self._scroll(flt, None)]
        data = Manifest.of(meta, docs, self.list_directories()).to_bytes()
        with self._manifest_lock:
            if self._writes != writes:
                return  # something was written meanwhile: this one could be stale
            try:
                _replace_file(self.manifest_path, data)
            except OSError as exc:  # the mount falls back to listing the records
                logger.warning("cannot write %s: %s", self.manifest_path, exc)
                return
            self._manifest_on_disk, self._on_disk_meta = True, meta

    def _take_ownership(self) -> None:
        """Lock ``COLLECTION/lock`` before Edge sees the shard.

        Edge refuses a second opener (its WAL is locked), but only after that opener has
        rewritten segment files under the live owner; our own lock keeps it from trying.
        While we own it, the umask is 077: whatever Edge creates is owner-only (the store
        holds copies of the user's documents).
        """
        privacy.private_dir(self.store_dir)
        privacy.private_dir(self.dir)
        fd = os.open(self.dir / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise StoreLockedError(
                f"store {self.dir} is in use by {read_owner(self.dir)}; "
                "stop it (semfs umount) or wait for it to finish"
            ) from exc
        self._owner_fd = fd
        privacy.hold()

    def _release_ownership(self) -> None:
        if self._owner_fd is not None:
            os.close(self._owner_fd)  # closing the descriptor drops the flock
            self._owner_fd = None
            privacy.release()

    @property
    def location(self) -> str:
        return str(self.dir)

    def _load(self) -> qe.EdgeShard:
        # Only when the engine opens the shard: a store opened from its manifest answers
        # `semfs status` and a mount's listings on a full disk, before (or without) this.
        self.space.check_open()
        try:
            shard = qe.EdgeShard.load(str(self.shard_dir))
        except BaseException as exc:
            # One handler: pyo3's PanicException is a BaseException, and a handler's raise is
            # not caught by the handlers after it.
            if type(exc).__name__ == "PanicException" or _undecodable(exc):
                raise StoreDamagedError(
                    f"store {self.dir} is damaged: the engine cannot open it "
                    f"({' '.join(str(exc).split())}); it must be rebuilt: `semfs check --rebuild "
                    "SOURCE` sets the shard aside and ingests SOURCE afresh"
                ) from exc
            if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit
                raise
            if "WouldBlock" in str(exc):
                raise StoreLockedError(
                    f"store {self.dir} is in use by {read_owner(self.dir)}; "
                    "stop it (semfs umount) or wait for it to finish"
                ) from exc
            raise StoreUnavailableError(f"cannot open store {self.dir}: {exc}") from exc
        # The load read some page files whole, mostly zeros that a mount would keep resident.
        mapped.release_pages(self.shard_dir)
        return shard

    def _write_owner(self) -> None:
        command = " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]])
        info = {"pid": os.getpid(), "command": command[:200]}
        try:
            (self.dir / "owner.json").write_text(json.dumps(info))
        except OSError as exc:  # informational only
            logger.debug("cannot write owner file: %s", exc)

    @property
    def shard(self) -> qe.EdgeShard:
        shard = self._ready()
        if shard is None:
            raise StoreNotFoundError(
                f"no collection {self.collection!r} in {self.store_dir}: "
                "run `semfs ingest DIR` first"
            )
        return shard

    def exists(self) -> bool:
        return self._early is not None or self._ready() is not None

    def create(self, dimension: int) -> None:
        with self._lock:
            if self._ready() is not None:
                return
            self._drop_manifest()  # a leftover of a shard that was deleted
            config = qe.EdgeConfig(
                # Cold: vectors stay on disk (mmap) instead of being read in at every open,
                # which would put the whole vector file between `semfs mount` and its first ls.
                vectors={
                    DENSE: qe.EdgeVectorParams(
                        size=dimension,
                        distance=qe.Distance.Cosine,
                        memory=qe.Memory.Cold,
                        quantization_config=_INT8,
                    )
                },
                # Cold sparse index, payload and id tracker: once compact() has made the
                # segments immutable, they stay on disk and are paged in as read. An
                # appendable segment keeps them in RAM whatever this says.
                sparse_vectors={
                    SPARSE: qe.EdgeSparseVectorParams(
                        modifier=qe.Modifier.Idf, memory=qe.Memory.Cold
                    )
                },
                payload_memory=qe.Memory.Cold,
                id_tracker_memory=qe.Memory.Cold,
                hnsw_config=_NO_GRAPH,
                # Vacuum a segment once a fifth of its points are deleted (Edge's default),
                # also in small collections (Edge's default waits for 1000 points).
                optimizers=qe.EdgeOptimizersConfig(
                    deleted_threshold=VACUUM_DELETED_RATIO, vacuum_min_vector_number=100
                ),
            )
            if self._owner_fd is None:
                self._take_ownership()
            self.space.check_write(0)
            try:
                self.shard_dir.mkdir(parents=True, exist_ok=True)
                qe.EdgeShard.create(str(self.shard_dir), config).close()
                _small_wal(self.shard_dir)
                shard = qe.EdgeShard.load(str(self.shard_dir))
            except Exception as exc:
                raise StoreUnavailableError(f"cannot create store {self.dir}: {exc}") from exc
            # On disk, like the text index: in an immutable segment they are then mmapped.
            # ``path`` is the tenant key: compact() then stores a document's chunks next to
            # each other, so reading a file cold faults in its own payload pages, not ten
            # pages shared with chunks of other files.
            for name in INDEXED_KEYWORDS:
                params = qe.KeywordIndexParams(memory=qe.Memory.Cold, is_tenant=name == "path")
                shard.update(qe.UpdateOperation.create_field_index(name, params))
            for name in INDEXED_INTEGERS:
                shard.update(
                    qe.UpdateOperation.create_field_index(
                        name, qe.IntegerIndexParams(lookup=True, range=True, memory=qe.Memory.Cold)
                    )
                )
            for name in INDEXED_TEXT:
                shard.update(qe.UpdateOperation.create_field_index(name, _text_index()))
            self._shard = shard
            self._write_owner()
            privacy.make_private(self.dir)  # in case anything was created before the umask

    def read_meta(self) -> StoreMeta | None:
        early = self._early
        if early is not None:  # the shard has not loaded, so nothing was written since
            return early.meta
        if self._ready() is None:
            return None
        records = self.shard.retrieve([meta_id()], with_payload=True, with_vector=False)
        if not records:
            return None
        try:
            return StoreMeta.from_payload(records[0].payload or {})
        except (KeyError, TypeError, ValueError) as exc:
            # The point is there but its payload is not (a zeroed payload tracker, say).
            raise StoreDamagedError(
                f"store {self.dir} is damaged: its meta point has no readable payload "
                f"(missing {exc}); rebuild it: `semfs check --rebuild SOURCE` sets the shard "
                "aside and ingests SOURCE afresh"
            ) from None

    def write_meta(self, meta: StoreMeta) -> None:
        self._drop_manifest()
        self._upsert([qe.Point(meta_id(), {}, meta.to_payload())])
        self.shard.flush()

    def _upsert(self, points: list[qe.Point]) -> None:
        self.shard.update(qe.UpdateOperation.upsert_points(points))

    def list_documents(self) -> list[DocumentRecord]:
        if self._ready() is None:
            return []
        flt = qe.Filter(must=[_match("kind", KIND_DOC)])
        return [DocumentRecord.from_payload(p) for p in self._scroll(flt, DOC_TREE_FIELDS)]

    def get_document(self, path: str) -> DocumentRecord | None:
        if self._ready() is None:
            return None
        records = self.shard.retrieve([doc_id(path)], with_payload=True, with_vector=False)
        return DocumentRecord.from_payload(records[0].payload or {}) if records else None

    def put_document(self, record: DocumentRecord) -> None:
        self._drop_manifest()
        self._upsert([qe.Point(doc_id(record.path), {}, record.to_payload())])

    def delete_documents(self, paths: Sequence[str]) -> None:
        if not paths:
            return
        self._drop_manifest()
        self.shard.update(qe.UpdateOperation.delete_points([doc_id(p) for p in paths]))
        for path in paths:
            self.delete_stale_chunks(path, None)

    def list_directories(self) -> list[DirectoryRecord]:
        if self._ready() is None:
            return []
        flt = qe.Filter(must=[_match("kind", KIND_DIR)])
        out: list[DirectoryRecord] = []
        offset: Any = None
        while True:
            records, offset = self.shard.scroll(
                qe.ScrollRequest(offset=offset, limit=SCROLL_PAGE, filter=flt, with_payload=True)
            )
            out.extend(DirectoryRecord.from_payload(r.payload or {}) for r in records)
            if offset is None:
                return out

    def put_directories(self, records: Sequence[DirectoryRecord]) -> None:
        if records:
            self._drop_manifest()
            self._upsert([qe.Point(dir_id(r.path), {}, r.to_payload()) for r in records])

    def delete_directories(self, paths: Sequence[str]) -> None:
        if paths:
            self._drop_manifest()
            self.shard.update(qe.UpdateOperation.delete_points([dir_id(p) for p in paths]))

    def upsert_chunks(self, points: Sequence[ChunkPoint]) -> None:
        if not points:
            return
        self._drop_manifest()
        self.space.check_write(chunk_bytes(points))
        self._upsert(
            [
                qe.Point(
                    chunk_id(p.record.path, p.record.gen, p.record.index),
                    {
                        DENSE: p.dense,
                        SPARSE: qe.SparseVector(p.sparse_indices, p.sparse_values),
                    },
                    p.record.to_payload(),
                )
                for p in points
            ]
        )

    def get_chunks(self, path: str, gen: int, indexes: Sequence[int]) -> list[ChunkRecord]:
        ids: list[qe.PointId] = [chunk_id(path, gen, i) for i in indexes]
        records = self.shard.retrieve(ids, with_payload=True, with_vector=False)
        by_index = {int((r.payload or {})["index"]): r for r in records}
        return [
            ChunkRecord.from_payload(by_index[i].payload or {}) for i in indexes if i in by_index
        ]

    def chunk_texts(self, path: str, gen: int, indexes: Sequence[int]) -> dict[int, str]:
        # One retrieve of the text and index only: decoding and wrapping the other ten
        # fields cost a third of a file's read (measured at 10k chunks).
        ids: list[qe.PointId] = [chunk_id(path, gen, i) for i in indexes]
        faults = _major_faults()
        records = self.shard.retrieve(ids, with_payload=_TEXT_ONLY, with_vector=False)
        if _major_faults() != faults:
            self._warm_read_path()
        return {int(p["index"]): str(p["text"]) for p in (r.payload for r in records) if p}

    def _warm_read_path(self) -> bool:
        """Start reading the read path's files into the page cache, in a thread of its own
        (its reads release the GIL), unless one is running or ran in the last
        WARM_INTERVAL_S. The page cache only: the daemon maps pages as reads touch them,
        as before. True when it started one."""
        with self._warm_lock:
            if self._warming or time.monotonic() - self._warmed_at < WARM_INTERVAL_S:
                return False
            self._warming = True
        threading.Thread(target=self._warm, name="semfs-warm", daemon=True).start()
        return True

    def _warm(self) -> None:
        buf = bytearray(_WARM_PIECE)
        try:
            for pattern in _READ_PATH:
                for path in sorted(self.shard_dir.glob(pattern)):
                    if self._closing:
                        return
                    _read_through(path, buf)
        except OSError as exc:  # a file a compaction just replaced: only slower reads
            logger.debug("warming %s stopped: %s", self.shard_dir, exc)
        finally:
            with self._warm_lock:
                self._warming = False
                self._warmed_at = time.monotonic()

    def delete_stale_chunks(self, path: str, keep_gen: int | None) -> None:
        self._drop_manifest()
        must_not: list[Any] | None = [_match("gen", keep_gen)] if keep_gen is not None else None
        kinds = qe.FieldCondition("kind", match=qe.MatchAny([KIND_CHUNK, KIND_BLOB]))
        flt = qe.Filter(must=[kinds, _match("path", path)], must_not=must_not)
        self.shard.update(qe.UpdateOperation.delete_points_by_filter(flt))

    def chunk_versions(self) -> set[tuple[str, int]]:
        if self._ready() is None:
            return set()
        kinds = qe.FieldCondition("kind", match=qe.MatchAny([KIND_CHUNK, KIND_BLOB]))
        pairs = self._scroll(qe.Filter(must=[kinds]), ["path", "gen"])
        return {(str(p["path"]), int(p["gen"])) for p in pairs}

    def put_blob(self, path: str, gen: int, data: bytes) -> None:
        self._drop_manifest()
        self.space.check_write(len(data) * 4 // 3 + 1024)
        for point_id, payload in blob_payloads(path, gen, data):
            self._upsert([qe.Point(point_id, {}, payload)])

    def read_blob(self, path: str, gen: int, indexes: Sequence[int]) -> dict[int, bytes]:
        ids: list[qe.PointId] = [blob_id(path, gen, i) for i in indexes]
        records = self.shard.retrieve(ids, with_payload=True, with_vector=False)
        return dict(blob_part(r.payload) for r in records if r.payload)

    def query(
        self,
        dense: list[float],
        sparse: SparseQuery,
        mode: str,
        limit: int,
        under: str | None = None,
    ) -> list[ScoredChunk]:
        if self._ready() is None:
            return []
        flt = _chunk_filter(under)
        if mode == "keyword" and not sparse.indices:
            return []
        sparse_q = qe.Query.Nearest(qe.SparseVector(sparse.indices, sparse.values), using=SPARSE)
        # Every mode is one prefetch per retriever, fused by DBSF: each retriever's scores are
        # normalised over its own candidates, so a score means the same across queries and
        # modes (see semfs.ingest.store.FUSION_CANDIDATES).
        candidates = max(limit, FUSION_CANDIDATES)
        prefetches = []
        if mode != "keyword":
            dense_q = qe.Query.Nearest(dense, using=DENSE)
            prefetches.append(
                qe.Prefetch(limit=candidates, query=dense_q, filter=flt, params=_RESCORED)
            )
        if mode != "semantic" and sparse.indices:
            prefetches.append(qe.Prefetch(limit=candidates, query=sparse_q, filter=flt))
        request = qe.QueryRequest(
            limit=limit,
            prefetches=prefetches,
            query=qe.Fusion.Dbsf(),  # type: ignore[arg-type]  # stub omits the variants
            filter=flt,
            with_payload=True,
            # The chunks' dense vectors come back too: their cosine to the query is a
            # similarity a caller may want beside the fused score.
            with_vector=[DENSE] if dense else None,
        )
        out = []
        for p in self.shard.query(request):
            sim = similarity(dense, p.vector, DENSE)
            out.append(ScoredChunk(ChunkRecord.from_payload(p.payload or {}), float(p.score), sim))
        return out

    def _scroll(self, flt: qe.Filter, fields: list[str] | None) -> Iterator[dict[str, Any]]:
        """Payloads matching ``flt``: only ``fields``, or whole when None."""
        offset: Any = None
        payload = True if fields is None else fields
        while True:
            records, offset = self.shard.scroll(
                qe.ScrollRequest(offset=offset, limit=SCROLL_PAGE, filter=flt, with_payload=payload)
            )
            yield from (r.payload for r in records if r.payload)
            if offset is None:
                return

    def chunk_paths_matching(
        self, substrings: Sequence[str], words: Sequence[str], under: str | None = None
    ) -> list[str]:
        if self._ready() is None:
            return []
        flt = _chunk_filter(under)
        assert flt.must is not None
        must = list(flt.must)
        must += [qe.FieldCondition("text", match=qe.MatchSubstring(s)) for s in substrings]
        if words:
            must.append(qe.FieldCondition("text", match=qe.MatchText(" ".join(words))))
        flt = qe.Filter(must=must)
        return sorted({str(p["path"]) for p in self._scroll(flt, ["path"])})

    def chunk_line_spans(self, under: str | None = None) -> Iterator[LineSpan]:
        if self._ready() is None:
            return
        fields = ["path", "gen", "index", "start_line", "end_line"]
        for p in self._scroll(_chunk_filter(under), fields):
            yield (
                str(p["path"]),
                int(p["gen"]),
                int(p["index"]),
                int(p["start_line"]),
                int(p["end_line"]),
            )

    def count_chunks(self) -> int:
        if self._ready() is None:
            return 0
        return int(self.shard.count(qe.CountRequest(filter=_chunk_filter(None), exact=True)))

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
    ) -> Callable[[], None] | None:
        """Serve this shard on ``COLLECTION/daemon.sock``: we hold its lock, so others cannot."""
        from semfs.ingest.store.ipc.server import (
            StoreServer,
        )  # in a daemon's init(), not on its way up

        server = StoreServer(served or self, self.dir, on_change=on_change, queries=queries)
        server.start()
        return server.close

    def flush(self) -> None:
        if self._shard is not None:  # nothing to flush in a shard that has not loaded
            self._shard.flush()

    def close(self) -> None:
        self._closing = True  # a warm-up in flight stops at its next file
        with self._load_lock:  # never under a load in flight; a pending one is not needed
            self._load_pending = False
        with self._lock:
            if self._shard is None:
                self._release_ownership()
                return
            self._shard.flush()
            self._shard.close()
            self._shard = None
            shardprobe.mark_clean(self.dir, self.shard_dir)
            self.space.keep_reserve()
            self._release_ownership()
            try:
                info = json.loads((self.dir / "owner.json").read_text())
                if info.get("pid") == os.getpid():
                    (self.dir / "owner.json").unlink()
            except (OSError, ValueError):
                pass


def _valid_name(name: str) -> bool:
    try:
        check_collection_name(name)
    except SemfsError:
        return False
    return True


class EdgeCatalog(Catalog):
    """The collections of an embedded store folder: its sub-folders that hold a shard."""

    def __init__(self, store_dir: Path) -> None:
        self.store_dir = store_dir

    @property
    def location(self) -> str:
        return str(self.store_dir)

    def names(self) -> list[str]:
        try:
            entries = sorted(os.scandir(self.store_dir), key=lambda e: e.name)
        except FileNotFoundError:
            return []
        return [
            e.name for e in entries if _valid_name(e.name) and (Path(e.path) / "shard").is_dir()
        ]

    def _locked(self, name: str) -> int:
        """The collection's lock, taken (a descriptor to close), or StoreLockedError."""
        self.require(name)
        coll = collection_dir(self.store_dir, name)
        fd = os.open(coll / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise StoreLockedError(
                f"collection {name!r} is in use by {read_owner(coll)}: stop it first "
                "(semfs umount, or Ctrl-C the watcher or ingest)"
            ) from exc
        return fd

    def remove(self, name: str) -> None:
        fd = self._locked(name)
        try:
            # Aside first, in one rename: a crash midway leaves no half-deleted collection.
            doomed = self.store_dir / f".removing-{name}-{os.getpid()}"
            os.rename(collection_dir(self.store_dir, name), doomed)
            _fsync_dir(self.store_dir)
            shutil.rmtree(doomed)
        finally:
            os.close(fd)

    def rename(self, old: str, new: str) -> None:
        self.check_new_name(new)
        fd = self._locked(old)
        try:
            target = collection_dir(self.store_dir, new)
            if target.exists():  # a folder without a shard (a leftover): not ours to replace
                raise SemfsError(f"{target} already exists: remove it or choose another name")
            os.rename(collection_dir(self.store_dir, old), target)
            _fsync_dir(self.store_dir)
        finally:
            os.close(fd)
