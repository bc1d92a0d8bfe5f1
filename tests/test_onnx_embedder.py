"""The ONNX Runtime backends (``MODEL@onnx``, ``MODEL@onnx-int8``): names, errors, vectors.

The model tests export the packaged weights once per module (~20-60 s on 2 cores) into a
shared folder, and check the vectors against torch's on real chunk texts."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, SAMPLE_CORPUS, SEMFS

from ingest.backends import open_store
from ingest.embedder import DEFAULT_MODEL, canonical_model_name, load_embedder
from ingest.errors import ModelMismatchError, ModelUnavailableError
from ingest.onnx_embedder import OnnxEmbedder, split_backend
from ingest.pipeline import ingest
from ingest.search import Searcher

pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")


def test_backend_is_part_of_the_recorded_model_name() -> None:
    assert canonical_model_name("all-MiniLM-L6-v2@onnx-int8") == DEFAULT_MODEL + "@onnx-int8"
    assert canonical_model_name("all-minilm-l6-v2@onnx") == DEFAULT_MODEL + "@onnx"
    assert canonical_model_name("all-MiniLM-L6-v2@torch") == DEFAULT_MODEL
    # An '@' inside a path is part of the path, not a backend.
    assert split_backend("/models/a@b/minilm") == ("/models/a@b/minilm", None)
    assert isinstance(load_embedder("all-MiniLM-L6-v2@onnx-int8"), OnnxEmbedder)


def test_unknown_backend_is_one_clear_line() -> None:
    with pytest.raises(ModelUnavailableError, match=r"unknown embedding backend 'onnx8'") as exc:
        load_embedder("all-MiniLM-L6-v2@onnx8")
    assert "\n" not in str(exc.value)


def test_missing_onnxruntime_is_one_line_saying_what_to_install(tmp_path: Path) -> None:
    """The CLI, with onnxruntime made unimportable in its process, as on a machine without it."""
    code = (
        "import sys; sys.modules['onnxruntime'] = None\n"
        "from fusefs.cli import main\n"
        "sys.argv = ['semfs', *sys.argv[1:]]\n"
        "main()\n"
    )
    args = ["ingest", str(SAMPLE_CORPUS), "--store", str(tmp_path / "s")]
    proc = subprocess.run(
        [sys.executable, "-c", code, *args, "--model", "all-MiniLM-L6-v2@onnx"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode != 0
    err = proc.stderr.strip()
    assert "needs onnxruntime" in err, err
    assert "pip install 'semfs[onnx]'" in err, err
    assert "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-models")


@pytest.fixture
def cached(model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("SEMFS_MODEL_CACHE", str(model_cache))
    yield model_cache


def _small_corpus(dst: Path) -> Path:
    """Five files of the sample corpus: enough to ingest and search, quick to embed."""
    for f in sorted(SAMPLE_CORPUS.rglob("*.md*"))[:5]:
        target = dst / f.relative_to(SAMPLE_CORPUS)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(f.read_bytes())
    return dst


def _texts() -> list[str]:
    from ingest.chunking import chunk_text, document_title, embedding_text

    torch = load_embedder(DEFAULT_MODEL)
    out: list[str] = []
    for f in sorted(SAMPLE_CORPUS.rglob("*.md*"))[:6]:
        text = f.read_text(encoding="utf-8")
        title = document_title(text, f.name)
        spans = chunk_text(text, f.name, torch.count_tokens, torch.max_tokens)
        out += [embedding_text(s, title) for s in spans]
    return [*out[:40], "x", "a question an agent might ask about API keys?"]


@pytest.mark.model
@pytest.mark.parametrize(("backend", "mean_floor", "min_floor"), [("onnx", 0.9999, 0.9999)])
def test_onnx_vectors_match_torch(
    cached: Path, backend: str, mean_floor: float, min_floor: float
) -> None:
    import numpy as np

    texts = _texts()
    torch = load_embedder(DEFAULT_MODEL)
    onnx = load_embedder(f"{DEFAULT_MODEL}@{backend}")
    a = np.array(torch.encode(texts, batch_size=8))
    b = np.array(onnx.encode(texts, batch_size=8))
    cos = (a * b).sum(1)
    assert cos.mean() >= mean_floor and cos.min() >= min_floor, (cos.mean(), cos.min())
    assert onnx.dimension == torch.dimension
    assert onnx.max_tokens == torch.max_tokens
    assert onnx.count_tokens(texts) == torch.count_tokens(texts)
    # The export is cached: another embedder finds the same file and does not redo it.
    path = onnx.export_path()  # type: ignore[attr-defined]
    assert path.parent == cached and path.exists()
    mtime = path.stat().st_mtime_ns
    load_embedder(f"{DEFAULT_MODEL}@{backend}").encode(["again"])
    assert path.stat().st_mtime_ns == mtime


@pytest.mark.model
def test_int8_store_records_its_backend_and_queries_follow_it(
    cached: Path, tmp_path: Path, store_dir: Path
) -> None:
    import numpy as np

    texts = _texts()
    torch = np.array(load_embedder(DEFAULT_MODEL).encode(texts))
    int8 = np.array(load_embedder(f"{DEFAULT_MODEL}@onnx-int8").encode(texts))
    cos = (torch * int8).sum(1)
    assert cos.mean() >= 0.98, cos.mean()  # approximate, not equal: measured ~0.99

    source = _small_corpus(tmp_path / "src")
    with open_store(store_dir) as store:
        report = ingest(source, store, model="all-MiniLM-L6-v2@onnx-int8")
        assert report.model == DEFAULT_MODEL + "@onnx-int8"
        meta = store.read_meta()
        assert meta is not None and meta.model == DEFAULT_MODEL + "@onnx-int8"
        searcher = Searcher(store)
        assert isinstance(searcher.embedder, OnnxEmbedder)
        assert searcher.search("how do I add a custom domain", k=3)
        # Another backend's vectors are another model's: refused, saying which backend.
        (source / "new.md").write_text("# New\n\nSomething new.\n")
        with pytest.raises(ModelMismatchError, match="onnx-int8"):
            ingest(source, store, model="all-MiniLM-L6-v2")


@pytest.mark.model
def test_cli_ingest_and_search_with_the_onnx_backend(cached: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    store = str(tmp_path / "cli-store")
    source = str(_small_corpus(tmp_path / "src"))
    ingest_run = subprocess.run(
        [SEMFS, "ingest", source, "--store", store, "-m", "all-MiniLM-L6-v2@onnx"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert ingest_run.returncode == 0, ingest_run.stderr
    status = subprocess.run(
        [SEMFS, "status", "--store", store], capture_output=True, text=True, env=env, check=True
    )
    assert "@onnx" in status.stdout
    search = subprocess.run(
        [SEMFS, "search", "custom domain", "--store", store, "-k", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert search.returncode == 0 and search.stdout.strip(), search.stderr


def test_unwritable_export_folder_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("SEMFS_MODEL_CACHE", str(blocker / "models"))
    embedder = load_embedder("all-MiniLM-L6-v2@onnx")
    with pytest.raises(ModelUnavailableError, match="set SEMFS_MODEL_CACHE") as exc:
        embedder.encode(["x"])
    assert str(blocker) in str(exc.value) and "\n" not in str(exc.value)
