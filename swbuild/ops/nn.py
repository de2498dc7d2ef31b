"""Convolution, pooling, Gemm/MatMul, LRN: reductions over windows and inner dimensions."""
from __future__ import annotations

import math

import numpy as np

from ..support.errors import UnsupportedError
from ..ir.loopnest import Acc, Axis, Bin, Const, iconst
from .base import KernelBuilder, attr_ints, axes_for, broadcast_index, register


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
    nd = len(x.shape) - 2
    strides = attr_ints(node, "strides", [1] * nd)
    dil = attr_ints(node, "dilations", [1] * nd)
    k_eff = [(k - 1) * d + 1 for k, d in zip(w.shape[2:], dil)]
    pb, _ = _pads(node, list(x.shape[2:]), k_eff, strides, list(out.shape[2:]))
    conv_kernel(ctx, node, x.name, w.name, bias, out.name, int(node.attrs.get("group", 1)), strides, dil, pb)


def conv_kernel(ctx, node, x_name, w_name, bias, out_name, G, strides, dil, pb, op="Conv", x_zero=0.0, requant=None,
                extra=None):
    """out[n, g, co, o...] = sum_{ci, k...} x[n, g, ci, o*s + k*d - p] * w[g, co, ci, k...] (+ bias).
    Groups are a view of the same memory ([N, G, C/G, ...]), so the indices stay affine;
    a negative pad is a crop. ConvInteger/QLinearConv (ops/quant.py): the input's zero point
    `x_zero` is subtracted from every tap (and pads, so a pad adds 0); `requant(epilogue, index)`
    wraps the epilogue, given the output channel's index; `extra`: the kernel's (ops/quant_wide.py)."""
    g = ctx.graph
    x, w, out = g.tensors[x_name], g.tensors[w_name], g.tensors[out_name]
    N, C, *in_sp = x.shape
    Co, Cig, *ks = w.shape
    _, _, *out_sp = out.shape
    nd = len(in_sp)
    k_eff = [(k - 1) * d + 1 for k, d in zip(ks, dil)]
    Cog = Co // G
    kb = KernelBuilder(ctx, node, op)
    n_ax = Axis("n", N)
    g_ax = [Axis("g", G)] if G > 1 else []
    co = Axis("co", Cog)
    sp = [Axis(f"o{d}", out_sp[d]) for d in range(nd)]
    ci = Axis("ci", Cig)
    kr = [Axis(f"k{d}", ks[d]) for d in range(nd)]
    gv = [a.var for a in g_ax]
    in_idx = [window_index(sp[d], strides[d], kr[d], dil[d], pb[d]) for d in range(nd)]
    pad = float(x_zero) if any(p > 0 for p in pb) or any((o - 1) * s + ke - p > i for o, s, ke, p, i in
                                               zip(out_sp, strides, k_eff, pb, in_sp)) else None
    xv = kb.load(x.name, [n_ax.var] + gv + [ci.var] + in_idx, pad=pad, shape=[N] + [G] * bool(g_ax) + [Cig] + in_sp)
    wv = kb.load(w.name, gv + [co.var, ci.var] + [a.var for a in kr], shape=[G] * bool(g_ax) + [Cog, Cig] + ks)
    epi = None
    if bias:
        epi = Bin("+", _acc(), kb.load(bias, gv + [co.var], shape=[G] * bool(g_ax) + [Cog]))
    if requant is not None:
        epi = requant(kb, epi or _acc(), gv + [co.var], [G] * bool(g_ax) + [Cog])
    axes = [n_ax] + g_ax + [co] + sp
    body = Bin("*", xv if not x_zero else Bin("-", xv, Const(float(x_zero))), wv)
    k = kb.kernel(out.name, axes, body, out_shape=[a.extent for a in axes],
                  reduce_axes=(ci, *kr), combine="sum", init=0.0, **({"epilogue": epi} if epi else {}),
                  **({"extra": dict(extra)} if extra else {}))
    ctx.add(k)


