"""A wide QLinearConv as two sums over halves of its input channels, one rounding (issue 36).

ops/quant_wide.py's digit split (x - z = 16 h + l) convolves the whole input twice: twice the
weights cross memory, which is what a deep layer of a per-channel int8 ResNet costs. When the
sums over each half of the input channels are proven below 2^24 (the first with the int32
bias), they are exact in float32: (S_a + bias) + S_b is one float32 addition of two exact
integers, the correctly rounded value of the exact int32 sum, which is what onnxruntime's
int32 -> float conversion gives. Each half's weights are read once. Then MLAS's
requantization, as in ops/quant.py.

Only for an ungrouped convolution whose input channels split at a multiple of 64 (an int8
tile's channel multiple on the MLU); None where that is not proven, and the digits decide.
"""
from __future__ import annotations

import numpy as np

from ..ir.loopnest import Axis, Bin, Var, iconst
from ..optimizer.exact_ints import RANGES, sum_bound
from .base import KernelBuilder, attr_ints
from .nn import _pads, conv_kernel
from .quant import EXACT, _diffs, _requant, int_dtype, note

QUANTUM = 64        # the channel split falls on a multiple of this


def lower_channel_halves(ctx, node, x, w, wd, b, xzp):
    """Lower the node as two half-channel sums when both are proven exact; else None."""
    g = ctx.graph
    cig = w.shape[1]
    c = cig // 2 // QUANTUM * QUANTUM
    if int(node.attrs.get("group", 1)) != 1 or c < QUANTUM:
        return None
    rows = wd.reshape(w.shape[0], cig, -1)
    lo, hi = _diffs(ctx, node, x.name, xzp)
    ba = sum_bound(rows[:, :c].reshape(w.shape[0], -1), lo, hi, b)
    bb = sum_bound(rows[:, c:].reshape(w.shape[0], -1), lo, hi)
    if ba >= EXACT or bb >= EXACT:
        return None
    out = g.tensors[node.outputs[0]]
    nd = len(x.shape) - 2
    strides, dil = attr_ints(node, "strides", [1] * nd), attr_ints(node, "dilations", [1] * nd)
    pb, _ = _pads(node, list(x.shape[2:]), [(k - 1) * d + 1 for k, d in zip(w.shape[2:], dil)], strides,
                  list(out.shape[2:]))
    z = 0.0 if xzp is None else float(xzp.reshape(-1)[0])
    dt = int_dtype(ctx, x.name)
    sums = []
    for part, (c0, c1) in (("a", (0, c)), ("b", (c, cig))):
        shape = (x.shape[0], c1 - c0) + tuple(x.shape[2:])
        xs = ctx.new_temp(shape, "float32", f"{node.name}_channels_{part}")
        if dt in RANGES:
            g.exact_ints[xs] = dt       # the input's own values: a target may hold them as it holds x
        kb = KernelBuilder(ctx, node, f"QLinearConv.{part}")
        axes = [Axis(f"i{j}", d) for j, d in enumerate(shape)]
        idx = [a.var for a in axes]
        idx[1] = Bin("+", Var("i1"), iconst(c0)) if c0 else idx[1]
        ctx.add(kb.kernel(xs, axes, kb.load(x.name, idx)))
        wc = ctx.new_const(wd[:, c0:c1].astype(np.float32), f"{node.name}_w_{part}")
        sums.append(ctx.new_temp(out.shape, "float32", f"{node.name}_sum_{part}"))
        conv_kernel(ctx, node, xs, wc, None, sums[-1], 1, strides, dil, pb, op="QLinearConv.half_sum", x_zero=z)
    kb = KernelBuilder(ctx, node, "QLinearConv.requantize")
    oax = [Axis(f"o{j}", d) for j, d in enumerate(out.shape)]
    idx = [a.var for a in oax]
    first = kb.load(sums[0], idx)
    if b is not None:
        first = Bin("+", first, kb.load(ctx.new_const(b.astype(np.float32).reshape(-1), node.name + "_bias"), [oax[1].var]))
    requant = _requant(ctx, node, (1, 4, 6), out.name)
    ctx.add(kb.kernel(out.name, oax, requant(kb, Bin("+", first, kb.load(sums[1], idx)), [oax[1].var], [out.shape[1]])))
    note(ctx, node, f"{dt} x {int_dtype(ctx, w.name)} -> {int_dtype(ctx, out.name)} (requantized as MLAS): the sum "
                    f"may pass 2^24, so two float32 sums over input channels [0, {c}) and [{c}, {cig}) proven exact "
                    f"(|sum_a + bias| <= {int(ba)}, |sum_b| <= {int(bb)} < 2^24) joined by one rounding, as int32 -> float")
    return True
