"""Embedding models behind one small interface, loaded lazily.

Rules a caller may rely on:

* The default model, all-MiniLM-L6-v2, whose files ship in semfs's own package
  (:func:`packaged_model_dir`), runs in fp32 on ONNX Runtime from a graph written from its
  weights without torch (:mod:`semfs.ingest.embedding.bert`): documents and queries, from the
  first run on. Its vectors are torch's to cosine >= 0.99999, so a store built with torch
  keeps its recorded name and rankings.
* ``MODEL@onnx`` and ``MODEL@onnx-int8`` run on ONNX Runtime too (int8: vectors of their own).
* Any other sentence-transformers model runs on torch, with the ``[torch]`` extra
  (:mod:`semfs.ingest.embedding.torchmodel`, the one module that imports it); without it the
  first use says in one line what to install. Nothing here imports torch: an unchanged
  re-ingest, ``semfs status`` and a mount never pay for it.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path

# The interface and the names, for the modules that import them from here.
from semfs.ingest.embedding.base import (  # noqa: F401 - re-exported
    BACKENDS,
    CONTEXT_RESERVE_TOKENS,
    DEFAULT_BATCH_SIZE,
    DEFAULT_MODEL,
    HASH_MODEL,
    ONNX_QUERIES,
    PACKAGED_FOLDER,
    PACKAGED_MODEL,
    TORCH_QUERIES,
    Embedder,
    OnLoad,
    canonical_model_name,
    model_location,
    packaged_model_dir,
    split_backend,
)

logger = logging.getLogger(__name__)


def load_embedder(name: str = DEFAULT_MODEL, threads: int | None = None) -> Embedder:
    """What embeds the documents of a store built with ``name``; the model loads on first use.

    ``name`` is a sentence-transformers model name or local path. The default,
    :data:`DEFAULT_MODEL`, is served from this package's own files, offline, in fp32 on ONNX
    Runtime without torch. ``hash`` (or ``hash:DIM``) is a deterministic bag-of-words stand-in
    for tests and benchmarks: fast, not semantic. ``MODEL@onnx`` and ``MODEL@onnx-int8`` run
    the model with ONNX Runtime (:mod:`semfs.ingest.embedding.onnx`). Any other model runs on
    torch (:mod:`semfs.ingest.embedding.torchmodel`, the ``[torch]`` extra). ``threads`` caps
    the threads of the session (torch: of the whole process once the model loads).
    """
    from semfs.ingest.embedding.onnx import OnnxEmbedder

    canonical = canonical_model_name(name)
    if canonical == HASH_MODEL or canonical.startswith(HASH_MODEL + ":"):
        dim = int(canonical.split(":", 1)[1]) if ":" in canonical else 384
        return HashEmbedder(dim)
    base, backend = split_backend(canonical)
    if backend is not None or base == PACKAGED_MODEL:
        # The packaged model named alone: fp32, the graph ONNX Runtime runs is torch-free.
        location, kind = model_location(base), backend or "onnx"
        return OnnxEmbedder(
            canonical, location, kind, CONTEXT_RESERVE_TOKENS, threads, torch_writer=_with_torch
        )
    from semfs.ingest.embedding.torchmodel import Fp32Embedder

    return Fp32Embedder(canonical, threads, export=True)


def counts_alone(name: str) -> bool:
    """Whether the tokens of ``name``'s texts are counted without loading a model: the
    stand-in's, and an ONNX model's (its tokenizer alone); what a chunking child
    (:mod:`semfs.ingest.chunkworkers`) can do cheaply. A torch model's count loads torch."""
    canonical = canonical_model_name(name)
    if canonical == HASH_MODEL or canonical.startswith(HASH_MODEL + ":"):
        return True
    base, backend = split_backend(canonical)
    return backend is not None or base == PACKAGED_MODEL


def _with_torch(location: Path, fp32: Path) -> None:
    """torch.onnx's export, for an ONNX backend of a model the torch-free writer does not
    cover; torch is imported only then (the ``[torch]`` extra)."""
    from semfs.ingest.embedding.torchmodel import export_with_torch

    export_with_torch(location, fp32)


