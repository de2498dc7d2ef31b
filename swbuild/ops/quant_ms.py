"""onnxruntime's QOperator ops (domain com.microsoft, frontends/contrib.py imports them) as
float32 kernels on exact integers (optimizer/exact_ints.py), bit for bit what onnxruntime's
CPU kernels (MLAS) compute on x86 with AVX2:

- QLinearAdd: MLAS's AVX2 kernel computes t = fma(a, A/C, fma(b, B/C, F)) with the fixed part
  F = zc - fma(A/C, za, B/C * zb) (ratios of the scales in float32), then cvtps2dq (ties to
  even) and saturating packs. When one operand is one value per span of the broadcast it
  is folded into F first (an fma too), and when it is A the kernel is called with A and B
  swapped: t = fma(b, B/C, fma(a, A/C, F')) with F' = zc - fma(B/C, zb, A/C * za). Not every
  printer has a fused multiply-add, so the kernel computes the same terms with two
  roundings; both are evaluated at compile time for every pair of input values (65536 for
  8 bits: the function is that small), and the pairs where the rounded integers differ
  (about one in 20000, a tie hit only by the fma) are patched in the kernel by a compare
  and select each. Exhaustive, so nothing is assumed.
- QLinearMul (MLAS's SSE2 kernel): (a - za) * (b - zb) is an exact integer (< 2^16), times
  A * B / C in float32, plus zc, rint, saturate: the same float32 steps here.
- QLinearGlobalAveragePool: the integer sum minus zx * image size, exact (< 2^24 checked),
  times x_scale / (y_scale * image size) in float32, rint, plus zy, saturated (MLAS's
  MlasRequantizeOutput; its range check on that multiplier is kept as a refusal).
- QLinearAveragePool: dequantized float32 values summed per window in onnxruntime's order
  (written out: each addition rounds), / count, / y_scale + y_zero_point, rint, clamped; a
  window over the whole unpadded image takes the global pool's integer path, as there.
- QLinearConcat: each input copied when its scale and zero point are the output's, else
  dequantized and quantized with the output's (the steps of onnxruntime's table).
- QGemm: the integer product sum (proven exact as ops/quant.py's QLinearMatMul) plus the int32
  bias C, times alpha * a_scale * b_scale[n] / y_scale requantized, or (no y_scale) float out.
- QLinearLeakyRelu / QLinearSigmoid: onnxruntime builds a 256-entry table (dequantize, the
  function, MlasQuantizeLinear). LeakyRelu's steps are float32 multiplies, a compare and a
  division: computed here as written. Sigmoid's table is MLAS's rational approximation of
  the logistic: the kernel computes 1 / (1 + exp(-v)) and every input value whose result may
  round differently (the table differs, or the value before rint lies within 64 ulps of a
  rounding boundary) is patched from onnxruntime's own table, obtained at compile time by
  running the node over all 256 inputs.

QLinearAdd, QLinearGlobalAveragePool and QGemm may read and write uint8 tensors held as int8
(value - 128, optimizer/uint8_as_int8.py) with their zero points unchanged: each held input
gets its 128 added back (exact), so the arithmetic and the exhaustive checks above are
onnxruntime's on the uint8 values, and a held output subtracts 128 before its saturation to
int8's range (exact on the rounded integer).
"""
from __future__ import annotations

import itertools

import numpy as np

from ..support.errors import UnsupportedError
from ..ir.loopnest import Acc, Axis, Bin, Const, Select, Un, iconst
from ..optimizer.exact_ints import sum_bound
from .base import KernelBuilder, attr_ints, broadcast_index, register
from .nn import _pads, lin
from .quant import _const_values, _float_param, _diffs, _range, int_dtype, note, prove_exact, saturate

MS = "com.microsoft."
F32 = np.float32
MAX_PATCHES = 64        # patched input pairs a node may need before it is refused


def _param(ctx, node, k, what, default=None):
    """A per-tensor scale or zero point (constant): a float32 scale, an int zero point."""
    v = _const_values(ctx, node, k, what)
    if v is None:
        if default is None:
            raise UnsupportedError(f"node '{node.name}' ({node.op}): {what} is required")
        return default
    if v.size != 1:
        raise UnsupportedError(f"node '{node.name}' ({node.op}): {what} has {v.size} values; onnxruntime takes "
                               "one (per tensor)")
    if "scale" in what:
        _float_param(ctx, node, k)
        return F32(v.reshape(-1)[0])
    return int(v.reshape(-1)[0])


