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

import functools
import math
from dataclasses import replace

import numpy as np

from ....ir.graph import Tensor
from ....ir.loopnest import Acc, Bin, Buffer, Const, Load, Select, Un, Var, substitute_acc, transform
from ....optimizer.exact_ints import RANGES, sum_bound
from .builder import Unschedulable
from .conversion_join import joins_every_channel

MAGIC = 12582912.0       # 1.5 * 2^23: (y + MAGIC) - MAGIC is rint(y), ties to even, for |y| <= 2^22
# QLinearConv.high_sum / .low_sum: a wide QLinearConv's two digit sums (ops/quant_wide.py); .half_sum: its
# sums over halves of the input channels (ops/quant_split.py); QGemm: onnxruntime's (ops/quant_ms.py), a
# QLinearMatMul with its bias C
INTEGER_OPS = {"QLinearConv": "Conv", "ConvInteger": "Conv", "QLinearMatMul": "MatMul", "MatMulInteger": "MatMul",
               "QGemm": "MatMul",
               "QLinearConv.high_sum": "Conv", "QLinearConv.low_sum": "Conv", "QLinearConv.half_sum": "Conv"}
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


def conversion_rounds(e, integral, constant=lambda load: None):
    """saturating_int8's (v + M) - (M - z), v = X * s with X an exact integer (integral(X): the
    accumulator, plus or minus a constant integer tensor), as v + z (v when z = 0): the
    conversion rounds ties to even itself, and v + z rounds to the same int8 as rint(v) + z
    wherever _z_joins proves it for this s and z. One vector pass fewer (two when z = 0).
    s may be a per-channel multiplier (a Load of a constant tensor, whose values constant(load)
    gives): then every channel's is proven (conversion_join.py)."""
    if not (isinstance(e, Bin) and e.op == "-" and isinstance(e.b, Const) and isinstance(e.a, Bin)
            and e.a.op == "+" and e.a.b == Const(MAGIC)):
        return e
    v, z = e.a.a, MAGIC - float(e.b.value)
    if not (isinstance(v, Bin) and v.op == "*" and integral(v.a)):
        return e
    if isinstance(v.b, Const):
        proven = _z_joins(float(v.b.value), z)
    else:
        scales = constant(v.b) if isinstance(v.b, Load) else None
        proven = scales is not None and joins_every_channel(scales, z)
    if not proven:
        return e
    return Bin("+", v, Const(z)) if z else v


def rounded_in_conversion(k, g, e):
    """conversion_rounds on kernel k's epilogue e, with its integral and constant operands."""
    return conversion_rounds(e, integral_in(k, g), constant_in(k, g))


def constant_in(k, g):
    """constant(load) for conversion_rounds: the values of a constant tensor k reads whole (no
    pads), finite; None for anything else."""
    def constant(load):
        b = k.buffers.get(load.buf)
        data = None if b is None or load.pad is not None else g.tensors[b.tensor].data
        if data is None:
            return None
        d = np.asarray(data, np.float64)
        return d if d.size and np.all(np.isfinite(d)) else None
    return constant


def integral_in(k, g):
    """integral(X) for conversion_rounds: X is an integer kernel's accumulator (exact,
    integer_as_conv) plus or minus a constant tensor of integers (the bias, the zero point's sums)."""
    def integral(x):
        if isinstance(x, Acc):
            return True
        if not (isinstance(x, Bin) and x.op in ("+", "-") and isinstance(x.a, Acc) and isinstance(x.b, Load)
                and x.b.buf in k.buffers and x.b.pad is None):
            return False
        data = g.tensors[k.buffers[x.b.buf].tensor].data
        if data is None:
            return False
        d = np.asarray(data, np.float64)
        return bool(np.all(np.isfinite(d)) and np.array_equal(d, np.rint(d)) and np.abs(d).max(initial=0) < EXACT)
    return integral


@functools.lru_cache(maxsize=None)
def _z_joins(s, z):
    """saturate(rint(fl(n * s) + z)) == saturate(rint(fl(n * s)) + z) for every integer n, in
    float32 as the vector unit computes (saturate: int8's range, as __bang_float2int8_rn does).
    Checked on every n with |fl(n * s)| <= 130 + |z|; beyond, both sides saturate alike (both
    are non-decreasing in fl(n * s), and beyond that bound both lie past the same end of
    [-128, 127]). False when that is more than 2^24 integers or s, z are unusual."""
    if not (math.isfinite(s) and s != 0 and z.is_integer() and abs(z) <= 128 and np.float32(s) == s):
        return False
    bound = 130.0 + abs(z)
    n_max = math.ceil(bound / abs(s)) + 1
    if n_max >= 1 << 23:
        return False
    n = np.arange(-n_max, n_max + 1, dtype=np.float32)      # exact integers (below 2^24)
    v = n * np.float32(s)
    want = np.clip(np.rint(v.astype(np.float64)) + z, -128, 127)
    got = np.clip(np.rint((v + np.float32(z)).astype(np.float64)), -128, 127)
    return bool(np.array_equal(want, got)) and bool(np.all(np.abs(v[[0, -1]]) >= bound))


