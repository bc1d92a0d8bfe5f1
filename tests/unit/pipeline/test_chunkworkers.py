"""The first pass's chunking children (issue 45.4): what they make is what the run makes in
process, record for record and BM25 vector for vector, and a run that uses them writes the
same points as one that does not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from semfs.ingest import chunkworkers
from semfs.ingest.chunkworkers import ChunkWorkers
from semfs.ingest.embedding.embedder import HashEmbedder
from semfs.ingest.pipeline import ingest
from semfs.ingest.records import chunk_document, keyword_text
from semfs.ingest.sources import Document, Original
from semfs.ingest.store import DelegatingStore
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.bm25 import bm25_for
from semfs.ingest.store.schema import ChunkPoint

PROSE = "# Rotating keys\n\n" + "".join(
    f"## Step {i}\n\nRotate the kéy {i} with `semfs rotate --id {i}`; "
    f"{'antidisestablishment' * 4} then wait.\n\n"
    for i in range(40)
)
CODE = "".join(
    f"class Uploader{i}:\n    def retryUpload(self, n: int) -> int:\n        return n + {i}\n\n"
    for i in range(30)
)
VIEW = "".join(f"Page {i} of the manual: turbine gasket ✓ check.\n\n" for i in range(60))


def _docs() -> list[Document]:
    pages = Original(
        "manual.pdf", b"", 1, "", "pdf", "page", tuple((2 * i, str(i)) for i in range(60))
    )
    return [
        Document("guide/keys.md", PROSE, len(PROSE), 0.0, "", 0),
        Document("src/upload.py", CODE, len(CODE), 0.0, "", 0),
        Document("manual.pdf.md", VIEW, len(VIEW), 0.0, "", 0, original=pages),
    ]


def test_children_chunk_and_weigh_as_the_run_does() -> None:
    """Prose, code (its outline and symbols) and a paged view: the same
    records and model texts as chunk_document, and the BM25 vectors (and long words cut) of
    the run's weights once they are known; none before."""
    embedder = HashEmbedder(384)
    workers = ChunkWorkers("hash", lambda: embedder.max_tokens, 7, jobs=1)
    try:
        for doc in _docs():
            records, texts = chunk_document(embedder, doc, 7)
            workers.bm25 = None
            before = workers.chunk(doc)
            assert before is not None and before.sparse is None
            assert (before.records, before.texts) == (records, texts)
            workers.bm25 = (31.5,)
            after = workers.chunk(doc)
            bm25 = bm25_for(31.5)
            pairs = zip(records, texts, strict=True)
            vectors = [bm25.embed_document(keyword_text(r, t)) for r, t in pairs]
            sparse = [(list(sv.indices), list(sv.values)) for sv in vectors]
            assert after is not None and after.records == records and after.sparse == sparse
            assert after.words_cut == bm25.words_cut
    finally:
        workers.close()


class _Points(DelegatingStore):
    """Keeps what each upsert writes."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.points: list[str] = []

    def upsert_chunks(self, points: list[ChunkPoint]) -> None:
        for p in points:
            payload = [p.record.to_payload(), p.sparse_indices, p.sparse_values]
            self.points.append(json.dumps(payload, sort_keys=True))
        self.inner.upsert_chunks(points)


def test_a_run_with_children_writes_what_one_without_writes(
    tmp_path: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first ingest whose BM25 weights are measured mid-run (documents chunked before and
    after), then a re-ingest of changed and new files: the points written are the same with
    children as in process, and the children made them."""
    src = tmp_path / "src"
    for i, doc in enumerate(_docs() * 20):
        path = src / f"d{i}" / doc.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(doc.text or "")
    monkeypatch.setattr("semfs.ingest.writer.BM25_SAMPLE_CHUNKS", 64)
    made = []
    chunk = ChunkWorkers.chunk

    def counted(self: ChunkWorkers, doc: Document) -> Any:
        made.append(chunk(self, doc))
        return made[-1]

    monkeypatch.setattr(ChunkWorkers, "chunk", counted)
    written = {}
    for side, from_files in (("in process", 10**9), ("children", 1)):
        monkeypatch.setattr(chunkworkers, "FROM_FILES", from_files)
        with open_store(CollectionAddress(store=store_dir / side.replace(" ", "-"))) as inner:
            store = _Points(inner)
            ingest(src, store, model="hash", dense=False, jobs=2)
            (src / "d0" / "guide" / "keys.md").write_text(PROSE.replace("wait", "sleep"))
            (src / "d9" / "new.md").write_text(PROSE)
            ingest(src, store, model="hash", dense=False, jobs=2)
            (src / "d0" / "guide" / "keys.md").write_text(PROSE)
            (src / "d9" / "new.md").unlink()
            written[side] = store.points
    assert written["children"] == written["in process"]
    # The first documents went before the weights were measured; those read more than a
    # read-ahead (chunkworkers.AHEAD per thread) later came back weighed.
    assert sum(1 for m in made if m is not None and m.sparse is not None) >= 2
    assert sum(1 for m in made if m is not None and m.sparse is None) >= 1