def _offset(ctx, name):
    """128 where tensor `name` holds a uint8 tensor as int8 (value - 128, optimizer/uint8_as_int8.py),
    else 0: the kernels add it back (exact) and compute on the uint8 values, as onnxruntime does."""
    return 128 if ctx.graph.rebiased.get(name) == "uint8" else 0


def _dtype(ctx, name):
    """The model's dtype of tensor `name` for the notes (uint8 where it is held as int8)."""
    return "uint8" if _offset(ctx, name) else int_dtype(ctx, name)


def _true(ctx, name, v):
    """The loaded value v of tensor `name` as the model's own (uint8 where it is held as int8)."""
    off = _offset(ctx, name)
    return Bin("+", v, Const(float(off))) if off else v


def _values(ctx, node, name):
    """[lo, hi] and every value of the 8-bit input `name`, as the model's dtype has them."""
    lo, hi = _range(ctx, node, name)
    if hi - lo > 255:
        raise UnsupportedError(f"node '{node.name}' ({node.op}): tensor '{name}' has dtype {_dtype(ctx, name)}; "
                               "8-bit inputs only (the kernel is checked over every input value)")
    lo, hi = lo + _offset(ctx, name), hi + _offset(ctx, name)
    return lo, hi, np.arange(lo, hi + 1, dtype=F32)


def _mlas_saturate(t, lo, hi):
    """cvtps2dq (ties to even; out of range or NaN: INT_MIN) then saturating packs."""
    r = np.rint(t.astype(np.float64))
    r = np.where(np.isnan(r) | (np.abs(r) >= 2.0 ** 31), -2.0 ** 31, r)
    return np.clip(r, lo, hi)


def _ours_saturate(t, lo, hi):
    """The kernel's saturate(rint(t)) (ops/quant.py): NaN to lo."""
    r = np.rint(t.astype(np.float64))
    return np.where(np.isnan(r), lo, np.clip(r, lo, hi))


def _fma(x, y, z):
    """fl32(x * y + z) with one rounding: the float64 product of float32 values is exact and
    so is the sum when its bits fit in 53 (checked); then one rounding to float32."""
    p = x.astype(np.float64) * y.astype(np.float64)
    zz = np.broadcast_to(np.asarray(z, np.float64), p.shape)
    s = p + zz
    bp = s - zz
    err = (p - bp) + (zz - (s - bp))
    if np.any(err != 0):
        return None
    return s.astype(F32)


def _patch(node, y, a, b, want, got, va, vb):
    """y with a select per (a, b) value pair where the kernel's integer differs from onnxruntime's."""
    bad = np.argwhere(want != got)
    if len(bad) > MAX_PATCHES:
        raise UnsupportedError(f"node '{node.name}' ({node.op}): {len(bad)} input pairs round differently without "
                               f"a fused multiply-add (at most {MAX_PATCHES} are patched)")
    for i, j in bad:
        hit = Bin("==", a, Const(float(va[i]))) if b is None else \
            Bin("and", Bin("==", a, Const(float(va[i]))), Bin("==", b, Const(float(vb[j]))))
        y = Select(hit, Const(float(want[i, j])), y)
    return y, len(bad)


def _span_mode(a_shape, b_shape, out_shape):
    """onnxruntime's broadcast loop: 'A' (A is one value per span), 'B', or 'full'."""
    r = len(out_shape)
    a = [1] * (r - len(a_shape)) + list(a_shape)
    b = [1] * (r - len(b_shape)) + list(b_shape)
    if int(np.prod(a)) == 1:
        return "A"
    if int(np.prod(b)) == 1:
        return "B"
    for d in reversed(range(r)):
        if out_shape[d] == 1:
            continue
        return "A" if a[d] == 1 else "B" if b[d] == 1 else "full"
    return "full"


