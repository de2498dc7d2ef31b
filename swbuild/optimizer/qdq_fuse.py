"""Graph pass before lowering: QDQ chains become integer kernels (QLinearConv, QLinearMatMul).

A QDQ model (onnxruntime's `quantize_static`, PyTorch's QDQ export) says "this Conv is int8"
by surrounding a float Conv with DequantizeLinear on its inputs and QuantizeLinear on its
output. onnxruntime's QDQ transformer turns

    DequantizeLinear(x_q) ─┐
    DequantizeLinear(W_q) ─┼─ Conv / MatMul / Gemm (─ Relu) ─ QuantizeLinear ─ y_q
    DequantizeLinear(b_q) ─┘

into one QLinearConv / QLinearMatMul / QGemm on the CPU: int8 inputs, int32 sums, the
requantization of MLAS. This pass does the same, so the kernel is integer arithmetic (exact
float32 integers, optimizer/exact_ints.py) instead of a float Conv between a dequantize and
a quantize, and the weights are the int8 values once, at compile time. The import folded the
weights' DequantizeLinear; `graph.dequantized` keeps what it read (frontends/onnx.py).

A chain fuses when:
- x comes from a run-time DequantizeLinear of an int8/uint8 tensor with one scale and zero
  point (per tensor), constant;
- W (and the bias, if any) come from a folded DequantizeLinear: int8/uint8 weights per tensor
  or per output channel; the bias int32 with zero point 0 and scale x_scale * W_scale (what
  QLinearConv assumes of its bias, so the float graph and the integer kernel agree);
- the result feeds only (a Relu feeding only) a QuantizeLinear per tensor, constant;
- Gemm: alpha = beta = 1, transA = 0; MatMul: a 2-D constant W;
- the integer sum is provably exact in float32 (optimizer/exact_ints.sum_bound < 2^24), or, for
  a Conv, its split in two sums is (split_sum_bounds: ops/quant_wide.py, the deep layers of a ResNet).
A Relu fuses as a clamp at the output zero point: quantizing max(v, 0) and clamping the
quantized v at the zero point give the same integer.

Where onnxruntime does not fuse (its default x86 CPU session, the reference of `swbuild check`;
onnxruntime 1.32: optimizer/graph_transformer_utils.cc, qdq_transformer/qdq_s8_to_u8.cc,
ensure_unique_dq_for_node_unit.cc, selectors_actions/qdq_selectors.cc, qdq_util.cc): int8
activations are fused on ARM only (QDQIsInt8Allowed()), so QDQS8ToU8Transformer first makes an
int8 Quantize -> Dequantize pair uint8, but only when the Quantize's output has one consumer, a
DequantizeLinear whose output has at most one consumer and is no graph output, or has none
(EnsureUniqueDQForNodeUnit gives every further consumer its own copy: another edge out of the
Quantize; CommonSubexpressionElimination merged twin Quantizes before), both with the same
scalar constant int8 zero point. Conv and MatMul then fuse only with input and output uint8
(Conv/MatMulNodeGroupSelector), Gemm with input and output alike (int8 weights under an int8
input), and a Relu only when the Quantize's zero point is the dtype's low end
(IsClipMadeRedundantByQ). The rest onnxruntime computes in float. We still fuse
those (exact integer sums) and `graph.qdq_notes` says that onnxruntime does not: leaving them in
float does not make us agree with it, since its float sums (MLAS) and ours round differently
near ties too (measured on quantize_static's ResNet-18: per tensor, onnxruntime's float convs
happen to agree with the exact integer result, ours would not, and the check would fail by two
steps; per channel, its float convs already miss the exact result in 4 of 200704 outputs of
the first block, which grows to two steps at the logits either way).
Anything not fused stays as the graph says, and `graph.qdq_notes` says why (`swbuild ops`).
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Node, Tensor
from .exact_ints import FUSED_RELU, RANGES, split_sum_bounds, sum_bound
from .graph import remove_dead_nodes

EXACT = 1 << 24
PRODUCTS = ("Conv", "MatMul", "Gemm")


def _const(graph, name):
    t = graph.tensors.get(name) if name else None
    return None if t is None or t.data is None else np.asarray(t.data)


def _qparams(graph, node):
    """(scale, zero point or None) of a Quantize/DequantizeLinear as constants, else None."""
    s = _const(graph, node.inputs[1])
    z = _const(graph, node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    if s is None or (len(node.inputs) > 2 and node.inputs[2] and z is None) or graph.tensors[node.inputs[1]].dtype != "float32":
        return None
    return s, z


def _per_tensor(graph, node):
    p = _qparams(graph, node)
    if p is None or p[0].size != 1 or (p[1] is not None and p[1].size != 1) or int(node.attrs.get("block_size", 0)):
        return None
    return p


class _Skip(Exception):
    """This chain stays as the graph says (the message says why)."""


def _activation(graph, prod, name):
    dq = prod.get(name)
    if dq is None or dq.op != "DequantizeLinear":
        raise _Skip("its input is not a DequantizeLinear output")
    xq = graph.tensors[dq.inputs[0]]
    if xq.data is not None or xq.dtype not in ("int8", "uint8") or _per_tensor(graph, dq) is None:
        raise _Skip(f"input DequantizeLinear '{dq.name}' is not a per-tensor int8/uint8 one with constant parameters")
    return dq


def _weights(graph, name, axis):
    dq = graph.dequantized.get(name)
    if dq is None:
        raise _Skip("its weights are not a constant DequantizeLinear")
    w = graph.tensors[dq.inputs[0]]
    p = _qparams(graph, dq)
    if w.data is None or w.dtype not in ("int8", "uint8") or p is None or int(dq.attrs.get("block_size", 0)):
        raise _Skip(f"weights DequantizeLinear '{dq.name}' is not int8/uint8 with constant parameters")
    s, z = p
    if s.size > 1 and (s.ndim != 1 or int(dq.attrs.get("axis", 1)) % w.data.ndim != axis
                       or s.shape[0] != w.shape[axis]):
        raise _Skip(f"weights DequantizeLinear '{dq.name}' is per axis, but not along the output channels")
    return dq, s


def _bias(graph, name, x_scale, w_scale):
    dq = graph.dequantized.get(name)
    if dq is None or graph.tensors[dq.inputs[0]].dtype != "int32" or _qparams(graph, dq) is None:
        raise _Skip("its bias is not an int32 constant DequantizeLinear")
    s, z = _qparams(graph, dq)
    want = (np.float32(x_scale.reshape(-1)[0]) * w_scale.astype(np.float32).reshape(-1)).astype(np.float32)
    if (z is not None and np.any(z)) or not np.array_equal(np.broadcast_to(s.astype(np.float32).reshape(-1), want.shape),
                                                           np.broadcast_to(want, s.reshape(-1).shape)):
        raise _Skip(f"bias DequantizeLinear '{dq.name}' has a zero point or a scale other than x_scale * w_scale")
    return dq


def _single_consumer(graph, cons, name, what):
    c = cons.get(name, [])
    if len(c) != 1 or name in graph.outputs:
        raise _Skip(f"{what} has {len(c)} consumers" + (" and is a graph output" if name in graph.outputs else ""))
    return c[0]


def _match(graph, n, prod, cons):
    """The fused node replacing n (and its Relu, QuantizeLinear), or raise _Skip."""
    if n.op == "Gemm":
        if float(n.attrs.get("alpha", 1.0)) != 1.0 or float(n.attrs.get("beta", 1.0)) != 1.0 \
                or int(n.attrs.get("transA", 0)):
            raise _Skip("Gemm with alpha, beta or transA")
    dx = _activation(graph, prod, n.inputs[0])
    w = graph.tensors[n.inputs[1]]
    trans_b = n.op == "Gemm" and int(n.attrs.get("transB", 0))
    if n.op != "Conv" and len(w.shape) != 2:
        raise _Skip("its weights are not a 2-D matrix")
    axis = 0 if n.op == "Conv" or trans_b else 1          # the output channels' axis of W
    dw, ws = _weights(graph, n.inputs[1], axis)
    xs, xz = _per_tensor(graph, dx)
    db = None
    if len(n.inputs) > 2 and n.inputs[2]:
        db = _bias(graph, n.inputs[2], xs, ws)
    nxt = _single_consumer(graph, cons, n.outputs[0], f"{n.op} output '{n.outputs[0]}'")
    relu = None
    if nxt.op == "Relu":
        relu, nxt = nxt, _single_consumer(graph, cons, nxt.outputs[0], f"Relu output '{nxt.outputs[0]}'")
    if nxt.op != "QuantizeLinear" or _per_tensor(graph, nxt) is None \
            or graph.tensors[nxt.outputs[0]].dtype not in ("int8", "uint8"):
        raise _Skip("its result does not go to a per-tensor int8/uint8 QuantizeLinear")
    q = nxt
    unlike = _unlike_onnxruntime(graph, n, dx, dw, relu, q, prod, cons)
    # the integer sum must be exact in float32 (ops/quant.py proves it again when it lowers)
    wq = np.asarray(graph.tensors[dw.inputs[0]].data, np.float64)
    wz = _const(graph, dw.inputs[2]) if len(dw.inputs) > 2 and dw.inputs[2] else None
    if wz is not None:
        wz = wz.astype(np.float64)
        wq = wq - (wz.reshape([-1] + [1] * (wq.ndim - 1)) if axis == 0 and wz.size > 1 else
                   wz.reshape(-1) if wz.size > 1 else wz.reshape(-1)[0])
    rows = wq.reshape(wq.shape[0], -1) if axis == 0 else wq.T
    lo, hi = RANGES[graph.tensors[dx.inputs[0]].dtype]
    z = 0.0 if xz is None else float(xz.reshape(-1)[0])
    b = None if db is None else np.asarray(graph.tensors[db.inputs[0]].data, np.float64)
    bound = sum_bound(rows, lo - z, hi - z, b)
    if bound >= EXACT:
        # a Conv's wide sum is two exact float32 sums joined by one rounding (ops/quant_wide.py)
        wide = split_sum_bounds(rows, b) if n.op == "Conv" and max(abs(lo - z), abs(hi - z)) <= 255 else None
        if wide is None or max(wide) >= EXACT:
            raise _Skip(f"its integer sum can reach {int(bound)} >= 2^24 (not exact in float32)"
                        + ("" if wide is None else f", nor its split in 16 h + l ({int(max(wide))})"))
    return dx, dw, db, relu, q, unlike


def _scalar(graph, name):
    """The value of a constant one-element integer tensor, else None (also for a missing input)."""
    v = _const(graph, name)
    return None if v is None or v.size != 1 or v.dtype.kind not in "iu" else int(v.reshape(-1)[0])


def _ort_dtype(graph, name, prod, cons):
    """The dtype onnxruntime's x86 session gives the quantized activation `name` after
    QDQS8ToU8Transformer (module docstring): int8 stays int8 unless its Quantize -> Dequantize
    pair is converted to uint8."""
    dt = graph.tensors[name].dtype
    q, users = prod.get(name), cons.get(name, [])
    if dt != "int8" or q is None or q.op != "QuantizeLinear" or len(users) != 1 or name in graph.outputs:
        return dt
    # CommonSubexpressionElimination first merges a twin Quantize (same inputs and attributes): two consumers
    if any(o is not q and o.op == q.op and o.inputs == q.inputs and o.attrs == q.attrs for o in cons[q.inputs[0]]):
        return dt
    dq = users[0]
    # EnsureUniqueDQForNodeUnit copies dq for each further consumer, and for every consumer if
    # dq's output is also a graph output: each copy is one more edge out of q
    edges = len(cons.get(dq.outputs[0], []))
    if dq.op != "DequantizeLinear" or edges > (0 if dq.outputs[0] in graph.outputs else 1):
        return dt
    zps = [(graph.tensors[x.inputs[2]].dtype, _scalar(graph, x.inputs[2])) if len(x.inputs) > 2 and x.inputs[2]
           else None for x in (q, dq)]
    return "uint8" if zps[0] is not None and zps[0] == zps[1] and zps[0][0] == "int8" and zps[0][1] is not None else dt


def _unlike_onnxruntime(graph, n, dx, dw, relu, q, prod, cons):
    """Why onnxruntime's x86 session runs this chain in float (module docstring), else None."""
    dt_x, dt_y = _ort_dtype(graph, dx.inputs[0], prod, cons), _ort_dtype(graph, q.outputs[0], prod, cons)
    zp = _scalar(graph, q.inputs[2]) if len(q.inputs) > 2 and q.inputs[2] else 0
    if relu is not None and zp != RANGES[graph.tensors[q.outputs[0]].dtype][0]:
        return f"its Relu is not the saturation of QuantizeLinear '{q.name}' (zero point above the dtype's low end)"
    why = None
    if dt_x != dt_y:
        why = f"its input is {dt_x} and its output {dt_y}"
    elif n.op != "Gemm" and dt_x == "int8":
        why = "its input stays int8, which onnxruntime fuses on ARM only"
    elif n.op == "Gemm" and dt_x == "int8" and graph.tensors[dw.inputs[0]].dtype != "int8":
        why = "its input stays int8 and its weights are not"
    return None if why is None else why + (" after QDQS8ToU8Transformer (an int8 Quantize -> Dequantize pair becomes "
                                           "uint8 only with a single consumer)")


