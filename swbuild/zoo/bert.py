"""BERT-base encoder (Devlin et al. 2018): 12 layers, hidden 768, 12 heads, FFN 3072, vocab
30522, sequence length 16; ~109M parameters with the embeddings (no pooler). One input,
`input_ids` int64 [N, 16]; token types are all 0 and there is no padding mask, so the
token-type and position embeddings are Gathers of constant indices (foldable). Output: the last
hidden state [N, 16, 768].

Written the way PyTorch's exporter writes a HuggingFace BertModel: nn.Linear as MatMul with a
[in, out] weight + Add bias, heads split by Reshape + Transpose, scores scaled by Div with a
Constant, Softmax on the last axis, LayerNormalization (eps 1e-12; this needs opset 17, the
first with that op, so this model's opset is 17 rather than the zoo's usual 13), and exact
GELU as Div(sqrt 2) -> Erf -> Add 1 -> Mul x -> Mul 0.5.
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from .registry import model
from .common import GraphBuilder, const, finish_io, he

SEQ, HIDDEN, HEADS, FFN, LAYERS, VOCAB, MAX_POS, TYPES = 16, 768, 12, 3072, 12, 30522, 512, 2
OPSET = 17
NAME = "bert-base"
# The two projections that write into the residual stream start small, so that the stream keeps
# its per-token content through 12 post-LN layers: with full He init every token converges to
# the same vector by layer 6 and the output stops depending on input_ids; at 0.15 the last
# layer's tokens still differ (std across tokens ~0.3 of the total) and attention stays peaked.
RESIDUAL_GAIN = 0.15


def _param(gb, name, arr):
    return gb.array(name, arr.astype(np.float32))


def _embedding(gb, name, n):
    return _param(gb, name, gb.rng.standard_normal((n, HIDDEN), dtype=np.float32) * np.float32(0.02))


def _scalar(gb, name, value):
    """A Constant node holding a float scalar, as the exporter emits them."""
    out = f"{name}_output_0"
    gb.nodes.append(helper.make_node("Constant", [], [out], name=name,
                                     value=numpy_helper.from_array(np.array(value, dtype=np.float32), name)))
    return out


def _layernorm(gb, x, p):
    g = _param(gb, f"{p}/weight", gb.rng.uniform(0.5, 1.5, HIDDEN))
    b = _param(gb, f"{p}/bias", gb.rng.standard_normal(HIDDEN) * 0.1)
    return gb.node("LayerNormalization", [x, g, b], f"{p}/LayerNormalization", axis=-1, epsilon=1e-12)


def _linear(gb, x, p, fin, fout, gain=1.0):
    w = he(gb, f"{p}/weight", (fin, fout), fin, gain)
    b = gb.bias(f"{p}/bias", fout)
    x = gb.node("MatMul", [x, w], f"{p}/MatMul")
    return gb.node("Add", [x, b], f"{p}/Add")


def _gelu(gb, x, p):
    y = gb.node("Div", [x, _scalar(gb, f"{p}/Constant", 1.4142135381698608)], f"{p}/Div")
    y = gb.node("Erf", [y], f"{p}/Erf")
    y = gb.node("Add", [y, _scalar(gb, f"{p}/Constant_1", 1.0)], f"{p}/Add")
    y = gb.node("Mul", [x, y], f"{p}/Mul")
    return gb.node("Mul", [y, _scalar(gb, f"{p}/Constant_2", 0.5)], f"{p}/Mul_1")


def _layer(gb, x, p, heads_shape, hidden_shape):
    dh = HIDDEN // HEADS
    a = f"{p}/attention/self"

    def heads(name, perm):
        y = _linear(gb, x, f"{a}/{name}", HIDDEN, HIDDEN)
        y = gb.node("Reshape", [y, heads_shape], f"{a}/{name}/Reshape")
        return gb.node("Transpose", [y], f"{a}/{name}/Transpose", perm=perm)

    q = heads("query", [0, 2, 1, 3])          # [N, H, S, dh]
    k = heads("key", [0, 2, 3, 1])            # [N, H, dh, S]
    v = heads("value", [0, 2, 1, 3])          # [N, H, S, dh]
    s = gb.node("MatMul", [q, k], f"{a}/MatMul")
    s = gb.node("Div", [s, _scalar(gb, f"{a}/Constant", float(np.sqrt(dh)))], f"{a}/Div")
    s = gb.node("Softmax", [s], f"{a}/Softmax", axis=-1)
    c = gb.node("MatMul", [s, v], f"{a}/MatMul_1")
    c = gb.node("Transpose", [c], f"{a}/Transpose", perm=[0, 2, 1, 3])
    c = gb.node("Reshape", [c, hidden_shape], f"{a}/Reshape")
    o = _linear(gb, c, f"{p}/attention/output/dense", HIDDEN, HIDDEN, RESIDUAL_GAIN)
    o = gb.node("Add", [o, x], f"{p}/attention/output/Add")
    x = _layernorm(gb, o, f"{p}/attention/output/LayerNorm")
    h = _linear(gb, x, f"{p}/intermediate/dense", HIDDEN, FFN)
    h = _gelu(gb, h, f"{p}/intermediate/intermediate_act_fn")
    o = _linear(gb, h, f"{p}/output/dense", FFN, HIDDEN, RESIDUAL_GAIN)
    o = gb.node("Add", [o, x], f"{p}/output/Add")
    return _layernorm(gb, o, f"{p}/output/LayerNorm")


@model(NAME, (SEQ,))
def bert_base(batch=1, seed=0):
    gb = GraphBuilder(NAME, seed)
    e = f"{NAME}/embeddings"
    word = _embedding(gb, f"{e}/word_embeddings/weight", VOCAB)
    pos = _embedding(gb, f"{e}/position_embeddings/weight", MAX_POS)
    typ = _embedding(gb, f"{e}/token_type_embeddings/weight", TYPES)
    pos_ids = const(gb, f"{e}/position_ids", np.arange(SEQ).reshape(1, SEQ))
    type_ids = const(gb, f"{e}/token_type_ids", np.zeros((1, SEQ)))
    x = gb.node("Gather", [word, "input_ids"], f"{e}/word_embeddings/Gather", axis=0)
    t = gb.node("Gather", [typ, type_ids], f"{e}/token_type_embeddings/Gather", axis=0)
    x = gb.node("Add", [x, t], f"{e}/Add")
    ps = gb.node("Gather", [pos, pos_ids], f"{e}/position_embeddings/Gather", axis=0)
    x = gb.node("Add", [x, ps], f"{e}/Add_1")
    x = _layernorm(gb, x, f"{e}/LayerNorm")
    heads_shape = const(gb, f"{NAME}/encoder/heads_shape", [batch, SEQ, HEADS, HIDDEN // HEADS])
    hidden_shape = const(gb, f"{NAME}/encoder/hidden_shape", [batch, SEQ, HIDDEN])
    for i in range(LAYERS):
        x = _layer(gb, x, f"{NAME}/encoder/layer.{i}", heads_shape, hidden_shape)
    return finish_io(gb, [("input_ids", TensorProto.INT64, [batch, SEQ])],
                     [(x, TensorProto.FLOAT, [batch, SEQ, HIDDEN])], opset=OPSET)
