"""Convolution, pooling, Gemm/MatMul, LRN: reductions over windows and inner dimensions."""
from __future__ import annotations

import math

from ..errors import UnsupportedError
from ..ir.loopnest import Acc, Axis, Bin, Const, iconst
from . import KernelBuilder, attr_ints, axes_for, broadcast_index, register


def _pads(node, in_sp, k_eff, strides, out_sp):
    """Begin/end pads per spatial dim, honouring auto_pad."""
    n = len(in_sp)
    auto = node.attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for d in range(n):
            total = max(0, (out_sp[d] - 1) * strides[d] + k_eff[d] - in_sp[d])
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
            begin.append(lo)
            end.append(total - lo)
        return begin, end
    if auto == "VALID":
        return [0] * n, [0] * n
    p = attr_ints(node, "pads", [0] * (2 * n))
    return p[:n], p[n:]


def lin(terms, const=0):
    """sum(coef * var) + const, without the `* 1` and `+ 0` noise in printed kernels."""
    e = None
    for v, c in terms:
        t = v if c == 1 else Bin("*", v, iconst(c))
        e = t if e is None else Bin("+", e, t)
    if e is None:
        return iconst(const)
    return e if const == 0 else Bin("+" if const > 0 else "-", e, iconst(abs(const)))


def window_index(out_axis, stride, win_axis, dilation, pad_begin):
    return lin([(out_axis.var, stride), (win_axis.var, dilation)], -pad_begin)


@register("Conv")
def lower_conv(ctx, node):
    g = ctx.graph
    x, w, out = g.tensors[node.inputs[0]], g.tensors[node.inputs[1]], g.tensors[node.outputs[0]]
    bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else None
    N, C, *in_sp = x.shape
    Co, Cig, *ks = w.shape
    _, _, *out_sp = out.shape
    G = int(node.attrs.get("group", 1))
    nd = len(in_sp)
    strides = attr_ints(node, "strides", [1] * nd)
    dil = attr_ints(node, "dilations", [1] * nd)
    k_eff = [(k - 1) * d + 1 for k, d in zip(ks, dil)]
    pb, _ = _pads(node, in_sp, k_eff, strides, out_sp)
    Cog = Co // G
    kb = KernelBuilder(ctx, node)
    n_ax = Axis("n", N)
    g_ax = [Axis("g", G)] if G > 1 else []
    co = Axis("co", Cog)
    sp = [Axis(f"o{d}", out_sp[d]) for d in range(nd)]
    ci = Axis("ci", Cig)
    kr = [Axis(f"k{d}", ks[d]) for d in range(nd)]
    gv = [a.var for a in g_ax]
    in_idx = [window_index(sp[d], strides[d], kr[d], dil[d], pb[d]) for d in range(nd)]
    pad = 0.0 if any(pb) or any((o - 1) * s + ke - p > i for o, s, ke, p, i in
                                zip(out_sp, strides, k_eff, pb, in_sp)) else None
    xv = kb.load(x.name, [n_ax.var] + gv + [ci.var] + in_idx, pad=pad, shape=[N] + [G] * bool(g_ax) + [Cig] + in_sp)
    wv = kb.load(w.name, gv + [co.var, ci.var] + [a.var for a in kr], shape=[G] * bool(g_ax) + [Cog, Cig] + ks)
    epi = None
    if bias:
        epi = Bin("+", _acc(), kb.load(bias, gv + [co.var], shape=[G] * bool(g_ax) + [Cog]))
    axes = [n_ax] + g_ax + [co] + sp
    k = kb.kernel(out.name, axes, Bin("*", xv, wv), out_shape=[a.extent for a in axes],
                  reduce_axes=(ci, *kr), combine="sum", init=0.0, **({"epilogue": epi} if epi else {}))
    ctx.add(k)


def _acc():
    return Acc()


def _pool(ctx, node, combine):
    g = ctx.graph
    x, out = g.tensors[node.inputs[0]], g.tensors[node.outputs[0]]
    N, C, *in_sp = x.shape
    _, _, *out_sp = out.shape
    nd = len(in_sp)
    ks = attr_ints(node, "kernel_shape", None)
    strides = attr_ints(node, "strides", [1] * nd)
    dil = attr_ints(node, "dilations", [1] * nd)
    if node.op == "AveragePool" and any(d != 1 for d in dil):
        raise UnsupportedError(f"node '{node.name}' (AveragePool): dilations other than 1 are not supported")
    k_eff = [(k - 1) * d + 1 for k, d in zip(ks, dil)]
    pb, pe = _pads(node, in_sp, k_eff, strides, out_sp)
    kb = KernelBuilder(ctx, node)
    axes = [Axis("n", N), Axis("c", C)] + [Axis(f"o{d}", out_sp[d]) for d in range(nd)]
    kr = [Axis(f"k{d}", ks[d]) for d in range(nd)]
    idx = [window_index(axes[2 + d], strides[d], kr[d], dil[d], pb[d]) for d in range(nd)]
    pad = -math.inf if combine == "max" else 0.0
    xv = kb.load(x.name, [axes[0].var, axes[1].var] + idx, pad=pad)
    epi = _acc()
    if combine == "sum":
        include = int(node.attrs.get("count_include_pad", 0))
        cnt = None
        for d in range(nd):
            start = lin([(axes[2 + d].var, strides[d])], -pb[d])
            lo_lim, hi_lim = (-pb[d], in_sp[d] + pe[d]) if include else (0, in_sp[d])
            # window [start, start+k) clipped to the region that counts
            n_d = Bin("-", Bin("min", start + ks[d], iconst(hi_lim)), Bin("max", start, iconst(lo_lim)))
            cnt = n_d if cnt is None else Bin("*", cnt, n_d)
        epi = Bin("/", _acc(), cnt)
    ctx.add(kb.kernel(out.name, axes, xv, reduce_axes=tuple(kr), combine=combine,
                      init=-math.inf if combine == "max" else 0.0, epilogue=epi))


