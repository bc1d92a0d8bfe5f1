"""Server backend: a Qdrant server or cluster through qdrant-client.

qdrant_client is imported here only, and this module only when ``--url`` is given: its import
costs ~1 s that the embedded path must not pay. Sharding and replication are the server's.
A ``file:`` URL opens qdrant-client's local mode instead, which tests use as a stand-in server.

The Store calls themselves are :class:`semfs.ingest.store.qdrant.QdrantStore`'s, spelled for
qdrant-client by :class:`ClientEngine`. What is the server's own is here: reaching it, creating
a collection, and where the tree manifest is kept.

The tree manifest (:mod:`semfs.ingest.store.manifest`) is kept in up to ``MANIFEST_PARTS`` points
with fixed ids, so one retrieve reads it together with the meta: a mount against a cluster boots in
one round trip. A writer deletes those points before its first change and at every meta write;
a reader uses a manifest only when it is whole and stamped with the meta read beside it.
"""

from __future__ import annotations

import base64
import contextlib
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

from qdrant_client import QdrantClient
from qdrant_client import models as m
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from semfs.ingest.errors import StoreNotFoundError, StoreUnavailableError
from semfs.ingest.store import qdrant as core
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.catalog import Catalog, refuse_if_mounted
from semfs.ingest.store.manifest import Manifest
from semfs.ingest.store.schema import (
    DENSE,
    INDEXED_INTEGERS,
    INDEXED_KEYWORDS,
    INDEXED_TEXT,
    KIND_MANIFEST,
    KIND_META,
    SPARSE,
    SparseQuery,
    StoreMeta,
    manifest_id,
    meta_id,
)
from semfs.ingest.store.tree_records import TreeRecords

logger = logging.getLogger(__name__)

# The manifest is kept in up to MANIFEST_PARTS points of MANIFEST_PART_BYTES (base64) each, so
# one retrieve of fixed ids reads it with the meta: 64 x 4 MiB covers millions of documents.
MANIFEST_PARTS = 64
MANIFEST_PART_BYTES = 4 << 20


def _local_mode(url: str) -> bool:
    """Whether ``url`` names qdrant-client's local mode (a ``file:`` URL), not a server: the
    one place that tells, from the address; the store then asks what it was told."""
    return url.startswith("file:")


def _client(address: CollectionAddress) -> QdrantClient:
    """A client for the server at ``address`` (a ``file:`` URL: qdrant-client's local mode)."""
    url = address.url
    assert url is not None
    with _reaching(url):
        if _local_mode(url):
            return QdrantClient(path=url.removeprefix("file://").removeprefix("file:"))
        # No client-side version check: qdrant-client runs it in a thread of its own that
        # prints a Python warning to stderr whenever it happens to finish, so an unreachable
        # server's one-line error sometimes came with three lines of noise.
        return QdrantClient(
            url=url,
            api_key=address.api_key,
            timeout=int(address.timeout),
            check_compatibility=False,
        )


@contextlib.contextmanager
def _reaching(url: str) -> Iterator[None]:
    """Failures to reach ``url`` as one-line StoreUnavailableErrors."""
    try:
        yield
    except UnexpectedResponse as exc:
        # Something answered, but not as Qdrant does (a web server, a proxy's error page).
        raise StoreUnavailableError(
            f"{url} does not answer like a Qdrant server (HTTP {exc.status_code} "
            f"{exc.reason_phrase}): check --url"
        ) from exc
    except (ResponseHandlingException, OSError, RuntimeError) as exc:
        reason = " ".join(str(exc).split())  # one line: messages may hold raw responses
        raise StoreUnavailableError(f"cannot reach Qdrant at {url}: {reason}") from exc


# --- the engine: qdrant-client's spelling of the core's calls ---------------------------------


def _condition(c: core.Condition) -> m.FieldCondition | m.HasVectorCondition:
    if isinstance(c, core.HasVector):
        return m.HasVectorCondition(has_vector=c.name)
    if isinstance(c, core.Match):
        return m.FieldCondition(key=c.key, match=m.MatchValue(value=c.value))
    if isinstance(c, core.MatchAny):
        return m.FieldCondition(key=c.key, match=m.MatchAny(any=list(c.values)))
    if isinstance(c, core.Substring):
        return m.FieldCondition(key=c.key, match=m.MatchSubstring(substring=c.text))
    return m.FieldCondition(key=c.key, match=m.MatchText(text=c.text))


