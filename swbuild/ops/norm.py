"""Normalisations as two-pass reductions (mean, then centred variance): stable in float32."""
from __future__ import annotations

import math

import numpy as np

from ..support.errors import UnsupportedError
from ..ir.loopnest import Acc, Axis, Bin, Const, Un
from .base import KernelBuilder, register


def _normalize(ctx, node, view, eps, affine, stats=(None, None)):
    """x viewed as [O, D, I], statistics over D per (O, I):
    y = (x - mean) * invstd * scale + bias, where affine(kb, o, d) gives the (scale, bias)
    loads (or None). `stats` names tensors to hold mean and invstd (LayerNorm's optional
    outputs); temporaries otherwise."""
    x = ctx.graph.tensors[node.inputs[0]]
    out = ctx.graph.tensors[node.outputs[0]]
    O, D, I = view
    mean = stats[0] or ctx.new_temp((O, I), x.dtype, node.name + "_mean")
    inv = stats[1] or ctx.new_temp((O, I), x.dtype, node.name + "_invstd")
    o, d, i = Axis("o", O), Axis("d", D), Axis("i", I)
    avg = Bin("/", Acc(), Const(float(D)))

    def centred(kb):
        return Bin("-", kb.load(x.name, [o.var, d.var, i.var], shape=view), kb.load(mean, [o.var, i.var], shape=(O, I)))

    kb = KernelBuilder(ctx, node, node.op + ".mean")
    ctx.add(kb.kernel(mean, [o, i], kb.load(x.name, [o.var, d.var, i.var], shape=view), out_shape=(O, I),
                      reduce_axes=(d,), combine="sum", init=0.0, epilogue=avg))
    kb = KernelBuilder(ctx, node, node.op + ".invstd")
    c = centred(kb)
    ctx.add(kb.kernel(inv, [o, i], Bin("*", c, c), out_shape=(O, I), reduce_axes=(d,), combine="sum", init=0.0,
                      epilogue=Bin("/", Const(1.0), Un("sqrt", Bin("+", avg, Const(eps))))))
    kb = KernelBuilder(ctx, node, node.op)
    y = Bin("*", centred(kb), kb.load(inv, [o.var, i.var], shape=(O, I)))
    scale, bias = affine(kb, o, d)
    if scale is not None:
        y = Bin("*", y, scale)
    if bias is not None:
        y = Bin("+", y, bias)
    ctx.add(kb.kernel(out.name, [o, d, i], y, out_shape=view))


def _input(node, k):
    return node.inputs[k] if len(node.inputs) > k and node.inputs[k] else None


@register("LayerNormalization")
def lower_layernorm(ctx, node):
    x = ctx.graph.tensors[node.inputs[0]]
    axis = int(node.attrs.get("axis", -1)) % len(x.shape)
    D = math.prod(x.shape[axis:])
    for k in (1, 2):
        if _input(node, k) and ctx.graph.tensors[node.inputs[k]].size != D:
            raise UnsupportedError(f"node '{node.name}' (LayerNormalization): scale/bias must cover the "
                                   f"normalised dims exactly (a broadcast scale is not supported)")

    def affine(kb, o, d):
        return tuple(kb.load(n, [d.var], shape=[D]) if n else None for n in (_input(node, 1), _input(node, 2)))

    stats = tuple(node.outputs[k] if len(node.outputs) > k and node.outputs[k] else None for k in (1, 2))
    _normalize(ctx, node, (math.prod(x.shape[:axis]), D, 1), float(node.attrs.get("epsilon", 1e-5)), affine, stats)


@register("InstanceNormalization")
def lower_instancenorm(ctx, node):
    x = ctx.graph.tensors[node.inputs[0]]
    N, C, *sp = x.shape
    # statistics per (n, c) over the spatial dims: the [N*C, S, 1] view, o = n * C + c
    rows = []
    for k in (1, 2):
        t = ctx.graph.tensors[node.inputs[k]]
        if t.data is not None:
            rows.append(ctx.new_const(np.tile(np.asarray(t.data, np.float32).reshape(-1), N), f"{node.name}_{k}"))
        else:   # runtime scale: repeat it per n with a copy kernel, keeping indices affine
            r = ctx.new_temp((N, C), t.dtype, f"{node.name}_{k}")
            kb = KernelBuilder(ctx, node, "InstanceNormalization.repeat")
            n, c = Axis("n", N), Axis("c", C)
            ctx.add(kb.kernel(r, [n, c], kb.load(t.name, [c.var])))
            rows.append(r)

    def affine(kb, o, d):
        return tuple(kb.load(r, [o.var], shape=[N * C]) for r in rows)

    _normalize(ctx, node, (N * C, math.prod(sp), 1), float(node.attrs.get("epsilon", 1e-5)), affine)
