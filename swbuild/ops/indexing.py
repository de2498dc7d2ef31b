"""GatherND and ScatterND with constant indices (every batch_dims; ScatterND's reduction none,
add, mul, max, min), as PyTorch's dynamo exporter writes them for advanced indexing.

Both flatten to rows: the indexed leading dimensions become one row number (numpy's
ravel_multi_index, per batch for GatherND), the rest of the tensor is the row.

- GatherND is a Gather of rows (movement.gather_constant: strided copies per affine run of
  the row numbers, or one gather kernel). With indices known only at run time, the form
  with one index per row (last dimension 1, batch_dims 0) is a run-time Gather on axis 0;
  other forms need integer arithmetic at run time and are refused.
- ScatterND is written as gathers too, since kernels write boxes, not scattered rows: in
  round r every output row m reads the r-th update aimed at it (a gather of update rows over
  a constant table), then out = mask_r[m] ? combine(acc, g_r) : acc. reduction none takes the
  last update per row in one round (the reference applies updates in order); the others take
  one round per repeat of a row, in the order the reference folds them.
"""
from __future__ import annotations

import math

import numpy as np

from ..support.errors import UnsupportedError
from ..ir.loopnest import Axis, Bin, Const, Select
from .base import KernelBuilder, register
from .movement import _s, gather_constant, gather_kernel, gather_rows

COMBINE = {"add": "+", "mul": "*", "max": "max", "min": "min"}


def _indices(ctx, node, k, what):
    t = ctx.graph.tensors[node.inputs[k]]
    if t.data is None:
        raise UnsupportedError(f"node '{node.name}' ({node.op}): {what} '{t.name}' are computed at run time; "
                               "swbuild lowers constant indices (they fold when they come from shapes and ranges), "
                               "and at run time only GatherND's one index per row with batch_dims 0")
    return np.asarray(t.data).astype(np.int64)


def _rows(node, idx, dims):
    """Row numbers of index tuples (last axis of idx) into `dims`, negatives wrapped."""
    dims = np.asarray(dims, dtype=np.int64)
    idx = np.where(idx < 0, idx + dims, idx)
    bad = (idx < 0) | (idx >= dims)
    if bad.any():
        at = np.argwhere(bad)[0]
        raise UnsupportedError(f"node '{node.name}' ({node.op}): index {tuple(int(v) for v in at[:-1])} is out of "
                               f"range for dims {tuple(int(d) for d in dims)}")
    return np.ravel_multi_index(tuple(np.moveaxis(idx, -1, 0)), tuple(int(d) for d in dims)) if dims.size \
        else np.zeros(idx.shape[:-1], np.int64)


@register("GatherND")
def lower_gather_nd(ctx, node):
    data = ctx.graph.tensors[node.inputs[0]]
    out = ctx.graph.tensors[node.outputs[0]]
    idx_t = ctx.graph.tensors[node.inputs[1]]
    b = int(node.attrs.get("batch_dims", 0))
    if idx_t.data is None and b == 0 and idx_t.shape[-1] == 1:
        _runtime_rows(ctx, node, data, idx_t, out)      # one index per row: Gather on axis 0
        return
    idx = _indices(ctx, node, 1, "indices")
    k = idx.shape[-1]
    B, M = math.prod(data.shape[:b]), math.prod(data.shape[b:b + k])
    inner = math.prod(data.shape[b + k:])
    rows = _rows(node, idx.reshape(B, -1, k), data.shape[b:b + k])        # [B, Q]
    rows = (rows + M * np.arange(B, dtype=np.int64)[:, None]).reshape(-1)
    gather_constant(ctx, node, data.name, (1, B * M, inner), rows, out.name)