def _binary(ctx, node):
    g = ctx.graph
    A, B, out = g.tensors[node.inputs[0]], g.tensors[node.inputs[3]], g.tensors[node.outputs[0]]
    sa, sb, sc = (_param(ctx, node, k, w) for k, w in ((1, "A_scale"), (4, "B_scale"), (6, "C_scale")))
    za, zb, zc = (_param(ctx, node, k, w, 0) for k, w in ((2, "A_zero_point"), (5, "B_zero_point"),
                                                          (7, "C_zero_point")))
    lo, hi = _range(ctx, node, out.name)
    kb = KernelBuilder(ctx, node, node.op[len(MS):])
    axes = [Axis(f"i{k}", d) for k, d in enumerate(out.shape)]
    a = _true(ctx, A.name, kb.load(A.name, broadcast_index(A.shape, axes), shape=A.shape))
    b = _true(ctx, B.name, kb.load(B.name, broadcast_index(B.shape, axes), shape=B.shape))
    return A, B, out, (sa, za, sb, zb, sc, zc), (lo, hi), kb, axes, a, b


def _stored(ctx, out, y, lo, hi):
    """saturate(y, lo, hi) of the model's output values as the output is held: y - 128 where a
    uint8 output is held as int8 (lo, hi: the held dtype's range), exact on the integer y."""
    off = _offset(ctx, out)
    return saturate(y if not off else Bin("+", y, Const(float(-off))), lo, hi)


@register(MS + "QLinearAdd")
def lower_qlinear_add(ctx, node):
    A, B, out, (sa, za, sb, zb, sc, zc), (lo, hi), kb, axes, a, b = _binary(ctx, node)
    _, _, va = _values(ctx, node, A.name)
    _, _, vb = _values(ctx, node, B.name)
    rac, rbc = F32(sa / sc), F32(sb / sc)
    mode = _span_mode(A.shape, B.shape, out.shape)
    ga, gb = np.meshgrid(va, vb, indexing="ij")
    # onnxruntime (qladd_avx2.cpp), the kernel called with (A, B) or, for 'A', with (B, A); its
    # compiler contracts a * b + c into an fma in the scalar fixed part and the span's scalar
    # term as well (measured: without those fmas a pair in ~20000 differs from onnxruntime)
    (r1, z1, g1), (r2, z2, g2) = ((rbc, zb, gb), (rac, za, ga)) if mode == "A" else ((rac, za, ga), (rbc, zb, gb))
    part = _fma(np.asarray(r1), F32(z1), F32(r2 * F32(z2)))
    inner = None if part is None else _fma(g2, r2, F32(F32(zc) - part))
    t = None if inner is None else _fma(g1, r1, inner)
    if t is None:
        raise UnsupportedError(f"node '{node.name}' ({node.op}): scale ratios {rac}, {rbc} are too far apart to "
                               "model onnxruntime's fused multiply-add exactly")
    fixed = F32(F32(zc) - part)
    off = _offset(ctx, out.name)
    lo, hi = lo + off, hi + off            # the model's output range (uint8 where held as int8)
    want = _mlas_saturate(t, lo, hi)
    # the kernel: two roundings where onnxruntime has one (same association)
    if mode == "A":
        y = Bin("+", Bin("*", b, Const(float(rbc))), Bin("+", Const(float(fixed)), Bin("*", a, Const(float(rac)))))
        tk = (gb * rbc).astype(F32) + (fixed + (ga * rac).astype(F32)).astype(F32)
    elif mode == "B":
        y = Bin("+", Bin("*", a, Const(float(rac))), Bin("+", Const(float(fixed)), Bin("*", b, Const(float(rbc)))))
        tk = (ga * rac).astype(F32) + (fixed + (gb * rbc).astype(F32)).astype(F32)
    else:
        y = Bin("+", Bin("*", a, Const(float(rac))), Bin("+", Bin("*", b, Const(float(rbc))), Const(float(fixed))))
        tk = (ga * rac).astype(F32) + ((gb * rbc).astype(F32) + fixed).astype(F32)
    y, n = _patch(node, _stored(ctx, out.name, Un("round", y), lo - off, hi - off), a, b, want - off,
                  _ours_saturate(tk.astype(F32), lo, hi) - off, va, vb)
    ctx.add(kb.kernel(out.name, axes, y))
    note(ctx, node, f"{_dtype(ctx, A.name)} + {_dtype(ctx, B.name)} -> {_dtype(ctx, out.name)} held as exact "
                    f"float32: a * {rac} + b * {rbc} + {fixed} as onnxruntime's AVX2 kernel (span mode {mode}), "
                    f"checked over all {va.size * vb.size} input pairs, {n} patched where its fma rounds differently")