@register("MaxPool")
def lower_maxpool(ctx, node):
    if len([o for o in node.outputs if o]) > 1:
        raise UnsupportedError(f"node '{node.name}' (MaxPool): the Indices output is not supported")
    if int(node.attrs.get("storage_order", 0)):
        raise UnsupportedError(f"node '{node.name}' (MaxPool): storage_order=1 is not supported")
    _pool(ctx, node, "max")


@register("AveragePool")
def lower_avgpool(ctx, node):
    _pool(ctx, node, "sum")


@register("Gemm")
def lower_gemm(ctx, node):
    g = ctx.graph
    a, b, out = g.tensors[node.inputs[0]], g.tensors[node.inputs[1]], g.tensors[node.outputs[0]]
    ta, tb = int(node.attrs.get("transA", 0)), int(node.attrs.get("transB", 0))
    alpha, beta = float(node.attrs.get("alpha", 1.0)), float(node.attrs.get("beta", 1.0))
    M, N = out.shape
    K = a.shape[0] if ta else a.shape[1]
    kb = KernelBuilder(ctx, node)
    m, n, k = Axis("m", M), Axis("n", N), Axis("k", K)
    av = kb.load(a.name, [k.var, m.var] if ta else [m.var, k.var])
    bv = kb.load(b.name, [n.var, k.var] if tb else [k.var, n.var])
    epi = _acc() if alpha == 1.0 else Bin("*", Const(alpha), _acc())
    if len(node.inputs) > 2 and node.inputs[2] and beta != 0.0:
        c = g.tensors[node.inputs[2]]
        cv = kb.load(c.name, broadcast_index(c.shape, [m, n]))
        epi = Bin("+", epi, cv if beta == 1.0 else Bin("*", Const(beta), cv))
    ctx.add(kb.kernel(out.name, [m, n], Bin("*", av, bv), reduce_axes=(k,), combine="sum", init=0.0, epilogue=epi))


@register("MatMul")
def lower_matmul(ctx, node):
    g = ctx.graph
    a, b, out = g.tensors[node.inputs[0]], g.tensors[node.inputs[1]], g.tensors[node.outputs[0]]
    ash, bsh = list(a.shape), list(b.shape)
    a1, b1 = len(ash) == 1, len(bsh) == 1
    if a1:
        ash = [1] + ash
    if b1:
        bsh = bsh + [1]
    K = ash[-1]
    batch = list(out.shape[:len(out.shape) - (0 if a1 else 1) - (0 if b1 else 1)])
    M, N = ash[-2], bsh[-1]
    bax = [Axis(f"b{i}", d) for i, d in enumerate(batch)]
    m, n, k = Axis("m", M), Axis("n", N), Axis("k", K)
    kb = KernelBuilder(ctx, node)
    av = kb.load(a.name, broadcast_index(ash[:-2], bax) + [m.var, k.var], shape=ash)
    bv = kb.load(b.name, broadcast_index(bsh[:-2], bax) + [k.var, n.var], shape=bsh)
    axes = bax + [m, n]
    ctx.add(kb.kernel(out.name, axes, Bin("*", av, bv), out_shape=[x.extent for x in axes],
                      reduce_axes=(k,), combine="sum", init=0.0))


@register("LRN")
def lower_lrn(ctx, node):
    g = ctx.graph
    x, out = g.tensors[node.inputs[0]], g.tensors[node.outputs[0]]
    size = int(node.attrs["size"])
    alpha, beta, bias = (float(node.attrs.get(k, d)) for k, d in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
    kb = KernelBuilder(ctx, node)
    axes = axes_for(x.shape)
    j = Axis("j", size)
    lo = (size - 1) // 2
    idx = [a.var for a in axes]
    win = list(idx)
    win[1] = lin([(axes[1].var, 1), (j.var, 1)], -lo)
    xv = kb.load(x.name, win, pad=0.0)
    epi = Bin("/", kb.load(x.name, idx),
              Bin("pow", Bin("+", Const(bias), Bin("*", Const(alpha / size), _acc())), Const(beta)))
    ctx.add(kb.kernel(out.name, axes, Bin("*", xv, xv), reduce_axes=(j,), combine="sum", init=0.0, epilogue=epi))