def _filter(where: core.Where) -> m.Filter:
    must_not: list[Any] | None = [_condition(c) for c in where.must_not] or None
    return m.Filter(must=[_condition(c) for c in where.must], must_not=must_not)


def _point(p: core.Point) -> m.PointStruct:
    vectors: dict[str, Any] = {}
    if p.dense is not None:
        vectors[DENSE] = p.dense
    if p.sparse is not None:
        vectors[SPARSE] = m.SparseVector(indices=p.sparse.indices, values=p.sparse.values)
    return m.PointStruct(id=p.id, vector=vectors, payload=p.payload)


def _payload(fields: list[str] | None) -> m.PayloadSelectorInclude | bool:
    return True if fields is None else m.PayloadSelectorInclude(include=fields)


class ClientEngine(core.Engine):
    """The calls of :class:`~semfs.ingest.store.qdrant.Engine` on one collection of a client."""

    def __init__(self, client: QdrantClient, collection: str) -> None:
        self.client = client
        self.collection = collection

    def retrieve(
        self, ids: Sequence[str], fields: list[str] | None = None, with_dense: bool = False
    ) -> Sequence[core.Record]:
        return self.client.retrieve(
            self.collection,
            list(ids),
            with_payload=_payload(fields),
            with_vectors=[DENSE] if with_dense else False,
        )

    def scroll(
        self,
        where: core.Where,
        fields: list[str] | None,
        offset: Any,
        limit: int = core.SCROLL_PAGE,
        with_dense: bool = False,
    ) -> tuple[Sequence[core.Record], Any]:
        return self.client.scroll(
            self.collection,
            scroll_filter=_filter(where),
            limit=limit,
            offset=offset,
            with_payload=_payload(fields),
            with_vectors=[DENSE] if with_dense else False,
        )

    def upsert(self, points: Sequence[core.Point]) -> None:
        self.client.upsert(self.collection, points=[_point(p) for p in points], wait=True)

    def set_vectors(self, dense: Sequence[tuple[str, list[float]]]) -> None:
        vectors = [m.PointVectors(id=point_id, vector={DENSE: vec}) for point_id, vec in dense]
        self.client.update_vectors(self.collection, points=vectors, wait=True)

    def delete(self, ids: Sequence[str]) -> None:
        selector = m.PointIdsList(points=cast(list[m.ExtendedPointId], list(ids)))
        self.client.delete(self.collection, points_selector=selector)

    def delete_where(self, where: core.Where) -> None:
        selector = m.FilterSelector(filter=_filter(where))
        self.client.delete(self.collection, points_selector=selector)

    def count(self, where: core.Where) -> int:
        return int(self.client.count(self.collection, count_filter=_filter(where)).count)

    def fuse(self, query: core.FusedQuery) -> Sequence[core.ScoredPoint]:
        flt = _filter(query.where)
        prefetch = []
        if query.dense is not None:
            prefetch.append(
                m.Prefetch(query=query.dense, using=DENSE, filter=flt, limit=query.candidates)
            )
        if query.sparse is not None:
            vector = m.SparseVector(indices=query.sparse.indices, values=query.sparse.values)
            prefetch.append(
                m.Prefetch(query=vector, using=SPARSE, filter=flt, limit=query.candidates)
            )
        return self.client.query_points(
            self.collection,
            prefetch=prefetch,
            query=m.FusionQuery(fusion=m.Fusion.DBSF),
            query_filter=flt,
            limit=query.limit,
            with_payload=query.with_payload,
            with_vectors=[DENSE] if query.with_dense else False,
        ).points

    def sparse_best(
        self, queries: Sequence[tuple[SparseQuery, core.Where]]
    ) -> list[tuple[float, dict[int, float]] | None]:
        requests = [
            m.QueryRequest(
                query=m.SparseVector(indices=sparse.indices, values=sparse.values),
                using=SPARSE,
                filter=_filter(where),
                limit=1,
                with_payload=False,
                with_vector=[SPARSE],
            )
            for sparse, where in queries
        ]
        found = self.client.query_batch_points(self.collection, requests)
        return [
            (float(r.points[0].score), core.sparse_weights(r.points[0].vector))
            if r.points
            else None
            for r in found
        ]