def _flipped_weights(ctx, node, w, G, Cin_g, Cog, ks):
    """The equivalent convolution's weights, wc[g, co, ci, k] = W[g, ci, co, K-1-k]: folded
    when W is a constant, else one copy kernel (the flip is an affine index)."""
    nd = len(ks)
    if w.data is not None:
        Wg = np.asarray(w.data).reshape([G, Cin_g, Cog] + ks)
        Wc = np.flip(Wg, axis=tuple(range(3, 3 + nd))).transpose([0, 2, 1] + list(range(3, 3 + nd)))
        return ctx.new_const(np.ascontiguousarray(Wc.reshape([G * Cog, Cin_g] + ks)), node.name + "_wconv")
    wc = ctx.new_temp([G * Cog, Cin_g] + ks, w.dtype, node.name + "_wconv")
    kb = KernelBuilder(ctx, node, "ConvTranspose.flip")
    axes = [Axis("g", G), Axis("co", Cog), Axis("ci", Cin_g)] + [Axis(f"k{d}", k) for d, k in enumerate(ks)]
    idx = [axes[0].var, axes[2].var, axes[1].var] + [lin([(a.var, -1)], k - 1) for a, k in zip(axes[3:], ks)]
    ctx.add(kb.kernel(wc, axes, kb.load(w.name, idx, shape=[G, Cin_g, Cog] + ks), out_shape=[G, Cog, Cin_g] + ks))
    return wc


@register("ConvTranspose")
def lower_conv_transpose(ctx, node):
    """A stride-1 convolution with the flipped kernel over the input with s-1 zeros inserted
    between elements (two copy kernels build that input: a zero fill and a strided scatter)."""
    g = ctx.graph
    x, w, out = g.tensors[node.inputs[0]], g.tensors[node.inputs[1]], g.tensors[node.outputs[0]]
    bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else None
    N, C, *in_sp = x.shape
    nd = len(in_sp)
    G = int(node.attrs.get("group", 1))
    Cin_g, Cog, ks = w.shape[0] // G, w.shape[1], list(w.shape[2:])
    strides = attr_ints(node, "strides", [1] * nd)
    dil = attr_ints(node, "dilations", [1] * nd)
    out_sp = list(out.shape[2:])
    opad = attr_ints(node, "output_padding", [0] * nd)
    auto = node.attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    pads = attr_ints(node, "pads", [0] * (2 * nd))
    if "output_shape" in node.attrs or auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for d in range(nd):   # total padding that yields the requested output size
            total = strides[d] * (in_sp[d] - 1) + opad[d] + (ks[d] - 1) * dil[d] + 1 - out_sp[d]
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
            pads.append((d, lo, total - lo))
        pads = [p[1] for p in pads] + [p[2] for p in pads]
    pb = pads[:nd]
    # the dilated input: [N, C, H*s, W*s], zero except at multiples of s
    xd = ctx.new_temp([N, C] + [h * s for h, s in zip(in_sp, strides)], x.dtype, node.name + "_dilated")
    if any(s > 1 for s in strides):
        kb = KernelBuilder(ctx, node, "ConvTranspose.zero")
        axes = axes_for(g.tensors[xd].shape)
        ctx.add(kb.kernel(xd, axes, Const(0.0)))
        kb = KernelBuilder(ctx, node, "ConvTranspose.scatter")
        axes = [Axis("n", N), Axis("c", C)]
        view = [N, C]
        for d in range(nd):
            axes += [Axis(f"i{d}", in_sp[d]), Axis(f"r{d}", 1)]
            view += [in_sp[d], strides[d]]
        xv = kb.load(x.name, [axes[0].var, axes[1].var] + [axes[2 + 2 * d].var for d in range(nd)])
        ctx.add(kb.kernel(xd, axes, xv, out_shape=view))
    else:
        ctx.alias(xd, x.name)
    wc = _flipped_weights(ctx, node, w, G, Cin_g, Cog, ks)
    conv_pb = [dil[d] * (ks[d] - 1) - pb[d] for d in range(nd)]
    conv_kernel(ctx, node, xd, wc, bias, out.name, G, [1] * nd, dil, conv_pb, op="ConvTranspose")


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
    k_eff = [(k - 1) * d + 1 for k, d in zip(ks, dil)]
    pb, pe = _pads(node, in_sp, k_eff, strides, out_sp)
    if combine == "sum" and _image_window(node, in_sp, out_sp, ks, dil, pb):
        ctx.add(global_pool_kernel(ctx, node, avg=True))
        return
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
            n_d = _window_count(start, ks[d], dil[d], lo_lim, hi_lim)
            cnt = n_d if cnt is None else Bin("*", cnt, n_d)
        epi = Bin("/", _acc(), cnt)
    ctx.add(kb.kernel(out.name, axes, xv, reduce_axes=tuple(kr), combine=combine,
                      init=-math.inf if combine == "max" else 0.0, epilogue=epi))


