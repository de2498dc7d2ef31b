"""Graph pass before lowering: quantized integers computed at run time become exact float32.

Kernels compute in float32, which holds every integer of magnitude below 2**24 exactly. An
int8, uint8, int16 or uint16 value is such an integer, so a quantized tensor lives inside
the program as a float32 buffer of its exact values (as a run-time boolean is a float32 0/1,
optimizer/dtypes.py), and the dtype it stands for is kept in `graph.exact_ints` (name ->
dtype): QuantizeLinear saturates to it, ConvInteger proves its sums exact from its range.
The int32 result of ConvInteger/MatMulInteger lives the same way: its lowering (ops/quant.py)
proves |sum| < 2**24 from the weights and the input dtype, or refuses naming the node.

This is exact only where nothing computes on the integers but those ops: a run-time integer
tensor may be read by the quantization ops, by layout ops (values copied, never combined),
by MaxPool (it picks one of its inputs) and by a Cast that cannot change them (to float32, or to a wider integer type); a Cast into
a quantized dtype becomes `swbuild.CastToInteger` (truncation, wrap-around). Anything else
(an Add of int8 tensors wraps around in C, not in float32) is refused here, naming the node,
the tensor and its dtype. Graph inputs and outputs keep their dtypes in the public API: a
Cast converts at the boundary (the existing `convert` kernels: exact both ways).
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from ..support.errors import UnsupportedError
from ..ir.graph import Node, Tensor, is_splat

RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535)}   # held exactly in float32
CAST_TO_INT = "swbuild.CastToInteger"   # a Cast into a quantized dtype inside the program (ops/quant.py lowers it)
FUSED_RELU = "swbuild_relu"   # attribute of a QLinearConv/QLinearMatMul that absorbed a Relu (optimizer/qdq_fuse.py)

ACCUMULATORS = ("ConvInteger", "MatMulInteger")     # int32 outputs, proven below 2**24 when lowered
# onnxruntime's QOperator ops (frontends/contrib.py imports them, ops/quant_ms.py lowers them)
MS_QUANT_OPS = tuple(f"com.microsoft.{op}" for op in (
    "QLinearAdd", "QLinearMul", "QLinearGlobalAveragePool", "QLinearAveragePool", "QGemm", "QLinearConcat",
    "QLinearSigmoid", "QLinearLeakyRelu"))
QUANT_OPS = ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv", "QLinearMatMul") + \
    ACCUMULATORS + MS_QUANT_OPS
# ops whose every output value is one of their input values (a max picks, never combines):
# exact on the integers as on floats
SELECT_OPS = ("MaxPool",)
# ops that only move values: their integer input is copied, never combined (input 0 for Gather)
LAYOUT_OPS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose", "Concat", "Slice", "Split",
              "Expand", "Tile", "Gather", "DepthToSpace", "SpaceToDepth")
CASTS = ("Cast", "CastLike")
INT32_MAX_EXACT = 1 << 24


def sum_bound(wd, lo, hi, bias=None):
    """Largest |sum_k wd[r, k] * d_k + bias[r]| over rows r with every d_k in [lo, hi] (lo <= 0 <= hi,
    the input minus its zero point): a positive weight is worst at hi, a negative one at lo, or
    the other way round. When lo = 0 (a zero point at the dtype's low end: ReLU outputs) this is
    about half of max|d| * sum|w|, which is what lets a 3x3x512 layer of an int8 CNN be exact."""
    wd = np.asarray(wd, np.float64).reshape(len(wd), -1) if np.ndim(wd) else np.zeros((1, 1))
    pos, neg = np.maximum(wd, 0).sum(axis=1), np.maximum(-wd, 0).sum(axis=1)
    per = np.maximum(hi * pos - lo * neg, -lo * pos + hi * neg)
    if bias is not None:
        per = per + np.abs(np.asarray(bias, np.float64).reshape(-1))
    return float(per.max(initial=0.0))


SPLIT_BASE = 16     # a wide 8-bit sum splits x - zero point = 16 h + l (ops/quant_wide.py)


def split_sum_bounds(wd, bias=None, base=SPLIT_BASE):
    """(bound of sum_k wd * h, bound of sum_k wd * l + bias) for an 8-bit input whose centred value
    d (|d| <= 255) is split as d = base * h + l, |h| <= base, 0 <= l < base: the two float32 sums
    ops/quant_wide.py computes when sum_bound passes 2^24. Both below 2^24: that layer is exact."""
    wd = np.asarray(wd, np.float64).reshape(len(wd), -1) if np.ndim(wd) else np.zeros((1, 1))
    per = np.abs(wd).sum(axis=1)
    extra = 0.0 if bias is None else np.abs(np.asarray(bias, np.float64).reshape(-1))
    return float((per * base).max(initial=0.0)), float((per * (base - 1) + extra).max(initial=0.0))


def _range(dtype):
    if dtype in RANGES:
        return RANGES[dtype]
    if dtype in ("int32", "int64"):
        i = np.iinfo(dtype)
        return int(i.min), int(i.max)
    return None


def _cast_keeps(src, dst):
    """A Cast from integer dtype `src` to `dst` leaves every value unchanged."""
    if dst in ("float32", "float64"):
        return True
    a, b = _range(src), _range(dst)
    return a is not None and b is not None and b[0] <= a[0] and a[1] <= b[1]


def _why(node, name, dtype):
    return (f"node '{node.name}' ({node.op}): tensor '{name}' has dtype {dtype}; run-time integers are held "
            f"as exact float32 values, which only quantization ops, layout ops and widening Casts read "
            f"(integer arithmetic in float32 would not wrap around as {dtype} does)")


def _exact_runtime(graph):
    """Run-time tensors held as exact float32 integers: name -> dtype, in topological order."""
    out = {}
    for x in graph.inputs:
        if graph.tensors[x].dtype in RANGES:
            out[x] = graph.tensors[x].dtype
    for n in graph.nodes:
        for o in n.outputs:
            t = graph.tensors.get(o)
            if not o or t is None or t.data is not None:
                continue
            if n.op in CASTS and o in graph.outputs and n.inputs[0] not in out:
                continue        # float32 into a typed graph output: the boundary's convert kernel, as before
            if t.dtype in RANGES:
                out[o] = t.dtype
            elif t.dtype == "int32" and (n.op in ACCUMULATORS or (n.op in LAYOUT_OPS and n.inputs and n.inputs[0] in out)):
                out[o] = t.dtype
    return out


def _check(graph, exact):
    for n in graph.nodes:
        reads = [i for k, i in enumerate(n.inputs) if i in exact and not (n.op == "Gather" and k > 0)]
        writes = [o for o in n.outputs if o in exact]
        if not reads and not writes or n.op in QUANT_OPS or n.op in LAYOUT_OPS or n.op in SELECT_OPS:
            continue
        if n.op in CASTS:
            src, dst = graph.tensors[n.inputs[0]].dtype, graph.tensors[n.outputs[0]].dtype
            if reads and _cast_keeps(src, dst):
                continue        # to float32 or a wider integer: the same exact values
            if dst in RANGES and (reads or src == "float32"):
                # float32 or a wider integer into a quantized dtype: truncation and wrap-around
                # as C converts (ops/quant.py), not the alias a Cast within float32 would be
                n.op, n.attrs = CAST_TO_INT, {"to_dtype": dst}
                continue
            name = n.inputs[0] if reads else n.outputs[0]
            raise UnsupportedError(_why(n, name, exact[name]) + f"; a Cast {src} -> {dst} inside the program "
                                   "may change values")
        name = (reads or writes)[0]
        raise UnsupportedError(_why(n, name, exact[name]))


def exact_ints_as_float(graph):
    """Rewrite run-time quantized integers into exact float32 (see the module docstring)."""
    exact = _exact_runtime(graph)
    if not exact:
        return graph
    consumers = graph.consumers()
    # a graph input only converted by Casts keeps its dtype (the Cast converts, as before)
    for x in list(exact):
        if x in graph.inputs and all(n.op in CASTS for n in consumers.get(x, [])):
            del exact[x]
    _check(graph, exact)
    # an integer graph input read by a kernel: one Cast at the front reads it into float32
    for x in [x for x in graph.inputs if x in exact]:
        t = graph.tensors[x]
        twin = f"{x}:as_float"
        for n in graph.nodes:
            n.inputs = [twin if i == x else i for i in n.inputs]
        graph.tensors[twin] = Tensor(twin, t.shape, "float32")
        graph.nodes.insert(0, Node("Cast", f"{x}:to_float", [x], [twin], {"to": TensorProto.FLOAT}))
        exact[twin] = exact.pop(x)
    # an integer graph output computed at run time: its producer writes a float32 twin, a Cast
    # converts into the output's own buffer (exact: the values are in the dtype's range)
    for o in [o for o in graph.outputs if o in exact]:
        t = graph.tensors[o]
        twin = f"{o}:as_float"
        for n in graph.nodes:
            n.outputs = [twin if x == o else x for x in n.outputs]
            n.inputs = [twin if x == o else x for x in n.inputs]
        graph.tensors[twin] = Tensor(twin, t.shape, "float32")
        graph.nodes.append(Node("Cast", f"{o}:to_{t.dtype}", [twin], [o],
                                {"to": helper.np_dtype_to_tensor_dtype(np.dtype(t.dtype))}))
        exact[twin] = exact.pop(o)
    for name, dtype in exact.items():
        t = graph.tensors[name]
        graph.tensors[name] = Tensor(name, t.shape, "float32")
    # integer constants read by the quantization ops at run time (zero points): float32 too
    for n in graph.nodes:
        if n.op not in QUANT_OPS:
            continue
        for i in n.inputs:
            t = graph.tensors.get(i) if i else None
            if t is None or t.data is None or t.dtype not in RANGES:
                continue
            a = t.data
            v = np.broadcast_to(np.float32(a.reshape(-1)[0]), a.shape) if is_splat(a) else np.asarray(a, np.float32)
            graph.tensors[i] = Tensor(i, t.shape, "float32", v)
            exact[i] = t.dtype
    graph.exact_ints.update(exact)
    return graph
