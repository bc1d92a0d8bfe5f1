"""A BERT encoder's fp32 ONNX graph written from its weights, without torch.

Rules a caller may rely on:

* :func:`build_bert_graph` reads a model folder's ``config.json`` and ``model.safetensors``
  (safetensors' numpy loader) and returns the serialised ONNX model of the encoder: inputs
  ``input_ids``, ``attention_mask`` and ``token_type_ids`` (int64, batch x sequence), output
  ``last_hidden_state`` (float32, batch x sequence x hidden), the same interface as
  ``torch.onnx``'s export of ``transformers.BertModel``. Pooling and normalisation stay outside
  the graph (:class:`semfs.ingest.embedding.onnx.OnnxEmbedder`).
* The graph is the one ``transformers`` computes for ``BertModel``: word + absolute position +
  token type embeddings and a LayerNorm; per layer, multi-head self-attention with the padding
  masked out, a residual LayerNorm, an exact (erf) GELU feed-forward and a second residual
  LayerNorm. Standard opset-17 operators only, so ONNX Runtime fuses them (LayerNorm, GELU) as it
  does the torch export's.
* Only what it can write exactly is accepted: a ``BertModel`` with absolute positions and the
  ``gelu`` activation, weights in ``model.safetensors``. Anything else raises
  :class:`UnsupportedModel` with the reason, and the caller needs another way (torch's export).
* It agrees with sentence-transformers to cosine >= 0.99999 on the packaged model
  (tests/unit/embedding/test_bert_graph.py, run with the ``[torch]`` extra). It is deterministic:
  the same weights give the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# ONNX's opset 17 has LayerNormalization; ONNX Runtime 1.17 (the oldest the project allows)
# runs it. IR version 8 is the oldest that can carry opset 17.
OPSET = 17
IR_VERSION = 8
# Part of the cached graph's key (semfs.ingest.embedding.onnx.export_path): bump it when the
# graph written changes, so that no older file is loaded.
GRAPH_VERSION = 1


class UnsupportedModel(ValueError):
    """The model folder holds something this writer does not build exactly."""


def bert_config(location: Path) -> dict[str, Any]:
    """The model's ``config.json``, checked to be a BERT encoder this module writes exactly."""
    try:
        config = json.loads((location / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise UnsupportedModel(f"no readable config.json in {location}: {exc}") from None
    if not isinstance(config, dict):
        raise UnsupportedModel(f"{location}/config.json is not an object")
    checks = {
        "model_type": (config.get("model_type"), "bert"),
        "hidden_act": (config.get("hidden_act", "gelu"), "gelu"),
        "position_embedding_type": (config.get("position_embedding_type", "absolute"), "absolute"),
    }
    for key, (found, wanted) in checks.items():
        if found != wanted:
            raise UnsupportedModel(f"{key} is {found!r}, not {wanted!r}")
    if config["hidden_size"] % config["num_attention_heads"]:
        raise UnsupportedModel("hidden_size is not a multiple of num_attention_heads")
    if not (location / "model.safetensors").is_file():
        raise UnsupportedModel(f"no model.safetensors in {location}")
    return config


def build_bert_graph(location: Path) -> bytes:
    """The serialised fp32 ONNX model of the BERT encoder at ``location`` (see module doc)."""
    import numpy as np
    from onnx import ModelProto, TensorProto, helper
    from safetensors.numpy import load_file

    config = bert_config(location)
    weights = load_file(str(location / "model.safetensors"))
    # Some checkpoints name their tensors from the wrapping module (``bert.embeddings...``).
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head_dim = hidden // heads
    eps = float(config.get("layer_norm_eps", 1e-12))

    # Built in place in one ModelProto: the weights (90 MB for the packaged model) are copied
    # once, into it, and once more when it is serialised.
    model = ModelProto()
    graph = model.graph
    nodes = graph.node

    def weight(name: str, transpose: bool = False) -> str:
        """An initializer holding the checkpoint's tensor ``name`` (a Linear's weight
        transposed, so that ``x @ W`` is the layer)."""
        key = prefix + name
        if key not in weights:
            raise UnsupportedModel(f"model.safetensors has no tensor {key}")
        array = weights[key]
        return const(key, array.T if transpose else array)

    def const(name: str, value: Any, dtype: Any = np.float32) -> str:
        array = np.asarray(value, dtype=dtype)  # tobytes() writes C order, transposed or not
        tensor = graph.initializer.add()
        tensor.name = name
        tensor.data_type = helper.np_dtype_to_tensor_dtype(array.dtype)
        tensor.dims.extend(array.shape)
        tensor.raw_data = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        return name

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def linear(x: str, name: str, out: str) -> str:
        product = node("MatMul", [x, weight(f"{name}.weight", transpose=True)], f"{out}/matmul")
        return node("Add", [product, weight(f"{name}.bias")], out)

    def layer_norm(x: str, name: str, out: str) -> str:
        scale, bias = weight(f"{name}.weight"), weight(f"{name}.bias")
        return node("LayerNormalization", [x, scale, bias], out, axis=-1, epsilon=eps)

    # Embeddings: word + position (0..seq-1) + token type, then LayerNorm.
    const("zero", 0, np.int64)
    const("one", 1, np.int64)
    node("Shape", ["input_ids"], "emb/shape")
    node("Gather", ["emb/shape", "one"], "emb/seq", axis=0)
    node("Range", ["zero", "emb/seq", "one"], "emb/positions")
    words = node("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"], "emb/words")
    pos = weight("embeddings.position_embeddings.weight")
    positions = node("Gather", [pos, "emb/positions"], "emb/position")
    types = weight("embeddings.token_type_embeddings.weight")
    kinds = node("Gather", [types, "token_type_ids"], "emb/type")
    summed = node("Add", [node("Add", [words, positions], "emb/sum1"), kinds], "emb/sum")
    x = layer_norm(summed, "embeddings.LayerNorm", "emb/out")

    # The padding mask as an additive bias: 0 where attended, the lowest float32 elsewhere
    # (what transformers adds), shaped batch x 1 x 1 x seq to broadcast over heads and queries.
    const("mask/axes", [1, 2], np.int64)
    mask = node("Cast", ["attention_mask"], "mask/float", to=TensorProto.FLOAT)
    inverted = node("Sub", [const("mask/one", 1.0), mask], "mask/inverted")
    lowest = const("mask/lowest", np.finfo(np.float32).min)
    bias = node("Mul", [inverted, lowest], "mask/scaled")
    bias = node("Unsqueeze", [bias, "mask/axes"], "mask/bias")

    const("heads/shape", [0, 0, heads, head_dim], np.int64)
    const("merge/shape", [0, 0, hidden], np.int64)
    scale = const("attention/scale", 1.0 / np.sqrt(head_dim))
    sqrt2 = const("gelu/sqrt2", np.sqrt(2.0))
    half = const("gelu/half", 0.5)
    one = const("gelu/one", 1.0)

    for i in range(int(config["num_hidden_layers"])):
        name = f"encoder.layer.{i}"
        at = f"layer{i}"

        def split(x: str, part: str, perm: list[int], at: str = at, name: str = name) -> str:
            projected = linear(x, f"{name}.attention.self.{part}", f"{at}/{part}")
            shaped = node("Reshape", [projected, "heads/shape"], f"{at}/{part}/heads")
            return node("Transpose", [shaped], f"{at}/{part}/t", perm=perm)

        q = split(x, "query", [0, 2, 1, 3])
        k = split(x, "key", [0, 2, 3, 1])  # already transposed for q @ k
        v = split(x, "value", [0, 2, 1, 3])
        scores = node("MatMul", [q, k], f"{at}/scores")
        scores = node("Mul", [scores, scale], f"{at}/scaled")
        scores = node("Add", [scores, bias], f"{at}/masked")
        probs = node("Softmax", [scores], f"{at}/probs", axis=-1)
        context = node("MatMul", [probs, v], f"{at}/context")
        context = node("Transpose", [context], f"{at}/context/t", perm=[0, 2, 1, 3])
        context = node("Reshape", [context, "merge/shape"], f"{at}/context/merged")
        attended = linear(context, f"{name}.attention.output.dense", f"{at}/attn_out")
        residual = node("Add", [attended, x], f"{at}/attn_res")
        x = layer_norm(residual, f"{name}.attention.output.LayerNorm", f"{at}/attn_norm")

        inner = linear(x, f"{name}.intermediate.dense", f"{at}/inter")
        # GELU, exact: x * 0.5 * (1 + erf(x / sqrt(2))), as transformers' "gelu".
        erf = node("Erf", [node("Div", [inner, sqrt2], f"{at}/gelu/div")], f"{at}/gelu/erf")
        gate = node("Mul", [node("Add", [erf, one], f"{at}/gelu/add"), half], f"{at}/gelu/gate")
        activated = node("Mul", [inner, gate], f"{at}/gelu")
        out = linear(activated, f"{name}.output.dense", f"{at}/ffn_out")
        residual = node("Add", [out, x], f"{at}/ffn_res")
        x = layer_norm(residual, f"{name}.output.LayerNorm", f"{at}/out")

    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    graph.name = "bert"
    graph.input.extend(
        helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
        for n in ("input_ids", "attention_mask", "token_type_ids")
    )
    graph.output.append(
        helper.make_tensor_value_info(
            "last_hidden_state", TensorProto.FLOAT, ["batch", "seq", hidden]
        )
    )
    model.ir_version = IR_VERSION
    model.producer_name = "semfs"
    model.opset_import.append(helper.make_opsetid("", OPSET))
    data: bytes = model.SerializeToString()
    return data