@register(MS + "QLinearMul")
def lower_qlinear_mul(ctx, node):
    A, B, out, (sa, za, sb, zb, sc, zc), (lo, hi), kb, axes, a, b = _binary(ctx, node)
    _values(ctx, node, A.name)
    _values(ctx, node, B.name)
    ratio = F32(F32(sa * sb) / sc)
    e = Bin("*", a if not za else Bin("-", a, Const(float(za))), b if not zb else Bin("-", b, Const(float(zb))))
    t = Bin("+", Bin("*", e, Const(float(ratio))), Const(float(zc)))
    ctx.add(kb.kernel(out.name, axes, saturate(Un("round", t), lo, hi)))
    note(ctx, node, f"{_dtype(ctx, A.name)} x {_dtype(ctx, B.name)} -> {_dtype(ctx, out.name)} held as exact "
                    f"float32: (a - za) * (b - zb) exact, * {ratio} + {zc}, rint, saturated (MLAS's SSE2 kernel)")


@register(MS + "QLinearGlobalAveragePool")
def lower_qlinear_global_average_pool(ctx, node):
    x, out = ctx.graph.tensors[node.inputs[0]], ctx.graph.tensors[node.outputs[0]]
    _global_pool(ctx, node, x, out, bool(node.attrs.get("channels_last", 0)))


def _global_pool(ctx, node, x, out, last):
    """MLAS's integer global average pool (QLinearAveragePool over the whole image too)."""
    sx, sy = _param(ctx, node, 1, "x_scale"), _param(ctx, node, 3, "y_scale")
    zx, zy = _param(ctx, node, 2, "x_zero_point", 0), _param(ctx, node, 4, "y_zero_point", 0)
    lo, hi = _range(ctx, node, out.name)
    xlo, xhi, _ = _values(ctx, node, x.name)
    xoff = _offset(ctx, x.name)
    spatial = list(range(1, len(x.shape) - 1)) if last else list(range(2, len(x.shape)))
    image = int(np.prod([x.shape[d] for d in spatial]))
    scale = F32(sx / F32(sy * F32(image)))
    if image >= 1 << 24 or scale < 2.0 ** -32 or scale >= 256.0:
        raise UnsupportedError(f"node '{node.name}' ({node.op}): multiplier {scale} over {image} values is outside "
                               "the range onnxruntime computes (2^-32 <= x_scale / (y_scale * size) < 256)")
    prove_exact(node, float(image * max(abs(xhi - zx), abs(xlo - zx), abs(xhi - xoff), abs(xlo - xoff))),
                f"{image} values per output")
    kb = KernelBuilder(ctx, node, node.op[len(MS):])
    keep = [Axis(f"i{d}", x.shape[d]) if d not in spatial else None for d in range(len(x.shape))]
    red = [Axis(f"r{d}", x.shape[d]) for d in spatial]
    it = iter(red)
    idx = [a.var if a is not None else next(it).var for a in keep]
    axes = [a if a is not None else Axis(f"o{d}", 1) for d, a in enumerate(keep)]
    # the held values' sum is the uint8 values' minus 128 per value (an exact integer either way)
    e = Acc() if zx == xoff else Bin("-", Acc(), Const(float((zx - xoff) * image)))
    q = Un("round", Bin("*", e, Const(float(scale))))
    zy -= _offset(ctx, out.name)
    epi = saturate(q if not zy else Bin("+", q, Const(float(zy))), lo, hi)
    ctx.add(kb.kernel(out.name, axes, kb.load(x.name, idx), out_shape=out.shape, reduce_axes=tuple(red),
                      combine="sum", init=0.0, epilogue=epi))
    note(ctx, node, f"{_dtype(ctx, x.name)} -> {_dtype(ctx, out.name)} held as exact float32: exact sum of "
                    f"{image}, * {scale}, rint, + zero point, saturated (MLAS)")


MAX_TAPS = 64       # QLinearAveragePool windows summed as one written-out expression


