"""Comparisons, logical ops, IsNaN/IsInf and Where: element-wise kernels over booleans.

A boolean computed at run time is a float32 holding exactly 0 or 1 inside the program
(optimizer/dtypes.py rewrites the graph so); every op here produces exactly 0 or 1 with a
Select, so And/Or/Xor/Not/Where read them back with `!= 0` and nothing is approximated.
Graph inputs and outputs keep their bool/int dtypes: Cast kernels convert at the boundary.
"""
from __future__ import annotations

import math

from ..ir.loopnest import Bin, Const, Select
from .base import KernelBuilder, axes_for, broadcast_index, register

COMPARE = {"Equal": "==", "Less": "<", "LessOrEqual": "<=", "Greater": ">", "GreaterOrEqual": ">="}
LOGICAL = ("And", "Or", "Xor")
_ONE, _ZERO = Const(1.0), Const(0.0)


def truth(cond):
    """0/1 of a condition, as the float32 that stands for a bool."""
    return Select(cond, _ONE, _ZERO)


def is_true(x):
    return Bin("!=", x, _ZERO)


def _kernel(ctx, node, fn):
    out = ctx.graph.tensors[node.outputs[0]]
    kb = KernelBuilder(ctx, node)
    axes = axes_for(out.shape)
    xs = [kb.load(i, broadcast_index(ctx.graph.tensors[i].shape, axes)) for i in node.inputs if i]
    ctx.add(kb.kernel(out.name, axes, fn(*xs)))


@register(*COMPARE)
def lower_compare(ctx, node):
    _kernel(ctx, node, lambda a, b: truth(Bin(COMPARE[node.op], a, b)))


@register(*LOGICAL)
def lower_logical(ctx, node):
    op = {"And": "and", "Or": "or", "Xor": "!="}[node.op]
    _kernel(ctx, node, lambda a, b: truth(Bin(op, is_true(a), is_true(b))))


@register("Not")
def lower_not(ctx, node):
    _kernel(ctx, node, lambda a: truth(Bin("==", a, _ZERO)))


@register("IsNaN")
def lower_isnan(ctx, node):
    _kernel(ctx, node, lambda a: truth(Bin("!=", a, a)))


@register("IsInf")
def lower_isinf(ctx, node):
    pos, neg = int(node.attrs.get("detect_positive", 1)), int(node.attrs.get("detect_negative", 1))

    def fn(a):
        conds = ([Bin("==", a, Const(math.inf))] if pos else []) + ([Bin("==", a, Const(-math.inf))] if neg else [])
        if not conds:
            return _ZERO
        return truth(conds[0] if len(conds) == 1 else Bin("or", conds[0], conds[1]))
    _kernel(ctx, node, fn)


@register("Where")
def lower_where(ctx, node):
    _kernel(ctx, node, lambda c, a, b: Select(is_true(c), a, b))
