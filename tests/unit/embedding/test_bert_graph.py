"""The packaged model's fp32 graph, written without torch (semfs.ingest.embedding.bert): what it
accepts, that it is deterministic, and (with the ``[torch]`` extra, as CI's second venv runs it)
that it is sentence-transformers' model: cosine >= 0.99999 on a few hundred texts, the same token
counts, and the same top 10 for every question of the three public sets."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from semfs.ingest.embedding.bert import UnsupportedModel, bert_config, build_bert_graph
from semfs.ingest.embedding.embedder import (
    PACKAGED_MODEL,
    load_embedder,
    load_torch_embedder,
    packaged_model_dir,
)
from semfs.ingest.embedding.onnx import OnnxEmbedder, _graph_writer
from semfs.ingest.pipeline import ingest
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Searcher
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from tests.helpers import sample_subset, shared_path

QUESTION_SETS = ("fastapi-docs", "mem0-docs", "mintlify-docs")
# What the issue asks of the torch-free graph against sentence-transformers.
COSINE = 0.99999


def _config_copy(tmp_path: Path, **changes: object) -> Path:
    """A model folder with the packaged model's config.json, changed, and a stand-in weights
    file (the checks read the config and look for the file; nothing loads)."""
    folder = tmp_path / "model"
    folder.mkdir()
    config = json.loads((packaged_model_dir() / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    (folder / "model.safetensors").write_bytes(b"")
    return folder


def test_the_packaged_model_is_written_without_torch(tmp_path: Path) -> None:
    assert bert_config(packaged_model_dir())["num_hidden_layers"] == 6
    assert _graph_writer(packaged_model_dir()).startswith("bert-graph-")
    assert bert_config(_config_copy(tmp_path))["hidden_size"] == 384


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"model_type": "roberta"}, "model_type is 'roberta'"),
        ({"hidden_act": "relu"}, "hidden_act is 'relu'"),
        ({"position_embedding_type": "relative_key"}, "position_embedding_type"),
        ({"num_attention_heads": 5}, "multiple of num_attention_heads"),
    ],
)
def test_what_it_cannot_write_exactly_is_refused_and_left_to_torch(
    tmp_path: Path, changes: dict[str, object], why: str
) -> None:
    folder = _config_copy(tmp_path, **changes)
    with pytest.raises(UnsupportedModel, match=why):
        bert_config(folder)
    assert _graph_writer(folder) == "torch"


def test_no_weights_or_no_config_is_refused(tmp_path: Path) -> None:
    folder = _config_copy(tmp_path)
    (folder / "model.safetensors").unlink()
    with pytest.raises(UnsupportedModel, match=r"no model\.safetensors"):
        bert_config(folder)
    with pytest.raises(UnsupportedModel, match=r"no readable config\.json"):
        bert_config(tmp_path)


@pytest.mark.model
def test_the_graph_is_deterministic_and_what_onnx_runtime_runs(tmp_path: Path) -> None:
    """The same weights give the same bytes; the file the default model loads is that graph."""
    first = build_bert_graph(packaged_model_dir())
    assert build_bert_graph(packaged_model_dir()) == first
    default = load_embedder(PACKAGED_MODEL)
    assert isinstance(default, OnnxEmbedder)
    default.encode(["load it"])
    assert default.export_path().read_bytes() == first
    # Another folder with the same files writes the same graph (nothing depends on the path).
    copy = tmp_path / "copy"
    shutil.copytree(packaged_model_dir(), copy)
    assert build_bert_graph(copy) == first


def _questions() -> list[str]:
    out: list[str] = []
    for name in QUESTION_SETS:
        path = shared_path("datasets", "doc-questions", f"{name}.tsv")
        with path.open(newline="") as f:
            out += [row["question"] for row in csv.DictReader(f, delimiter="\t")]
    return out


def _top10_differences(a: Searcher, b: Searcher, questions: list[str]) -> list[object]:
    different: list[object] = []
    for q in questions:
        for mode in ("hybrid", "semantic"):
            request = SearchRequest(q, k=10, mode=mode)
            got = [h.path for h in b.search(request)]
            want = [h.path for h in a.search(request)]
            if got != want:
                different.append((q, mode, got, want))
    return different


@pytest.mark.model
@pytest.mark.torch
def test_the_graph_is_sentence_transformers_model(tmp_path: Path) -> None:
    """Against sentence-transformers on torch: a store built and searched by each. Every chunk
    text, every question of the three public sets and the probe texts: cosine >= 0.99999 and
    the same token counts; every question's top 10, hybrid and semantic: identical, whether
    the queries or the documents (or both) were embedded by the graph."""
    import numpy as np

    from semfs.ingest.embedding.torchmodel import PROBE_TEXTS, SentenceTransformerEmbedder

    torch = load_torch_embedder(PACKAGED_MODEL)
    assert isinstance(torch, SentenceTransformerEmbedder)
    graph = load_embedder(PACKAGED_MODEL)
    assert isinstance(graph, OnnxEmbedder)
    questions = _questions()
    source = sample_subset(tmp_path / "src")
    with (
        open_store(CollectionAddress(store=tmp_path / "by-torch")) as by_torch,
        open_store(CollectionAddress(store=tmp_path / "by-graph")) as mine,
    ):
        assert ingest(source, by_torch, embedder=torch).chunks_embedded > 0
        assert ingest(source, mine, embedder=graph).chunks_embedded > 0
        texts = [
            rec.text
            for doc in by_torch.list_documents()
            for rec in by_torch.get_chunks(doc.path, doc.gen, range(doc.chunks))
        ]
        texts += [*questions, *PROBE_TEXTS]
        assert len(texts) >= 250, len(texts)
        a = np.asarray(torch.encode_array(texts), dtype=np.float64)
        b = np.asarray(graph.encode_array(texts), dtype=np.float64)
        cosine = (a * b).sum(1)
        assert cosine.min() >= COSINE, (cosine.min(), texts[int(cosine.argmin())][:80])
        assert graph.count_tokens(texts) == torch.count_tokens(texts)
        assert (graph.max_tokens, graph.dimension) == (torch.max_tokens, torch.dimension)

        reference = Searcher(by_torch, embedder=torch)
        assert _top10_differences(reference, Searcher(by_torch, embedder=graph), questions) == []
        assert _top10_differences(reference, Searcher(mine, embedder=graph), questions) == []