def global_pool_kernel(ctx, node, avg):
    """The mean (or max) of each image of `node`'s input, output (N, C, 1, ...); an AveragePool
    whose one window holds the image (_image_window below) is lowered as one too."""
    x = ctx.graph.tensors[node.inputs[0]]
    out = ctx.graph.tensors[node.outputs[0]]
    N, C, *sp = x.shape
    kb = KernelBuilder(ctx, node, "GlobalAveragePool" if avg else "GlobalMaxPool")
    n, c = Axis("n", N), Axis("c", C)
    rd = [Axis(f"r{d}", s) for d, s in enumerate(sp)]
    xv = kb.load(x.name, [n.var, c.var] + [a.var for a in rd])
    epi = Bin("/", _acc(), Const(float(math.prod(sp)))) if avg else _acc()
    return kb.kernel(out.name, [n, c], xv, out_shape=[N, C], reduce_axes=tuple(rd),
                     combine="sum" if avg else "max", init=0.0 if avg else -math.inf, epilogue=epi)


def _image_window(node, in_sp, out_sp, ks, dil, pb):
    """An AveragePool that excludes padding and whose one window holds the whole image and
    some padding (light Inception-v1: 7x7, pads 0,0,1,1 on 6x6): every output is the mean of
    all H x W pixels, a GlobalAveragePool. The same pixels summed in the same order (rows, then
    columns; the padding's +0.0 terms change no value), divided by H * W once: a window count
    that is constant, so vector code takes it instead of scalar code (a varying count)."""
    if int(node.attrs.get("count_include_pad", 0)) or any(o != 1 for o in out_sp) or any(d != 1 for d in dil):
        return False
    covers = all(pb[d] >= 0 and ks[d] - pb[d] >= in_sp[d] for d in range(len(in_sp)))
    padded = any(ks[d] != in_sp[d] for d in range(len(in_sp)))     # unpadded: already a constant count
    return covers and padded


def _window_count(start, k, d, lo, hi):
    """How many of the taps start + j*d (0 <= j < k) fall in [lo, hi): the divisor of an
    average pool at this output position."""
    if d == 1:   # window [start, start+k) clipped to [lo, hi)
        return Bin("-", Bin("min", lin([(start, 1)], k), iconst(hi)), Bin("max", start, iconst(lo)))
    first = Bin("max", iconst(0), Bin("//", Bin("-", iconst(lo + d - 1), start), iconst(d)))   # ceil((lo-start)/d)
    last = Bin("min", iconst(k - 1), Bin("//", Bin("-", iconst(hi - 1), start), iconst(d)))   # floor((hi-1-start)/d)
    return Bin("max", iconst(0), lin([(Bin("-", last, first), 1)], 1))


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