def load_query_embedder(name: str, threads: int | None = None) -> Embedder:
    """What embeds the queries of a store whose documents ``name`` embedded; loads on first use.

    The packaged model, its ONNX backends and ``hash``: the same as its documents
    (:func:`load_embedder`). Another torch model: its fp32 export once an ingest has checked it
    against torch, else torch, with a log line saying why (a search never exports:
    :class:`semfs.ingest.embedding.torchmodel.Fp32Embedder`). Its ``query_backend`` says which
    (``semfs status``)."""
    canonical = canonical_model_name(name)
    if canonical == HASH_MODEL or canonical.startswith(HASH_MODEL + ":"):
        return load_embedder(canonical, threads)
    base, backend = split_backend(canonical)
    if backend is not None or base == PACKAGED_MODEL:
        return load_embedder(canonical, threads)
    from semfs.ingest.embedding.torchmodel import Fp32Embedder

    return Fp32Embedder(canonical, threads, export=False)


def query_backend(embedder: Embedder) -> str:
    """What runs ``embedder`` for queries, in words: ``onnxruntime fp32``, ``onnxruntime
    int8``, ``torch fp32`` or ``hash (test stand-in)``."""
    backend = getattr(embedder, "query_backend", None)
    if isinstance(backend, str):
        return backend
    if isinstance(embedder, HashEmbedder):
        return "hash (test stand-in)"
    return TORCH_QUERIES


def load_torch_embedder(name: str = DEFAULT_MODEL, threads: int | None = None) -> Embedder:
    """``name`` run by sentence-transformers on torch itself (the ``[torch]`` extra): the
    baseline of the benchmarks and of the checks of the torch-free graph."""
    from semfs.ingest.embedding.torchmodel import load_torch_embedder as load

    return load(name, threads)


def _installed(package: str) -> str | None:
    """``package``'s installed version, read off its metadata (nothing imported), or None."""
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def runtime_with_version(backend: str) -> str:
    """``backend`` as :func:`query_backend` words it, with the installed version of the
    library that runs it: ``onnxruntime 1.22.0 fp32``, ``torch 2.7.0 fp32``."""
    library, _, rest = backend.partition(" ")
    version = _installed(library) if library in ("onnxruntime", "torch") else None
    return f"{library} {version} {rest}".strip() if version else backend


def embedding_runtime() -> str:
    """What embeds the default model here, and whether the ``[torch]`` extra is installed, in
    two lines for ``semfs --version``: read off the installed packages' metadata."""
    ort = _installed("onnxruntime") or "(not installed)"
    torch = _installed("torch")
    extra = (
        f"torch {torch}, for other sentence-transformers models"
        if torch and _installed("sentence-transformers")
        else "not installed (other sentence-transformers models need it: "
        "pip install 'semfs[torch]')"
    )
    return (
        f"embedding runtime: onnxruntime {ort} ({PACKAGED_FOLDER}, fp32, without torch)\n"
        f"torch extra: {extra}"
    )


_WORD = re.compile(r"\w+")


class HashEmbedder:
    """Deterministic stand-in: hashed bag of lowercase words, L2-normalised.

    Texts sharing words get similar vectors, so ranking tests stay meaningful, while
    embedding is ~1000x faster than a transformer and imports nothing heavy.
    """

    def __init__(self, dimension: int = 384) -> None:
        self.name = HASH_MODEL if dimension == 384 else f"{HASH_MODEL}:{dimension}"
        self._dimension = dimension

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def max_tokens(self) -> int:
        return 256 - CONTEXT_RESERVE_TOKENS

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def _vector(self, text: str) -> list[float]:
        vec = [0.0] * self._dimension
        for word in _WORD.findall(text.lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
            vec[h % self._dimension] += 1.0 if (h >> 32) & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in vec))
        if norm == 0.0:
            vec[0] = 1.0
            return vec
        return [x / norm for x in vec]

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        # Word pieces are never fewer than whitespace words; 1.3x approximates sub-words.
        return [math.ceil(len(t.split()) * 1.3) for t in texts]
