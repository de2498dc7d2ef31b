"""A QuantizeLinear on the vector unit, bit for bit (issue 36).

ops/quant.py lowers it as onnxruntime computes it, saturate(rint(x / s) + z, lo, hi): a true
division, nearbyintf and a NaN-aware clamp, none of them a vector instruction, and the
three-address form (no common subexpressions) evaluates v = rint(x / s) + z three times for
the clamp. With a constant scale s, L = lo - z and H = hi - z it becomes

    v = x * r   (or x / s: below)
    v = v >= L ? v : L          __bang_maxeq_scalar: NaN to L, as the saturation sends it to lo
    v = v <= H ? v : H          __bang_mineq_scalar
                                (each left to __bang_float2int8_rn's saturation when the result is
                                stored as int8 bytes at that end of int8's range; the low one only
                                where x is never NaN, which the conversion sends to 0)
    y = (v + M) - (M - z)       M = 1.5 * 2^23: rint(v) + z, ties to even, exact for |v| <= 2^22

Clamping before rounding is the same as after (L, H are integers, rint is monotone); the
additions are exact (integers below 2^24). x * r replaces x / s only where reciprocal.py proves
the quantized value equal for every float32 x, or, when x is computed from at most two
int8/uint8 tensors and constants, where it is equal on every one of their (at most 65,536)
combinations, each evaluated in float32 step by step as the vector unit computes x. Otherwise
x / s is carried in two floats (exact_quotient.py) where that is proven to quantize the same;
only else does the division stay (a scalar statement; three_address.py treats the magic
addition as the rounding it is and keeps the division exact), the rest still vector code.

A requantization without a division, saturate(rint(v) + z, lo, hi) of any v (onnxruntime's
QLinearAdd, QLinearGlobalAveragePool, QGemm, ops/quant_ms.py), takes the same clamps and
rounding, v as computed: clamping to the integers L, H before rint is the same as after, for
every float v (NaN to L as the saturation sends it to lo). An integer kernel's own
requantization of its accumulator is left to integer.py's vector_requant.

A value stored as int8 bytes that depends on two int8 leaves only (a residual Add) then takes
a cheaper form found and proven on all their pairs (pair_requantize).
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ....ir.loopnest import Acc, Bin, Const, Load, Select, Un, substitute_acc, transform
from ....optimizer.exact_ints import RANGES
from . import exact_quotient
from .integer import INTEGER_OPS, MAGIC
from .narrow import _interval, clamp_parts
from .reciprocal import CANDIDATES, exact_reciprocal

MAX_COMBINATIONS = 1 << 17


def _saturation(e):
    """(rint argument, z, lo, hi) of ops/quant.py's saturate(rint(a) [+ z], lo, hi), else None."""
    parts = clamp_parts(e)
    if parts is None:
        return None
    v, lo, hi = parts
    z = 0.0
    if isinstance(v, Bin) and v.op == "+" and isinstance(v.b, Const):
        v, z = v.a, float(v.b.value)
    if not (isinstance(v, Un) and v.op == "round"):
        return None
    if not all(math.isfinite(t) and t.is_integer() for t in (z, lo, hi)) or lo > hi \
            or max(abs(lo - z), abs(hi - z), abs(z)) > 2 ** 22:
        return None
    return v.a, z, lo, hi


def vector_quantize(e, k, program, bytes_out=False, hw=None):
    """e with every saturate(rint(x / s) + z, lo, hi) of a constant s > 0 in the vector form of
    the module docstring, and per rewrite (s, r) with r None where the division stays.
    bytes_out: e is the value stored as int8 bytes (narrow.py), whose conversion saturates at
    127; only e itself may then drop its upper clamp. hw: the toolchain's hardware table, which
    says whether the two-float quotient beats the scalar division (exact_quotient.cheaper)."""
    notes = []

    def fn(x, top=False):
        sat = _saturation(x)
        if sat is None:
            return None
        a, z, lo, hi = sat
        L, H = lo - z, hi - z
        if isinstance(a, Bin) and a.op == "/":
            s = float(a.b.value) if isinstance(a.b, Const) else math.nan
            if not (math.isfinite(s) and s > 0):
                return None
            num = transform(a.a, fn)
            r = exact_reciprocal(s, L, H)
            if r is None:
                r = _reciprocal_on_domain(a.a, s, L, H, k, program)
            if r is None and isinstance(num, (Load, Acc)) and exact_quotient.cheaper(k, hw) \
                    and exact_quotient.proven(s, L, H):
                v, r = exact_quotient.quotient(num, s), "two floats"       # exact_quotient.py
            else:
                v = Bin("*", num, Const(r)) if r is not None else Bin("/", num, Const(s))
            notes.append((s, r))
        elif _own_requant(a, k):
            return None                 # an integer kernel's own requantization: integer.py's vector_requant
        else:                           # a requantization computed without a division (QLinearAdd, QGemm...)
            v, r = transform(a, fn), None
        saturating = top and bytes_out         # the conversion saturates to [-128, 127], NaN to 0
        nan_free = r == "two floats" or _interval(a, k, program) is not None    # the quotient clamps x itself
        if not (saturating and lo <= -128 and nan_free):     # may be NaN
            v = Select(Bin(">=", v, Const(L)), v, Const(L))
        if not (saturating and hi >= 127):
            v = Select(Bin("<=", v, Const(H)), v, Const(H))
        return Bin("-", Bin("+", v, Const(MAGIC)), Const(MAGIC - z))
    out = fn(e, top=True)
    out = transform(e, fn) if out is None else out
    return out, notes


