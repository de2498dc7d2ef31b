"""Softmax-family and reductions: multi-stage kernels through small temporaries."""
from __future__ import annotations

import math

from ..ir.loopnest import Axis, Bin, Const, Select, Un
from ..support.errors import UnsupportedError
from .base import KernelBuilder, const_input, register
from .nn import _acc, global_pool_kernel


def _softmax_view(ctx, node):
    x = ctx.graph.tensors[node.inputs[0]]
    r = len(x.shape)
    opset = ctx.graph.opset
    axis = int(node.attrs.get("axis", -1 if opset >= 13 else 1)) % r
    if opset >= 13:
        return x, (math.prod(x.shape[:axis]), x.shape[axis], math.prod(x.shape[axis + 1:]))
    # opsets < 13 coerce the input to 2-D at `axis`
    return x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:]), 1)


@register("Softmax", "LogSoftmax")
def lower_softmax(ctx, node):
    x, (O, D, I) = _softmax_view(ctx, node)
    out = ctx.graph.tensors[node.outputs[0]]
    view = (O, D, I)
    mx = ctx.new_temp((O, I), x.dtype, node.name + "_max")
    sm = ctx.new_temp((O, I), x.dtype, node.name + "_sum")
    o, i, d = Axis("o", O), Axis("i", I), Axis("d", D)
    kb = KernelBuilder(ctx, node, "Softmax.max")
    ctx.add(kb.kernel(mx, [o, i], kb.load(x.name, [o.var, d.var, i.var], shape=view),
                      reduce_axes=(d,), combine="max", init=-math.inf))
    kb = KernelBuilder(ctx, node, "Softmax.sum")
    e = Un("exp", Bin("-", kb.load(x.name, [o.var, d.var, i.var], shape=view), kb.load(mx, [o.var, i.var])))
    ctx.add(kb.kernel(sm, [o, i], e, reduce_axes=(d,), combine="sum", init=0.0))
    kb = KernelBuilder(ctx, node, node.op)
    shifted = Bin("-", kb.load(x.name, [o.var, d.var, i.var], shape=view), kb.load(mx, [o.var, i.var]))
    if node.op == "Softmax":
        y = Bin("/", Un("exp", shifted), kb.load(sm, [o.var, i.var]))
    else:
        y = Bin("-", shifted, Un("log", kb.load(sm, [o.var, i.var])))
    ctx.add(kb.kernel(out.name, [o, d, i], y, out_shape=view))


def _reduce_axes(ctx, node):
    x = ctx.graph.tensors[node.inputs[0]]
    r = len(x.shape)
    axes = node.attrs.get("axes")
    if axes is None and len(node.inputs) > 1 and node.inputs[1]:
        axes = const_input(ctx, node, 1).reshape(-1).tolist()
    if axes is None or len(axes) == 0:
        if int(node.attrs.get("noop_with_empty_axes", 0)):
            return x, []
        axes = list(range(r))
    return x, sorted(int(a) % r for a in axes)


_REDUCE = {"ReduceSum": "sum", "ReduceMean": "sum", "ReduceMax": "max", "ReduceMin": "min",
           "ReduceProd": "prod", "ReduceSumSquare": "sum", "ReduceL1": "sum", "ReduceL2": "sum",
           "ReduceLogSum": "sum", "ReduceLogSumExp": "sum"}


@register(*_REDUCE)
def lower_reduce(ctx, node):
    x, red = _reduce_axes(ctx, node)
    out = ctx.graph.tensors[node.outputs[0]]
    kb = KernelBuilder(ctx, node)
    keep = [d for d in range(len(x.shape)) if d not in red]
    sp = [Axis(f"i{d}", x.shape[d]) for d in keep]
    rd = [Axis(f"r{d}", x.shape[d]) for d in red]
    by = {d: a for d, a in zip(keep, sp)}
    by.update({d: a for d, a in zip(red, rd)})
    xv = kb.load(x.name, [by[d].var for d in range(len(x.shape))])
    body = {"ReduceSumSquare": Bin("*", xv, xv), "ReduceL1": Un("abs", xv), "ReduceL2": Bin("*", xv, xv),
            "ReduceLogSumExp": Un("exp", xv)}.get(node.op, xv)
    comb = _REDUCE[node.op]
    init = {"sum": 0.0, "prod": 1.0, "max": -math.inf, "min": math.inf}[comb]
    cnt = math.prod(x.shape[d] for d in red)
    epi = {"ReduceMean": Bin("/", _acc(), Const(float(cnt))), "ReduceL2": Un("sqrt", _acc()),
           "ReduceLogSum": Un("log", _acc()), "ReduceLogSumExp": Un("log", _acc())}.get(node.op, _acc())
    ctx.add(kb.kernel(out.name, sp, body, out_shape=[a.extent for a in sp] or [1],
                      reduce_axes=tuple(rd), combine=comb, init=init, epilogue=epi)
            if sp else _scalar_reduce(kb, out, body, rd, comb, init, epi))


def _scalar_reduce(kb, out, body, rd, comb, init, epi):
    one = Axis("z", 1)
    return kb.kernel(out.name, [one], body, out_shape=[1], reduce_axes=tuple(rd), combine=comb, init=init, epilogue=epi)


@register("GlobalAveragePool", "GlobalMaxPool")
def lower_global_pool(ctx, node):
    ctx.add(global_pool_kernel(ctx, node, node.op == "GlobalAveragePool"))


@register("CumSum")
def lower_cumsum(ctx, node):
    """y[.., i, ..] = sum of x[.., j, ..] over j <= i (j < i exclusive; j >= i reverse): a sum
    over the whole axis of a triangle-masked x, n^2 along the axis. The terms are added in the
    order j = 0, 1, .. as a running sum would (the masked ones add 0), and an integer input's
    sums are exact while they stay within float32's 2^24 (optimizer/exact_ints.py)."""
    x = ctx.graph.tensors[node.inputs[0]]
    out = ctx.graph.tensors[node.outputs[0]]
    r = len(x.shape)
    axis = int(const_input(ctx, node, 1).reshape(-1)[0])
    if not -r <= axis < r:
        raise UnsupportedError(f"node '{node.name}' (CumSum): axis {axis} is out of range for rank {r}")
    axis %= r
    kb = KernelBuilder(ctx, node)
    sp = [Axis(f"i{d}", n) for d, n in enumerate(x.shape)]
    j = Axis("j", x.shape[axis])
    idx = [j.var if d == axis else a.var for d, a in enumerate(sp)]
    rev, excl = int(node.attrs.get("reverse", 0)), int(node.attrs.get("exclusive", 0))
    op = {(0, 0): "<=", (0, 1): "<", (1, 0): ">=", (1, 1): ">"}[rev, excl]
    body = Select(Bin(op, j.var, sp[axis].var), kb.load(x.name, idx), Const(0.0))
    ctx.add(kb.kernel(out.name, sp, body, out_shape=list(x.shape), reduce_axes=(j,), combine="sum", init=0.0))
