"""ONNX Runtime: the default model (fp32, its graph written without torch) and the backends
``MODEL@onnx``, ``MODEL@onnx-int8``: names, errors, vectors, and a store built with one keeping
it (fp32 stays the default of a new store).

The model tests write the packaged model's graph once per run (about a second) into the
session's model cache (conftest.py). Its agreement with torch is test_bert_graph.py's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from semfs.ingest.embedding.embedder import (
    DEFAULT_MODEL,
    ONNX_QUERIES,
    PACKAGED_MODEL,
    canonical_model_name,
    load_embedder,
    query_backend,
)
from semfs.ingest.embedding.onnx import OnnxEmbedder, split_backend
from semfs.ingest.errors import ModelMismatchError, ModelUnavailableError
from semfs.ingest.pipeline import ingest, resolve_model
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Searcher
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.schema import StoreMeta
from tests.helpers import REPO, SAMPLE_CORPUS, SEMFS, sample_subset

INT8 = "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"
TORCH = "sentence-transformers/all-MiniLM-L6-v2"


def test_backend_is_part_of_the_recorded_model_name() -> None:
    assert canonical_model_name("all-MiniLM-L6-v2@onnx-int8") == INT8
    assert canonical_model_name("all-minilm-l6-v2@onnx") == TORCH + "@onnx"
    assert canonical_model_name("all-MiniLM-L6-v2@torch") == TORCH
    assert canonical_model_name("all-MiniLM-L6-v2") == TORCH
    # An '@' inside a path is part of the path, not a backend.
    assert split_backend("/models/a@b/minilm") == ("/models/a@b/minilm", None)
    assert isinstance(load_embedder("all-MiniLM-L6-v2@onnx-int8"), OnnxEmbedder)


def test_a_new_store_defaults_to_torch_and_each_store_keeps_its_backend(store_dir: Path) -> None:
    """What resolve_model picks, and what a search of each store embeds queries with (nothing
    is loaded: the embedders load on first use)."""
    assert DEFAULT_MODEL == TORCH and PACKAGED_MODEL == TORCH
    # torch's vectors (to cosine 0.99999), on ONNX Runtime, from the first use on
    default = load_embedder()
    assert isinstance(default, OnnxEmbedder) and default.backend == "onnx"
    assert default.name == TORCH
    with open_store(CollectionAddress(store=store_dir / "new")) as store:
        assert resolve_model(store, None) == TORCH
        assert resolve_model(store, "all-MiniLM-L6-v2@torch") == TORCH
        assert resolve_model(store, "all-MiniLM-L6-v2@onnx-int8") == INT8
    with open_store(CollectionAddress(store=store_dir / "torch")) as store:
        # A torch store records the bare name.
        store.create(384)
        store.write_meta(StoreMeta(model=TORCH, dimension=384))
        assert resolve_model(store, None) == TORCH
        assert resolve_model(store, "all-MiniLM-L6-v2") == TORCH
        with pytest.raises(ModelMismatchError, match="onnx-int8"):
            resolve_model(store, INT8)
        # Its queries: torch's weights, on ONNX Runtime, with no export to wait for.
        assert query_backend(Searcher(store).embedder) == ONNX_QUERIES
    with open_store(CollectionAddress(store=store_dir / "int8")) as store:
        store.create(384)
        store.write_meta(StoreMeta(model=INT8, dimension=384))
        assert resolve_model(store, None) == INT8
        with pytest.raises(ModelMismatchError, match="built with model"):
            resolve_model(store, "all-MiniLM-L6-v2")
        searcher = Searcher(store)
        assert isinstance(searcher.embedder, OnnxEmbedder)
        assert searcher.embedder.backend == "onnx-int8"


def test_cli_help_names_the_default_and_how_to_pick_int8() -> None:
    from click.testing import CliRunner

    from semfs.fusefs.cli.group import cli

    out = " ".join(CliRunner().invoke(cli, ["ingest", "--help"]).output.split())
    assert "else all-MiniLM-L6-v2, the packaged model, in fp32 on ONNX Runtime, no torch" in out
    assert "Any other model runs on torch: pip install 'semfs[torch]'" in out, out
    assert "@onnx-int8" in out and "runs it int8 on ONNX Runtime" in out, out


def test_unknown_backend_is_one_clear_line() -> None:
    with pytest.raises(ModelUnavailableError, match=r"unknown embedding backend 'onnx8'") as exc:
        load_embedder("all-MiniLM-L6-v2@onnx8")
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("backend", ["", "@onnx", "@onnx-int8"])
def test_missing_onnxruntime_is_one_line_saying_what_to_install(
    tmp_path: Path, backend: str
) -> None:
    """The CLI, with onnxruntime made unimportable in its process, as on a broken install,
    asked for the default model or either ONNX backend."""
    model = ["--model", f"all-MiniLM-L6-v2{backend}"]
    code = (
        "import sys; sys.modules['onnxruntime'] = None\n"
        "from semfs.fusefs.cli import main\n"
        "sys.argv = ['semfs', *sys.argv[1:]]\n"
        "main()\n"
    )
    args = ["ingest", str(SAMPLE_CORPUS), "--store", str(tmp_path / "s")]
    proc = subprocess.run(
        [sys.executable, "-c", code, *args, *model],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode != 0
    err = proc.stderr.strip()
    assert "needs onnxruntime" in err, err
    assert "pip install onnxruntime onnx" in err, err
    assert "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err


@pytest.fixture
def cached(model_cache: Path) -> Path:
    """The run's model cache (conftest.py sets SEMFS_MODEL_CACHE to it for every test)."""
    return model_cache


