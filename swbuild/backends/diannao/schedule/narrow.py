"""Which int8 activations DianNao keeps as int8 in GDRAM (issue 36).

A quantized tensor lives in the program as float32 values (optimizer/exact_ints.py): 4 bytes
per element cross GDRAM where the MLU's fixed-point convolution reads one. An int8 tensor is
stored as bytes when its one writer ends in a requantization (an integer convolution, a
quantized MaxPool, an element-wise kernel ending in QuantizeLinear: its lanes are integers
of int8's range) and its readers are integer convolutions that run __bang_conv on int8
(schedule/integer.py fixed_point 1) or read it in their epilogue, element-wise kernels, MaxPools or
integer global pools (their byte tile widened in NRAM, a MaxPool's pads reading -128 where every
window holds a pixel). The writer converts its lanes
in NRAM (__bang_float2int8_rn, exact on such integers) and stores a byte each; a
convolution copies the bytes straight into the tile __bang_conv reads (schedule/conv.py
narrow_ends, byte_pixels), an element-wise kernel widens its tile in NRAM (__bang_int82float, exact).
Nothing else may see it: not a graph input or output, no view or slice of another storage.

`candidates` is what the graph allows; the kernels are then scheduled, and `unfulfilled`
names the tensors some kernel did not schedule that way (a fallback to the float convolution
or the scalar class, a hoisted or scalar read, a tile that did not fit): those go back to
float32 and the kernels are scheduled again, so a wrong element size never reaches a kernel
that does not expect it.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ....ir.loopnest import Acc, Bin, Const, Load, Select, Un, transform
from ....optimizer.exact_ints import RANGES
from .integer import INTEGER_OPS

POOLS = ("MaxPool",)     # a quantized MaxPool's epilogue requantizes: its result may be bytes


def _integer_conv(k):
    return INTEGER_OPS.get(k.op) == "Conv" and k.combine == "sum" and k.kind == "compute"


def candidates(program):
    """Roots of the int8 tensors the graph lets live as bytes (module docstring)."""
    g = program.graph
    shared = program.viewed_tensors()
    io = {program.root(t) for t in list(program.inputs) + list(program.outputs)}
    # a channel slice read in place (read_slices.py) is stored as its container: its readers count as x's
    inside = getattr(program.target_state, "read_slices", None) or {}
    writers, readers, other = {}, {}, set()
    for k in program.kernels:
        out = k.buffers[k.out].tensor
        for name, b in k.buffers.items():
            t = inside.get(b.tensor, b.tensor)
            if name == k.out:
                writers.setdefault(t, []).append(k)
            elif (_integer_conv(k) and (_input_buffer(k) == name or _epilogue_only(k, name))) or _pointwise(k) \
                    or _pool_input(k, name):
                readers.setdefault(t, []).append(k)
            else:
                other.add(t)
        if getattr(k, "loop", None) is not None:
            other.add(out)
    out = set()
    for t, ws in writers.items():
        if g.exact_ints.get(t) != "int8" or t in shared or t in io or t in other or g.tensors[t].data is not None:
            continue
        if len(ws) == 1 and (_integer_conv(ws[0]) or _pointwise(ws[0]) or ws[0].op in POOLS) and readers.get(t):
            out.add(t)
    return frozenset(out | {s for s, x in inside.items() if x in out})


def _epilogue_only(k, name):
    """An integer convolution reads buffer `name` in its epilogue only (a residual Add fused
    there: schedule/conv.py copies its per-pixel bytes and widens them in NRAM)."""
    found = []
    transform(k.body, lambda e: found.append(e) if isinstance(e, Load) and e.buf == name else None)
    return not found


def narrow_ends(kb, G, fx, pool):
    """(input, result) of this convolution or pool held as int8 in GDRAM (narrow.py): the input
    only when __bang_conv reads int8 (fx 1) and its pads read an int8 value."""
    narrow = kb.narrow()
    if pool:        # a quantized MaxPool's result (its epilogue requantizes) stored as bytes;
        # its int8 input too when every window holds a pixel: the pads then read -128, which
        # no maximum takes from a pixel of int8's range (-inf needs a float)
        real = G.pt < G.kh and G.pl < G.kw and (G.Ho - 1) * G.sh - G.pt <= G.H - 1 \
            and (G.Wo - 1) * G.sw - G.pl <= G.W - 1
        # an average over windows without padding (an integer global pool, pool_sum.py): the
        # widened bytes are the values, the fills never read
        inside = G.pt == 0 and G.pl == 0 and (G.Ho - 1) * G.sh + G.kh <= G.H and (G.Wo - 1) * G.sw + G.kw <= G.W
        x8 = (real if G.combine == "max" else G.combine == "avg" and inside) \
            and kb.p.root(kb.k.buffers[G.xbuf].tensor) in narrow
        return x8, kb.p.root(kb.k.buffers[kb.k.out].tensor) in narrow
    x8 = fx == 1 and kb.p.root(kb.k.buffers[G.xbuf].tensor) in narrow and float(G.fill).is_integer() \
        and -128 <= G.fill <= 127
    return x8, kb.p.root(kb.k.buffers[kb.k.out].tensor) in narrow


def byte_pixels(kb, loads, kinds, pool):
    """A convolution's per-pixel epilogue operands held as int8 bytes in GDRAM (a residual Add's
    shortcut): schedule/conv.py copies them as bytes and widens them in NRAM (__bang_int82float)."""
    narrow = () if pool else kb.narrow()
    return [ld for ld in loads if kinds[ld] == "pixel" and kb.p.root(kb.k.buffers[ld.buf].tensor) in narrow]


def _pool_input(k, name):
    """The input of a MaxPool or an integer global pool (schedule/conv.py widens its byte tile in NRAM)."""
    pooled = k.op in POOLS and k.combine == "max" or k.op == "QLinearGlobalAveragePool" and k.combine == "sum"
    return pooled and isinstance(k.body, Load) and k.body.buf == name


def _pointwise(k):
    """An element-wise kernel (schedule/elementwise.py converts its byte tiles in NRAM)."""
    return not k.combine and k.kind == "compute" and k.op not in INTEGER_OPS


def _input_buffer(k):
    """The buffer of an integer convolution's input (the product's left factor)."""
    from .integer import _centered
    try:
        xl, _, _ = _centered(k.body)
    except Exception:       # an unusual product: integer_as_conv refuses it too
        return None
    return xl.buf


def unfulfilled(dev, narrow):
    """Tensors of `narrow` that a scheduled kernel reads or writes other than as int8 bytes."""
    bad = set()
    for dk in dev:
        k = dk.kernel
        if k is None:
            continue
        for name, b in k.buffers.items():
            if b.tensor not in narrow:
                continue
            if dk.cls == "pool":
                ok = dk.info.get("narrow_out") if name == k.out else dk.info.get("narrow_in") and _pool_input(k, name)
            elif dk.cls == "conv":
                ok = dk.info.get("narrow_out") if name == k.out else \
                    dk.info.get("narrow_in") and name == _input_buffer(k) or name in dk.info.get("narrow_bufs", ())
            elif dk.cls == "elementwise":
                ok = dk.info.get("narrow_out") if name == k.out else name in dk.info.get("narrow_bufs", ())
            else:
                ok = False
            if not ok:
                bad.add(b.tensor)
    return bad


def clamp_parts(x):
    """(v, lo, hi) of ops/quant.py's saturating clamp select(v >= lo, select(v <= hi, v, hi), lo)
    with constant bounds, else None."""
    if not (isinstance(x, Select) and isinstance(x.cond, Bin) and x.cond.op == ">=" and isinstance(x.cond.b, Const)
            and isinstance(x.a, Select) and isinstance(x.a.cond, Bin) and x.a.cond.op == "<="
            and isinstance(x.a.cond.b, Const) and x.a.b == x.a.cond.b and x.b == x.cond.b):
        return None
    v = x.cond.a
    if x.a.cond.a != v or x.a.a != v:
        return None
    return v, float(x.cond.b.value), float(x.a.cond.b.value)


def saturated_store(k, program):
    """The kernel whose result is stored as int8 bytes with its QuantizeLinear's final clamp
    (ops/quant.py saturate: select(v >= lo, select(v <= hi, v, hi), lo), lo <= -128, hi >= 127)
    left to the byte conversion: __bang_float2int8_rn rounds (v is already an integer) and
    saturates to [-128, 127], which is the clamp, except that it takes NaN to 0 where the
    clamp gives lo, so only when v provably is never NaN (_interval). The element-wise and
    pool kernels then compute v once instead of three times (three-address form has no common
    subexpressions). The kernel unchanged otherwise."""
    def unclamped(x):
        parts = clamp_parts(x)
        if parts is None or parts[1] > -128 or parts[2] < 127:
            return None
        return parts[0] if _interval(parts[0], k, program) is not None else None
    # only the stored value's outermost clamp: the epilogue, or a point-wise kernel's body
    # when its epilogue stores the body as it is
    if isinstance(k.epilogue, Acc) and not k.combine:
        v = unclamped(k.body)
        return k if v is None else replace(k, body=v)
    v = unclamped(k.epilogue)
    return k if v is None else replace(k, epilogue=v)


_BIG = 1e37     # beyond this a float32 step may overflow to infinity: treated as infinite


def _widen(lo, hi):
    if math.isnan(lo) or math.isnan(hi):
        return None
    return (-math.inf if lo < -_BIG else lo, math.inf if hi > _BIG else hi)


def _interval(e, k, program):
    """[lo, hi] holding every value e takes (infinities included), or None when e may be NaN
    or is not understood. Leaves: int8/uint8... tensors (graph.exact_ints), constants; a max
    pool's accumulator is its window's maximum or -inf (an all-padding window)."""
    g = program.graph
    if isinstance(e, Const):
        v = float(e.value)
        return None if math.isnan(v) else _widen(v, v)
    if isinstance(e, Acc):
        if not k.combine:
            return _interval(k.body, k, program)
        if k.combine == "max":
            b = _interval(k.body, k, program)
            return None if b is None else (-math.inf, b[1])
        return None
    if isinstance(e, Load):
        t = k.buffers[e.buf].tensor
        data = g.tensors[t].data
        if data is not None:
            d = np.asarray(data, np.float64)
            if d.size == 0 or np.isnan(d).any():
                return None
            r = _widen(float(d.min()), float(d.max()))
        else:
            r = RANGES.get(g.exact_ints.get(program.root(t), g.exact_ints.get(t)))
        if r is None or e.pad is None:
            return None if r is None else (float(r[0]), float(r[1]))
        p = float(e.pad)            # what a padded read returns
        return None if math.isnan(p) else (min(r[0], p), max(r[1], p))
    if isinstance(e, Un):
        a = _interval(e.a, k, program)
        if a is None:
            return None
        if e.op == "round":
            return (a[0] - 1, a[1] + 1)
        if e.op == "neg":
            return (-a[1], -a[0])
        if e.op == "relu":
            return (max(a[0], 0.0), max(a[1], 0.0))
        return None
    if isinstance(e, Select):
        a, b = _interval(e.a, k, program), _interval(e.b, k, program)
        return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
    if isinstance(e, Bin):
        a = _interval(e.a, k, program)
        if a is None:
            return None
        if e.op == "/":         # by a nonzero finite constant only
            if not isinstance(e.b, Const) or not math.isfinite(float(e.b.value)) or float(e.b.value) == 0:
                return None
            c = float(e.b.value)
            q = (a[0] / c, a[1] / c)
            return _widen(min(q), max(q))
        b = _interval(e.b, k, program)
        if b is None:
            return None
        if e.op in ("+", "-", "*"):       # every pair of ends: inf - inf or 0 * inf is NaN, refused
            if e.op == "*" and any(u[0] <= 0 <= u[1] and any(map(math.isinf, v)) for u, v in ((a, b), (b, a))):
                return None
            p = [x + y if e.op == "+" else x - y if e.op == "-" else x * y for x in a for y in b]
            return None if any(math.isnan(v) for v in p) else _widen(min(p), max(p))
        if e.op in ("min", "max"):
            f = min if e.op == "min" else max
            return (f(a[0], b[0]), f(a[1], b[1]))
        return None
    return None
