"""Queries of a torch store on ONNX Runtime: prepared by an ingest, never exported by a search,
checked against torch on real chunks and the public question sets, torch when it must be.

The model tests share the run's model cache (conftest.py): the first to ingest exports the
packaged weights to fp32 ONNX and records their agreement with torch; the others find it."""

from __future__ import annotations

import csv
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from semfs.ingest.embedding.embedder import (
    ONNX_QUERIES,
    PACKAGED_MODEL,
    TORCH_QUERIES,
    QueryEmbedder,
    SentenceTransformerEmbedder,
    load_embedder,
    load_query_embedder,
    model_location,
    prepare_query_embedding,
    query_backend,
)
from semfs.ingest.embedding.onnx import (
    AGREEMENT,
    agreement_path,
    export_path,
    verified_query_export,
)
from semfs.ingest.pipeline import ingest
from semfs.ingest.search import Searcher
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.schema import StoreMeta
from tests.helpers import REPO, SAMPLE_CORPUS, SEMFS, shared_path

QUESTION_SETS = ("fastapi-docs", "mem0-docs", "mintlify-docs")


def _corpus(dst: Path, files: int = 12) -> Path:
    """The first ``files`` files of the sample corpus: several documents to rank, quick to embed."""
    for f in sorted(SAMPLE_CORPUS.rglob("*.md*"))[:files]:
        target = dst / f.relative_to(SAMPLE_CORPUS)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(f.read_bytes())
    return dst


def _questions() -> list[str]:
    out: list[str] = []
    for name in QUESTION_SETS:
        path = shared_path("datasets", "doc-questions", f"{name}.tsv")
        with path.open(newline="") as f:
            out += [row["question"] for row in csv.DictReader(f, delimiter="\t")]
    return out


def _torch_store(meta_dir: Path) -> None:
    """A store recorded as built by torch (nothing embedded: nothing loads)."""
    with open_store(meta_dir) as store:
        store.create(384)
        store.write_meta(StoreMeta(model=PACKAGED_MODEL, dimension=384))


@pytest.mark.model
def test_torch_store_queries_run_on_onnx_with_the_same_vectors_and_rankings(
    tmp_path: Path, store_dir: Path
) -> None:
    """An ingest with torch prepares the fp32 export; the store's searches then embed with it,
    and agree with torch: cosine >= 0.9999 on every chunk and question, identical top 10 for
    every question of the three public sets, in hybrid and semantic mode."""
    import numpy as np

    torch = load_embedder(PACKAGED_MODEL)
    assert isinstance(torch, SentenceTransformerEmbedder)
    with open_store(store_dir) as store:
        report = ingest(_corpus(tmp_path / "src"), store, embedder=torch)
        assert report.chunks_embedded > 0
        prepare_query_embedding(torch)  # None when an earlier test of the run did it
        location = Path(model_location(PACKAGED_MODEL))
        path, why = verified_query_export(location)
        assert path is not None, why
        record = json.loads(agreement_path(path).read_text())
        assert record["min_cosine"] >= AGREEMENT

        searcher = Searcher(store)
        assert isinstance(searcher.embedder, QueryEmbedder)
        assert query_backend(searcher.embedder) == ONNX_QUERIES
        reference = Searcher(store, embedder=torch)

        # Real chunks: every chunk text of the store, as the model saw it when ingested.
        texts = [
            rec.text
            for doc in store.list_documents()
            for rec in store.get_chunks(doc.path, doc.gen, range(doc.chunks))
        ]
        questions = _questions()
        a = np.array(torch.encode([*texts, *questions]))
        b = np.array(searcher.embedder.encode([*texts, *questions]))
        cosine = (a * b).sum(1)
        assert cosine.min() >= AGREEMENT, (cosine.min(), int(cosine.argmin()))

        different = []
        for q in questions:
            for mode in ("hybrid", "semantic"):
                got = [h.path for h in searcher.search(q, k=10, mode=mode)]
                want = [h.path for h in reference.search(q, k=10, mode=mode)]
                if got != want:
                    different.append((q, mode, got, want))
        assert different == [], different[:3]
        assert searcher.embedder.loaded
        assert "torch" not in type(searcher.embedder._embedder()).__name__.lower()