# A question about one of _small_corpus's files, in other words than its title's.
QUESTION, ANSWER = "give AI tools a single file that lists all my pages", "ai/llmstxt.mdx"


def _texts() -> list[str]:
    from semfs.ingest.chunking import chunk_text, document_title, embedding_text

    model = load_embedder(PACKAGED_MODEL)
    out: list[str] = []
    for f in sorted(SAMPLE_CORPUS.rglob("*.md*"))[:6]:
        text = f.read_text(encoding="utf-8")
        title = document_title(text, f.name)
        spans = chunk_text(text, f.name, model.count_tokens, model.max_tokens)
        out += [embedding_text(s, title) for s in spans]
    return [*out[:40], "x", "a question an agent might ask about API keys?"]


@pytest.mark.model
def test_the_default_and_onnx_are_one_graph_written_once(cached: Path) -> None:
    """The default model and ``@onnx`` run the same fp32 graph (one file in the cache, the
    same vectors); another embedder finds the file and does not write it again."""
    import numpy as np

    texts = _texts()
    default = load_embedder(PACKAGED_MODEL)
    onnx = load_embedder(f"{PACKAGED_MODEL}@onnx")
    assert np.array_equal(np.array(default.encode(texts)), np.array(onnx.encode(texts)))
    assert default.dimension == 384 and default.max_tokens == 256 - 32
    path = onnx.export_path()  # type: ignore[attr-defined]
    assert path == default.export_path()  # type: ignore[attr-defined]
    assert path.parent == cached and path.exists()
    mtime = path.stat().st_mtime_ns
    load_embedder(f"{PACKAGED_MODEL}@onnx").encode(["again"])
    assert path.stat().st_mtime_ns == mtime


