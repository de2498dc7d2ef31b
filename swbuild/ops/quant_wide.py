"""QLinearConv whose integer sum may pass 2^24: two exact float32 sums, one rounding.

ops/quant.py computes a QLinearConv as one float32 sum, exact while it stays below 2^24 in
magnitude (proven from the weights). The deep layers of an int8 ResNet pass that bound
(K = 4608 products of up to 255 x 128). onnxruntime sums in int32 and converts the sum (plus
the int32 bias) to float32 once, before the multiplier: one rounding. We get the same float:
the centred input d = x - x_zero_point is split into d = 16 h + l (h = floor(d / 16), l in
[0, 15]: both exact), the convolution runs on h and on l (each sum proven below 2^24 from the
actual weights, pads reading 0), and 16 * sum_h (exact, a power of two) + (sum_l + bias)
(exact) is one float32 addition: the correctly rounded value of the exact int32 sum, which
is what cvtdq2ps gives. Then MLAS's requantization, as in ops/quant.py.

This module registers QLinearConv; sums proven below 2^24 go to ops/quant.py's single sum.
"""
from __future__ import annotations

import numpy as np

from ..ir.loopnest import Axis, Bin, Const, Un
from ..optimizer.exact_ints import sum_bound
from .base import KernelBuilder, attr_ints, register
from .nn import _pads, conv_kernel
from .quant import (EXACT, _const_values, _requant, _scalar_zero, _diffs, _t, _weights, int_dtype,
                    lower_qlinear_conv_single, note, prove_exact)
from .quant_split import lower_channel_halves

BASE = 16       # d = BASE * h + l


@register("QLinearConv")
def lower_qlinear_conv(ctx, node):
    g = ctx.graph
    x, w = g.tensors[node.inputs[0]], g.tensors[node.inputs[3]]
    zt = _t(ctx, node.inputs[2] if len(node.inputs) > 2 else "")
    if zt is not None and zt.data is None:
        return lower_qlinear_conv_single(ctx, node)     # a run-time zero point: ops/quant.py decides
    b = _const_values(ctx, node, 8, "bias")
    xzp = _scalar_zero(ctx, node, 2, x.name)
    wd = _weights(ctx, node, 3, 5, w.shape[0])
    per_co = np.abs(wd).reshape(w.shape[0], -1).sum(axis=1)
    extra = np.zeros_like(per_co) if b is None else np.abs(b.reshape(-1))
    # the single sum when its proof (ops/quant.py's, the same bound) passes
    if sum_bound(wd.reshape(w.shape[0], -1), *_diffs(ctx, node, x.name, xzp), b) < EXACT:
        return lower_qlinear_conv_single(ctx, node)
    if lower_channel_halves(ctx, node, x, w, wd, b, xzp):      # each weight read once (ops/quant_split.py)
        return
    K = int(np.prod(w.shape[1:]))
    bh = prove_exact(node, float((per_co * BASE).max(initial=0.0)), f"the high part: {K} products of |h| <= {BASE}")
    bl = prove_exact(node, float((per_co * (BASE - 1) + extra).max(initial=0.0)),
                     f"the low part and the bias: {K} products of l <= {BASE - 1}")
    out = g.tensors[node.outputs[0]]
    nd = len(x.shape) - 2
    strides = attr_ints(node, "strides", [1] * nd)
    dil = attr_ints(node, "dilations", [1] * nd)
    k_eff = [(k - 1) * d + 1 for k, d in zip(w.shape[2:], dil)]
    pb, _ = _pads(node, list(x.shape[2:]), k_eff, strides, list(out.shape[2:]))
    G = int(node.attrs.get("group", 1))
    wc = ctx.new_const(wd.astype(np.float32), node.name + "_w")
    # the two digits of the centred input
    axes = [Axis(f"i{j}", d) for j, d in enumerate(x.shape)]
    parts = {}
    for part in ("high", "low"):
        parts[part] = ctx.new_temp(x.shape, "float32", f"{node.name}_{part}")
        kb = KernelBuilder(ctx, node, f"QLinearConv.{part}")
        xv = kb.load(x.name, [a.var for a in axes])
        d = xv if xzp is None or not xzp.reshape(-1)[0] else Bin("-", xv, Const(float(xzp.reshape(-1)[0])))
        h = Un("floor", Bin("*", d, Const(1.0 / BASE)))
        ctx.add(kb.kernel(parts[part], axes, h if part == "high" else Bin("-", d, Bin("*", Const(float(BASE)), h))))
    # each digit is an integer within int8 (a target may hold it as such, e.g. the MLU's
    # fixed-point convolution); its exact range lets that target prove its own sum's bound
    dlo, dhi = _diffs(ctx, node, x.name, xzp)
    ranges = {"high": (float(np.floor(dlo / BASE)), float(np.floor(dhi / BASE))), "low": (0.0, float(BASE - 1))}
    sums = {}
    for part in ("high", "low"):
        if -128 <= ranges[part][0] and ranges[part][1] <= 127:
            g.exact_ints[parts[part]] = "int8"
        sums[part] = ctx.new_temp(out.shape, "float32", f"{node.name}_sum_{part}")
        conv_kernel(ctx, node, parts[part], wc, None, sums[part], G, strides, dil, pb, op=f"QLinearConv.{part}_sum",
                    extra={"input_range": ranges[part]})
    # 16 * high + (low + bias): one rounding of the exact sum, then MLAS's requantization
    kb = KernelBuilder(ctx, node, "QLinearConv.requantize")
    oax = [Axis(f"o{j}", d) for j, d in enumerate(out.shape)]
    idx = [a.var for a in oax]
    low = kb.load(sums["low"], idx)
    if b is not None:
        low = Bin("+", low, kb.load(ctx.new_const(b.astype(np.float32).reshape(-1), node.name + "_bias"), [oax[1].var]))
    e = Bin("+", Bin("*", Const(float(BASE)), kb.load(sums["high"], idx)), low)
    requant = _requant(ctx, node, (1, 4, 6), out.name)
    ctx.add(kb.kernel(out.name, oax, requant(kb, e, [oax[1].var], [out.shape[1]])))
    note(ctx, node, f"{int_dtype(ctx, x.name)} x {int_dtype(ctx, w.name)} -> {int_dtype(ctx, out.name)} (requantized "
                    f"as MLAS): the sum may pass 2^24, so x - zero point = {BASE} h + l, two float32 sums proven exact "
                    f"(|sum_h| <= {bh}, |sum_l + bias| <= {bl} < 2^24) joined by one rounding, as int32 -> float")