@register(MS + "QLinearAveragePool")
def lower_qlinear_average_pool(ctx, node):
    """onnxruntime dequantizes x (x_scale * (x - zp)), sums each window's float32 values in
    row-major order from 0, divides by the count (the window, or its part inside the image
    unless count_include_pad), then rint(y / y_scale + y_zero_point), clamped. The sum is
    rounded at each step, so its order is kept: one written-out sum per output (pads read the
    zero point: they add 0). A window over the whole unpadded image is its global pool."""
    g = ctx.graph
    x, out = g.tensors[node.inputs[0]], g.tensors[node.outputs[0]]
    if node.attrs.get("channels_last", 0):
        raise UnsupportedError(f"node '{node.name}' ({node.op}): channels_last=1 is not supported")
    nd = len(x.shape) - 2
    ks = [int(k) for k in node.attrs["kernel_shape"]]
    strides = attr_ints(node, "strides", [1] * nd)
    if any(d != 1 for d in attr_ints(node, "dilations", [1] * nd)):
        raise UnsupportedError(f"node '{node.name}' ({node.op}): dilations are not supported (onnxruntime ignores them)")
    in_sp, out_sp = list(x.shape[2:]), list(out.shape[2:])
    pb, pe = _pads(node, in_sp, ks, strides, out_sp)
    if ks == in_sp and not any(pb) and not any(pe):
        return _global_pool(ctx, node, x, out, False)
    taps = int(np.prod(ks))
    if taps > MAX_TAPS:
        raise UnsupportedError(f"node '{node.name}' ({node.op}): a window of {taps} values (at most {MAX_TAPS}: each "
                               "is summed in onnxruntime's order, written out)")
    sx, sy = _param(ctx, node, 1, "x_scale"), _param(ctx, node, 3, "y_scale")
    zx, zy = _param(ctx, node, 2, "x_zero_point", 0), _param(ctx, node, 4, "y_zero_point", 0)
    lo, hi = _range(ctx, node, out.name)
    _values(ctx, node, x.name)
    kb = KernelBuilder(ctx, node, "QLinearAveragePool")
    axes = [Axis(f"i{d}", e) for d, e in enumerate(out.shape)]
    total = None
    for tap in itertools.product(*[range(k) for k in ks]):
        idx = [axes[0].var, axes[1].var] + [lin([(axes[2 + d].var, strides[d])], tap[d] - pb[d]) for d in range(nd)]
        v = kb.load(x.name, idx, pad=float(zx))
        v = Bin("*", Const(float(sx)), v if not zx else Bin("-", v, Const(float(zx))))
        total = v if total is None else Bin("+", total, v)
    # the count per output position: onnxruntime clips the window to the image (hend = min(start + k, size))
    counts = np.ones(out_sp, np.float32) * taps
    if not node.attrs.get("count_include_pad", 0):
        per = []
        for d in range(nd):
            start = np.arange(out_sp[d]) * strides[d] - pb[d]
            per.append((np.minimum(start + ks[d], in_sp[d]) - np.maximum(start, 0)).astype(np.float32))
        counts = per[0]
        for c in per[1:]:
            counts = np.multiply.outer(counts, c)
    if np.all(counts == counts.reshape(-1)[0]):
        cnt = Const(float(counts.reshape(-1)[0]))
    else:
        cnt = kb.load(ctx.new_const(counts.astype(np.float32), node.name + "_counts"), [a.var for a in axes[2:]])
    y = Bin("+", Bin("/", Bin("/", total, cnt), Const(float(sy))), Const(float(zy)))
    ctx.add(kb.kernel(out.name, axes, saturate(Un("round", y), lo, hi)))
    note(ctx, node, f"{_dtype(ctx, x.name)} -> {_dtype(ctx, out.name)} held as exact float32: dequantized, "
                    f"{taps} values summed in onnxruntime's order, / count, / y_scale + zero point, rint, saturated")


