"""Resize and Upsample: every mode (nearest, linear, cubic), coordinate transformation,
nearest mode, cubic_coeff_a, exclude_outside, antialias, tf_crop_and_resize with its
extrapolation value, axes, keep_aspect_ratio_policy, scales or sizes.

Resize is separable: the onnx reference resizes one axis at a time, and so do we. Each axis'
interpolation is a constant matrix W[o, i] (the weight of input i in output o), taken from
the onnx reference itself by resizing the identity along that axis, so every coefficient
formula is the spec's own. Then per axis:

- nearest whose map is a whole-number view or affine: the affine copy of the old lowering
  (all such axes in one kernel, as before);
- nearest otherwise: a gather of the chosen rows (kind "gather", constant indices), exact
  for any value;
- linear and cubic: a reduction out[p, o, q] = sum_i W[o, i] * x[p, i, q] (a matrix product
  with a constant band matrix), plus the extrapolation value on tf_crop_and_resize's rows
  outside the input (their row of W is zero). An inf or NaN in x then reaches every output
  of its row along that axis (0 * inf), where the reference only spreads it to neighbours.
"""
from __future__ import annotations

import math

import numpy as np

from ..support.errors import UnsupportedError
from ..ir.loopnest import Acc, Axis, Bin, iconst
from .base import KernelBuilder, const_input, register
from .movement import _affine, _s, gather_rows


def _reference(who):
    try:
        from onnx.reference.ops import op_resize as ref
        ref._interpolate_1d_along_axis      # the separable reference (onnx >= 1.23)
    except (ImportError, AttributeError):
        import onnx
        raise UnsupportedError(f"{who}: linear, cubic and non-affine nearest resizing take their coefficients from "
                               f"the onnx reference's separable Resize (onnx >= 1.23); onnx {onnx.__version__} is "
                               "installed") from None
    return ref


def _coeffs(ref, mode, nearest, antialias, a):
    """The coefficient function the reference's Resize picks for these attributes."""
    if mode == "nearest":
        return lambda ratio, scale: ref._nearest_coeffs(ratio, mode=nearest)
    if mode == "cubic":
        f = ref._cubic_coeffs_antialias if antialias else ref._cubic_coeffs
        return lambda ratio, scale: f(ratio, scale, A=a)
    return ref._linear_coeffs_antialias if antialias else ref._linear_coeffs


def axis_matrix(n_in, n_out, scale, *, mode, ctm, nearest="round_prefer_floor", antialias=False, cubic_a=-0.75,
                exclude_outside=False, roi=None, who="Resize"):
    """(W, outside): W[o, i] the weight of input i in output o along one axis, and which
    outputs lie outside the input (tf_crop_and_resize: they take the extrapolation value)."""
    ref = _reference(who)
    f = _coeffs(ref, mode, nearest, antialias, cubic_a)

    def run(extrapolation):
        return ref._interpolate_1d_along_axis(np.eye(n_in), 0, float(scale), int(n_out), f, roi=roi,
                                              extrapolation_value=extrapolation, coordinate_transformation_mode=ctm,
                                              exclude_outside=bool(exclude_outside))
    w0, w1 = run(0.0), run(1.0)
    outside = np.any(w0 != w1, axis=1)
    w0[outside] = 0.0
    return w0, outside


def resize_plan(ctx, node, x_shape, out_shape):
    """Per resized axis in the reference's order: (axis, n_in, n_out, scale, roi)."""
    r = len(x_shape)
    opset = ctx.graph.opset
    legacy = node.op == "Upsample" or opset < 11
    axes = node.attrs.get("axes")
    axes = list(range(r)) if axes is None else [int(a) % r for a in axes]
    if node.op == "Upsample" and "scales" in node.attrs:
        scales, sizes = [float(s) for s in node.attrs["scales"]], None
    else:
        sc = const_input(ctx, node, 1 if legacy else 2)
        sizes = None if legacy else const_input(ctx, node, 3)
        scales = [float(s) for s in sc.reshape(-1)] if sc is not None and sc.size else None
        sizes = [int(s) for s in sizes.reshape(-1)] if sizes is not None and sizes.size else None
    if scales is None and sizes is None:
        raise UnsupportedError(f"node '{node.name}' ({node.op}): neither scales nor sizes is given")
    full = axes     # scales, sizes and roi list these axes (all of them without the attribute)
    if len(scales if scales is not None else sizes) != len(full):
        raise UnsupportedError(f"node '{node.name}' ({node.op}): {len(scales if scales is not None else sizes)} "
                               f"scales or sizes for {len(full)} axes")
    roi = None if legacy else const_input(ctx, node, 1)
    roi = None if roi is None or not roi.size else [float(v) for v in roi.reshape(-1)]
    rois = {a: (roi[k], roi[len(full) + k]) for k, a in enumerate(full)} if roi else {}
    if scales is not None:
        scale = dict(zip(full, scales))
        n_out = {a: int(scale[a] * x_shape[a]) for a in full}
    else:
        scale = {a: s / x_shape[a] for a, s in zip(full, sizes)}
        n_out = dict(zip(full, sizes))
        policy = _s(node.attrs.get("keep_aspect_ratio_policy"), "stretch")
        if policy != "stretch":
            one = (min if policy == "not_larger" else max)(scale.values())
            scale = {a: one for a in full}
            n_out = {a: int(one * x_shape[a] + 0.5) for a in full}
    for a in full:
        if n_out[a] != out_shape[a]:
            raise UnsupportedError(f"node '{node.name}' ({node.op}): output dim {a} is {out_shape[a]} by shape "
                                   f"inference but {n_out[a]} by the reference's rule for scale {scale[a]}")
    plan = []
    for a in full:
        lo, hi = rois.get(a, (0.0, 1.0))
        if math.isclose(scale[a], 1.0) and n_out[a] == x_shape[a] and math.isclose(lo, 0.0) and math.isclose(hi, 1.0):
            continue        # the reference skips identity axes too
        plan.append((a, x_shape[a], n_out[a], scale[a], (lo, hi) if a in rois else None))
    return plan