def test_a_search_never_exports_and_says_why_it_uses_torch(
    tmp_path: Path,
    store_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No export yet, a record that disagrees, an export changed after its check: each keeps
    the queries on torch with a log line saying why, and a search writes nothing to the cache."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("SEMFS_MODEL_CACHE", str(cache))
    _torch_store(store_dir)
    location = Path(model_location(PACKAGED_MODEL))
    with (
        caplog.at_level(logging.INFO, logger="semfs.ingest.embedding.embedder"),
        open_store(store_dir) as s,
    ):
        searcher = Searcher(s)
        assert query_backend(searcher.embedder) == TORCH_QUERIES
        assert "no ONNX export" in caplog.text and "semfs ingest" in caplog.text
        assert not cache.exists()  # nothing exported, not even a folder made

        export = export_path(location, "onnx")
        export.parent.mkdir(parents=True)
        export.write_bytes(b"not a model")
        caplog.clear()
        assert query_backend(load_query_embedder(PACKAGED_MODEL)) == TORCH_QUERIES
        assert "never checked against torch" in caplog.text

        st = export.stat()
        record = {"export": [st.st_size, st.st_mtime_ns], "min_cosine": 0.97, "texts": 6}
        agreement_path(export).write_text(json.dumps(record))
        caplog.clear()
        assert query_backend(load_query_embedder(PACKAGED_MODEL)) == TORCH_QUERIES
        assert "disagrees with torch (cosine 0.97" in caplog.text

        agreement_path(export).write_text(json.dumps({**record, "min_cosine": 0.99999}))
        assert query_backend(load_query_embedder(PACKAGED_MODEL)) == ONNX_QUERIES
        export.write_bytes(b"changed after its check")
        os.utime(export, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
        caplog.clear()
        assert query_backend(load_query_embedder(PACKAGED_MODEL)) == TORCH_QUERIES
        assert "changed after it was checked" in caplog.text
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        [export.name, agreement_path(export).name]
    )
    # Another model's store (an ONNX backend, the stand-in) embeds queries as its documents.
    assert query_backend(load_query_embedder("hash")) == "hash (test stand-in)"
    assert query_backend(load_query_embedder(PACKAGED_MODEL + "@onnx-int8")) == ("onnxruntime int8")


@pytest.mark.model
def test_an_export_that_cannot_load_falls_back_to_torch(
    tmp_path: Path,
    store_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A recorded, agreeing export whose file is damaged: the search still answers, on torch,
    and says so once."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("SEMFS_MODEL_CACHE", str(cache))
    export = export_path(Path(model_location(PACKAGED_MODEL)), "onnx")
    export.parent.mkdir(parents=True)
    export.write_bytes(b"\x08\x07 damaged protobuf")
    st = export.stat()
    record = {"export": [st.st_size, st.st_mtime_ns], "min_cosine": 1.0, "texts": 6}
    agreement_path(export).write_text(json.dumps(record))
    embedder = load_query_embedder(PACKAGED_MODEL)
    assert query_backend(embedder) == ONNX_QUERIES
    with caplog.at_level(logging.WARNING):
        vector = embedder.encode(["rotate an api key"])[0]
    assert len(vector) == 384
    assert query_backend(embedder) == TORCH_QUERIES
    assert "cannot load the ONNX export" in caplog.text


@pytest.mark.model
def test_cli_ingest_prepares_searches_and_a_fresh_search_imports_no_torch(
    tmp_path: Path, model_cache: Path
) -> None:
    """`semfs ingest` of a torch store leaves the export checked; a fresh `semfs search` then
    embeds the query with onnxruntime alone, ranking as torch does."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    store = tmp_path / "cli-store"
    source = _corpus(tmp_path / "src", files=5)
    run = subprocess.run(
        [SEMFS, "ingest", str(source), "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    # Progress a person can follow: the model's load and its time, then the chunks.
    assert f"Loading model {PACKAGED_MODEL} ..." in run.stderr, run.stderr
    assert re.search(rf"Loaded model {PACKAGED_MODEL} in \d+\.\d s", run.stderr), run.stderr
    assert re.search(r"Embedding: (\d+)/\1 chunks \(100%\)", run.stderr), run.stderr
    assert verified_query_export(Path(model_location(PACKAGED_MODEL)))[0] is not None
    query = ["--store", str(store), "-k", "5", "--json"]
    r = subprocess.run(
        [sys.executable, "-X", "importtime", SEMFS, "search", "custom domain", *query],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    imported = set(re.findall(r"^import time:.*\|\s+([\w.]+)$", r.stderr, re.M))
    assert "onnxruntime" in imported
    assert not imported & {"torch", "transformers", "sentence_transformers"}
    with open_store(store) as s:
        want = [
            h.path
            for h in Searcher(s, embedder=load_embedder(PACKAGED_MODEL)).search(
                "custom domain", k=5
            )
        ]
    assert [h["path"] for h in json.loads(r.stdout)] == want
    shutil.rmtree(store)