def _fused(graph, n, dx, dw, db, relu, q):
    attrs = {k: v for k, v in n.attrs.items() if n.op == "Conv"}
    if relu is not None:
        attrs[FUSED_RELU] = 1
    w_q = dw.inputs[0]
    if n.op == "Gemm" and int(n.attrs.get("transB", 0)):
        wt = np.ascontiguousarray(np.asarray(graph.tensors[w_q].data).T)
        name = f"{w_q}:transposed"
        graph.tensors[name] = Tensor(name, wt.shape, wt.dtype.name, wt)
        w_q = name
    opt = lambda node, k: node.inputs[k] if len(node.inputs) > k else ""    # noqa: E731
    ins = [dx.inputs[0], dx.inputs[1], opt(dx, 2), w_q, dw.inputs[1], opt(dw, 2), q.inputs[1], opt(q, 2)]
    if db is not None:
        ins.append(db.inputs[0])
    op = "QLinearConv" if n.op == "Conv" else "QLinearMatMul"
    return Node(op, n.name, ins, [q.outputs[0]], attrs)


def fuse_qdq(graph):
    """Rewrite the QDQ chains that fuse (module docstring); note why the others do not."""
    if not any(n.op == "QuantizeLinear" for n in graph.nodes):
        return graph
    prod, cons = graph.producer(), graph.consumers()
    notes, replace, drop = {}, {}, set()
    for n in graph.nodes:
        if n.op not in PRODUCTS:
            continue
        try:
            dx, dw, db, relu, q, unlike = _match(graph, n, prod, cons)
        except _Skip as e:
            if getattr(prod.get(n.inputs[0]), "op", None) == "DequantizeLinear" or n.inputs[1] in graph.dequantized:
                notes[n.name] = f"float32 between DequantizeLinear and QuantizeLinear: {e}"
            continue
        if unlike:
            notes[n.name] = (f"fused (exact integer sum) where onnxruntime's x86 session computes in float: {unlike}; "
                             "outputs may differ from onnxruntime's by a step where its float sum rounds a near tie")
        replace[q.name] = _fused(graph, n, dx, dw, db, relu, q)
        drop.update({n.name} | ({relu.name} if relu is not None else set()))
    graph.nodes = [replace.get(n.name, n) for n in graph.nodes if n.name not in drop]
    graph.qdq_notes = notes
    return remove_dead_nodes(graph) if replace else graph
