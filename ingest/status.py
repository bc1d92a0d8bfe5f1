"""What a collection holds and how fresh it is, gathered without loading a model: what
`semfs status` shows (its ``--json`` is :func:`collection_status`), and the Python API's
:meth:`semfs.ingest.collection.Collection.status`.

Rules a caller may rely on:

* :func:`collection_status` opens the store, reads it, and closes it; a collection that is not
  there raises :class:`~semfs.ingest.errors.StoreNotFoundError` naming those that are. A store
  a watcher holds still answers from the watcher's state file.
* Every value is plain (numbers, strings, None, a dict for the watch state): JSON as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from semfs.ingest.errors import SemfsError, StoreLockedError, StoreNotFoundError
from semfs.ingest.logs import MOUNT_LOG
from semfs.ingest.store import StoreReader
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import missing_collection, open_store

if TYPE_CHECKING:
    from semfs.ingest.store.schema import StoreMeta


def collection_status(address: CollectionAddress) -> dict[str, Any]:
    """The collection at ``address``: what its store holds (:func:`store_info`), the watch
    state when a folder is followed (``watch``), and where a background mount of it logs
    (``mount_log``)."""
    from semfs.ingest.syncstate import load_state, state_file

    watch = load_state(state_file(address))
    try:
        info = _store_info(address)
    except StoreLockedError as exc:
        # `semfs ingest --watch` holds an embedded store: its state file still answers.
        if watch is None or not watch.running:
            raise
        info = {"collection": address.collection, "store": str(exc)}
    if watch is not None:
        info["watch"] = {**watch.to_json(), "running": watch.running}
    log = address.local_dir / MOUNT_LOG
    if log.is_file():  # where a background mount of it logs (damage too)
        info["mount_log"] = str(log)
    return info


def _store_info(address: CollectionAddress) -> dict[str, Any]:
    with open_store(address) as store:
        meta = store.read_meta()
        if meta is not None:
            return store_info(store, meta, address.collection)
        running = _ingest_under_way(store)
        if running:
            raise StoreNotFoundError(
                f"collection {address.collection!r} is being made by {running}: nothing is "
                "committed yet (its first documents are, in moments)"
            )
    # After closing: listing may open the store (a file: URL takes one client).
    raise missing_collection(address)


def _ingest_under_way(store: StoreReader) -> str | None:
    """Who, when the process that serves ``store`` is a plain `semfs ingest` (a run that
    ends): ``pid 12 (semfs ingest ./docs)``."""
    from semfs.ingest.store.owner import holder
    from semfs.ingest.store.ownerkind import INGEST

    owner = store.owner_link()
    if owner is None:
        return None
    who, kind = holder(owner)
    return who if kind == INGEST else None


def store_info(store: StoreReader, meta: StoreMeta, collection: str) -> dict[str, Any]:
    """What ``store`` (collection ``collection``, its ``meta`` read) holds, loading no model:
    the store part of :func:`collection_status`."""
    # A current manifest is the store as its last ingest left it (semfs.ingest.store.manifest):
    # its records and counts need no shard, which the engine cannot open on a full disk.
    manifest = store.read_manifest()
    if manifest is not None:
        docs = list(manifest.documents)
        chunks = sum(d.chunks for d in docs)
    else:
        docs = store.list_documents()
        chunks = store.count_chunks()
    from semfs.ingest.store.check import require_counts

    # A store that lost points says so; against the meta read before the counts (a run's last
    # commits since then add to them).
    require_counts(store, len(docs), chunks, meta)
    running = _ingest_under_way(store)
    owner = store.owner_link()
    return {
        "backend": store.backend,
        "location": store.address,  # a path or URL; who relays the calls is served_by
        "served_by": owner.pid if owner is not None else None,
        # For people: the location with the process that relays the calls, when one does.
        "through": store.location if owner is not None else None,
        "collection": collection,
        "source": meta.source,
        "documents": len(docs),
        "chunks": chunks,
        "bytes": sum(d.size for d in docs),
        "model": meta.model,
        "runtime": _runtime(meta.model),
        "queries": _queries_backend(store, meta.model),
        "model_cache": _model_cache(meta.model),
        "dimension": meta.dimension,
        "generation": meta.generation,
        # A run under way is not one that was stopped: it says so, and what it has committed.
        "interrupted": meta.dirty and running is None,
        "ingesting": f"under way, {running}: what it has committed so far" if running else None,
        "disk_bytes": store.disk_bytes(),
        "ingested_at": meta.ingested_at,
        "ingest_seconds": meta.ingest_seconds,
        "embedding": embedding_progress(store, meta, chunks),
    }


def embedding_progress(store: StoreReader, meta: StoreMeta, chunks: int) -> dict[str, Any]:
    """How far the dense vectors are: chunks with one, all chunks, and who embeds the rest
    (a process holding the collection's embed lock). Counted in the engine only while the
    meta says some may be missing (a store whose every chunk is embedded costs nothing)."""
    if not meta.dense_pending:
        return {"embedded": chunks, "chunks": chunks, "by": None}
    from semfs.ingest.store.writelock import EMBED_LOCK, CollectionLock

    embedded, total = store.embedding_counts()
    lock = CollectionLock(store.lock_path(EMBED_LOCK), "embedding")
    by = None
    if lock.try_acquire():
        lock.release()
    else:
        by = lock.holder()
    return {"embedded": embedded, "chunks": total, "by": by}


def _model_cache(model: str) -> str | None:
    """Where the model's ONNX exports are kept (one folder per user, whatever the store)."""
    from semfs.ingest.embedding.embedder import HASH_MODEL
    from semfs.ingest.embedding.onnx import model_cache_dir

    return None if model.partition(":")[0] == HASH_MODEL else str(model_cache_dir())


def _runtime(model: str) -> str:
    """What embeds this store's documents in this install, with its version (loading nothing):
    ``onnxruntime 1.22.0 fp32``, ``onnxruntime 1.22.0 int8``, ``torch 2.7.0 fp32``."""
    from semfs.ingest.embedding.embedder import load_embedder, query_backend, runtime_with_version

    try:
        embedder = load_embedder(model)
    except SemfsError as exc:  # a model this install cannot run says why, in the line
        return f"none: {exc}"
    return runtime_with_version(query_backend(embedder))


def _queries_backend(store: StoreReader, model: str) -> str:
    """What embeds this store's search queries (`semfs status`), loading nothing: the owner's
    model over its socket, ONNX Runtime, or torch and why."""
    from semfs.ingest.embedding.embedder import load_query_embedder, query_backend
    from semfs.ingest.embedding.owner import owner_embedder

    served = owner_embedder(store, model, lambda: None)
    if served is not None:
        return served.query_backend
    embedder = load_query_embedder(model)
    backend = query_backend(embedder)
    why_torch = getattr(embedder, "why_torch", "")  # a torch model without a checked export
    if why_torch:
        return f"{backend} ({why_torch}; the next `semfs ingest` that embeds fixes it)"
    return backend
