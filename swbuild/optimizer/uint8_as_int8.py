"""Graph pass before lowering: run-time uint8 tensors become int8 with their zero point - 128.

A uint8 value v with zero point z stands for (v - z) * s; the int8 value v - 128 with zero
point z - 128 stands for the same real number, bit for bit ((v - 128) - (z - 128) is the same
exact integer), and quantizing into it gives v - 128: saturate(rint(x / s) + z - 128, -128, 127)
is saturate(rint(x / s) + z, 0, 255) - 128. So a uint8 activation can live as int8, which is
what the MLU's byte storage and int8 x int8 convolution take (backends/diannao/schedule/
narrow.py, integer.py), without changing one result. PyTorch's x86 qconfig and onnxruntime's
QUInt8 activations are uint8.

Rewritten: each connected set of run-time uint8 tensors joined by ops that only move or pick
values (layout ops, a Cast from uint8 to uint8 as PyTorch's export writes after each
QuantizeLinear, MaxPool: max(v) - 128 = max(v - 128), its pads never win), when every
writer is a QuantizeLinear / QLinearConv / QLinearMatMul with a constant zero point (or none:
0) and every reader a DequantizeLinear / QLinearConv / QLinearMatMul (its input x or a) with a
constant zero point, or such a move; onnxruntime's QLinearAdd, QLinearGlobalAveragePool and QGemm
read and write the set with their zero points unchanged: their lowering adds the 128 back
(ops/quant_ms.py), so its arithmetic is onnxruntime's on the uint8 values. Anything else touching
the set (a graph input or output, another Cast, a run-time zero point from DynamicQuantizeLinear,
onnxruntime's other com.microsoft ops, a Pad with a value) leaves the whole set as it is: still
exact, on the uint8 path.
Runs after optimizer/qdq_fuse.py, so QDQ fusion decides on the model's own dtypes.
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from ..ir.graph import Tensor
from .exact_ints import LAYOUT_OPS, SELECT_OPS

# op -> {input index of a quantized value: index of its zero point} (outputs: output 0, zero point index)
READS = {"DequantizeLinear": {0: 2}, "QLinearConv": {0: 2}, "QLinearMatMul": {0: 2}}
WRITES = {"QuantizeLinear": 2, "QLinearConv": 7, "QLinearMatMul": 7}
# onnxruntime's ops whose lowering (ops/quant_ms.py) reads graph.rebiased and computes on the uint8
# values themselves (v + 128, exact), with the node's own zero points: their inputs (by index) and
# output 0 join a set unchanged. QGemm writes uint8 only with a y_scale (input 7).
MS = "com.microsoft."
AWARE_READS = {MS + "QLinearAdd": (0, 3), MS + "QLinearGlobalAveragePool": (0,), MS + "QGemm": (0,)}
AWARE_WRITES = (MS + "QLinearAdd", MS + "QLinearGlobalAveragePool", MS + "QGemm")
MOVES = tuple(op for op in LAYOUT_OPS if op != "Gather") + SELECT_OPS    # every input 0.. moves to the outputs
OFFSET = 128


def _is_move(graph, n):
    """n only moves or picks the values of its moved inputs (a Cast: uint8 to uint8 only)."""
    if n.op == "Cast":
        return all(graph.tensors[t].dtype == "uint8" for t in (n.inputs[0], n.outputs[0]))
    return n.op in MOVES or n.op == "Gather"


def _moved_inputs(n):
    """The inputs of a move whose values reach its outputs (Concat: all; others: the data input)."""
    if n.op in ("Gather", "Cast"):
        return [n.inputs[0]]
    return [i for i in n.inputs if i] if n.op == "Concat" else n.inputs[:1]


def _zero_point_ok(graph, n, k):
    """The zero point input k of n is absent (0) or a constant uint8 tensor."""
    z = n.inputs[k] if len(n.inputs) > k else ""
    if not z:
        return True
    t = graph.tensors.get(z)
    return t is not None and t.data is not None and t.dtype == "uint8"


def _sets(graph):
    """Connected sets of run-time uint8 tensors joined by moves (union-find)."""
    u8 = {name for name, t in graph.tensors.items() if t.dtype == "uint8" and t.data is None}
    parent = {t: t for t in u8}

    def find(t):
        while parent[t] != t:
            parent[t] = parent[parent[t]]
            t = parent[t]
        return t
    for n in graph.nodes:
        if _is_move(graph, n):
            ins = [i for i in _moved_inputs(n) if i in u8]
            for o in n.outputs:
                if o in u8:
                    for i in ins:
                        parent[find(i)] = find(o)
    sets = {}
    for t in sorted(u8):        # sorted: new constants enter graph.tensors in one order (generated C is deterministic)
        sets.setdefault(find(t), set()).add(t)
    return sorted(sets.values(), key=min)


def _why_not(graph, members, prod, cons):
    """Why this set stays uint8, or None when every writer and reader is understood."""
    io = set(graph.inputs) | set(graph.outputs)
    for t in sorted(members):
        if t in io:
            return f"'{t}' is a graph input or output"
        p = prod.get(t)
        if p is None:
            return f"'{t}' has no writer"
        moved = _is_move(graph, p) and all(i in members for i in _moved_inputs(p))
        written = p.op in WRITES and p.outputs[0] == t and _zero_point_ok(graph, p, WRITES[p.op])
        if not moved and not written and not (p.op in AWARE_WRITES and p.outputs[0] == t):
            return f"'{t}' is written by '{p.name}' ({p.op})"
        for c in cons.get(t, []):
            reads = [k for k, i in enumerate(c.inputs) if i == t]
            if _is_move(graph, c) and all(o in members for o in c.outputs if o) \
                    and (c.op == "Concat" or reads == [0]):
                continue
            if c.op in READS and all(k in READS[c.op] and _zero_point_ok(graph, c, READS[c.op][k]) for k in reads):
                continue
            if all(k in AWARE_READS.get(c.op, ()) for k in reads):
                continue
            return f"'{t}' is read by '{c.name}' ({c.op})"
    return None


def _shifted(graph, name, cache):
    """The int8 constant z - 128 for uint8 zero point `name` ('' : 0)."""
    if name in cache:
        return cache[name]
    z = np.zeros((), np.int16) if not name else np.asarray(graph.tensors[name].data, np.int16)
    new = f"{name or 'uint8_zero_point'}:as_int8"
    while new in graph.tensors:
        new += "_"
    a = (z - OFFSET).astype(np.int8)
    graph.tensors[new] = Tensor(new, tuple(a.shape), "int8", a)
    cache[name] = new
    return new


def _set_input(n, k, name):
    n.inputs = list(n.inputs) + [""] * (k + 1 - len(n.inputs))
    n.inputs[k] = name


def uint8_as_int8(graph):
    """Rewrite the uint8 sets that may be int8 (module docstring); graph.rebiased names them."""
    if not any(t.dtype == "uint8" and t.data is None for t in graph.tensors.values()):
        return graph
    prod, cons = graph.producer(), graph.consumers()
    cache, same = {}, {}
    for members in _sets(graph):
        if _why_not(graph, members, prod, cons) is not None:
            continue
        for t in sorted(members):
            old = graph.tensors[t]
            graph.tensors[t] = Tensor(t, old.shape, "int8")
            graph.rebiased[t] = "uint8"
            p = prod[t]
            if p.op == "Cast":      # int8 to int8 now: dropped (below), so no alias hides the tensor
                same[t] = p.inputs[0]
            if p.op in WRITES:
                k = WRITES[p.op]
                _set_input(p, k, _shifted(graph, p.inputs[k] if len(p.inputs) > k else "", cache))
                if p.op == "QuantizeLinear" and "output_dtype" in p.attrs:
                    p.attrs["output_dtype"] = TensorProto.INT8
            for c in cons.get(t, []):
                for k, i in enumerate(list(c.inputs)):
                    if i == t and c.op in READS:
                        z = READS[c.op][k]
                        _set_input(c, z, _shifted(graph, c.inputs[z] if len(c.inputs) > z else "", cache))
    if same:
        def root(t):
            while t in same:
                t = same[t]
            return t
        graph.nodes = [n for n in graph.nodes if not (n.op == "Cast" and n.outputs[0] in same)]
        for n in graph.nodes:
            n.inputs = [root(i) if i in same else i for i in n.inputs]
        for t in same:
            del graph.tensors[t], graph.rebiased[t]
    return graph
