"""Graph passes, before lowering: dead-node removal and BatchNormalization folding.

Folding rewrites Conv(x, W, B) -> BatchNormalization into one Conv with
W' = W * a[co] and B' = B * a + b (a = scale / sqrt(var + eps), b = bias - mean * a):
legal when the Conv's output feeds only the BatchNormalization and W and the statistics
are constants. What cannot fold still fuses into the Conv's epilogue later.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Node, Tensor


def remove_dead_nodes(graph):
    live = set(graph.outputs)
    kept = []
    for n in reversed(graph.nodes):
        if any(o in live for o in n.outputs if o):
            kept.append(n)
            live.update(i for i in n.inputs if i)
    graph.nodes = list(reversed(kept))
    return graph


def _distinct(a):
    """A broadcast view's values without the repeats: index 0 of each axis of stride 0."""
    return a[tuple(slice(0, 1) if st == 0 else slice(None) for st in a.strides)] if a.ndim else a


def fold_batchnorm(graph):
    consumers = graph.consumers()
    prod = graph.producer()
    out = []
    folded = set()
    for n in graph.nodes:
        if n.op != "BatchNormalization" or len([o for o in n.outputs if o]) != 1 \
                or int(n.attrs.get("training_mode", 0)):
            out.append(n)
            continue
        conv = prod.get(n.inputs[0])
        params = [graph.tensors[t] for t in n.inputs[1:5]]
        if conv is None or conv.op != "Conv" or len(consumers.get(n.inputs[0], [])) != 1 \
                or n.inputs[0] in graph.outputs or any(t.data is None for t in params) \
                or graph.tensors[conv.inputs[1]].data is None \
                or (len(conv.inputs) > 2 and conv.inputs[2] and graph.tensors[conv.inputs[2]].data is None):
            out.append(n)
            continue
        scale, bias, mean, var = (np.asarray(t.data, np.float64) for t in params)
        a = scale / np.sqrt(var + float(n.attrs.get("epsilon", 1e-5)))
        w = np.asarray(graph.tensors[conv.inputs[1]].data)
        b0 = np.asarray(graph.tensors[conv.inputs[2]].data, np.float64) if len(conv.inputs) > 2 and conv.inputs[2] \
            else np.zeros(w.shape[0])
        # products in float64, rounded once to float32, in one pass (no float64 copy of W); a
        # broadcast W (ConstantOfShape) stays one: only its distinct values are multiplied
        wc = _distinct(w)
        ar = a.reshape([-1] + [1] * (w.ndim - 1))
        w2 = np.empty(np.broadcast_shapes(wc.shape, ar.shape), np.float32)
        np.multiply(wc, ar, out=w2, dtype=np.float64, casting="same_kind")
        if w2.shape != w.shape:
            w2 = np.broadcast_to(w2, w.shape)
        b2 = ((b0 - mean) * a + bias).astype(np.float32)
        wn, bn = f"{conv.inputs[1]}/bnfold", f"{conv.inputs[1]}/bnfold_bias"
        graph.tensors[wn] = Tensor(wn, w2.shape, "float32", w2)
        graph.tensors[bn] = Tensor(bn, b2.shape, "float32", b2)
        i = out.index(conv)
        out[i] = Node("Conv", conv.name, [conv.inputs[0], wn, bn], [n.outputs[0]], dict(conv.attrs))
        folded.add(n.name)
    graph.nodes = out
    graph.folded_batchnorms = sorted(folded)
    return graph


def simplify(graph):
    return fold_batchnorm(remove_dead_nodes(graph))
