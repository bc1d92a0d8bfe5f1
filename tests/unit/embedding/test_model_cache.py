"""The model cache: one folder per user whatever names the store, exports keyed by the bytes of
the weights (so installs of the same weights share one), stale exports removed. A small folder
of made-up model files stands in for the weights: nothing here loads a model."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from semfs.ingest.embedding.onnx import (
    agreement_path,
    export_path,
    model_cache_dir,
    remove_stale_exports,
    weights_digest,
)


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "venv-a" / "site-packages" / "some_model" / "model"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(bytes(range(256)) * 4096)
    (folder / "tokenizer.json").write_text('{"model": "wordpiece"}')
    (folder / "1_Pooling").mkdir()
    return folder


def test_the_cache_is_the_users_whatever_names_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SEMFS_STORE, XDG_DATA_HOME (the default store) and --store (which never reaches this
    function) leave it where it is; SEMFS_MODEL_CACHE and XDG_CACHE_HOME move it."""
    monkeypatch.delenv("SEMFS_MODEL_CACHE")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    default = tmp_path / "home" / ".cache" / "semfs" / "models"
    assert model_cache_dir() == default
    monkeypatch.setenv("SEMFS_STORE", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert model_cache_dir() == default
    monkeypatch.delenv("SEMFS_STORE")
    assert model_cache_dir() == default
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    assert model_cache_dir() == tmp_path / "xdg-cache" / "semfs" / "models"
    monkeypatch.setenv("SEMFS_MODEL_CACHE", str(tmp_path / "mine"))
    assert model_cache_dir() == tmp_path / "mine"


def test_an_export_is_keyed_by_the_weights_bytes_not_their_install(
    tmp_path: Path, model_dir: Path
) -> None:
    """A second install of the same files (another venv: new mtimes, new inodes) maps to the
    same export; one changed byte, or another backend, to another."""
    first = export_path(model_dir, "onnx")
    assert first.parent == model_cache_dir()
    assert first.name.startswith("some_model-model-onnx-")
    copy = tmp_path / "venv-b" / "site-packages" / "some_model" / "model"
    shutil.copytree(model_dir, copy)
    for f in copy.iterdir():
        os.utime(f, ns=(1, 1))
    assert export_path(copy, "onnx") == first
    assert export_path(model_dir, "onnx-int8") != first
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(1, 1))  # the same size, mtime and inode as before the change
    assert export_path(copy, "onnx") != first


def test_the_digest_is_hashed_once_per_install(model_dir: Path) -> None:
    """The memo answers while the files' names, sizes, times and inodes stay: a search does
    not hash 90 MB of weights each time. A touched file is hashed again."""
    digest = weights_digest(model_dir)
    memo = model_cache_dir() / ".digests.json"
    entry = json.loads(memo.read_text())[str(model_dir.resolve())]
    assert entry[1] == digest
    # A memo that lies is believed while the stat signature matches (that is what it saves)...
    memo.write_text(json.dumps({str(model_dir.resolve()): [entry[0], "remembered"]}))
    assert weights_digest(model_dir) == "remembered"
    # ... and dropped once a file changes.
    (model_dir / "tokenizer.json").write_text('{"model": "wordpiece", "v": 2}')
    assert weights_digest(model_dir) not in ("remembered", digest)


def test_stale_exports_are_removed_and_others_kept(
    tmp_path: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model's other exports for the backend go, with their records and lock files, in
    the cache and in the default store's models/ (where they were kept before); the current
    one, another backend's and another model's stay."""
    monkeypatch.setenv("SEMFS_STORE", str(tmp_path / "store"))
    cache = model_cache_dir()
    legacy = tmp_path / "store" / "models"
    current = export_path(model_dir, "onnx")
    stale = [
        cache / "some_model-model-onnx-0000000000000000.onnx",
        legacy / "model-onnx-1111111111111111.onnx",
    ]
    kept = [
        current,
        cache / "some_model-model-onnx-int8-0000000000000000.onnx",
        cache / "other_model-model-onnx-0000000000000000.onnx",
        legacy / "model-onnx-int8-1111111111111111.onnx",
    ]
    for f in [*stale, *kept]:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"onnx")
        agreement_path(f).write_text("{}")
        (f.parent / f".{f.name}.lock").touch()
    assert sorted(remove_stale_exports(model_dir, "onnx")) == sorted(stale)
    for f in stale:
        assert not f.exists() and not agreement_path(f).exists()
        assert not (f.parent / f".{f.name}.lock").exists()
    for f in kept:
        assert f.exists() and agreement_path(f).exists()