# --- the store: a server's collection and its manifest points ---------------------------------


class ServerStore(core.QdrantStore):
    backend = "server"

    def __init__(self, address: CollectionAddress, client: QdrantClient | None = None) -> None:
        """The collection at ``address`` (its URL set); ``client``: one to share
        (qdrant-client's local mode takes one per folder)."""
        assert address.url is not None
        collection = self.collection = address.collection
        url = self.url = address.url
        self._local_dir = address.local_dir  # this machine's folder for it (the writers' lock)
        # Local mode has no payload indexes (it warns if asked for one).
        self._payload_indexes = not _local_mode(url)
        self.client = client if client is not None else _client(address)
        self._engine = ClientEngine(self.client, collection)
        # Never started: other clients may write the collection too, so a manifest scrolls.
        self.tree = TreeRecords()
        with _reaching(url):
            self._exists = self.client.collection_exists(collection)
        self._manifest_dropped = False

    @property
    def location(self) -> str:
        return f"{self.url} collection {self.collection}"

    def lock_path(self, name: str) -> Path | None:
        # This machine's writers take turns; another machine's are not seen (writelock).
        return self._local_dir / name

    def exists(self) -> bool:
        return self._exists

    def _open_engine(self) -> ClientEngine | None:
        return self._engine if self._exists else None

    def _missing(self) -> StoreNotFoundError:
        return StoreNotFoundError(
            f"no collection {self.collection!r} at {self.url}: run `semfs ingest DIR` first"
        )

    def create(self, dimension: int) -> None:
        if self._exists or self.client.collection_exists(self.collection):
            self._exists = True
            if self._payload_indexes:
                have = self.client.get_collection(self.collection).payload_schema
                for name in INDEXED_KEYWORDS:  # one added since the collection was made
                    if name not in have:
                        self.client.create_payload_index(
                            self.collection, name, m.PayloadSchemaType.KEYWORD
                        )
            return
        self.client.create_collection(
            self.collection,
            vectors_config={DENSE: m.VectorParams(size=dimension, distance=m.Distance.COSINE)},
            sparse_vectors_config={SPARSE: m.SparseVectorParams(modifier=m.Modifier.IDF)},
        )
        if not self._payload_indexes:
            self._exists = True
            return
        for name in INDEXED_KEYWORDS:
            self.client.create_payload_index(self.collection, name, m.PayloadSchemaType.KEYWORD)
        for name in INDEXED_INTEGERS:
            self.client.create_payload_index(self.collection, name, m.PayloadSchemaType.INTEGER)
        for name in INDEXED_TEXT:
            # Word tokens, lowercased: the same as an unindexed field, so filters agree on
            # collections made before this index existed.
            params = m.TextIndexParams(
                type=m.TextIndexType.TEXT,
                tokenizer=m.TokenizerType.WORD,
                lowercase=True,
                on_disk=True,
            )
            self.client.create_payload_index(self.collection, name, params)
        self._exists = True

    def write_meta(self, meta: StoreMeta) -> None:
        # At every meta write, not only the first: another writer's manifest may have come
        # since, and this meta is the one it would be checked against.
        self._manifest_dropped = False
        super().write_meta(meta)

    def _drop_manifest(self) -> None:
        """Before this instance's first write: no manifest may describe what it changes."""
        if self._manifest_dropped or not self._exists:
            return
        self._engine.delete([manifest_id(i) for i in range(MANIFEST_PARTS)])
        self._manifest_dropped = True

    def read_manifest(self) -> Manifest | None:
        if not self._exists:
            return None
        # One request: the meta and every part the manifest can have.
        ids = [meta_id(), *(manifest_id(i) for i in range(MANIFEST_PARTS))]
        meta: StoreMeta | None = None
        parts: dict[int, dict[str, Any]] = {}
        for record in self._engine.retrieve(ids):
            payload = record.payload or {}
            if payload.get("kind") == KIND_MANIFEST:
                parts[int(payload["part"])] = payload
            elif str(record.id) == meta_id():
                meta = StoreMeta.from_payload(payload)
        if meta is None or not parts:
            return None
        first = parts.get(0, {})
        count, gen = first.get("parts"), first.get("generation")
        if not isinstance(count, int) or sorted(parts) != list(range(count)):
            return None  # torn: another writer is replacing it
        if any(p.get("generation") != gen or p.get("parts") != count for p in parts.values()):
            return None
        try:
            data = base64.b64decode("".join(str(parts[i]["data"]) for i in range(count)))
        except ValueError as exc:
            logger.warning("ignoring the manifest of %s: %s", self.location, exc)
            return None
        manifest = Manifest.decode(data, self.location)
        return manifest if manifest is not None and manifest.matches(meta) else None

    def _keep_manifest(self, meta: StoreMeta) -> None:
        current = self.read_manifest()
        if current is not None and current.meta == meta:
            return
        text = base64.b64encode(self._manifest_bytes(meta)).decode("ascii")
        parts = [
            text[i : i + MANIFEST_PART_BYTES] for i in range(0, len(text), MANIFEST_PART_BYTES)
        ]
        if len(parts) > MANIFEST_PARTS:
            logger.warning(
                "%s: the manifest is too large to store; mounts list the records", self.location
            )
            return
        payloads = [
            {
                "kind": KIND_MANIFEST,
                "generation": meta.generation,
                "part": i,
                "parts": len(parts),
                "data": part,
            }
            for i, part in enumerate(parts)
        ]
        self.engine.upsert([core.Point(manifest_id(i), p) for i, p in enumerate(payloads)])
        self._engine.delete([manifest_id(i) for i in range(len(parts), MANIFEST_PARTS)])
        self._manifest_dropped = False  # the next write drops this one

    def close(self) -> None:
        try:
            self.client.close()
        except Exception as exc:  # closing must not mask the real outcome
            logger.debug("closing qdrant client: %s", exc)


