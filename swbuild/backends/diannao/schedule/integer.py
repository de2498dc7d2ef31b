"""Integer products (QLinearConv, ConvInteger, QLinearMatMul, MatMulInteger) as convolutions.

ops/quant.py lowers them to sum((x - x_zero) * w) over exact float32 integers, with the
tensor's pads reading x_zero. `__bang_conv` takes the input as it is staged, so the zero point
moves out of the sum: sum((x - z) * w) = sum(x * w) - z * sum(w), the last term one constant
per output channel (pads stay x_zero, so they still add nothing). The input is then the raw
quantized values (int8 or uint8: what a fixed-point convolution reads) and the epilogue
subtracts the constant before the bias and the requantization.

Exact in float32 when every partial sum of x * w is (optimizer/exact_ints.sum_bound over the
input dtype's own range), and the constants are: both are checked here, per kernel; the sum
minus the constant is what ops/quant.py proved exact.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ....ir.graph import Tensor
from ....ir.loopnest import Acc, Bin, Buffer, Const, Load, Var, substitute_acc
from ....optimizer.exact_ints import RANGES, sum_bound
from .builder import Unschedulable

INTEGER_OPS = {"QLinearConv": "Conv", "ConvInteger": "Conv", "QLinearMatMul": "MatMul", "MatMulInteger": "MatMul"}
EXACT = 1 << 24


def _centered(body):
    """(input load, zero point, weight load) of sum((x - z) * w) or sum(x * w)."""
    if not isinstance(body, Bin) or body.op != "*":
        raise Unschedulable("not a product reduction")
    a, b = body.a, body.b
    if isinstance(a, Bin) and a.op == "-" and isinstance(a.a, Load) and isinstance(a.b, Const) and isinstance(b, Load):
        return a.a, float(a.b.value), b
    if isinstance(a, Load) and isinstance(b, Load):
        return a, 0.0, b
    raise Unschedulable("integer product of unusual form")


def integer_as_conv(k, program):
    """The kernel with the zero point moved into its epilogue (module docstring), or raise."""
    g = program.graph
    xl, z, wl = _centered(k.body)
    x, w = g.tensors[k.buffers[xl.buf].tensor], g.tensors[k.buffers[wl.buf].tensor]
    dtype = g.exact_ints.get(program.root(x.name), g.exact_ints.get(x.name))
    if w.data is None or dtype not in RANGES:
        raise Unschedulable(f"{k.op}: the input is not a quantized tensor or the weights are not constant")
    wd = np.asarray(w.data, np.float64)
    conv = INTEGER_OPS[k.op] == "Conv"
    if not conv and int(np.prod(wd.shape[:-2])) != 1:
        raise Unschedulable(f"{k.op}: batched weights")
    rows = wd.reshape(wd.shape[0], -1) if conv else wd.reshape(wd.shape[-2], wd.shape[-1]).T
    lo, hi = RANGES[dtype]
    bound = sum_bound(rows, lo, hi)
    corr = z * rows.sum(axis=1)
    if bound >= EXACT or np.abs(corr).max(initial=0) >= EXACT:
        raise Unschedulable(f"{k.op}: sum(x * w) can reach {int(bound)} >= 2^24 before its zero point is taken out")
    body = Bin("*", xl, wl)         # pads keep reading z (ops/nn.py conv_kernel)
    if not z:
        return replace(k, body=body)
    name = f"{k.name}:zero_point_sums"
    axes = [a.name for a in k.axes]
    if conv:
        grouped = len(k.axes) == 5
        shape = (k.axes[1].extent, k.axes[2].extent) if grouped else (k.axes[1].extent,)
        index = (Var(axes[1]), Var(axes[2])) if grouped else (Var(axes[1]),)
    else:
        shape, index = (k.axes[-1].extent,), (Var(axes[-1]),)
    data = corr.astype(np.float32).reshape(shape)
    g.tensors[name] = Tensor(name, shape, "float32", data)
    buf = f"b{len(k.buffers)}"
    while buf in k.buffers:
        buf += "_"
    buffers = dict(k.buffers)
    buffers[buf] = Buffer(buf, name, shape, "float32")
    epi = substitute_acc(k.epilogue, Bin("-", Acc(), Load(buf, index)))
    return replace(k, body=body, epilogue=epi, buffers=buffers)