@register(MS + "QGemm")
def lower_qgemm(ctx, node):
    """Y = requant(alpha * (A - a_zp)(B - b_zp) + C), B constant (per-column zero points and scales)."""
    g = ctx.graph
    A, out = g.tensors[node.inputs[0]], g.tensors[node.outputs[0]]
    ta, tb = int(node.attrs.get("transA", 0)), int(node.attrs.get("transB", 0))
    alpha = F32(node.attrs.get("alpha", 1.0))
    sa, za = _param(ctx, node, 1, "a_scale"), _param(ctx, node, 2, "a_zero_point", 0)
    bv = _const_values(ctx, node, 3, "B")
    _range(ctx, node, node.inputs[3])
    bv = bv.T if tb else bv
    K, N = bv.shape
    M = A.shape[1] if ta else A.shape[0]
    bs = _const_values(ctx, node, 4, "b_scale").astype(F32).reshape(-1)
    _float_param(ctx, node, 4)
    bz = _const_values(ctx, node, 5, "b_zero_point")
    bd = bv - (0 if bz is None else bz.reshape(1, -1))
    c = _const_values(ctx, node, 6, "C") if len(node.inputs) > 6 and node.inputs[6] else None
    ys = _param(ctx, node, 7, "y_scale") if len(node.inputs) > 7 and node.inputs[7] else None
    za -= _offset(ctx, A.name)      # A held as int8: a - a_zero_point is the same integer
    lo, hi = _diffs(ctx, node, A.name, np.array([za]))
    bound = sum_bound(bd.T, lo, hi) + (0.0 if c is None else float(np.abs(c).max()))
    bound = prove_exact(node, bound, f"K = {K}, a - a_zero_point in [{lo:.0f}, {hi:.0f}]")
    scales = (F32(alpha * sa) * bs).astype(F32)
    if ys is not None:
        scales = (scales / ys).astype(F32)
    kb = KernelBuilder(ctx, node, "QGemm")
    m, n, k = Axis("m", M), Axis("n", N), Axis("k", K)
    av = kb.load(A.name, [k.var, m.var] if ta else [m.var, k.var])
    if za:
        av = Bin("-", av, Const(float(za)))
    bl = kb.load(ctx.new_const(bd.astype(F32), node.name + "_b"), [k.var, n.var])
    e = Acc()
    if c is not None:
        cshape = list(c.shape) if c.ndim else [1]
        e = Bin("+", e, kb.load(ctx.new_const(c.astype(F32).reshape(cshape), node.name + "_c"),
                                broadcast_index(cshape, [m, n])))
    sv = Const(float(scales[0])) if scales.size == 1 else kb.load(ctx.new_const(scales, node.name + "_scales"), [n.var])
    if ys is None:
        epi = Bin("*", e, sv)
        what = "float32"
    else:
        zy = _param(ctx, node, 8, "y_zero_point", 0) - _offset(ctx, out.name)
        lo, hi = _range(ctx, node, out.name)
        q = Un("round", Bin("*", e, sv))
        epi = saturate(q if not zy else Bin("+", q, Const(float(zy))), lo, hi)
        what = f"{_dtype(ctx, out.name)} (requantized as MLAS)"
    ctx.add(kb.kernel(out.name, [m, n], Bin("*", av, bl), reduce_axes=(k,), combine="sum", init=0.0, epilogue=epi))
    note(ctx, node, f"{_dtype(ctx, A.name)} x {_dtype(ctx, node.inputs[3])} -> int32 sum -> {what}: float32 "
                    f"sums proven exact (|sum| <= {bound} < 2^24)")


def _unary_setup(ctx, node):
    g = ctx.graph
    x, out = g.tensors[node.inputs[0]], g.tensors[node.outputs[0]]
    sx, sy = _param(ctx, node, 1, "X_scale"), _param(ctx, node, 3, "Y_scale")
    zx, zy = _param(ctx, node, 2, "X_zero_point", 0), _param(ctx, node, 4, "Y_zero_point", 0)
    lo, hi = _range(ctx, node, out.name)
    _, _, vx = _values(ctx, node, x.name)
    kb = KernelBuilder(ctx, node, node.op[len(MS):])
    axes = [Axis("i", x.size)]
    xv = kb.load(x.name, [axes[0].var], shape=[x.size])
    v = Bin("*", Const(float(sx)), xv if not zx else Bin("-", xv, Const(float(zx))))
    return x, out, (sx, sy, zx, zy), (lo, hi), vx, kb, axes, xv, v


def _quantize(v, sy, zy, lo, hi):
    """MlasQuantizeLinear: rint(v / scale) + zero point, saturated."""
    q = Un("round", Bin("/", v, Const(float(sy))))
    return saturate(q if not zy else Bin("+", q, Const(float(zy))), lo, hi)


@register(MS + "QLinearLeakyRelu")
def lower_qlinear_leaky_relu(ctx, node):
    x, out, (sx, sy, zx, zy), (lo, hi), vx, kb, axes, xv, v = _unary_setup(ctx, node)
    alpha = F32(node.attrs.get("alpha", 0.01))
    y = Select(Bin(">=", v, Const(0.0)), v, Bin("*", Const(float(alpha)), v))
    ctx.add(kb.kernel(out.name, axes, _quantize(y, sy, zy, lo, hi), out_shape=[x.size]))
    note(ctx, node, f"{_dtype(ctx, x.name)} -> {_dtype(ctx, out.name)} held as exact float32: dequantize, "
                    f"LeakyRelu({alpha}), quantize, the steps of onnxruntime's table")


