"""Integer products (QLinearConv, ConvInteger, QLinearMatMul, MatMulInteger) as convolutions.

ops/quant.py lowers them to sum((x - x_zero) * w) over exact float32 integers, with the
tensor's pads reading x_zero. `__bang_conv` takes the input as it is staged, so the zero point
moves out of the sum: sum((x - z) * w) = sum(x * w) - z * sum(w), the last term one constant
per output channel (pads stay x_zero, so they still add nothing). The input is then the raw
quantized values (int8 or uint8: what a fixed-point convolution reads) and the epilogue
subtracts the constant before the bias and the requantization.

On a chip with fixed-point rates (toolchain `conv_int8_macs_per_cycle`...), the staged tile
is converted in NRAM to int8 (int8 inputs) or int16 (uint8 inputs) and the weights, centred
on their zero point and within int8, are stored int8 in the weights image and WRAM:
__bang_conv then sums int8 x int8 (or int16 x int8) products exactly and charges its
fixed-point rate (schedule/conv.py).

Exact in float32 when every partial sum of x * w is (optimizer/exact_ints.sum_bound over the
input dtype's own range), and the constants are: both are checked here, per kernel; the sum
minus the constant is what ops/quant.py proved exact.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ....ir.graph import Tensor
from ....ir.loopnest import Acc, Bin, Buffer, Const, Load, Select, Un, Var, substitute_acc, transform
from ....optimizer.exact_ints import RANGES, sum_bound
from .builder import Unschedulable

MAGIC = 12582912.0       # 1.5 * 2^23: (y + MAGIC) - MAGIC is rint(y), ties to even, for |y| <= 2^22
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


def vector_requant(e, consts):
    """MLAS's requantization saturate(rint(v) + z, lo, hi) (ops/quant.py) as vector steps:
    round by adding and subtracting 1.5 * 2^23 (rint, ties to even, for |v| <= 2^22; beyond,
    a value as far out, which the clamp saturates the same way), then clamp to the integers
    [lo - z, hi - z] (the relu forms of min and max are exact on integers; on a fractional v
    they would round x - s), then add z. Only where v is the integer sum and constants (bias,
    multiplier): finite, so no NaN needs the select; min and max map to relu forms
    (three_address.py). A requantization of anything else (a fused element-wise consumer's
    QuantizeLinear) keeps its exact NaN-aware form."""
    def fn(x):
        if not (isinstance(x, Select) and isinstance(x.cond, Bin) and x.cond.op == ">=" and isinstance(x.cond.b, Const)
                and isinstance(x.a, Select) and isinstance(x.a.cond, Bin) and x.a.cond.op == "<="
                and isinstance(x.a.cond.b, Const)):
            return None
        v, lo, hi = x.cond.a, x.cond.b.value, x.a.cond.b.value
        if x.a.a != v or x.a.b != x.a.cond.b or x.b != x.cond.b:
            return None
        r, z = (v.a, v.b.value) if isinstance(v, Bin) and v.op == "+" and isinstance(v.b, Const) else (v, 0.0)
        if not (isinstance(r, Un) and r.op == "round") or max(abs(lo - z), abs(hi - z)) > 2 ** 22 \
                or not _of_sum(r.a, consts):
            return None
        y = Bin("-", Bin("+", transform(r.a, fn), Const(MAGIC)), Const(MAGIC))
        c = Bin("max", Bin("min", y, Const(hi - z)), Const(lo - z))
        return Bin("+", c, Const(z)) if z else c
    return transform(e, fn)


def saturating_int8(e):
    """vector_requant's result for lanes then converted to int8 by __bang_float2int8_rn, which
    saturates to [-128, 127] (bangemu/vector.h): when the clamp's bounds lie outside that
    range (no relu, or a relu at zero point -128) the conversion clamps the same, and adding z
    joins the rounding's subtraction: (v + M) - (M - z) is rint(v) + z, both operands exact
    integers below 2^24 (|v| <= 2^22; beyond, as far out, saturated the same way). 10 vector
    passes become 2, bit for bit. Anything else is returned as it is."""
    z = 0.0
    c = e
    if isinstance(c, Bin) and c.op == "+" and isinstance(c.b, Const):
        c, z = c.a, float(c.b.value)
    if not (isinstance(c, Bin) and c.op == "max" and isinstance(c.b, Const) and isinstance(c.a, Bin)
            and c.a.op == "min" and isinstance(c.a.b, Const)):
        return e
    lo, hi, y = float(c.b.value) + z, float(c.a.b.value) + z, c.a.a
    if lo > -128 or hi < 127 or not z.is_integer() or abs(z) > 2 ** 16:
        return e
    if not (isinstance(y, Bin) and y.op == "-" and y.b == Const(MAGIC) and isinstance(y.a, Bin) and y.a.op == "+"
            and y.a.b == Const(MAGIC)):
        return e
    return Bin("-", y.a, Const(MAGIC - z))


def _of_sum(e, consts):
    """e reads the accumulator and constant buffers only."""
    if isinstance(e, Acc):
        return True
    if isinstance(e, Load):
        return e.buf in consts
    kids = [k for k in (getattr(e, "a", None), getattr(e, "b", None), getattr(e, "cond", None)) if k is not None]
    return bool(kids) and all(_of_sum(k, consts) or isinstance(k, Const) for k in kids) and any(_of_sum(k, consts) for k in kids)


def fixed_point(dtype, wd, hw):
    """Bytes of __bang_conv's fixed-point input for this input dtype and these weights: 1
    (int8 x int8), 2 (int16 x int8: uint8 and int16 inputs), or 0 (float) when the weights do
    not fit int8 or the chip has no such rate (toolchain `conv_int8/int16_macs_per_cycle`)."""
    if wd.size == 0 or wd.min() < -128 or wd.max() > 127:
        return 0
    fx = 1 if dtype == "int8" else 2 if dtype in ("uint8", "int16") else 0
    key = {1: "conv_int8_macs_per_cycle", 2: "conv_int16_macs_per_cycle"}.get(fx)
    return fx if key and int(hw.get(key, 0)) > 0 else 0


def _consts(k, g):
    return {n for n, b in k.buffers.items() if g.tensors[b.tensor].data is not None}


def integer_as_conv(k, program, hw):
    """The kernel with the zero point moved into its epilogue (module docstring), or raise;
    `extra["fixed_point"]` says which __bang_conv input type computes it (fixed_point)."""
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
    extra = {**k.extra, "fixed_point": fixed_point(dtype, wd, hw)}
    if not z:
        return replace(k, body=body, extra=extra, epilogue=vector_requant(k.epilogue, _consts(k, g)))
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
    epi = vector_requant(substitute_acc(k.epilogue, Bin("-", Acc(), Load(buf, index))), _consts(replace(k, buffers=buffers), g))
    return replace(k, body=body, epilogue=epi, buffers=buffers, extra=extra)