class ServerCatalog(Catalog):
    """The semfs collections of a Qdrant server: those holding a semfs meta point."""

    def __init__(self, address: CollectionAddress) -> None:
        """The collections of the server at ``address`` (its collection name is not used)."""
        assert address.url is not None
        self.address = address
        self.url = address.url
        self.client = _client(address)

    @property
    def location(self) -> str:
        return self.url

    def names(self) -> list[str]:
        with _reaching(self.url):
            every = sorted(c.name for c in self.client.get_collections().collections)
            return [name for name in every if self._meta(name) is not None]

    def _meta(self, name: str) -> StoreMeta | None:
        try:
            records = self.client.retrieve(name, [meta_id()], with_payload=True)
        except (UnexpectedResponse, ValueError) as exc:  # not ours: another kind of points
            logger.debug("collection %s is not a semfs collection: %s", name, exc)
            return None
        payload = records[0].payload if records else None
        if not payload or payload.get("kind") != KIND_META or "model" not in payload:
            return None
        return StoreMeta.from_payload(payload)

    def remove(self, name: str) -> None:
        self.require(name)
        refuse_if_mounted(self.address.named(name))
        with _reaching(self.url):
            self.client.delete_collection(name)

    def rename(self, old: str, new: str) -> None:
        """Qdrant has no rename: the points are copied into a new collection (made as
        :meth:`ServerStore.create` makes one), then the old one is deleted. A copy that
        fails midway deletes the new collection and leaves the old one whole."""
        self.require(old)
        self.check_new_name(new)
        refuse_if_mounted(self.address.named(old))
        meta = self._meta(old)
        assert meta is not None  # require() saw it
        target = ServerStore(self.address.named(new), client=self.client)
        with _reaching(self.url):
            target.create(meta.dimension)
            try:
                offset: m.ExtendedPointId | None = None
                while True:
                    points, offset = self.client.scroll(
                        old,
                        limit=core.SCROLL_PAGE,
                        offset=offset,
                        with_payload=True,
                        with_vectors=True,
                    )
                    batch = [
                        m.PointStruct(id=p.id, vector=cast(Any, p.vector or {}), payload=p.payload)
                        for p in points
                    ]
                    if batch:
                        self.client.upsert(new, points=batch, wait=True)
                    if offset is None:
                        break
            except BaseException:
                self.client.delete_collection(new)
                raise
            self.client.delete_collection(old)

    def close(self) -> None:
        try:
            self.client.close()
        except Exception as exc:  # closing must not mask the real outcome
            logger.debug("closing qdrant client: %s", exc)