def _own_requant(a, k):
    """a reads the accumulator of an integer kernel (QLinearConv, QGemm...) other than through a
    nested saturation: that kernel's own requantization, which integer.py rewrites itself."""
    if k.op not in INTEGER_OPS:
        return False
    found = []

    def visit(e):
        if _saturation(e) is not None:
            return e            # a nested requantization: its Acc is not a's own
        if isinstance(e, Acc):
            found.append(e)
        return None
    transform(a, visit)
    return bool(found)


def identity_on_domain(k, program):
    """k with its epilogue dropped where, stored as int8 bytes (__bang_float2int8_rn: rint,
    saturate), it gives back the max reduction's own value on every value that can take (each
    int8 value of a max pool's input, or its start -inf): a QDQ MaxPool requantized with its
    input's scale and zero point, the dequantize-quantize round trip proven exact per value."""
    if k.combine != "max" or isinstance(k.epilogue, Acc):
        return k
    vals = _values(Acc(), k, program)
    got = None if vals is None else _eval(k.epilogue, {Acc(): vals})
    if got is None:
        return k

    def as_int8(v):
        v = np.nan_to_num(np.asarray(v, np.float64), nan=0.0, posinf=1e9, neginf=-1e9)
        return np.clip(np.rint(v), -128, 127)
    return replace(k, epilogue=Acc()) if np.array_equal(as_int8(got), as_int8(vals)) else k


def _reciprocal_on_domain(x, s, L, H, k, program):
    """r (fl(1/s) or a neighbour) with equal quantized values on every value x takes, when x is
    computed from at most MAX_COMBINATIONS combinations of integer leaves (int8/uint8 tensors,
    a saturation's [lo, hi], a small constant tensor's values, a max pool of one of them);
    else None."""
    if not k.combine:
        x = substitute_acc(x, k.body)       # a point-wise kernel's epilogue reads its body
    leaves = []

    def collect(e):
        if (isinstance(e, (Load, Acc)) or _saturation(e) is not None) and e not in leaves:
            leaves.append(e)
            return e
        return None
    transform(x, collect)
    ranges = [_values(e, k, program) for e in leaves]
    if not ranges or any(v is None for v in ranges) or math.prod(len(v) for v in ranges) > MAX_COMBINATIONS:
        return None
    grids = np.meshgrid(*ranges, indexing="ij")
    xs = _eval(x, {e: gr.ravel() for e, gr in zip(leaves, grids)})
    if xs is None:
        return None
    s32 = np.float32(s)
    with np.errstate(all="ignore"):
        want = np.clip(np.rint(xs / s32), L, H)
        r0 = np.float32(1.0) / s32
        for d in sorted(range(-CANDIDATES, CANDIDATES + 1), key=abs):
            r = np.int32(r0.view(np.int32) + d).view(np.float32)
            if np.array_equal(np.clip(np.rint(xs * r), L, H), want, equal_nan=True):
                return float(r)
    return None


