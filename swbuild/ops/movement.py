"""Data movement expressed as affine copies: Slice, Pad, Expand, Tile, DepthToSpace/SpaceToDepth,
Gather with constant indices, Cast to the same type (Resize and Upsample: resize.py).

Repetition and interleaving become views instead of division: Tile reads x[j] for an
output viewed as [repeats, n]; a whole-number nearest upsampling by s writes an output
viewed as [H, s, W, s] from x[h, w]. Indices stay affine, so DMA footprints stay boxes;
what is not affine moves rows through a gather kernel (gather_rows).
"""
from __future__ import annotations

import math

import numpy as np

from ..support.errors import UnsupportedError
from ..ir.loopnest import Axis, Bin, iconst
from .base import KernelBuilder, axes_for, broadcast_index, const_input, register


def _affine(v, c):
    """coef * var + const with the trivial cases folded."""
    e = v if c[0] == 1 else Bin("*", v, iconst(c[0]))
    return e if c[1] == 0 else Bin("+" if c[1] > 0 else "-", e, iconst(abs(c[1])))


@register("Slice")
def lower_slice(ctx, node):
    x = ctx.graph.tensors[node.inputs[0]]
    out = ctx.graph.tensors[node.outputs[0]]
    r = len(x.shape)
    if "starts" in node.attrs:   # opset < 10
        starts, ends = node.attrs["starts"], node.attrs["ends"]
        axes = node.attrs.get("axes", list(range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts = const_input(ctx, node, 1).reshape(-1).tolist()
        ends = const_input(ctx, node, 2).reshape(-1).tolist()
        axes = const_input(ctx, node, 3, np.arange(len(starts))).reshape(-1).tolist()
        steps = const_input(ctx, node, 4, np.ones(len(starts), np.int64)).reshape(-1).tolist()
    maps = {d: (1, 0) for d in range(r)}
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = int(a) % r
        idx = range(x.shape[a])[slice(int(s), int(e), int(st))]   # ONNX clamping = Python's
        maps[a] = (int(st), idx[0] if len(idx) else 0)
    if out.size == 0:
        return
    kb = KernelBuilder(ctx, node)
    oax = axes_for(out.shape)
    ctx.add(kb.kernel(out.name, oax, kb.load(x.name, [_affine(a.var, maps[d]) for d, a in enumerate(oax)])))


@register("Pad")
def lower_pad(ctx, node):
    mode = node.attrs.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode != "constant":
        raise UnsupportedError(f"node '{node.name}' (Pad): mode '{mode}' is not supported (constant only)")
    x = ctx.graph.tensors[node.inputs[0]]
    out = ctx.graph.tensors[node.outputs[0]]
    r = len(x.shape)
    if "pads" in node.attrs:
        pads, value = list(node.attrs["pads"]), float(node.attrs.get("value", 0.0))
    else:
        pads = const_input(ctx, node, 1).reshape(-1).tolist()
        cv = const_input(ctx, node, 2)
        value = float(cv.reshape(-1)[0]) if cv is not None and cv.size else 0.0
        ax = const_input(ctx, node, 3)
        if ax is not None:
            full = [0] * (2 * r)
            ax = [int(a) % r for a in ax.reshape(-1)]
            for k, a in enumerate(ax):
                full[a], full[a + r] = pads[k], pads[k + len(ax)]
            pads = full
    kb = KernelBuilder(ctx, node)
    oax = axes_for(out.shape)
    idx = [_affine(a.var, (1, -int(pads[d]))) for d, a in enumerate(oax)]
    ctx.add(kb.kernel(out.name, oax, kb.load(x.name, idx, pad=value)))


@register("Expand")
def lower_expand(ctx, node):
    x = ctx.graph.tensors[node.inputs[0]]
    out = ctx.graph.tensors[node.outputs[0]]
    kb = KernelBuilder(ctx, node)
    oax = axes_for(out.shape)
    ctx.add(kb.kernel(out.name, oax, kb.load(x.name, broadcast_index(x.shape, oax))))


@register("Tile")
def lower_tile(ctx, node):
    x = ctx.graph.tensors[node.inputs[0]]
    out = ctx.graph.tensors[node.outputs[0]]
    reps = [int(v) for v in const_input(ctx, node, 1).reshape(-1)]
    kb = KernelBuilder(ctx, node)
    axes, view, idx = [], [], []
    for d, (n, rep) in enumerate(zip(x.shape, reps)):
        t, j = Axis(f"t{d}", rep), Axis(f"j{d}", n)
        axes += [t, j]
        view += [rep, n]
        idx.append(j.var)
    ctx.add(kb.kernel(out.name, axes, kb.load(x.name, idx), out_shape=view))


def _s(v, default):
    if v is None:
        return default
    return v.decode() if isinstance(v, bytes) else v


@register("DepthToSpace")
def lower_depth_to_space(ctx, node):
    x = ctx.graph.tensors[node.inputs[0]]
    out = ctx.graph.tensors[node.outputs[0]]
    b = int(node.attrs["blocksize"])
    N, C, H, W = x.shape
    c = C // (b * b)
    crd = _s(node.attrs.get("mode"), "DCR") == "CRD"
    n, ch, h, i, w, j = (Axis("n", N), Axis("c", c), Axis("h", H), Axis("i", b), Axis("w", W), Axis("j", b))
    kb = KernelBuilder(ctx, node)
    if crd:
        src = kb.load(x.name, [n.var, ch.var, i.var, j.var, h.var, w.var], shape=[N, c, b, b, H, W])
    else:
        src = kb.load(x.name, [n.var, i.var, j.var, ch.var, h.var, w.var], shape=[N, b, b, c, H, W])
    ctx.add(kb.kernel(out.name, [n, ch, h, i, w, j], src, out_shape=[N, c, H, b, W, b]))


@register("SpaceToDepth")
def lower_space_to_depth(ctx, node):
    x = ctx.graph.tensors[node.inputs[0]]
    out = ctx.graph.tensors[node.outputs[0]]
    b = int(node.attrs["blocksize"])
    N, C, H, W = x.shape
    n, i, j, ch, h, w = (Axis("n", N), Axis("i", b), Axis("j", b), Axis("c", C), Axis("h", H // b), Axis("w", W // b))
    kb = KernelBuilder(ctx, node)
    src = kb.load(x.name, [n.var, ch.var, h.var, i.var, w.var, j.var], shape=[N, C, H // b, b, W // b, b])
    if _s(node.attrs.get("mode"), "DCR") == "CRD":   # output channel c * b * b + i * b + j
        ctx.add(kb.kernel(out.name, [n, ch, i, j, h, w], src, out_shape=[N, C, b, b, H // b, W // b]))
        return
    ctx.add(kb.kernel(out.name, [n, i, j, ch, h, w], src, out_shape=[N, b, b, C, H // b, W // b]))


@register("Cast", "CastLike")
def lower_cast(ctx, node):
    """Within float32 (run-time booleans are float32 0/1, optimizer/dtypes.py): an alias, or a
    0/1 kernel for a Cast to bool. Across dtypes (a typed graph input read into float32, a
    float32 result written to a typed graph output): a conversion kernel, kind "convert"."""
    from onnx import TensorProto

    from .logical import is_true, truth
    x = ctx.graph.tensors[node.inputs[0]]
    out = ctx.graph.tensors[node.outputs[0]]
    to = node.attrs.get("to")
    to_bool = to == TensorProto.BOOL if to is not None else out.dtype == "bool"
    if x.dtype == out.dtype and not (to_bool and x.dtype == "float32"):
        ctx.alias(out.name, x.name)
        return
    # what kernels compute in, and float16 at the boundary (C conversions; halves via cexpr)
    kernel_types = ("float32", "float64", "int32", "int64", "float16")
    if x.dtype != out.dtype and "float32" not in (x.dtype, out.dtype) \
            and not (x.dtype in kernel_types and out.dtype in kernel_types):
        raise UnsupportedError(f"node '{node.name}' ({node.op}): cast from {x.dtype} to {out.dtype} of a run-time "
                               "tensor is not supported (one side must be float32, or both of float32, float64, "
                               "int32, int64)")
    if out.dtype not in ("float32", "float64", "int32", "int64") and out.name not in ctx.graph.outputs:
        raise UnsupportedError(f"node '{node.name}' ({node.op}): cast from {x.dtype} to {out.dtype} of a run-time "
                               "tensor that feeds further kernels is not supported (kernels compute in float32; "
                               "integer results are kept as graph outputs only)")
    kb = KernelBuilder(ctx, node)
    i = Axis("i", x.size)      # an empty tensor: a kernel of no points, which ctx.add drops
    v = kb.load(x.name, [i.var], shape=[i.extent])
    k = kb.kernel(out.name, [i], truth(is_true(v)) if to_bool else v, out_shape=[i.extent])
    if x.dtype != out.dtype:
        k.kind = "convert"              # typed buffers: each backend prints its own converter
        k.extra = {"src": v.buf, "to_bool": to_bool}
    ctx.add(k)


@register("Gather")
def lower_gather(ctx, node):
    """out[o, q, i] = data[o, idx[q], i] over the [outer, n, inner] view of the data.
    Constant indices: one affine copy kernel per index, or past MAX_INDEX_KERNELS of them
    (the cap on launches: PyTorch's as_strided writes thousands) gather_constant. Run-time
    indices (embedding lookups): a special gather kernel that moves the chosen rows."""
    data = ctx.graph.tensors[node.inputs[0]]
    out = ctx.graph.tensors[node.outputs[0]]
    idx_t = ctx.graph.tensors[node.inputs[1]]
    axis = int(node.attrs.get("axis", 0)) % len(data.shape)
    n = data.shape[axis]
    outer, inner = math.prod(data.shape[:axis]), math.prod(data.shape[axis + 1:])
    Q = idx_t.size
    o, i = Axis("o", outer), Axis("i", inner)
    if idx_t.data is None:
        gather_kernel(ctx, node, data.name, (outer, n, inner), idx_t.name, Q, out.name)
        return
    idx = np.asarray(idx_t.data).reshape(-1)
    idx = idx + np.where(idx < 0, n, 0)
    if idx.size > MAX_INDEX_KERNELS:      # (PyTorch's as_strided: thousands of indices)
        gather_constant(ctx, node, data.name, (outer, n, inner), idx, out.name)
        return
    for p, v in enumerate(idx.tolist()):
        v = int(v) + (n if v < 0 else 0)
        kb = KernelBuilder(ctx, node)
        src = kb.load(data.name, [o.var, iconst(v), i.var], shape=[outer, n, inner])
        ctx.add(kb.kernel(out.name, [o, Axis("p", 1), i], src, out_shape=[outer, Q, inner], out_offset=(0, p, 0)))


MAX_INDEX_KERNELS = 256     # constant indices up to this many: one copy kernel each (a launch each)
MAX_RUN_KERNELS = 16        # more affine runs than this: one gather kernel instead


def affine_runs(idx):
    """The index list as maximal runs idx[p0 + t] = start + step * t: [(p0, length, start, step)]."""
    runs, p = [], 0
    while p < len(idx):
        step = int(idx[p + 1] - idx[p]) if p + 1 < len(idx) else 1
        e = p + 1
        while e < len(idx) and idx[e] - idx[e - 1] == step:
            e += 1
        runs.append((p, e - p, int(idx[p]), step))
        p = e
    return runs


def gather_constant(ctx, node, src, view, idx, dst):
    """dst[o, q, i] = src[o, idx[q], i] with constant indices over the views [O, N, I] and
    [O, Q, I]: one strided copy per affine run of the indices when they are few (a strided
    view), else one gather kernel reading the indices as a constant table."""
    O, N, I = view
    runs = affine_runs(idx)
    if len(runs) > MAX_RUN_KERNELS:
        gather_rows(ctx, node, src, view, idx, dst)
        return
    o, i = Axis("o", O), Axis("i", I)
    for p0, length, start, step in runs:
        q = Axis("q", length)
        kb = KernelBuilder(ctx, node)
        ld = kb.load(src, [o.var, _affine(q.var, (step, start)) if step else iconst(start), i.var], shape=view)
        ctx.add(kb.kernel(dst, [o, q, i], ld, out_shape=[O, len(idx), I], out_offset=(0, p0, 0)))


def gather_rows(ctx, node, src, view, idx, dst):
    """dst[o, q, i] = src[o, idx[q], i]: the gather kernel (kind "gather", printed by each
    backend, as for run-time indices) over a constant index table."""
    O, N, I = view
    idx = np.asarray(idx, dtype=np.int64).reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= N):
        raise UnsupportedError(f"node '{node.name}' ({node.op}): index {int(idx.min() if idx.min() < 0 else idx.max())} "
                               f"is outside the gathered axis of {N}")
    gather_kernel(ctx, node, src, view, ctx.new_const(idx, f"{node.name}.indices"), idx.size, dst)


def gather_kernel(ctx, node, src, view, table, Q, dst):
    """dst[o, q, i] = src[o, table[q], i] over the views [O, N, I] and [O, Q, I], the Q indices
    read from tensor `table` when the kernel runs: the kernel of kind "gather" each backend
    prints (a run-time Gather, GatherND's rows, GatherElements' flat positions, a constant table)."""
    O, N, I = view
    o, q, i = Axis("o", O), Axis("q", Q), Axis("i", I)
    kb = KernelBuilder(ctx, node)
    ix = kb.load(table, [q.var], shape=[Q])
    k = kb.kernel(dst, [o, q, i], kb.load(src, [o.var, ix, i.var], shape=view), out_shape=[O, Q, I])
    k.kind = "gather"
    k.extra = {"data": k.body.buf, "indices": ix.buf}
    ctx.add(k)
