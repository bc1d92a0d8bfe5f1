"""What every embedding module shares: the interface, the model names, where the packaged
model's files are, and how a name says its backend.

The bottom of ``semfs.ingest.embedding``: it imports nothing else of it. :mod:`.onnx` (ONNX
Runtime), :mod:`.torchmodel` (torch, the ``[torch]`` extra) and :mod:`.embedder` (which picks
one for a model name) build on it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from semfs.ingest.errors import ModelUnavailableError

# The packaged model. Named alone (or with ``@torch``) its vectors are torch's fp32 ones,
# computed on ONNX Runtime from the torch-free graph (:mod:`semfs.ingest.embedding.bert`).
PACKAGED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# Its files, in this package (setup.py puts them there; packaged_model.json says what they are).
PACKAGED_FOLDER = "all-MiniLM-L6-v2"
# What a new store is built with: fp32. int8 on ONNX Runtime (``@onnx-int8``) stays an
# option: issue 11's rule for the default (>= 1.8x torch's chunks/s, Cranfield nDCG@10 within
# 0.005) held only while the benchmark capped torch at one thread; with both on both cores it
# is 1.03x (docs/cli.md "Embedding backends"; BENCHMARKS.md section 7).
DEFAULT_MODEL = PACKAGED_MODEL
HASH_MODEL = "hash"
# Room left in the model window for the context line (title > heading) added before a chunk.
CONTEXT_RESERVE_TOKENS = 32
DEFAULT_BATCH_SIZE = 32
# What embeds a store's documents and queries, as `semfs status` says it.
ONNX_QUERIES = "onnxruntime fp32"
TORCH_QUERIES = "torch fp32"
# Told when a model starts loading (seconds None) and when it is loaded (seconds taken).
OnLoad = Callable[[str, "float | None"], None]


class Embedder(Protocol):
    name: str

    @property
    def dimension(self) -> int: ...

    @property
    def max_tokens(self) -> int: ...

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> list[list[float]]: ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]: ...


BACKENDS = ("onnx", "onnx-int8")


def split_backend(name: str) -> tuple[str, str | None]:
    """``"m@onnx-int8"`` -> ``("m", "onnx-int8")``; ``"m"`` -> ``("m", None)``."""
    base, sep, backend = name.rpartition("@")
    if not sep or "/" in backend:  # an '@' inside a path is not a backend
        return name, None
    if backend == "torch":
        return base, None
    if backend not in BACKENDS:
        raise ModelUnavailableError(
            f"unknown embedding backend {backend!r} in {name!r}: name the model alone (fp32, "
            f"the default), or add {' or '.join('@' + b for b in BACKENDS)}"
        )
    return base, backend


def canonical_model_name(name: str) -> str:
    """The name recorded in a store, so ``all-MiniLM-L6-v2`` and its hub name compare equal.

    An ONNX backend stays part of the name (``...@onnx-int8``): vectors of another backend
    are another model's. A name without a backend (or with ``@torch``) means torch fp32, and
    ``@torch`` is dropped, so stores built with torch keep matching their recorded name."""
    base, backend = split_backend(name)
    if base in ("all-MiniLM-L6-v2", "all-minilm-l6-v2", PACKAGED_MODEL):
        base = PACKAGED_MODEL
    return f"{base}@{backend}" if backend else base


def packaged_model_dir() -> Path:
    """The packaged model's folder, in this package (the wheel carries it; in a checkout,
    ``pip install -e .`` fetches it: setup.py)."""
    folder = Path(__file__).resolve().parent / PACKAGED_FOLDER
    if not (folder / "model.safetensors").is_file():
        raise ModelUnavailableError(
            f"the packaged model's files are missing from {folder}: reinstall semfs "
            "(in a checkout: pip install -e .)"
        )
    return folder


def model_location(name: str) -> str:
    """Where a model's files are: the packaged model's folder, else ``name`` itself."""
    if canonical_model_name(name) == PACKAGED_MODEL:
        return str(packaged_model_dir())
    return name
