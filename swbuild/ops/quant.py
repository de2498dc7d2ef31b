"""Quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, ConvInteger,
MatMulInteger, QLinearConv, QLinearMatMul as float32 kernels that are exact.

Run-time integers live as exact float32 values (optimizer/exact_ints.py; `graph.exact_ints`
names the dtype each stands for). The arithmetic is onnxruntime's, step for step:
- Quantize: y = saturate(rint(x / scale) + zero_point): one IEEE division, rint under the
  default rounding mode (C `nearbyintf`: ties to even, as MLAS's cvtps2dq), then the clamp;
  NaN saturates to the low end (MLAS clamps before it converts). Every step is exact or is
  the same single rounding onnxruntime does.
- Dequantize: y = (x - zero_point) * scale: the difference of two exact integers is exact,
  the product is one rounding, as static_cast<float>(x - zp) * scale.
- ConvInteger / MatMulInteger: a sum of integer products is exact in float32 while every
  partial sum stays below 2**24 in magnitude. We prove that per node at compile time from the
  weights' actual values and the input dtype's range (sum over K of max|w - wzp| times
  max|x - xzp|, the worst output channel; any order of summation is then exact, so CPE splits
  and SIMD lanes change nothing) and refuse naming the node when it cannot be proven. We chose
  the proof over int32 accumulators because every kernel, tiler, DMA plan and printer of both
  families computes in float32; the proof costs nothing at run time and holds for every
  int8 x int8 sum of K < 1024 terms (2**24 / 128**2), and beyond that as far as the weights'
  actual magnitudes allow. A deep layer of a real int8 CNN (K = 4608) can exceed it: a
  QLinearConv then splits its sum in two (ops/quant_wide.py); the other ops are refused.
- QLinearConv / QLinearMatMul: the exact integer sum (plus the int32 bias) requantized as
  MLAS does: rint(sum * (x_scale * w_scale / y_scale)) + y_zero_point, saturated.
"""
from __future__ import annotations

import math

import numpy as np

from ..support.errors import UnsupportedError
from ..ir.loopnest import Acc, Axis, Bin, Const, Select, Un, iconst
from ..optimizer.exact_ints import CAST_TO_INT, FUSED_RELU, RANGES, sum_bound
from .base import KernelBuilder, attr_ints, broadcast_index, register
from .nn import _pads, conv_kernel

EXACT = 1 << 24          # float32 holds every integer of magnitude up to 2**24


def _t(ctx, name):
    return ctx.graph.tensors[name] if name else None


def int_dtype(ctx, name):
    """The integer dtype a float32 tensor stands for (optimizer/exact_ints.py), else its own."""
    return ctx.graph.exact_ints.get(name, ctx.graph.tensors[name].dtype)


def _range(ctx, node, name):
    dt = int_dtype(ctx, name)
    if dt not in RANGES:
        raise UnsupportedError(f"node '{node.name}' ({node.op}): tensor '{name}' has dtype {dt}; quantized "
                               f"values here are {', '.join(RANGES)} (exact in float32)")
    return RANGES[dt]


def _input(node, k):
    return node.inputs[k] if len(node.inputs) > k and node.inputs[k] else None


def _float_param(ctx, node, k):
    t = _t(ctx, _input(node, k))
    if t is not None and t.dtype != "float32":
        raise UnsupportedError(f"node '{node.name}' ({node.op}): scale '{t.name}' has dtype {t.dtype}; "
                               "scales are float32 here")
    return t


def _param(kb, t, x_shape, axes, axis, block):
    """Load of a scale or zero point: per tensor, per axis (1-D) or per block along `axis`."""
    if t is None:
        return None
    if t.data is not None and t.size == 1:
        return Const(float(np.asarray(t.data).reshape(-1)[0]))
    if t.size == 1:
        return kb.load(t.name, [iconst(0)], shape=[1])
    if block:           # axes are the view: the quantized axis split into [blocks, block]
        idx = [a.var for j, a in enumerate(axes) if j != axis + 1]
        return kb.load(t.name, idx, shape=[a.extent for j, a in enumerate(axes) if j != axis + 1])
    return kb.load(t.name, [axes[axis].var], shape=[x_shape[axis]])