def _values(e, k, program, nested=True):
    """Every float32 value leaf e can hold, or None. nested: a float tensor's values may come
    from its writer (_written_values)."""
    sat = _saturation(e)
    if sat is not None:
        return np.arange(sat[2], sat[3] + 1, dtype=np.float32)
    if isinstance(e, Acc):      # a max reduction of a load: one of its values, or the start -inf
        if k.combine != "max" or not isinstance(k.body, Load):
            return None
        vals = _values(k.body, k, program)
        return None if vals is None else np.append(vals, np.float32(-np.inf))
    g = program.graph
    t = k.buffers[e.buf].tensor
    if g.tensors[t].data is not None:
        vals = np.unique(np.asarray(g.tensors[t].data, np.float32))
    else:
        dt = g.exact_ints.get(program.root(t), g.exact_ints.get(t))
        vals = np.arange(RANGES[dt][0], RANGES[dt][1] + 1, dtype=np.float32) if dt in ("int8", "uint8") \
            else _written_values(program.root(t), program) if nested else None
        if vals is None:
            return None
    return vals if e.pad is None else np.append(vals, np.float32(e.pad))


def _written_values(t, program):
    """Every float32 value of tensor t when its one writer is a point-wise kernel computing it
    from one int8/uint8 tensor (a standalone DequantizeLinear, (q - z) * s, that PyTorch's QDQ
    export puts on a residual block's shortcut): the writer's value evaluated as the vector unit
    computes it on each value of that tensor, else None."""
    writers = [w for w in getattr(program, "kernels", ()) if program.root(w.buffers[w.out].tensor) == t]
    if len(writers) != 1:
        return None
    w = writers[0]
    shape = tuple(w.buffers[w.out].shape)
    if w.combine or w.kind != "compute" or w.loop is not None or w.stages or any(w.out_offset) \
            or math.prod(shape) != math.prod(program.graph.tensors[t].shape):
        return None
    value = substitute_acc(w.epilogue, w.body)
    leaves = []
    transform(value, lambda e: leaves.append(e) if isinstance(e, (Load, Acc)) and e not in leaves else None)
    if len(leaves) != 1 or not isinstance(leaves[0], Load):
        return None
    vals = _values(leaves[0], w, program, nested=False)
    got = None if vals is None else _eval(value, {leaves[0]: vals})
    if got is None:
        return None
    got = np.asarray(got, np.float32).ravel()
    return None if np.isnan(got).any() else np.unique(got)


def _eval(e, env):
    """e in float32, one rounding per operation as the vector unit computes it; None for what
    three_address.py would not compute as written (a division or a min/max against a nonzero
    constant are rewritten there) or what this does not know."""
    if e in env:
        return env[e]
    if isinstance(e, Const):
        return np.float32(e.value)
    if isinstance(e, Bin) and e.op in ("+", "-", "*", "max", "min"):
        if e.op in ("max", "min") and not (isinstance(e.b, Const) and float(e.b.value) == 0.0):
            return None
        a, b = _eval(e.a, env), _eval(e.b, env)
        if a is None or b is None:
            return None
        with np.errstate(all="ignore"):
            f = {"+": np.add, "-": np.subtract, "*": np.multiply, "max": np.maximum, "min": np.minimum}[e.op]
            return np.asarray(f(a, b), np.float32)
    return None


PAIR_ULPS = 3       # each constant of the pair form tried this many floats either side


def pair_requantize(k, program):
    """An element-wise kernel or an integer convolution's epilogue whose value, stored as int8
    bytes, depends on two int8-ranged leaves only (a QDQ residual Add: dequantize both, add,
    requantize; 11 vector passes with the widenings and the conversion; in a downsample
    convolution's epilogue its requantized accumulator, a saturation, and the shortcut): its
    stored value becomes ((a + b * R) + K) * A, four passes, __bang_float2int8_rn rounding and saturating it, with constants found near
    (sb / sa, K, A) = the exact real form and proven to give the same byte on every one of the
    (at most 65,536) combinations of the two, evaluated in float32 step by step as the vector
    unit computes both. k unchanged where no such constants are found."""
    value = k.epilogue if k.combine else substitute_acc(k.epilogue, k.body)
    leaves = []

    def collect(e):
        if isinstance(e, (Load, Acc)) or _saturation(e) is not None:
            if e not in leaves:
                leaves.append(e)
            return e
        return None
    transform(value, collect)
    if len(leaves) != 2:
        return k
    ranges = [_values(e, k, program) for e in leaves]
    if any(v is None for v in ranges) or math.prod(len(v) for v in ranges) > MAX_COMBINATIONS:
        return k
    grids = [g.ravel() for g in np.meshgrid(*ranges, indexing="ij")]
    env = dict(zip(leaves, grids))
    want = _stored(_eval_stored(value, env))
    # the value before its roundings (v + M) - (M - z) -> v + z: the real form to fit
    smooth = _eval_stored(transform(value, _unrounded), env)
    if want is None or smooth is None:
        return k
    for (la, a), (lb, b) in (((leaves[0], grids[0]), (leaves[1], grids[1])),
                             ((leaves[1], grids[1]), (leaves[0], grids[0]))):
        found = _pair_constants(a, b, want, smooth)
        if found is not None:
            R, K, A = found
            v = Bin("*", Bin("+", Bin("+", la, Bin("*", lb, Const(R))), Const(K)), Const(A))
            return replace(k, epilogue=v) if k.combine else replace(k, body=v, epilogue=Acc())
    return k