@pytest.mark.model
def test_each_text_runs_alone_and_gets_the_vector_a_batch_gives_it(cached: Path) -> None:
    """Issue 38.5: texts run one at a time (no padding), several at once, each on one thread:
    the vectors are a padded batch's (mean pooling over the mask) to float precision, and do
    not depend on how many run at once."""
    import numpy as np

    texts = _texts()
    model = load_embedder(PACKAGED_MODEL)
    alone = np.array(model.encode(texts))
    one = OnnxEmbedder(model.name, str(model.location), "onnx", 32, threads=1)  # type: ignore[attr-defined]
    assert np.array_equal(alone, np.array(one.encode(texts)))
    session, tokenizer = one._session, one._tokenizer
    encs = tokenizer.encode_batch(texts)  # padded to the longest, as batches were run
    ids = np.array([e.ids for e in encs], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
    hidden = session.run(None, {"input_ids": ids, "attention_mask": mask,
                                "token_type_ids": np.zeros_like(ids)})[0]  # fmt: skip
    weights = mask[..., None].astype(np.float32)
    pooled = (hidden * weights).sum(1) / weights.sum(1)
    batch = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    assert float((alone * batch).sum(1).min()) > 0.99999


@pytest.mark.model
def test_int8_store_records_its_backend_and_queries_follow_it(
    cached: Path, tmp_path: Path, store_dir: Path
) -> None:
    import numpy as np

    texts = _texts()
    fp32 = np.array(load_embedder(PACKAGED_MODEL).encode(texts))
    int8 = np.array(load_embedder(INT8).encode(texts))
    cos = (fp32 * int8).sum(1)
    assert cos.mean() >= 0.98, cos.mean()  # approximate, not equal: measured ~0.99

    source = sample_subset(tmp_path / "src", 5)
    with open_store(CollectionAddress(store=store_dir)) as store:
        report = ingest(source, store, model="all-MiniLM-L6-v2@onnx-int8")
        assert report.model == INT8
        meta = store.read_meta()
        assert meta is not None and meta.model == INT8
        searcher = Searcher(store)
        assert isinstance(searcher.embedder, OnnxEmbedder)
        hits = searcher.search(SearchRequest(QUESTION, k=3))
        assert hits and hits[0].path == ANSWER, [h.path for h in hits]
        # Another backend's vectors are another model's: refused, saying which backend.
        (source / "new.md").write_text("# New\n\nSomething new.\n")
        with pytest.raises(ModelMismatchError, match="onnx-int8"):
            ingest(source, store, model="all-MiniLM-L6-v2")


@pytest.mark.model
def test_an_int8_store_keeps_ingesting_and_searching_with_int8(
    cached: Path, tmp_path: Path, store_dir: Path
) -> None:
    """A store built with int8 is not moved to the default (torch): a later ingest without
    --model embeds with int8, and searches embed queries with int8."""
    source = sample_subset(tmp_path / "src", 5)
    with open_store(CollectionAddress(store=store_dir)) as store:
        first = ingest(source, store, model="all-MiniLM-L6-v2@onnx-int8")
        assert first.model == INT8 and first.chunks_embedded > 0
        (source / "new.md").write_text("# Rotating keys\n\nRotate the API key every month.\n")
        again = ingest(source, store)
        assert again.model == INT8 and again.added == ["new.md"] and again.chunks_embedded > 0
        meta = store.read_meta()
        assert meta is not None and meta.model == INT8
        searcher = Searcher(store)
        assert isinstance(searcher.embedder, OnnxEmbedder)
        hits = searcher.search(
            SearchRequest("how often should the api key be rotated", k=3, mode="semantic")
        )
        assert hits and hits[0].path == "new.md", [h.path for h in hits]


@pytest.mark.model
@pytest.mark.parametrize(
    ("model", "recorded"),
    [
        (["-m", "all-MiniLM-L6-v2@onnx"], "@onnx"),
        (["-m", "all-MiniLM-L6-v2@onnx-int8"], "@onnx-int8"),
    ],
)
def test_cli_ingest_and_search_with_the_onnx_backend(
    cached: Path, tmp_path: Path, model: list[str], recorded: str
) -> None:
    """`semfs ingest` with either ONNX backend asked for; `semfs search` follows it."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    store = str(tmp_path / "cli-store")
    source = str(sample_subset(tmp_path / "src", 5))
    ingest_run = subprocess.run(
        [SEMFS, "ingest", source, "--store", store, *model],
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
    # The model line names the recorded backend exactly (nothing after it but the dimension).
    assert f"all-MiniLM-L6-v2{recorded} (dimension 384)\n" in status.stdout, status.stdout
    # The store's own backend embeds its queries, and status says so.
    assert "queries: onnxruntime " + ("int8" if "int8" in recorded else "fp32") in status.stdout
    search = subprocess.run(
        [SEMFS, "search", QUESTION, "--store", store, "-k", "2", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert search.returncode == 0, search.stderr
    assert json.loads(search.stdout)[0]["path"] == ANSWER, search.stdout


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


@pytest.mark.model
def test_two_first_uses_at_once_export_once(tmp_path: Path) -> None:
    """Two processes that find no export at the same moment (an ingest and a mount, say):
    one exports, the other waits for it and loads the same file; no half-written file."""
    cache = tmp_path / "fresh-cache"
    code = (
        "import logging, sys\n"
        "logging.basicConfig(level=logging.INFO, stream=sys.stderr)\n"
        "from semfs.ingest.embedding.embedder import load_embedder\n"
        "print(load_embedder('all-MiniLM-L6-v2@onnx').encode(['concurrent first use'])[0][:4])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "SEMFS_MODEL_CACHE": str(cache)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
    assert outs[0][0] == outs[1][0] and outs[0][0].strip()
    exports = sum(err.count("writing the fp32 ONNX graph") for _out, err in outs)
    assert exports == 1, [err for _out, err in outs]
    assert [f.suffix for f in cache.iterdir() if not f.name.startswith(".")] == [".onnx"]
    assert not list(cache.glob(".export-*"))  # the temporary folder is gone


@pytest.mark.model
def test_search_of_an_int8_store_imports_no_torch(cached: Path, tmp_path: Path) -> None:
    """Once the export is cached, a fresh `semfs search` of an int8 store embeds the query with
    onnxruntime alone, without torch."""
    store = tmp_path / "int8-store"
    query_args = ["--store", str(store), "-k", "3", "--json"]
    with open_store(CollectionAddress(store=store)) as s:
        ingest(sample_subset(tmp_path / "src", 5), s, model="all-MiniLM-L6-v2@onnx-int8")
    r = subprocess.run(
        [sys.executable, "-X", "importtime", SEMFS, "search", QUESTION, *query_args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)[0]["path"] == ANSWER, r.stdout
    imported = set(re.findall(r"^import time:.*\|\s+([\w.]+)$", r.stderr, re.M))
    assert "onnxruntime" in imported  # the right probe: the query was embedded here
    assert not imported & {"torch", "transformers", "sentence_transformers"}
    assert "semfs.ingest.embedding.torchmodel" not in imported


@pytest.mark.model
def test_onnx_runtime_writes_no_telemetry_into_home(cached: Path, tmp_path: Path) -> None:
    """ONNX Runtime 1.2x writes a device id and an event database under
    ~/.cache/Microsoft/DeveloperTools/ when it starts, unless ORT_DISABLE_TELEMETRY is set:
    semfs sets it, so an embedding leaves the user's home as it was."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}
    env |= {"HOME": str(home), "PYTHONPATH": str(REPO)}
    code = (
        "from semfs.ingest.embedding.embedder import load_embedder\n"
        "print(len(load_embedder().encode(['telemetry'])[0]))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert run.returncode == 0 and run.stdout.strip() == "384", run.stderr[-2000:]
    assert list(home.rglob("*")) == [], list(home.rglob("*"))


# A process that embeds on two runners and stops itself with SIGTERM as `semfs ingest` does
# (its handler raises KeyboardInterrupt) while they run, twice, then exits with 143.
_STOPPED_ENCODE = """
import os, signal, sys, threading
from semfs.ingest.embedding.embedder import load_embedder

class Texts(list):
    # What the runners read: the first read stops the run. A read after encode_array raised
    # is a runner still embedding (in ONNX Runtime when the interpreter exits: status 134);
    # it fails, so that the runners end.
    def __getitem__(self, i):
        if stopped.is_set():
            late.set()
            raise RuntimeError("read after the stop")
        started.set()
        return super().__getitem__(i)

def stop_once_started():
    started.wait()
    os.kill(os.getpid(), signal.SIGTERM)

def interrupt(signum, frame):
    raise KeyboardInterrupt

signal.signal(signal.SIGTERM, interrupt)
model = load_embedder(threads=2)
text = " ".join(f"word{i} about routing and virtual hosts" for i in range(40))
for _ in range(2):
    started, stopped, late = threading.Event(), threading.Event(), threading.Event()
    threading.Thread(target=stop_once_started, daemon=True).start()
    try:
        model.encode_array(Texts([text] * 2000))
        print("not stopped", flush=True)
    except KeyboardInterrupt:
        stopped.set()
        print("read after the stop" if late.wait(0.5) else "stopped", flush=True)
sys.exit(128 + signal.SIGTERM)
"""


@pytest.mark.model
def test_an_encode_stopped_by_a_signal_leaves_no_runner_in_onnx_runtime(cached: Path) -> None:
    """Before: SIGTERM (or Ctrl-C) during encode_array interrupted its Thread.join(), which on
    Python < 3.13 marks a thread stopped while it runs (python/cpython#90882): encode_array
    raised with both runners still embedding, and the interpreter's exit did not wait for them.
    A runner coming back from ONNX Runtime during finalization was ended by pthread_exit, whose
    unwind through ORT's C++ frames called std::terminate: status 134, "terminate called
    without an active exception", in about one `semfs ingest` stopped in its dense pass of two.
    Now it raises once no runner embeds, and no runner reads a text after."""
    run = subprocess.run(
        [sys.executable, "-c", _STOPPED_ENCODE],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )
    assert run.stdout.split("\n") == ["stopped", "stopped", ""], (run.stdout, run.stderr[-2000:])
    assert run.returncode == 128 + 15, run.stderr[-2000:]
    assert "terminate called" not in run.stderr, run.stderr[-2000:]


@pytest.mark.model
def test_a_keyword_pass_that_embeds_nothing_loads_no_onnx_runtime(
    cached: Path, tmp_path: Path
) -> None:
    """Before: a first ingest that leaves the embedding to another pass (``dense=False``, a
    watcher's batch, a store's owner) loaded the model's session for its window and the
    store's dimension: onnxruntime and the graph, about 150 MB of the pass's 240 MB peak
    (BENCHMARKS 46). Now both come from the model's config files, and the session loads with
    the first text to embed."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from semfs.ingest.pipeline import ingest\n"
        "from semfs.ingest.store.address import CollectionAddress\n"
        "from semfs.ingest.store.backends import open_store\n"
        "with open_store(CollectionAddress(store=Path(sys.argv[2]))) as store:\n"
        "    report = ingest(Path(sys.argv[1]), store, dense=False)\n"
        "    print(report.committed, report.dense_pending > 0, 'onnxruntime' in sys.modules)\n"
        "    meta = store.read_meta()\n"
        "    print(meta.dimension)\n"
    )
    source = sample_subset(tmp_path / "src", 5)
    run = subprocess.run(
        [sys.executable, "-c", code, str(source), str(tmp_path / "store")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split("\n") == ["5 True False", "384", ""], run.stdout
    # The store so made takes the model's vectors in the next run's dense pass.
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        ingest(source, store)
        embedded, total = store.embedding_counts()
    assert embedded == total > 0