def _clamp(x):
    """(v, H, L) of vector_requant's max(min((v + M) - M, H), L), bounds within 2^22; else None."""
    if not (isinstance(x, Bin) and x.op == "max" and isinstance(x.b, Const) and isinstance(x.a, Bin)
            and x.a.op == "min" and isinstance(x.a.b, Const)):
        return None
    y, hi, lo = x.a.a, float(x.a.b.value), float(x.b.value)
    if not (isinstance(y, Bin) and y.op == "-" and y.b == Const(MAGIC) and isinstance(y.a, Bin) and y.a.op == "+"
            and y.a.b == Const(MAGIC)) or max(abs(hi), abs(lo)) > 2 ** 22 or not 0 <= hi - lo <= 2 ** 16:
        return None
    return y.a.a, hi, lo


def clamp_instructions(hw):
    """The chip has __bang_maxeq_scalar / __bang_mineq_scalar (mtp_322 and later, isa.py)."""
    return int(str(hw["arch"]).rsplit("_", 1)[1]) >= 322


def fewer_passes(e, clamps=False):
    """vector_requant's result kept as float32 lanes (a dequantized or float-read output), in
    fewer vector passes, bit for bit:
    - (c + z) - z, a DequantizeLinear of the requantized integer c, is c (|c|, |z| < 2^22);
    - clamps (the chip has __bang_mineq/maxeq_scalar): min and max take one pass each, and a
      following + z joins the rounding's subtraction, clamped to the bounds plus z:
      (v + M) - (M - z) is rint(v) + z (both operands integers in [2^23, 2^24), exact; beyond,
      as far out, saturated the same way), 5 passes instead of 10;
    - else min(r, H) = H - relu(H - r), and H - r = (-(v * s) + M) - (M - H) when v = x * s: the
      negated scale rounds to -rint(v) (ties to even is symmetric) and the subtraction of two
      integers in [2^23, 2^24) is exact, so rounding and clamp take 6 passes instead of 8
      (three_address.py writes min as five passes, H - y as two)."""
    def fn(x):
        if isinstance(x, Bin) and x.op == "-" and isinstance(x.b, Const) and isinstance(x.a, Bin) \
                and x.a.op == "+" and x.a.b == x.b and _clamp(x.a.a) and abs(float(x.b.value)) <= 2 ** 22 \
                and float(x.b.value).is_integer():
            return transform(x.a.a, fn)
        if clamps:
            z, inner = 0.0, x
            if isinstance(x, Bin) and x.op == "+" and isinstance(x.b, Const) and _clamp(x.a) \
                    and float(x.b.value).is_integer() and abs(float(x.b.value)) <= 2 ** 22:
                z, inner = float(x.b.value), x.a
            c = _clamp(inner)
            if c is None:
                return None
            v, hi, lo = c
            y = Bin("-", Bin("+", transform(v, fn), Const(MAGIC)), Const(MAGIC - z))
            y = Select(Bin("<=", y, Const(hi + z)), y, Const(hi + z))
            return Select(Bin(">=", y, Const(lo + z)), y, Const(lo + z))
        c = _clamp(x)
        if c is None:
            return None
        v, hi, lo = c
        if not (isinstance(v, Bin) and v.op == "*" and isinstance(v.b, Const) and math.isfinite(v.b.value)):
            return None
        neg = Bin("-", Bin("+", Bin("*", transform(v.a, fn), Const(-float(v.b.value))), Const(MAGIC)), Const(MAGIC - hi))
        return Bin("max", Bin("-", Const(hi), Bin("max", neg, Const(0.0))), Const(lo))
    return transform(e, fn)


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
    if "input_range" in k.extra:    # a digit of a wide sum (ops/quant_wide.py): a narrower range than its dtype's
        lo, hi = max(lo, min(0.0, k.extra["input_range"][0])), min(hi, max(0.0, k.extra["input_range"][1]))
    bound = sum_bound(rows, lo, hi)
    corr = z * rows.sum(axis=1)
    if bound >= EXACT or np.abs(corr).max(initial=0) >= EXACT:
        raise Unschedulable(f"{k.op}: sum(x * w) can reach {int(bound)} >= 2^24 before its zero point is taken out")
    body = Bin("*", xl, wl)         # pads keep reading z (ops/nn.py conv_kernel)
    extra = {**k.extra, "fixed_point": fixed_point(dtype, wd, hw)}
    if not z:
        return replace(k, body=body, extra=extra, epilogue=vector_requant(k.epilogue, _consts(k, g) | _low_sums(k, program)))
    name = f"{k.name}:zero_point_sums"
    axes = [a.name for a in k.axes]
    if conv:
        grouped = len(k.axes) == 5
        shape = (k.axes[1].extent, k.axes[2].extent) if grouped else (k.axes[1].extent,)
        index = (Var(axes[1]), Var(axes[2])) if grouped else (Var(axes[1]),)
    else:
        shape, index = (k.axes[-1].extent,), (Var(axes[-1]),)
    buffers = dict(k.buffers)
    bias = _bias(k, g, index, shape)
    if bias is not None and bound + np.abs(corr).max(initial=0) + np.abs(bias[1]).max(initial=0) < EXACT:
        # acc - z*sum(w) + bias as acc + (bias - z*sum(w)): every term an integer below 2^24,
        # so both orders are exact, and one vector pass and one staged operand fewer
        name, data = f"{k.name}:bias_minus_zero_point_sums", (bias[1] - corr.reshape(shape)).astype(np.float32)
        old = Bin("+", Acc(), bias[0])
    else:
        data, old = corr.astype(np.float32).reshape(shape), None
    g.tensors[name] = Tensor(name, shape, "float32", data)
    buf = f"b{len(k.buffers)}"
    while buf in k.buffers:
        buf += "_"
    buffers[buf] = Buffer(buf, name, shape, "float32")
    if old is not None:
        epi = transform(k.epilogue, lambda e: Bin("+", Acc(), Load(buf, index)) if e == old else None)
        if old.b.buf not in _reads(epi) | _reads(body) and old.b.buf != k.out:
            del buffers[old.b.buf]      # the bias is read no more: not staged, not a parameter
    else:
        epi = substitute_acc(k.epilogue, Bin("-", Acc(), Load(buf, index)))
    epi = vector_requant(epi, _consts(replace(k, buffers=buffers), g) | _low_sums(k, program))
    return replace(k, body=body, epilogue=epi, buffers=buffers, extra=extra)


