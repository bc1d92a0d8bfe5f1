"""Shared fixtures: every test gets its own store directory; nothing touches the user's."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from semfs.ingest.embedding.torchmodel import torch_installed
from semfs.ingest.store import Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from tests.helpers import SAMPLE_CORPUS
from tests.helpers.mounting import allow_mounts, ingested_sample


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture of the test is set up (a module-scoped one may mount): only a test
    # marked `mount` may start one, so `pytest -m "not mount"` is sure to need no FUSE.
    allow_mounts(item.get_closest_marker("mount") is not None)
    # The default install has no torch; CI runs these in a second venv with the extra
    # (scripts/test.sh).
    if item.get_closest_marker("torch") is not None and not torch_installed():
        pytest.skip("needs the [torch] extra (scripts/setup.sh torch,test makes such a venv)")


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the ONNX exports go: one folder for the whole run, so the one-off export for the
    @onnx backends (~12 s) is paid once, not by every test that uses them. A SEMFS_MODEL_CACHE
    set before the run is kept, so a developer can reuse the export across runs."""
    given = os.environ.get("SEMFS_MODEL_CACHE")
    return Path(given) if given else tmp_path_factory.mktemp("onnx-models")


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_cache: Path) -> None:
    monkeypatch.setenv("SEMFS_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("SEMFS_MODEL_CACHE", str(model_cache))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("QDRANT_URL", raising=False)
    monkeypatch.delenv("QDRANT_API_KEY", raising=False)
    monkeypatch.delenv("SEMFS_COLLECTION", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def sample_copy(tmp_path: Path) -> Path:
    """A writable copy of the in-repo sample corpus."""
    dst = tmp_path / "src"
    shutil.copytree(SAMPLE_CORPUS, dst)
    return dst


@pytest.fixture(scope="module")
def ro_sample(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, Path]]:
    """The sample corpus ingested once per module, for tests that only read: (store, source)."""
    source, store = ingested_sample(tmp_path_factory.mktemp("ro-sample"))
    s = open_store(CollectionAddress(store=store))
    yield s, source
    s.close()


@pytest.fixture
def ro_store(ro_sample: tuple[Store, Path]) -> Store:
    return ro_sample[0]


@pytest.fixture
def ro_source(ro_sample: tuple[Store, Path]) -> Path:
    return ro_sample[1]


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return Path(os.environ["SEMFS_STORE"])


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A temp folder every user may enter (pytest's own is owner-only), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="semfs-test-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
