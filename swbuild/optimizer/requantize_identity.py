"""Graph pass before QDQ fusion: QuantizeLinear(DequantizeLinear(q)) that gives back q is q.

PyTorch's QDQ export re-quantizes a value it has just dequantized, with the same scale and
zero point (ResNet-18: GlobalAveragePool -> Q -> DQ -> Flatten -> Q -> the fc's DQ). The
second Quantize then divides by the scale again at run time (a scalar statement on the MLU,
schedule/quantize.py cannot prove a reciprocal for a float tensor read from memory) only to
return the integers it was given. It is dropped when, for every value v of q's dtype,

    saturate(rint(float32((v - z) * s) / s) + z) == v

evaluated in float32 as the ONNX spec (and onnxruntime) computes it: all 256 (int8/uint8) or
65,536 (int16/uint16) values are tried, so the rewrite is exact by enumeration, not by a
rounding argument. Both nodes must be per tensor with the same constant float32 scale and
zero point, and q's dtype must be the Quantize's output dtype. Shape-only nodes between them
(Flatten, Reshape, Squeeze, Unsqueeze, Identity) commute with an element-wise per-tensor
Quantize and are re-applied to q. The DequantizeLinear stays for its other consumers and
remove_dead_nodes drops it when it has none.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Node, Tensor
from .graph import remove_dead_nodes

VIEWS = ("Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity")
ENUMERABLE = ("int8", "uint8", "int16", "uint16")


def _scalar(graph, name):
    t = graph.tensors.get(name) if name else None
    if t is None or t.data is None or np.asarray(t.data).size != 1:
        return None
    return np.asarray(t.data).reshape(())


def _params(graph, node):
    """(float32 scale, zero point array, zero point dtype or None) per tensor, else None."""
    if int(node.attrs.get("block_size", 0)) or len(node.inputs) < 2:
        return None
    s = _scalar(graph, node.inputs[1])
    if s is None or graph.tensors[node.inputs[1]].dtype != "float32":
        return None
    zn = node.inputs[2] if len(node.inputs) > 2 else ""
    z = _scalar(graph, zn) if zn else None
    if zn and z is None:
        return None
    return np.float32(s), (z if z is not None else np.zeros((), np.uint8)), (graph.tensors[zn].dtype if zn else None)


def round_trips(dtype, s, z):
    """Whether Q(DQ(v)) == v for every v of `dtype` with scale s and zero point z (float32
    arithmetic of the spec: (v - z) * s, then rint(x / s) + z, saturated)."""
    info = np.iinfo(dtype)
    v = np.arange(info.min, info.max + 1, dtype=np.int64)
    s = np.float32(s)
    with np.errstate(all="ignore"):
        x = ((v - int(z)).astype(np.float32) * s).astype(np.float32)
        y = np.rint((x / s).astype(np.float32)).astype(np.float64) + int(z)
    ok = np.isfinite(y)
    y = np.clip(np.where(ok, y, 0), info.min, info.max)
    return bool(ok.all() and np.array_equal(y.astype(np.int64), v))


def _source(graph, prod, name):
    """(DequantizeLinear, [views from it down to name]) or None."""
    views = []
    n = prod.get(name)
    while n is not None and n.op in VIEWS:
        views.append(n)
        n = prod.get(n.inputs[0])
    if n is None or n.op != "DequantizeLinear":
        return None
    return n, views[::-1]


def drop_requantize(graph):
    prod = graph.producer()
    out, dropped = [], []
    for n in graph.nodes:
        src = _source(graph, prod, n.inputs[0]) if n.op == "QuantizeLinear" else None
        if src is None:
            out.append(n)
            continue
        dq, views = src
        q, y = dq.inputs[0], n.outputs[0]
        pq, pd = _params(graph, n), _params(graph, dq)
        qt = graph.tensors[q]
        if pq is None or pd is None or qt.data is not None or qt.dtype not in ENUMERABLE \
                or graph.tensors[y].dtype != qt.dtype or pd[2] not in (None, qt.dtype) \
                or pq[0] != pd[0] or int(pq[1]) != int(pd[1]) \
                or not round_trips(qt.dtype, pq[0], pq[1]):
            out.append(n)
            continue
        cur = q
        for k, v in enumerate(views):
            last = k == len(views) - 1
            name = y if last else f"{v.outputs[0]}/requantized"
            if not last:
                graph.tensors[name] = Tensor(name, graph.tensors[v.outputs[0]].shape, qt.dtype)
            out.append(Node(v.op, f"{v.name}/requantized", [cur] + list(v.inputs[1:]), [name], dict(v.attrs)))
            cur = name
        if not views:
            out.append(Node("Identity", n.name, [q], [y]))
        dropped.append(n.name)
    graph.nodes = out
    graph.requantize_dropped = dropped
    return remove_dead_nodes(graph)