def _stored(v):
    """The bytes __bang_float2int8_rn stores for float32 values v (rint, saturate, NaN to 0)."""
    if v is None:
        return None
    v = np.asarray(v, np.float64)
    return np.clip(np.rint(np.nan_to_num(v, nan=0.0, posinf=1e9, neginf=-1e9)), -128, 127)


def _pair_form(a, b, R, K, A):
    with np.errstate(all="ignore"):
        f = np.float32
        return ((a + b * f(R)).astype(np.float32) + f(K)).astype(np.float32) * f(A)


def _unrounded(e):
    """(v + M) - (M - z) as v + z (the magic rounding left out), else None (transform's rule)."""
    if isinstance(e, Bin) and e.op == "-" and isinstance(e.b, Const) and isinstance(e.a, Bin) and e.a.op == "+" \
            and e.a.b == Const(MAGIC):
        return Bin("+", transform(e.a.a, _unrounded), Const(MAGIC - float(e.b.value)))
    return None


def _pair_constants(a, b, want, smooth):
    """(R, K, A) float32 with _stored(((a + b R) + K) A) == want everywhere, or None. The real
    form alpha a + beta b + gamma is fitted by least squares to the value before its rounding
    (`smooth`, on the unsaturated pairs), then the floats around (beta / alpha, gamma / alpha,
    alpha) are tried."""
    inside = (want > -128) & (want < 127) & np.isfinite(smooth)
    if inside.sum() < 3:
        return None
    m = np.stack([a[inside], b[inside], np.ones(int(inside.sum()))], axis=1).astype(np.float64)
    (alpha, beta, gamma), *_ = np.linalg.lstsq(m, smooth[inside].astype(np.float64), rcond=None)
    if not (alpha > 0 and np.isfinite([alpha, beta, gamma]).all()):
        return None
    base = [np.float32(beta / alpha), np.float32(gamma / alpha), np.float32(alpha)]
    steps = sorted(range(-PAIR_ULPS, PAIR_ULPS + 1), key=abs)

    def near(v, d):
        return np.nextafter(v, np.float32(np.inf if d > 0 else -np.inf)) if d else v

    def moved(v, d):
        for _ in range(abs(d)):
            v = near(v, d)
        return v
    for dA in steps:
        A = moved(base[2], dA)
        for dK in steps:
            K = moved(base[1], dK)
            for dR in steps:
                R = moved(base[0], dR)
                if np.array_equal(_stored(_pair_form(a, b, R, K, A)), want):
                    return float(R), float(K), float(A)
    return None


def _eval_stored(e, env):
    """e in float32 as the vector unit computes it, with the clamps (select forms) and a kept
    division; None for what this does not know."""
    if e in env:
        return env[e]
    if isinstance(e, Const):
        return np.float32(e.value)
    if isinstance(e, Select) and isinstance(e.cond, Bin) and e.cond.op in (">=", "<="):
        c, x, y = _eval_stored(e.cond.a, env), _eval_stored(e.a, env), _eval_stored(e.b, env)
        bound = _eval_stored(e.cond.b, env)
        if c is None or x is None or y is None or bound is None:
            return None
        keep = c >= bound if e.cond.op == ">=" else c <= bound
        return np.where(keep, x, y).astype(np.float32)
    if isinstance(e, Un) and e.op == "round":
        a = _eval_stored(e.a, env)
        return None if a is None else np.rint(a).astype(np.float32)
    if isinstance(e, Bin) and e.op in ("+", "-", "*", "/", "max", "min"):
        a, b = _eval_stored(e.a, env), _eval_stored(e.b, env)
        if a is None or b is None:
            return None
        with np.errstate(all="ignore"):
            f = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "max": np.fmax,
                 "min": np.fmin}[e.op]
            return np.asarray(f(a, b), np.float32)
    return None
