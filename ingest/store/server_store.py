"""Server backend: a Qdrant server or cluster through qdrant-client.

qdrant_client is imported here only, and this module only when ``--url`` is given: its import
costs ~1 s that the embedded path must not pay. Sharding and replication are the server's.
A ``file:`` URL opens qdrant-client's local mode instead, which tests use as a stand-in server.

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
from typing import Any, cast

from qdrant_client import QdrantClient
from qdrant_client import models as m
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from semfs.ingest.errors import StoreNotFoundError, StoreUnavailableError
from semfs.ingest.store import FUSION_CANDIDATES, LineSpan, SparseQuery, Store, similarity
from semfs.ingest.store.catalog import Catalog, refuse_if_mounted
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
    KIND_MANIFEST,
    KIND_META,
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
    manifest_id,
    meta_id,
)

logger = logging.getLogger(__name__)

SCROLL_PAGE = 1024
# The manifest is kept in up to MANIFEST_PARTS points of MANIFEST_PART_BYTES (base64) each, so
# one retrieve of fixed ids reads it with the meta: 64 x 4 MiB covers millions of documents.
MANIFEST_PARTS = 64
MANIFEST_PART_BYTES = 4 << 20


def _client(url: str, api_key: str | None, timeout: float) -> QdrantClient:
    """A client for ``url`` (a ``file:`` URL: qdrant-client's local mode)."""
    with _reaching(url):
        if url.startswith("file:"):
            return QdrantClient(path=url.removeprefix("file://").removeprefix("file:"))
        # No client-side version check: qdrant-client runs it in a thread of its own that
        # prints a Python warning to stderr whenever it happens to finish, so an unreachable
        # server's one-line error sometimes came with three lines of noise.
        return QdrantClient(
            url=url, api_key=api_key, timeout=int(timeout), check_compatibility=False
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


def _match(key: str, value: str | int) -> m.FieldCondition:
    return m.FieldCondition(key=key, match=m.MatchValue(value=value))


def _chunk_filter(under: str | None) -> m.Filter:
    must: list[Any] = [_match("kind", KIND_CHUNK)]
    if under:
        must.append(_match("dirs", under))
    return m.Filter(must=must)


class ServerStore(Store):
    backend = "server"

    def __init__(
        self,
        url: str,
        collection: str,
        api_key: str | None = None,
        timeout: float = 10.0,
        client: QdrantClient | None = None,
    ) -> None:
        """``client``: one to share (qdrant-client's local mode takes one per folder)."""
        self.collection = collection
        self.url = url
        self.client = client if client is not None else _client(url, api_key, timeout)
        with _reaching(url):
            self._exists = self.client.collection_exists(collection)
        self._manifest_dropped = False

    @property
    def location(self) -> str:
        return f"{self.url} collection {self.collection}"

    def exists(self) -> bool:
        return self._exists

    def _require(self) -> None:
        if not self._exists:
            raise StoreNotFoundError(
                f"no collection {self.collection!r} at {self.url}: run `semfs ingest DIR` first"
            )

    def create(self, dimension: int) -> None:
        if self._exists or self.client.collection_exists(self.collection):
            self._exists = True
            return
        self.client.create_collection(
            self.collection,
            vectors_config={DENSE: m.VectorParams(size=dimension, distance=m.Distance.COSINE)},
            sparse_vectors_config={SPARSE: m.SparseVectorParams(modifier=m.Modifier.IDF)},
        )
        if self.url.startswith("file:"):
            self._exists = True
            return  # local mode has no payload indexes (it warns if asked)
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

    def read_meta(self) -> StoreMeta | None:
        if not self._exists:
            return None
        records = self.client.retrieve(self.collection, [meta_id()], with_payload=True)
        return StoreMeta.from_payload(records[0].payload or {}) if records else None

    def write_meta(self, meta: StoreMeta) -> None:
        # At every meta write, not only the first: another writer's manifest may have come
        # since, and this meta is the one it would be checked against.
        self._manifest_dropped = False
        self._drop_manifest()
        self._upsert([m.PointStruct(id=meta_id(), vector={}, payload=meta.to_payload())])

    def _upsert(self, points: list[m.PointStruct]) -> None:
        self._require()
        self.client.upsert(self.collection, points=points, wait=True)

    def _drop_manifest(self) -> None:
        """Before this instance's first write: no manifest may describe what it changes."""
        if self._manifest_dropped or not self._exists:
            return
        ids: list[m.ExtendedPointId] = [manifest_id(i) for i in range(MANIFEST_PARTS)]
        self.client.delete(self.collection, points_selector=m.PointIdsList(points=ids))
        self._manifest_dropped = True

    def read_manifest(self) -> Manifest | None:
        if not self._exists:
            return None
        # One request: the meta and every part the manifest can have.
        ids: list[m.ExtendedPointId] = [meta_id(), *(manifest_id(i) for i in range(MANIFEST_PARTS))]
        meta: StoreMeta | None = None
        parts: dict[int, dict[str, Any]] = {}
        for record in self.client.retrieve(self.collection, ids, with_payload=True):
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

    def write_manifest(self, generation: int) -> None:
        meta = self.read_meta()
        if meta is None or meta.dirty or meta.generation != generation:
            return
        current = self.read_manifest()
        if current is not None and current.meta == meta:
            return
        flt = m.Filter(must=[_match("kind", KIND_DOC)])
        docs = [DocumentRecord.from_payload(p) for p in self._scroll(flt, None)]
        data = Manifest.of(meta, docs, self.list_directories()).to_bytes()
        text = base64.b64encode(data).decode("ascii")
        parts = [
            text[i : i + MANIFEST_PART_BYTES] for i in range(0, len(text), MANIFEST_PART_BYTES)
        ]
        if len(parts) > MANIFEST_PARTS:
            logger.warning(
                "%s: the manifest is too large to store; mounts list the records", self.location
            )
            return
        self._upsert(
            [
                m.PointStruct(
                    id=manifest_id(i),
                    vector={},
                    payload={
                        "kind": KIND_MANIFEST,
                        "generation": generation,
                        "part": i,
                        "parts": len(parts),
                        "data": part,
                    },
                )
                for i, part in enumerate(parts)
            ]
        )
        stale: list[m.ExtendedPointId] = [manifest_id(i) for i in range(len(parts), MANIFEST_PARTS)]
        self.client.delete(self.collection, points_selector=m.PointIdsList(points=stale))
        self._manifest_dropped = False  # the next write drops this one

    def list_documents(self) -> list[DocumentRecord]:
        if not self._exists:
            return []
        flt = m.Filter(must=[_match("kind", KIND_DOC)])
        return [DocumentRecord.from_payload(p) for p in self._scroll(flt, DOC_TREE_FIELDS)]

    def get_document(self, path: str) -> DocumentRecord | None:
        if not self._exists:
            return None
        records = self.client.retrieve(self.collection, [doc_id(path)], with_payload=True)
        return DocumentRecord.from_payload(records[0].payload or {}) if records else None

    def put_document(self, record: DocumentRecord) -> None:
        self._drop_manifest()
        self._upsert(
            [m.PointStruct(id=doc_id(record.path), vector={}, payload=record.to_payload())]
        )

    def delete_documents(self, paths: Sequence[str]) -> None:
        if not paths:
            return
        self._drop_manifest()
        self.client.delete(
            self.collection, points_selector=m.PointIdsList(points=[doc_id(p) for p in paths])
        )
        for path in paths:
            self.delete_stale_chunks(path, None)

    def list_directories(self) -> list[DirectoryRecord]:
        if not self._exists:
            return []
        out: list[DirectoryRecord] = []
        offset: Any = None
        while True:
            records, offset = self.client.scroll(
                self.collection,
                scroll_filter=m.Filter(must=[_match("kind", KIND_DIR)]),
                limit=SCROLL_PAGE,
                offset=offset,
                with_payload=True,
            )
            out.extend(DirectoryRecord.from_payload(r.payload or {}) for r in records)
            if offset is None:
                return out

    def put_directories(self, records: Sequence[DirectoryRecord]) -> None:
        if records:
            self._drop_manifest()
            self._upsert(
                [
                    m.PointStruct(id=dir_id(r.path), vector={}, payload=r.to_payload())
                    for r in records
                ]
            )

    def delete_directories(self, paths: Sequence[str]) -> None:
        if paths:
            self._drop_manifest()
            self.client.delete(
                self.collection, points_selector=m.PointIdsList(points=[dir_id(p) for p in paths])
            )

    def upsert_chunks(self, points: Sequence[ChunkPoint]) -> None:
        if not points:
            return
        self._drop_manifest()
        self._upsert(
            [
                m.PointStruct(
                    id=chunk_id(p.record.path, p.record.gen, p.record.index),
                    vector={
                        DENSE: p.dense,
                        SPARSE: m.SparseVector(indices=p.sparse_indices, values=p.sparse_values),
                    },
                    payload=p.record.to_payload(),
                )
                for p in points
            ]
        )

    def get_chunks(self, path: str, gen: int, indexes: Sequence[int]) -> list[ChunkRecord]:
        self._require()
        ids = [chunk_id(path, gen, i) for i in indexes]
        records = self.client.retrieve(self.collection, ids, with_payload=True)
        by_index = {int((r.payload or {})["index"]): r for r in records}
        return [
            ChunkRecord.from_payload(by_index[i].payload or {}) for i in indexes if i in by_index
        ]

    def chunk_texts(self, path: str, gen: int, indexes: Sequence[int]) -> dict[int, str]:
        self._require()
        ids = [chunk_id(path, gen, i) for i in indexes]
        records = self.client.retrieve(self.collection, ids, with_payload=["index", "text"])
        return {int(p["index"]): str(p["text"]) for p in (r.payload for r in records) if p}

    def delete_stale_chunks(self, path: str, keep_gen: int | None) -> None:
        self._drop_manifest()
        must_not: list[Any] | None = [_match("gen", keep_gen)] if keep_gen is not None else None
        kinds = m.FieldCondition(key="kind", match=m.MatchAny(any=[KIND_CHUNK, KIND_BLOB]))
        flt = m.Filter(must=[kinds, _match("path", path)], must_not=must_not)
        self.client.delete(self.collection, points_selector=m.FilterSelector(filter=flt))

    def chunk_versions(self) -> set[tuple[str, int]]:
        if not self._exists:
            return set()
        kinds = m.FieldCondition(key="kind", match=m.MatchAny(any=[KIND_CHUNK, KIND_BLOB]))
        pairs = self._scroll(m.Filter(must=[kinds]), ["path", "gen"])
        return {(str(p["path"]), int(p["gen"])) for p in pairs}

    def put_blob(self, path: str, gen: int, data: bytes) -> None:
        self._drop_manifest()
        for point_id, payload in blob_payloads(path, gen, data):
            self._upsert([m.PointStruct(id=point_id, vector={}, payload=payload)])

    def read_blob(self, path: str, gen: int, indexes: Sequence[int]) -> dict[int, bytes]:
        self._require()
        ids = [blob_id(path, gen, i) for i in indexes]
        records = self.client.retrieve(self.collection, ids, with_payload=True)
        return dict(blob_part(r.payload) for r in records if r.payload)

    def query(
        self,
        dense: list[float],
        sparse: SparseQuery,
        mode: str,
        limit: int,
        under: str | None = None,
    ) -> list[ScoredChunk]:
        if not self._exists:
            return []
        flt = _chunk_filter(under)
        if mode == "keyword" and not sparse.indices:
            return []
        sparse_vec = m.SparseVector(indices=sparse.indices, values=sparse.values)
        # As in EdgeStore.query: one prefetch per retriever, fused by DBSF in every mode.
        candidates = max(limit, FUSION_CANDIDATES)
        prefetch = []
        if mode != "keyword":
            prefetch.append(m.Prefetch(query=dense, using=DENSE, filter=flt, limit=candidates))
        if mode != "semantic" and sparse.indices:
            prefetch.append(
                m.Prefetch(query=sparse_vec, using=SPARSE, filter=flt, limit=candidates)
            )
        points = self.client.query_points(
            self.collection,
            prefetch=prefetch,
            query=m.FusionQuery(fusion=m.Fusion.DBSF),
            query_filter=flt,
            limit=limit,
            with_payload=True,
            with_vectors=[DENSE] if dense else False,
        ).points
        out = []
        for p in points:
            sim = similarity(dense, p.vector, DENSE)
            out.append(ScoredChunk(ChunkRecord.from_payload(p.payload or {}), float(p.score), sim))
        return out

    def _scroll(self, flt: m.Filter, fields: list[str] | None) -> Iterator[dict[str, Any]]:
        """Payloads matching ``flt``: only ``fields``, or whole when None."""
        offset: Any = None
        payload: m.PayloadSelectorInclude | bool = (
            True if fields is None else m.PayloadSelectorInclude(include=fields)
        )
        while True:
            records, offset = self.client.scroll(
                self.collection,
                scroll_filter=flt,
                limit=SCROLL_PAGE,
                offset=offset,
                with_payload=payload,
            )
            yield from (r.payload for r in records if r.payload)
            if offset is None:
                return

    def chunk_paths_matching(
        self, substrings: Sequence[str], words: Sequence[str], under: str | None = None
    ) -> list[str]:
        if not self._exists:
            return []
        must: list[Any] = list(_chunk_filter(under).must or [])
        must += [
            m.FieldCondition(key="text", match=m.MatchSubstring(substring=s)) for s in substrings
        ]
        if words:
            must.append(m.FieldCondition(key="text", match=m.MatchText(text=" ".join(words))))
        flt = m.Filter(must=must)
        return sorted({str(p["path"]) for p in self._scroll(flt, ["path"])})

    def chunk_line_spans(self, under: str | None = None) -> Iterator[LineSpan]:
        if not self._exists:
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
        if not self._exists:
            return 0
        return int(self.client.count(self.collection, count_filter=_chunk_filter(None)).count)

    def close(self) -> None:
        try:
            self.client.close()
        except Exception as exc:  # closing must not mask the real outcome
            logger.debug("closing qdrant client: %s", exc)


class ServerCatalog(Catalog):
    """The semfs collections of a Qdrant server: those holding a semfs meta point."""

    def __init__(self, url: str, api_key: str | None = None, timeout: float = 10.0) -> None:
        self.url = url
        self.client = _client(url, api_key, timeout)

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
        refuse_if_mounted(name, self.url)
        with _reaching(self.url):
            self.client.delete_collection(name)

    def rename(self, old: str, new: str) -> None:
        """Qdrant has no rename: the points are copied into a new collection (made as
        :meth:`ServerStore.create` makes one), then the old one is deleted. A copy that
        fails midway deletes the new collection and leaves the old one whole."""
        self.require(old)
        self.check_new_name(new)
        refuse_if_mounted(old, self.url)
        meta = self._meta(old)
        assert meta is not None  # require() saw it
        target = ServerStore(self.url, new, client=self.client)
        with _reaching(self.url):
            target.create(meta.dimension)
            try:
                offset: m.ExtendedPointId | None = None
                while True:
                    points, offset = self.client.scroll(
                        old, limit=SCROLL_PAGE, offset=offset, with_payload=True, with_vectors=True
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