def _view_index(m, n_in, n_out, d):
    """Axes, view and index of a nearest map that is a whole-number upsampling or affine; None if not."""
    o = np.arange(n_out)
    s = n_out // n_in if n_in and n_out % n_in == 0 else 0
    if s >= 1 and np.array_equal(m, o // s):
        a, rr = Axis(f"i{d}", n_in), Axis(f"r{d}", s)
        return [a, rr], [n_in, s], a.var
    step = int(m[1] - m[0]) if n_out > 1 else 0
    if np.array_equal(m, m[0] + step * o):
        a = Axis(f"o{d}", n_out)
        return [a], [n_out], _affine(a.var, (step, int(m[0]))) if step else iconst(int(m[0]))
    return None


@register("Resize", "Upsample")
def lower_resize(ctx, node):
    x = ctx.graph.tensors[node.inputs[0]]
    out = ctx.graph.tensors[node.outputs[0]]
    mode = _s(node.attrs.get("mode"), "nearest")
    mode = "linear" if mode == "bilinear" else mode         # Upsample-1's name
    legacy = node.op == "Upsample" or ctx.graph.opset < 11
    ctm = "asymmetric" if legacy else _s(node.attrs.get("coordinate_transformation_mode"), "half_pixel")
    nearest = "floor" if legacy else _s(node.attrs.get("nearest_mode"), "round_prefer_floor")
    antialias = bool(int(node.attrs.get("antialias", 0)))
    if mode not in ("nearest", "linear", "cubic"):
        raise UnsupportedError(f"node '{node.name}' ({node.op}): mode '{mode}' is not an ONNX Resize mode")
    if antialias and mode == "nearest":
        raise UnsupportedError(f"node '{node.name}' ({node.op}): antialias with mode 'nearest' (the spec defines "
                               "antialias for linear and cubic only)")
    plan = resize_plan(ctx, node, x.shape, out.shape)
    if out.size == 0:       # a scale that leaves no element: nothing to compute
        return
    if not plan:
        ctx.alias(out.name, x.name)
        return
    opts = dict(mode=mode, ctm=ctm, nearest=nearest, antialias=antialias,
                cubic_a=float(node.attrs.get("cubic_coeff_a", -0.75)),
                exclude_outside=bool(int(node.attrs.get("exclude_outside", 0))))
    extrapolation = float(node.attrs.get("extrapolation_value", 0.0))
    who = f"node '{node.name}' ({node.op})"
    mats = {a: axis_matrix(ni, no, s, roi=roi, who=who, **opts) for a, ni, no, s, roi in plan}
    if mode == "nearest" and not any(o.any() for _, o in mats.values()) and _nearest_in_one(ctx, node, x, out, mats):
        return
    shape, src = list(x.shape), x.name
    for k, (a, ni, no, _, _) in enumerate(plan):
        shape[a] = no
        dst = out.name if k == len(plan) - 1 else ctx.new_temp(shape, "float32", f"{node.name}.axis{a}")
        w, outside = mats[a]
        P, Q = math.prod(shape[:a]), math.prod(shape[a + 1:])
        if mode == "nearest" and not outside.any():
            gather_rows(ctx, node, src, (P, ni, Q), np.argmax(w, axis=1), dst)
        else:
            _matrix_pass(ctx, node, src, (P, ni, Q), w, outside, extrapolation, dst)
        src = dst


def _nearest_in_one(ctx, node, x, out, mats):
    """The old lowering's single affine copy, when every axis' nearest map allows it."""
    axes, view, idx = [], [], []
    for d, (ni, no) in enumerate(zip(x.shape, out.shape)):
        m = np.argmax(mats[d][0], axis=1) if d in mats else np.arange(no)
        v = _view_index(m, ni, no, d)
        if v is None:
            return False
        axes += v[0]
        view += v[1]
        idx.append(v[2])
    kb = KernelBuilder(ctx, node)
    ctx.add(kb.kernel(out.name, axes, kb.load(x.name, idx), out_shape=view))
    return True


def _matrix_pass(ctx, node, src, view, w, outside, extrapolation, dst):
    """dst[p, o, q] = sum_i W[o, i] * src[p, i, q] (+ the extrapolation value on outside rows)."""
    P, ni, Q = view
    no = w.shape[0]
    wt = ctx.new_const(w.astype(np.float32), f"{node.name}.weights")
    p, o, q, i = Axis("p", P), Axis("o", no), Axis("q", Q), Axis("i", ni)
    kb = KernelBuilder(ctx, node)
    body = Bin("*", kb.load(wt, [o.var, i.var]), kb.load(src, [p.var, i.var, q.var], shape=view))
    epilogue = Acc()
    if outside.any() and extrapolation != 0.0:
        bias = ctx.new_const(np.where(outside, np.float32(extrapolation), np.float32(0)), f"{node.name}.extrapolation")
        epilogue = Bin("+", Acc(), kb.load(bias, [o.var]))
    ctx.add(kb.kernel(dst, [p, o, q], body, out_shape=[P, no, Q], reduce_axes=(i,), combine="sum", init=0.0,
                      epilogue=epilogue))
