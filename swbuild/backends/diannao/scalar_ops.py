"""What the printer's plain-C device code costs: operations per iteration, charged to the
emulator's compute queue by `SWB_SCALAR(n)` (bangemu's __bangemu_scalar; nothing under
cncc, where the code runs for real). Counted: arithmetic on data, loads, stores, guard
compares, a reduction's combine and the scalar kernels' index steps; not counted: address
arithmetic of NRAM accesses and loop control (the compiler's to strength-reduce)."""
from __future__ import annotations

import math

from ...ir.loopnest import count_ops, iter_loads
from .devir import const

MACRO = ["#ifdef __BANGEMU__",
         "#define SWB_SCALAR(n) __bangemu_scalar(n)",
         "#else",
         "#define SWB_SCALAR(n) ((void)0)",
         "#endif"]


def expr_ops(e):
    """Arithmetic plus loads (a Gather's index loads included) of one evaluation."""
    return count_ops(e) + sum(1 for _ in iter_loads(e))


def stmt_ops(s):
    """Operations of one iteration of a scalar Stmt's outer loops, or None when a
    reduction's trip count is not static."""
    guard = len(s.guard) + len(s.guard_any)
    if not s.combine:
        return guard + expr_ops(s.expr) + 1
    trips = [const(lp.ext) for lp in s.red]
    if any(t is None for t in trips):
        return None
    # init, (expr + combine) per reduction step, the store, an average's division
    return guard + 1 + math.prod(trips) * (expr_ops(s.expr) + 1) + 1 + (s.combine == "avg")


def kernel_item_ops(k, body_ops, epilogue_ops, red_trip):
    """Operations of one output element of a scalar-class kernel: its index split (a
    remainder and a division per axis), the reduction, the epilogue and the store."""
    split = 2 * len(k.axes)
    if k.combine:
        return split + 1 + red_trip * (body_ops + 1) + epilogue_ops + 1
    return split + epilogue_ops + 1