def _ort_table(node, dtype, sx, zx, sy, zy):
    """onnxruntime's output for each of the 256 input values of `node` (its own table)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    op = node.op[len(MS):]
    t = TensorProto.UINT8 if dtype == "uint8" else TensorProto.INT8
    ii = np.iinfo(dtype)
    inits = [numpy_helper.from_array(np.asarray(v, tp), k) for k, v, tp in
             (("sx", sx, F32), ("zx", zx, dtype), ("sy", sy, F32), ("zy", zy, dtype))]
    attrs = {k: v for k, v in node.attrs.items() if k == "alpha"}
    gr = helper.make_graph([helper.make_node(op, ["x", "sx", "zx", "sy", "zy"], ["y"], domain="com.microsoft", **attrs)],
                           "table", [helper.make_tensor_value_info("x", t, [256])],
                           [helper.make_tensor_value_info("y", t, [256])], initializer=inits)
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)],
                          ir_version=8)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": np.arange(ii.min, ii.max + 1).astype(dtype)})[0].astype(np.float64)


@register(MS + "QLinearSigmoid")
def lower_qlinear_sigmoid(ctx, node):
    x, out, (sx, sy, zx, zy), (lo, hi), vx, kb, axes, xv, v = _unary_setup(ctx, node)
    dt = int_dtype(ctx, x.name)
    want = _ort_table(node, dt, sx, zx, sy, zy)
    vv = (sx * (vx - F32(zx))).astype(F32)
    s = (1.0 / (1.0 + np.exp(-vv.astype(np.float64)))).astype(F32)
    r = (s / sy).astype(np.float64)
    # libm's expf and the division may differ from numpy's by an ulp or two: a margin of 64 ulps
    near = np.abs(r - np.floor(r) - 0.5) <= 64 * np.spacing(np.abs(r).astype(F32)).astype(np.float64)
    got = np.where(near, np.nan, _ours_saturate((np.rint(r) + zy).astype(F32), lo, hi))
    y = _quantize(Un("sigmoid", v), sy, zy, lo, hi)
    y, n = _patch(node, y, xv, None, want.reshape(-1, 1), got.reshape(-1, 1), vx, None)
    ctx.add(kb.kernel(out.name, axes, y, out_shape=[x.size]))
    note(ctx, node, f"{dt} -> {_dtype(ctx, out.name)} held as exact float32: dequantize, sigmoid, quantize, "
                    f"{n} of 256 input values patched from onnxruntime's table (MLAS's logistic approximation)")


@register(MS + "QLinearConcat")
def lower_qlinear_concat(ctx, node):
    """Each input copied where its scale and zero point are the output's (onnxruntime's memcpy),
    else requantized as its table: MlasQuantizeLinear(x_scale * (x - x_zero_point))."""
    g = ctx.graph
    out = g.tensors[node.outputs[0]]
    sy, zy = _param(ctx, node, 0, "Y_scale"), _param(ctx, node, 1, "Y_zero_point", 0)
    lo, hi = _range(ctx, node, out.name)
    axis = int(node.attrs.get("axis", 0)) % len(out.shape)
    at, paths = 0, []
    for k in range(2, len(node.inputs), 3):
        x = g.tensors[node.inputs[k]]
        sx, zx = _param(ctx, node, k + 1, "X_scale"), _param(ctx, node, k + 2, "X_zero_point", 0)
        _values(ctx, node, x.name)
        kb = KernelBuilder(ctx, node, "QLinearConcat")
        axes = [Axis(f"i{j}", d) for j, d in enumerate(x.shape)]
        xv = kb.load(x.name, [a.var for a in axes])
        if sx == sy and zx == zy:
            y = xv
            paths.append("copied")
        else:
            y = _quantize(Bin("*", Const(float(sx)), xv if not zx else Bin("-", xv, Const(float(zx)))), sy, zy, lo, hi)
            paths.append("requantized")
        off = tuple(at if j == axis else 0 for j in range(len(out.shape)))
        ctx.add(kb.kernel(out.name, axes, y, out_shape=out.shape, out_offset=off))
        at += x.shape[axis]
    note(ctx, node, f"{_dtype(ctx, out.name)} held as exact float32: inputs {', '.join(paths)} (dequantize, then "
                    "quantize with the output's scale, as onnxruntime's table)")