def digit_floor(k, program):
    """ops/quant_wide.py's digit h = floor(d * 0.0625), d = x - z with x a quantized tensor and
    z an integer, on the vector unit (floor is a scalar loop) as ((d * 0.0625 - 0.46875) + M) - M:
    d * 0.0625 is a multiple of 1/16, so after subtracting 15/32 its distance to floor(d / 16) is
    at most 15/32 and to every other integer more than 1/2: rounding to nearest (no tie) gives
    the floor. Every step is exact in float32 (|d| <= 2^17, so |d / 16| < 2^13 on a 1/32 grid;
    + M lands in [2^23, 2^24), where the ulp is 1). Other kernels are returned as they are."""
    if k.op not in ("QLinearConv.high", "QLinearConv.low") or k.combine:
        return k
    g = program.graph

    def integral(e):
        if isinstance(e, Bin) and e.op == "-" and isinstance(e.b, Const):
            z, e = float(e.b.value), e.a
            if not (z.is_integer() and abs(z) <= 1 << 16):
                return False
        if not (isinstance(e, Load) and e.pad is None and e.buf in k.buffers):
            return False
        t = k.buffers[e.buf].tensor
        return g.exact_ints.get(program.root(t), g.exact_ints.get(t)) in RANGES

    def fn(e):
        if isinstance(e, Un) and e.op == "floor" and isinstance(e.a, Bin) and e.a.op == "*" \
                and e.a.b == Const(0.0625) and integral(e.a.a):
            return Bin("-", Bin("+", Bin("-", e.a, Const(0.46875)), Const(MAGIC)), Const(MAGIC))
        return None
    return replace(k, body=transform(k.body, fn), epilogue=transform(k.epilogue, fn))


def _low_sums(k, program):
    """k's buffers of a wide QLinearConv's low digit sum (ops/quant_wide.py), which its high sum's
    epilogue adds, or of its other half-channel sum (ops/quant_split.py): finite integers below
    2^24 like the constants, so vector_requant applies."""
    if k.op not in ("QLinearConv.high_sum", "QLinearConv.half_sum"):
        return set()
    low = {kk.buffers[kk.out].tensor for kk in program.kernels if kk.op in ("QLinearConv.low_sum", "QLinearConv.half_sum")}
    return {n for n, b in k.buffers.items() if n != k.out and b.tensor in low}


def _reads(e):
    bufs = set()
    transform(e, lambda x: bufs.add(x.buf) if isinstance(x, Load) else None)
    return bufs


def _bias(k, g, index, shape):
    """(its Load, its values) of a constant integer bias the epilogue adds to the accumulator
    itself (acc + bias, every read of acc: the requantization repeats it), indexed as the zero point's per-channel
    constant; None otherwise."""
    found, accs = [], []

    def fn(e):
        if isinstance(e, Acc):
            accs.append(e)
        if isinstance(e, Bin) and e.op == "+" and isinstance(e.a, Acc) and isinstance(e.b, Load):
            found.append(e.b)
        return None
    transform(k.epilogue, fn)
    if not found or len(found) != len(accs) or any(f != found[0] for f in found) or tuple(found[0].index) != tuple(index) or found[0].pad is not None:
        return None
    b = k.buffers[found[0].buf]
    data = g.tensors[b.tensor].data
    if data is None or tuple(b.shape) != tuple(shape):
        return None
    vals = np.asarray(data, np.float64).reshape(shape)
    if not np.all(np.isfinite(vals)) or not np.array_equal(vals, np.rint(vals)):
        return None
    return found[0], vals