def _runtime_rows(ctx, node, data, idx, out, rows=None):
    """out[q, i] = data[idx[q], i] with indices read at run time: the gather kernel of a
    run-time Gather on axis 0 (negative indices as Gather treats them). `rows`: data's row
    count when it is read as a (rows, size / rows) view, not by its own leading axis."""
    n, inner = (rows, data.size // rows) if rows else (data.shape[0], math.prod(data.shape[1:]))
    gather_kernel(ctx, node, data.name, (1, n, inner), idx.name, idx.size, out.name)


@register("ScatterND")
def lower_scatter_nd(ctx, node):
    data = ctx.graph.tensors[node.inputs[0]]
    upd = ctx.graph.tensors[node.inputs[2]]
    out = ctx.graph.tensors[node.outputs[0]]
    idx = _indices(ctx, node, 1, "indices")
    reduction = _s(node.attrs.get("reduction"), "none")
    if reduction != "none" and reduction not in COMBINE:
        raise UnsupportedError(f"node '{node.name}' (ScatterND): reduction '{reduction}' is not an ONNX one")
    k = idx.shape[-1]
    M, inner = math.prod(data.shape[:k]), math.prod(data.shape[k:])
    rows = _rows(node, idx.reshape(-1, k), data.shape[:k])               # update q writes row rows[q]
    Q = rows.size
    if Q == 0:
        ctx.alias(out.name, data.name)
        return
    if reduction == "none":     # the last update of a row wins
        last = {int(m): q for q, m in enumerate(rows.tolist())}
        rounds = [last]
    else:                       # round r: each row's r-th update, in order
        rounds, seen = [], {}
        for q, m in enumerate(rows.tolist()):
            r = seen.get(m, 0)
            seen[m] = r + 1
            if r == len(rounds):
                rounds.append({})
            rounds[r][m] = q
    acc = data.name
    for r, pick in enumerate(rounds):
        table = np.zeros(M, np.int64)       # rows no update reaches read update 0, masked out below
        mask = np.zeros(M, np.float32)
        for m, q in pick.items():
            table[m], mask[m] = q, 1.0
        g = ctx.new_temp((M, inner), "float32", f"{node.name}.round{r}")
        gather_rows(ctx, node, upd.name, (1, Q, inner), table, g)
        dst = out.name if r == len(rounds) - 1 else ctx.new_temp(data.shape, "float32", f"{node.name}.acc{r}")
        mt = ctx.new_const(mask, f"{node.name}.mask{r}")
        m_ax, i_ax = Axis("m", M), Axis("i", inner)
        kb = KernelBuilder(ctx, node)
        a = kb.load(acc, [m_ax.var, i_ax.var], shape=(M, inner))
        v = kb.load(g, [m_ax.var, i_ax.var])
        new = v if reduction == "none" else Bin(COMBINE[reduction], a, v)
        body = Select(Bin("!=", kb.load(mt, [m_ax.var]), Const(0.0)), new, a)
        ctx.add(kb.kernel(dst, [m_ax, i_ax], body, out_shape=(M, inner)))
        acc = dst


@register("GatherElements")
def lower_gather_elements(ctx, node):
    """out[.., j, ..] = data[.., index[.., j, ..], ..] along `axis`: every output element is
    one element of data, at a flat position = (its index, wrapped) * the axis' stride + the
    offset of its other coordinates. Constant indices give those positions at compile time
    (one strided copy per affine run, or a constant-table gather); run-time ones (RoBERTa's
    position ids) a small integer kernel computing them, then the row gather of data viewed
    flat, as a run-time Gather reads rows."""
    data, idx_t = (ctx.graph.tensors[i] for i in node.inputs[:2])
    out = ctx.graph.tensors[node.outputs[0]]
    r = len(data.shape)
    axis = int(node.attrs.get("axis", 0))
    if not -r <= axis < r or len(idx_t.shape) != r:
        raise UnsupportedError(f"node '{node.name}' (GatherElements): axis {axis} or index rank {len(idx_t.shape)} "
                               f"does not fit data of rank {r}")
    axis %= r
    D, N = data.shape[axis], data.size
    strides = [math.prod(data.shape[d + 1:]) for d in range(r)]
    grid = np.indices(idx_t.shape, dtype=np.int64)
    offsets = sum((grid[d] * strides[d] for d in range(r) if d != axis), np.zeros(idx_t.shape, np.int64))
    if idx_t.data is not None:
        idx = np.asarray(idx_t.data).astype(np.int64)
        idx = np.where(idx < 0, idx + D, idx)
        if idx.size and (idx.min() < 0 or idx.max() >= D):
            raise UnsupportedError(f"node '{node.name}' (GatherElements): an index is outside the axis of {D}")
        gather_constant(ctx, node, data.name, (1, N, 1), (idx * strides[axis] + offsets).reshape(-1), out.name)
        return
    flat = ctx.new_temp(idx_t.shape, idx_t.dtype, node.name + "_flat")
    off = ctx.new_const(offsets.astype(idx_t.dtype), node.name + ".offsets")
    kb = KernelBuilder(ctx, node)
    ax = [Axis(f"i{d}", n) for d, n in enumerate(idx_t.shape)]
    ix = kb.load(idx_t.name, [a.var for a in ax])
    wrapped = Select(Bin("<", ix, Const(0.0)), Bin("+", ix, Const(float(D))), ix)
    ctx.add(kb.kernel(flat, ax, Bin("+", Bin("*", wrapped, Const(float(strides[axis]))), kb.load(off, [a.var for a in ax])),
                      out_shape=list(idx_t.shape)))
    _runtime_rows(ctx, node, data, ctx.graph.tensors[flat], out, rows=N)
