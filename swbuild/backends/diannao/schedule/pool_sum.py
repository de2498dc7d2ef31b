"""An integer global pool (QLinearGlobalAveragePool, ops/quant_ms.py) through __bang_avgpool.

The kernel needs the exact integer sum S of each image (MLAS's integer path); __bang_avgpool
gives fl(S / n) for an n-pixel image (it adds the window in order, exact: |S| < 2^24, then
divides once, bangemu/vector.h). S comes back as rint(fl(fl(S / n) * n)), the rounding by
adding and subtracting 1.5 * 2^23 (integer.py's MAGIC). That is proven here for every integer S
the input's range can reach, each step in float32 as the vector unit computes it; where it is
not, the kernel keeps its scalar sum.
"""
from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np

from ....ir.loopnest import Acc, Bin, Const, Load, substitute_acc
from ....optimizer.exact_ints import RANGES
from .integer import MAGIC

MAX_SUMS = 1 << 24


@functools.lru_cache(maxsize=None)
def _sum_recovered(n, lo, hi):
    """rint(fl(fl(S / n) * n)) == S for every integer S in [n * lo, n * hi], float32 steps."""
    smin, smax = n * lo, n * hi
    if smax - smin >= MAX_SUMS or max(abs(smin), abs(smax)) >= 2 ** 22:
        return False
    s = np.arange(smin, smax + 1, dtype=np.float64).astype(np.float32)
    f = np.float32(n)
    back = (s / f).astype(np.float32) * f
    return bool(np.array_equal(((back + np.float32(MAGIC)) - np.float32(MAGIC)).astype(np.float64),
                               s.astype(np.float64)))


def sum_from_mean(k, program):
    """k with its accumulator read as rint((acc / n) * n) (the pool scheduler's mean), or None
    when k is not an integer global pool over an int8/uint8 input or the sum is not proven."""
    if k.op != "QLinearGlobalAveragePool" or k.combine != "sum" or not isinstance(k.body, Load) \
            or len(k.reduce_axes) != 2 or len(k.axes) != 4 or any(a.extent != 1 for a in k.axes[2:]):
        return None
    g = program.graph
    t = k.buffers[k.body.buf].tensor
    r = RANGES.get(g.exact_ints.get(program.root(t), g.exact_ints.get(t)))
    n = k.reduce_axes[0].extent * k.reduce_axes[1].extent
    if r is None or not _sum_recovered(n, int(r[0]), int(r[1])):
        return None
    mean = Bin("*", Bin("/", Acc(), Const(float(n))), Const(float(n)))
    return replace(k, epilogue=substitute_acc(k.epilogue, Bin("-", Bin("+", mean, Const(MAGIC)), Const(MAGIC))))
