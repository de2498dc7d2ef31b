"""Integer column arithmetic shared by the table code (batch.py, batch_plans.py)."""
from __future__ import annotations

import numpy as np


def cdiv(a, b):
    """Ceiling division of integers (arrays welcome); by a power of two a shift: numpy's
    integer division is slow, and (a + b - 1) >> log2(b) is the same integer."""
    if isinstance(b, int) and b > 0 and b & (b - 1) == 0:
        return (a + (b - 1)) >> (b.bit_length() - 1)
    return -(-a // b)


def prod(arrays, n):
    """The elementwise product of int columns (n ones when there are none)."""
    out = np.ones(n, np.int64)
    for a in arrays:
        out = out * a
    return out


def sorted_distinct(a):
    """np.unique(a).tolist() for a 1-D int array (np.unique imports numpy.ma, 10 ms of a build)."""
    a = np.sort(a)
    return a[np.concatenate(([True], a[1:] != a[:-1]))].tolist() if len(a) else []