def _view(ctx, node, x, t):
    """(axis, block, view shape) of a Quantize/Dequantize over x with parameter t."""
    r = len(x.shape)
    axis = int(node.attrs.get("axis", 1))
    block = int(node.attrs.get("block_size", 0))
    if t is None or t.size == 1 and not block:
        return 0, 0, list(x.shape)
    axis %= max(r, 1)
    if block:
        D = x.shape[axis]
        if D % block:
            raise UnsupportedError(f"node '{node.name}' ({node.op}): block_size {block} does not divide axis {axis} "
                                   f"({D}); only whole blocks are supported")
        return axis, block, list(x.shape[:axis]) + [D // block, block] + list(x.shape[axis + 1:])
    if len(t.shape) != 1 or t.shape[0] != x.shape[axis]:
        raise UnsupportedError(f"node '{node.name}' ({node.op}): scale shape {list(t.shape)} fits neither per-tensor "
                               f"nor per-axis quantization of {list(x.shape)} on axis {axis}")
    return axis, 0, list(x.shape)


def note(ctx, node, text):
    """Record the node's dtype path (`swbuild ops MODEL` prints it)."""
    ctx.notes[node.name] = text


def saturate(v, lo, hi):
    """clamp(v, lo, hi) with NaN to lo, as MLAS saturates before it converts."""
    return Select(Bin(">=", v, Const(float(lo))), Select(Bin("<=", v, Const(float(hi))), v, Const(float(hi))),
                  Const(float(lo)))


def quantize(x, scale, zp, lo, hi):
    q = Un("round", Bin("/", x, scale))
    return saturate(q if zp is None else Bin("+", q, zp), lo, hi)


@register("QuantizeLinear")
def lower_quantize(ctx, node):
    x, out = _t(ctx, node.inputs[0]), _t(ctx, node.outputs[0])
    s, z = _float_param(ctx, node, 1), _t(ctx, _input(node, 2))
    lo, hi = _range(ctx, node, out.name)
    axis, block, view = _view(ctx, node, x, s)
    kb = KernelBuilder(ctx, node)
    axes = [Axis(f"i{j}", d) for j, d in enumerate(view)]
    xv = kb.load(x.name, [a.var for a in axes], shape=view)
    zv = _param(kb, z, x.shape, axes, axis, block)
    y = quantize(xv, _param(kb, s, x.shape, axes, axis, block), None if isinstance(zv, Const) and zv.value == 0 else zv,
                 lo, hi)
    ctx.add(kb.kernel(out.name, axes, y, out_shape=view))
    note(ctx, node, f"float32 -> {int_dtype(ctx, out.name)} held as exact float32: rint(x / scale) (ties to even) "
                    f"+ zero point, saturated to [{lo}, {hi}]" + (f", per block of {block}" if block else ""))


@register("DequantizeLinear")
def lower_dequantize(ctx, node):
    x, out = _t(ctx, node.inputs[0]), _t(ctx, node.outputs[0])
    s, z = _float_param(ctx, node, 1), _t(ctx, _input(node, 2))
    axis, block, view = _view(ctx, node, x, s)
    kb = KernelBuilder(ctx, node)
    axes = [Axis(f"i{j}", d) for j, d in enumerate(view)]
    xv = kb.load(x.name, [a.var for a in axes], shape=view)
    zv = _param(kb, z, x.shape, axes, axis, block)
    if zv is not None and not (isinstance(zv, Const) and zv.value == 0):
        xv = Bin("-", xv, zv)
    ctx.add(kb.kernel(out.name, axes, Bin("*", xv, _param(kb, s, x.shape, axes, axis, block)), out_shape=view))
    note(ctx, node, f"{int_dtype(ctx, x.name)} (exact float32) -> float32: (x - zero point) * scale")


@register("DynamicQuantizeLinear")
def lower_dynamic_quantize(ctx, node):
    """uint8: the range [min(x, 0), max(x, 0)] over 255 steps; scale 1 when it is empty (as
    onnxruntime); the zero point rint(saturate(0 - min / scale)); then Quantize."""
    x = _t(ctx, node.inputs[0])
    y, ys, yz = node.outputs[:3]
    n = Axis("i", x.size)
    one = Axis("o", 1)
    ext = {}
    for comb, init in (("min", math.inf), ("max", -math.inf)):
        ext[comb] = ctx.new_temp([1], "float32", f"{node.name}_{comb}")
        kb = KernelBuilder(ctx, node, f"DynamicQuantizeLinear.{comb}")
        ctx.add(kb.kernel(ext[comb], [one], kb.load(x.name, [n.var], shape=[x.size]), out_shape=[1],
                          reduce_axes=(n,), combine=comb, init=init))
    kb = KernelBuilder(ctx, node, "DynamicQuantizeLinear.scale")
    lo = Bin("min", kb.load(ext["min"], [iconst(0)]), Const(0.0))
    hi = Bin("max", kb.load(ext["max"], [iconst(0)]), Const(0.0))
    ctx.add(kb.kernel(ys, [one], Select(Bin("==", hi, lo), Const(1.0), Bin("/", Bin("-", hi, lo), Const(255.0))),
                      out_shape=[1]))
    kb = KernelBuilder(ctx, node, "DynamicQuantizeLinear.zero_point")
    lo = Bin("min", kb.load(ext["min"], [iconst(0)]), Const(0.0))
    izp = Bin("-", Const(0.0), Bin("/", lo, kb.load(ys, [iconst(0)], shape=[1])))
    # std::max(0.f, std::min(255.f, izp)), NaN (an infinite range) to 255 as there
    t = Select(Bin("<", izp, Const(255.0)), izp, Const(255.0))
    ctx.add(kb.kernel(yz, [one], Un("round", Select(Bin("<", Const(0.0), t), t, Const(0.0))), out_shape=[1]))
    kb = KernelBuilder(ctx, node, "DynamicQuantizeLinear")
    axes = [Axis("i", x.size)]
    xv = kb.load(x.name, [axes[0].var], shape=[x.size])
    q = quantize(xv, kb.load(ys, [iconst(0)], shape=[1]), kb.load(yz, [iconst(0)], shape=[1]), 0, 255)
    ctx.add(kb.kernel(y, axes, q, out_shape=[x.size]))
    note(ctx, node, "float32 -> uint8 held as exact float32, scale and zero point computed at run time")


@register(CAST_TO_INT)
def lower_cast_to_integer(ctx, node):
    """C's conversion into a quantized dtype, on exact float32 values: truncation toward zero,
    then the value modulo 2**bits (x86's cvttss2si keeps the low bits; beyond the int32 range
    and for NaN it gives INT_MIN, whose low bits are 0). ONNX leaves out-of-range values
    undefined; in range this is exact, and out of range it is what the boundary's C does."""
    x, out = _t(ctx, node.inputs[0]), _t(ctx, node.outputs[0])
    lo, hi = RANGES[node.attrs["to_dtype"]]
    span = Const(float(hi - lo + 1))
    kb = KernelBuilder(ctx, node, "Cast")
    axes = [Axis("i", x.size)]
    v = kb.load(x.name, [axes[0].var], shape=[x.size])
    t = Select(Bin("<", v, Const(0.0)), Un("ceil", v), Un("floor", v))
    wrapped = Bin("-", t, Bin("*", span, Un("floor", Bin("/", Bin("-", t, Const(float(lo))), span))))
    y = Select(Bin("<", Un("abs", v), Const(2.0 ** 31)), wrapped, Const(0.0))
    ctx.add(kb.kernel(out.name, axes, y, out_shape=[x.size]))
    note(ctx, node, f"{x.dtype if x.name not in ctx.graph.exact_ints else int_dtype(ctx, x.name)} -> "
                    f"{node.attrs['to_dtype']} held as exact float32: truncated, wrapped modulo 2^{int(math.log2(hi - lo + 1))}")


# ---- integer products: ConvInteger, MatMulInteger, QLinearConv, QLinearMatMul ----------

def _const_values(ctx, node, k, what):
    t = _t(ctx, _input(node, k))
    if t is None:
        return None
    if t.data is None:
        raise UnsupportedError(f"node '{node.name}' ({node.op}): {what} '{t.name}' must be a constant "
                               "(the exactness of the integer sums is proven at compile time)")
    return np.asarray(t.data, np.float64)


def _diffs(ctx, node, name, zp):
    """[low, high] of x - zp over x's dtype range (zp: constant values, None for 0, or
    "run" for a zero point known at run time only: any value of the dtype)."""
    lo, hi = _range(ctx, node, name)
    if isinstance(zp, str):
        return lo - hi, hi - lo
    z = np.zeros(1) if zp is None else zp.reshape(-1)
    return float(np.min(lo - z)), float(np.max(hi - z))


def prove_exact(node, bound, detail):
    """Refuse, naming the node, a sum whose magnitude may reach 2**24 (float32 would round it)."""
    if bound >= EXACT:
        raise UnsupportedError(f"node '{node.name}' ({node.op}): the integer sum can reach {int(bound)} >= 2^24 "
                               f"({detail}); float32 would round it, and int32 kernels are not supported yet")
    return int(bound)


def _note_sum(ctx, node, x, w, bound):
    out = node.outputs[0]
    to = "int32" if node.op in ("ConvInteger", "MatMulInteger") else f"{int_dtype(ctx, out)} (requantized as MLAS)"
    note(ctx, node, f"{int_dtype(ctx, x)} x {int_dtype(ctx, w)} -> {to}: float32 sums proven exact "
                    f"(|sum| <= {bound} < 2^24)")


def _weights(ctx, node, k_w, k_zp, axis_len):
    """Weights minus their zero point (per tensor or per output channel along `axis_len`'s axis
    0), as float64 numbers: exact integers."""
    w = _const_values(ctx, node, k_w, "weight")
    zp = _const_values(ctx, node, k_zp, "weight zero point")
    _range(ctx, node, node.inputs[k_w])
    if zp is not None and zp.size > 1:
        zp = zp.reshape([axis_len] + [1] * (w.ndim - 1))
    return w - (0 if zp is None else zp)


def _scalar_zero(ctx, node, k, name):
    zp = _const_values(ctx, node, k, "input zero point")
    if zp is not None and zp.size > 1:
        raise UnsupportedError(f"node '{node.name}' ({node.op}): a per-row input zero point is not supported")
    _range(ctx, node, name)
    return zp


def _conv_common(ctx, node, k_x, k_w, k_xzp, k_wzp, bias=None):
    g = ctx.graph
    x, w, out = g.tensors[node.inputs[k_x]], g.tensors[node.inputs[k_w]], g.tensors[node.outputs[0]]
    zt = _t(ctx, _input(node, k_xzp))
    run_zp = zt is not None and zt.data is None and zt.size == 1     # DynamicQuantizeLinear's zero point
    xzp = None if run_zp else _scalar_zero(ctx, node, k_xzp, x.name)
    wd = _weights(ctx, node, k_w, k_wzp, w.shape[0])
    d = _diffs(ctx, node, x.name, "run" if run_zp else xzp)
    x_name = x.name
    if run_zp:      # any zero point of the dtype; x - zp computed once, so a pad reads 0
        _range(ctx, node, zt.name)
        x_name = ctx.new_temp(x.shape, "float32", node.name + "_centered")
        kb = KernelBuilder(ctx, node, f"{node.op}.center")
        axes = [Axis(f"i{j}", d) for j, d in enumerate(x.shape)]
        ctx.add(kb.kernel(x_name, axes, Bin("-", kb.load(x.name, [a.var for a in axes]),
                                            kb.load(zt.name, [iconst(0)], shape=[1]))))
    bound = prove_exact(node, sum_bound(wd.reshape(w.shape[0], -1), *d, bias),
                        f"{int(np.prod(w.shape[1:]))} products per output, x - x_zero_point in [{d[0]:.0f}, {d[1]:.0f}]")
    _note_sum(ctx, node, x.name, w.name, bound)
    nd = len(x.shape) - 2
    strides = attr_ints(node, "strides", [1] * nd)
    dil = attr_ints(node, "dilations", [1] * nd)
    k_eff = [(k - 1) * d + 1 for k, d in zip(w.shape[2:], dil)]
    pb, _ = _pads(node, list(x.shape[2:]), k_eff, strides, list(out.shape[2:]))
    wc = ctx.new_const(wd.astype(np.float32), node.name + "_w")
    x_zero = 0.0 if xzp is None else float(xzp.reshape(-1)[0])
    return g.tensors[x_name], wc, out, int(node.attrs.get("group", 1)), strides, dil, pb, x_zero


@register("ConvInteger")
def lower_conv_integer(ctx, node):
    x, wc, out, G, strides, dil, pb, x_zero = _conv_common(ctx, node, 0, 1, 2, 3)
    conv_kernel(ctx, node, x.name, wc, None, out.name, G, strides, dil, pb, op="ConvInteger", x_zero=x_zero)


def _requant(ctx, node, k_scales, out_name):
    """epilogue -> saturate(rint(e * (x_scale * w_scale / y_scale)) + y_zero_point): MLAS's
    requantization, the multiplier computed in float32 as onnxruntime does."""
    xs, ws, ys = (_const_values(ctx, node, k, "scale").astype(np.float32) for k in k_scales)
    for k in k_scales:
        _float_param(ctx, node, k)
    yzp = _const_values(ctx, node, k_scales[2] + 1, "output zero point")
    if xs.size > 1 or ys.size > 1 or (yzp is not None and yzp.size > 1):
        raise UnsupportedError(f"node '{node.name}' ({node.op}): per-row input or per-column output scales are "
                               "not supported (per tensor only; the weights' scales may be per channel)")
    lo, hi = _range(ctx, node, out_name)
    if node.attrs.get(FUSED_RELU):     # Relu before QuantizeLinear (optimizer/qdq_fuse.py): clamp at zero
        lo = max(lo, int(yzp.reshape(-1)[0]) if yzp is not None else 0)
    mult = (xs.reshape(-1)[0] * ws.reshape(-1) / ys.reshape(-1)[0]).astype(np.float32)
    z = None if yzp is None or not yzp.reshape(-1)[0] else Const(float(yzp.reshape(-1)[0]))

    def requant(kb, epi, co_index, co_shape):
        if mult.size == 1:
            m = Const(float(mult[0]))
        else:
            m = kb.load(ctx.new_const(mult.reshape(co_shape), node.name + "_multiplier"), co_index)
        return quantize_mul(epi, m, z, lo, hi)
    return requant


def quantize_mul(e, m, zp, lo, hi):
    q = Un("round", Bin("*", e, m))
    return saturate(q if zp is None else Bin("+", q, zp), lo, hi)


def lower_qlinear_conv_single(ctx, node):
    """QLinearConv as one float32 sum (registered by ops/quant_wide.py, which splits a sum that
    may pass 2^24 and sends the others here)."""
    b = _const_values(ctx, node, 8, "bias")
    x, wc, out, G, strides, dil, pb, x_zero = _conv_common(ctx, node, 0, 3, 2, 5, bias=b)
    bias = None if b is None else ctx.new_const(b.astype(np.float32), node.name + "_bias")
    requant = _requant(ctx, node, (1, 4, 6), out.name)
    conv_kernel(ctx, node, x.name, wc, bias, out.name, G, strides, dil, pb, op="QLinearConv", x_zero=x_zero,
                requant=requant)


def _matmul(ctx, node, k_a, k_b, k_azp, k_bzp, requant=None, bias=None):
    """out[b.., m, n] = sum_k (A - a_zp)[b.., m, k] * (B - b_zp)[b.., k, n] (+ bias[n]), B constant."""
    g = ctx.graph
    a, b, out = g.tensors[node.inputs[k_a]], g.tensors[node.inputs[k_b]], g.tensors[node.outputs[0]]
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise UnsupportedError(f"node '{node.name}' ({node.op}): 1-D operands are not supported")
    zt = _t(ctx, _input(node, k_azp))
    run_zp = zt is not None and zt.data is None and zt.size == 1     # DynamicQuantizeLinear's zero point
    azp = None if run_zp else _scalar_zero(ctx, node, k_azp, a.name)
    bv = _const_values(ctx, node, k_b, "weight")
    _range(ctx, node, b.name)
    bzp = _const_values(ctx, node, k_bzp, "weight zero point")
    bd = bv - (0 if bzp is None else bzp.reshape([1] * (bv.ndim - 1) + [-1]) if bzp.size > 1 else bzp.reshape(-1)[0])
    d = _diffs(ctx, node, a.name, "run" if run_zp else azp)
    if run_zp:      # a zero point known at run time only: any value of the dtype
        _range(ctx, node, zt.name)
    K = a.shape[-1]
    rows = np.moveaxis(np.broadcast_to(bd, bd.shape), -1, -2).reshape(-1, K)     # one row per output column
    bias_bound = None if bias is None else np.full(1, np.abs(bias).max(initial=0.0))
    bound = prove_exact(node, sum_bound(rows, *d, bias_bound),
                        f"K = {K}, a - a_zero_point in [{d[0]:.0f}, {d[1]:.0f}]")
    _note_sum(ctx, node, a.name, b.name, bound)
    bc = ctx.new_const(bd.astype(np.float32), node.name + "_b")
    batch = list(out.shape[:-2])
    bax = [Axis(f"b{i}", d) for i, d in enumerate(batch)]
    m, n, k = Axis("m", out.shape[-2]), Axis("n", out.shape[-1]), Axis("k", K)
    kb = KernelBuilder(ctx, node)
    av = kb.load(a.name, broadcast_index(a.shape[:-2], bax) + [m.var, k.var])
    if azp is not None and azp.reshape(-1)[0]:
        av = Bin("-", av, Const(float(azp.reshape(-1)[0])))
    elif run_zp:
        av = Bin("-", av, kb.load(zt.name, [iconst(0)], shape=[1]))
    bl = kb.load(bc, broadcast_index(b.shape[:-2], bax) + [k.var, n.var])
    axes = bax + [m, n]
    epi = Acc() if bias is None else Bin("+", Acc(), kb.load(ctx.new_const(bias.astype(np.float32).reshape(-1),
                                                                             node.name + "_bias"), [n.var]))
    kw = {} if requant is None else {"epilogue": requant(kb, epi, [n.var], [out.shape[-1]])}
    ctx.add(kb.kernel(out.name, axes, Bin("*", av, bl), out_shape=[x.extent for x in axes],
                      reduce_axes=(k,), combine="sum", init=0.0, **kw))


@register("MatMulInteger")
def lower_matmul_integer(ctx, node):
    _matmul(ctx, node, 0, 1, 2, 3)


@register("QLinearMatMul")
def lower_qlinear_matmul(ctx, node):
    """Input 8, an int32 bias per output column, is swbuild's own: optimizer/qdq_fuse.py puts a
    Gemm's there (onnxruntime's QGemm)."""
    _matmul(ctx, node, 0, 3, 2, 5, requant=_requant(ctx, node, (1, 4, 6), node.outputs[0]),
            bias=_const_values(ctx, node, 8, "bias"))

