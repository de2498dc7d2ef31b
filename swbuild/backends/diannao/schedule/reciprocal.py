"""When a QuantizeLinear's division by its scale may be a multiplication by a reciprocal, bit for
bit (issue 36): the MLU's vector unit multiplies (__bang_mul_scalar) and has no exact division
(its __bang_div is the less precise one, bang_device_functions_decls.h), while onnxruntime
divides.

What must agree is the quantized value, clamp(rint(x / s), L, H) with L, H the integer bounds
(the saturation minus the zero point), not x / s itself. Both fl(x * r) and fl(x / s) are
non-decreasing in x (s, r > 0), and clamp(rint(v), L, H) changes only where v crosses a
half-integer h in (L, H). So for each such h, around the float x0 nearest h * s, we evaluate
both over a window of consecutive floats; if they give the same quantized value on every float
of the window, and at both ends of the window both lie strictly on the same side of h, then by
monotony they agree on every float below and above it too (nothing else changes there; the
windows of two half-integers are far apart, s apart against a few ulps). That covers every
float32 x: NaN and infinities give the same on both sides, and values beyond the outermost
half-integers saturate the same.
"""
from __future__ import annotations

import math

import numpy as np

WINDOW = 24         # floats on each side of h * s
CANDIDATES = 4      # r = fl(1 / s) and its neighbours up to this many ulps away


def _window(x0):
    """2 * WINDOW + 1 consecutive float32 values centred on x0 (same sign, none zero), or None."""
    m = np.float32(abs(x0)).view(np.int32)
    if m - WINDOW <= 0 or m + WINDOW >= 0x7f800000:
        return None
    mags = (m + np.arange(-WINDOW, WINDOW + 1, dtype=np.int32)).view(np.float32)
    return mags if x0 > 0 else -mags[::-1]


def _agrees(s, r, L, H):
    s32, r32 = np.float32(s), np.float32(r)
    for k in range(int(L), int(H)):
        h = k + 0.5
        x = _window(np.float32(h * float(s32)))
        if x is None:
            return False
        with np.errstate(all="ignore"):
            q, d = x * r32, x / s32
        if not (q[0] < h and d[0] < h and q[-1] > h and d[-1] > h):
            return False
        if not np.array_equal(np.clip(np.rint(q), L, H), np.clip(np.rint(d), L, H)):
            return False
    return True


def exact_reciprocal(s, L, H):
    """A float32 r with clamp(rint(fl(x * r)), L, H) == clamp(rint(fl(x / s)), L, H) for every
    float32 x (module docstring), or None. s a positive normal float32, L < H integers."""
    s = float(s)
    if not (math.isfinite(s) and s > 0 and np.float32(s) == s and s >= np.finfo(np.float32).tiny) \
            or not (float(L).is_integer() and float(H).is_integer() and L < H):
        return None
    r0 = np.float32(1.0) / np.float32(s)
    if not np.isfinite(r0) or r0 < np.finfo(np.float32).tiny:
        return None
    bits = r0.view(np.int32)
    for d in sorted(range(-CANDIDATES, CANDIDATES + 1), key=abs):
        r = np.int32(bits + d).view(np.float32)
        if _agrees(s, r, L, H):
            return float(r)
    return None
