"""x / s for a QuantizeLinear on the vector unit where no reciprocal is exact (issue 36).

onnxruntime divides, fl(x / s); the vector unit has add, sub and mul only. Where no r makes
fl(x * r) quantize like fl(x / s) (reciprocal.py), the quotient is carried in two floats:

    hi = fl(x * r)                     r = fl(1 / s) = r_hi + r_lo, r_hi of 12 significant bits
    a  = (x_hi * r_hi - hi) + x_lo * r_hi   = x * r_hi - hi exactly (Dekker): x = x_hi + x_lo by
                                       Veltkamp's split (t = x * 4097, x_hi = t - (t - x)), 12-bit
                                       halves, so both products and both steps are exact
    lo = a + x * r2                    r2 = fl(r_lo + c), c = fl(1 / s - r): the small terms
                                       x * r_lo + x * c, rounded once (~2^-36 of an ulp of hi)
    y  = hi + lo                       within ~2^-40 of x / s: fl(x / s) except next to a midpoint

y is then rounded and clamped as quantize.py does with x * r. A split that overflows (|x| >
2^115: t is infinite, x_hi NaN) gives a NaN lo, which the NaN-aware clamp lo >= -1 turns into
-1, leaving y = hi, far out and saturated as x / s is; a NaN x stays NaN (the clamp to L).

What must agree is clamp(rint(y), L, H) with clamp(rint(fl(x / s)), L, H): they can differ only
where y or fl(x / s) is next to a half-integer h, that is for x within a few ulps of h * s.
`proven` evaluates both, in float32 one rounding per operation as the vector unit computes,
on every float of a window of WINDOW floats on each side of h * s for every h between the
bounds, and on the special values; elsewhere both are the same integer (y is within an ulp
of x / s). 19 vector passes (three_address.py computes a repeated subtree again) replace a
division per element in scalar code.
"""
from __future__ import annotations

import math

import numpy as np

from ....ir.loopnest import Bin, Const, Select

SCALAR_OPS = 3      # the scalar statement x / s per element: load, divide, store (the printer's count)
SPLIT = 4097.0      # 2^12 + 1: Veltkamp's split of a float32 into two 12-bit halves
WINDOW = 64


def _split(v):
    v = np.float32(v)
    t = np.float32(v * np.float32(SPLIT))
    hi = np.float32(t - np.float32(t - v))
    return hi, np.float32(v - hi)


def constants(s):
    """(r, r_hi, r2) of the module docstring."""
    s32 = np.float32(s)
    r = np.float32(1.0) / s32
    r_hi, r_lo = _split(r)
    c = np.float32(1.0 / np.float64(s32) - np.float64(r))
    return r, r_hi, np.float32(r_lo + c)


def quotient(x, s):
    """The expression y of the module docstring (x a leaf: the tree reads it many times)."""
    r, r_hi, r2 = (float(v) for v in constants(s))
    t = Bin("*", x, Const(SPLIT))
    xh = Bin("-", t, Bin("-", t, x))
    hi = Bin("*", x, Const(r))
    a = Bin("+", Bin("-", Bin("*", xh, Const(r_hi)), hi), Bin("*", Bin("-", x, xh), Const(r_hi)))
    lo = Bin("+", a, Bin("*", x, Const(r2)))
    lo = Select(Bin(">=", lo, Const(-1.0)), lo, Const(-1.0))
    return Bin("+", hi, lo)


def passes(e):
    """Vector passes three_address.py emits for e (no common subexpressions: a repeated
    subtree is computed again; a clamp's operand once)."""
    if isinstance(e, Select):
        return 1 + passes(e.a)
    if isinstance(e, Bin):
        return 1 + passes(e.a) + passes(e.b)
    return 0


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
    r, r_hi, r2 = constants(s)
    f = np.float32
    with np.errstate(all="ignore"):
        x = np.asarray(x, np.float32)
        t = x * f(SPLIT)
        xh = t - (t - x)
        hi = x * r
        a = (xh * r_hi - hi) + (x - xh) * r_hi
        lo = a + x * r2
        lo = np.where(lo >= f(-1.0), lo, f(-1.0))       # NaN -> -1, as __bang_maxeq_scalar
        return (hi + lo).astype(np.float32)


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
