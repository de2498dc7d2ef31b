"""Per-channel requantization multipliers: the zero point joins the int8 conversion's rounding
where it is proven for every channel's multiplier (issue 36).

integer.conversion_rounds replaces (acc * s + M) - (M - z), then __bang_float2int8_rn, by
acc * s + z when saturate(rint(fl(n * s) + z)) == saturate(rint(fl(n * s)) + z) for every
integer n (integer._z_joins, which tries every n with |fl(n * s)| <= 130 + |z|: millions per
scale). A per-channel multiplier (PyTorch's per-channel weights) has up to 512 scales per
layer, so this module proves the same equality by windows:

- where |v| > 130 + |z| (v = fl(n * s)), both sides lie beyond the same end of [-128, 127]
  (both are non-decreasing in v, and 130 is a float32);
- elsewhere u = v + z is exact as a real, |u| <= 130 + 2 |z| < 512, so fl(u) is within 2^-16
  of u, and rint(fl(u)) differs from rint(u) = rint(v) + z only when a half-integer h lies
  within 2^-16 of u. v itself is within 2^-16 of n * s, so n * s is within 2^-15 of h - z:
  only the integers n of those windows (one per half-integer h, a few each) can differ, and
  they are evaluated in float32 as the vector unit computes.
"""
from __future__ import annotations

import math

import numpy as np

WINDOW = 2.0 ** -15     # |n * s - (h - z)| within which a rounding of v or of v + z can cross h
MAX_PER_WINDOW = 4096   # integers per window beyond which the proof is not tried


def joins_on_windows(s, z):
    """saturate(rint(fl(n * s) + z)) == saturate(rint(fl(n * s)) + z) for every integer n with
    n exact in float32 (|n| < 2^24: an accumulator the kernel proved exact); False where not
    proven (unusual s or z, or windows too wide)."""
    if not (math.isfinite(s) and s != 0 and float(z).is_integer() and abs(z) <= 128 and float(np.float32(s)) == s):
        return False
    a = abs(s)
    if (2 * WINDOW) / a + 3 > MAX_PER_WINDOW:
        return False
    bound = 130.0 + abs(z)
    # the targets t = h - z: every half-integer with |t| <= bound + 1
    t = np.arange(-math.floor(bound) - 2, math.floor(bound) + 2, dtype=np.float64) + 0.5
    lo = np.floor((t - WINDOW) / a) - 1
    width = int(math.ceil(2 * WINDOW / a)) + 3
    n = (lo[:, None] + np.arange(width, dtype=np.float64)[None, :]).reshape(-1)
    n = np.unique(np.concatenate([n, -n]))
    n = n[np.abs(n) < 2 ** 24]
    v = n.astype(np.float32) * np.float32(s)
    want = np.clip(np.rint(v.astype(np.float64)) + z, -128, 127)
    got = np.clip(np.rint((v + np.float32(z)).astype(np.float64)), -128, 127)
    return bool(np.array_equal(want, got))


def joins_every_channel(scales, z):
    """joins_on_windows for every distinct multiplier of a per-channel operand."""
    vals = np.unique(np.asarray(scales, np.float32).reshape(-1))
    return vals.size > 0 and all(joins_on_windows(float(s), float(z)) for s in vals)
