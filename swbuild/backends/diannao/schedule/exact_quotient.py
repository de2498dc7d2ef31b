"""x / s for a QuantizeLinear on the vector unit where no reciprocal is exact (issue 36).

onnxruntime divides, fl(x / s); the vector unit has add, sub and mul only. Where no r makes
fl(x * r) quantize like fl(x / s) (reciprocal.py), the quotient is summed from exact products:

    x' = min(max(x, -B), B)            B = s * 2^20: beyond it both sides saturate; NaN gives -B
                                       (__bang_maxeq_scalar), the low end, as the saturation does
    x' = x_hi + x_lo                   Veltkamp's split (t = x' * 4097, x_hi = t - (t - x')): 12-bit
                                       halves
    r_hi + r_lo                        r_hi: fl(1 / s) cut to 12 significant bits, r_lo = fl(1/s - r_hi)
    y  = x_hi * r_hi + (x_lo * r_hi + x' * r_lo)
                                       both products by r_hi exact (12 x 12 bits), the small sum
                                       rounded once (~2^-36 of y): y is within about half an ulp of
                                       x / s, fl(x / s) except next to a midpoint

The clamp keeps the split finite (x * 4097 overflows beyond 2^115) and y within the magic
rounding's 2^22, and as y is never NaN the rounding's low clamp can be left to the int8
conversion. 11 vector passes (three_address.py computes x', t and x_hi once each).

What must agree is clamp(rint(y), L, H) with clamp(rint(fl(x / s)), L, H): they can differ only
where y or fl(x / s) is next to a half-integer h, that is for x within a few ulps of h * s.
`proven` evaluates both, in float32 one rounding per operation as the vector unit computes,
on every float of a window of WINDOW floats on each side of h * s for every h between the
bounds, and on the special values; elsewhere both are the same integer (y is within an ulp
of x / s).
"""
from __future__ import annotations

import math

import numpy as np

from ....ir.loopnest import Bin, Const, Select

SCALAR_OPS = 3      # the scalar statement x / s per element: load, divide, store (the printer's count)
SPLIT = 4097.0      # 2^12 + 1: Veltkamp's split of a float32 into two 12-bit halves
WINDOW = 64
RANGE = 2.0 ** 20   # |x| clamped to s * RANGE: far beyond any saturation, inside the magic rounding


def _split(v):
    v = np.float32(v)
    t = np.float32(v * np.float32(SPLIT))
    hi = np.float32(t - np.float32(t - v))
    return hi, np.float32(v - hi)


def constants(s):
    """(B, r_hi, r_lo) of the module docstring."""
    s32 = np.float32(s)
    r_hi, _ = _split(np.float32(1.0) / s32)
    return np.float32(s32 * np.float32(RANGE)), r_hi, np.float32(1.0 / np.float64(s32) - np.float64(r_hi))


def quotient(x, s):
    """The expression y of the module docstring (x' read several times: three_address.py
    computes it once)."""
    B, r_hi, r_lo = (float(v) for v in constants(s))
    x = Select(Bin(">=", x, Const(-B)), x, Const(-B))
    x = Select(Bin("<=", x, Const(B)), x, Const(B))
    t = Bin("*", x, Const(SPLIT))
    xh = Bin("-", t, Bin("-", t, x))
    small = Bin("+", Bin("*", Bin("-", x, xh), Const(r_hi)), Bin("*", x, Const(r_lo)))
    return Bin("+", Bin("*", xh, Const(r_hi)), small)


def passes(e):
    """Vector passes three_address.py emits for e: one per distinct compound subtree (a clamp's
    operand and a repeated subtree once)."""
    seen = set()

    def walk(x):
        if not isinstance(x, (Select, Bin)) or x in seen:
            return
        seen.add(x)
        for c in ((x.a,) if isinstance(x, Select) else (x.a, x.b)):
            walk(c)
    walk(e)
    return len(seen)


def cheaper(k, hw):
    """The quotient's vector passes over a core's share of k's elements cost less than the
    scalar division (the toolchain's vector start-up and bytes per cycle, scalar cycles per op)."""
    if not hw or any(key not in hw for key in ("cores", "vector_startup_cycles", "vector_bytes_per_cycle",
                                                   "scalar_cycles_per_op")):
        return False
    n = math.prod(int(a.extent) for a in k.axes) if k.axes else 1
    per_core = -(-n // int(hw["cores"]))
    vector = passes(quotient(Const(0.0), 1.0)) * (hw["vector_startup_cycles"] + -(-per_core * 4 // hw["vector_bytes_per_cycle"]))
    return vector < per_core * SCALAR_OPS * hw["scalar_cycles_per_op"]


def evaluate(x, s):
    """quotient(x, s) in float32, operation by operation (the vector unit's order)."""
    B, r_hi, r_lo = constants(s)
    f = np.float32
    with np.errstate(all="ignore"):
        x = np.asarray(x, np.float32)
        x = np.where(x >= -B, x, -B).astype(np.float32)      # NaN -> -B, as __bang_maxeq_scalar
        x = np.where(x <= B, x, B).astype(np.float32)
        t = x * f(SPLIT)
        xh = t - (t - x)
        return (xh * r_hi + ((x - xh) * r_hi + x * r_lo)).astype(np.float32)


def proven(s, L, H):
    """clamp(rint(y), L, H) == clamp(rint(fl(x / s)), L, H) for every float32 x (module
    docstring; NaN to L on both sides, as the saturation's clamp does)."""
    if not (math.isfinite(s) and 2.0 ** -60 < s < 2.0 ** 60 and np.float32(s) == s) or H - L > 1 << 16:
        return False
    s32 = np.float32(s)
    xs = [np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-38, -1e-38, 3.4e38, -3.4e38,
                    1e35, -1e35, 8.3e34, -8.3e34], np.float32)]
    offs = np.arange(-WINDOW, WINDOW + 1, dtype=np.int64)
    for k in range(int(L), int(H) + 2):
        x0 = np.float32((k - 0.5) * float(s32))
        m = int(np.abs(x0).view(np.int32))
        bits = np.clip(m + offs, 1, 0x7f7fffff).astype(np.int32)
        xs.append(np.sign(x0) * bits.view(np.float32) if x0 != 0 else bits.view(np.float32))
    x = np.concatenate(xs).astype(np.float32)
    with np.errstate(all="ignore"):
        want = np.clip(np.nan_to_num(np.rint(x / s32), nan=L), L, H)
        got = np.clip(np.nan_to_num(np.rint(evaluate(x, s32)), nan=L), L, H)
    return bool(np.array_equal(want, got))
