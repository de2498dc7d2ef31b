"""Storage layouts of tensors in GDRAM (a graph pass of the DianNao backend).

`__bang_conv` and `__bang_maxpool` read HWC data, so every intermediate tensor that a
convolution or pooling produces or consumes is stored NHWC (channels innermost) when all
the kernels that touch it can address it that way, and so are the 4-D tensors point-wise
kernels connect to those (the layout spreads until a reduction or a graph input/output). Kernels keep their NCHW semantics:
only the strides of their accesses change (`view_strides`). A Transpose whose source and
destination then have the same bytes is an identity copy and disappears (the NHWC ↔ NCHW
transposes around a convolution of an NHWC model cancel this way). Graph inputs and
outputs keep the layout the ONNX model gives them.
"""
from __future__ import annotations

import math

from ...ir.loopnest import Acc, Load, Var, affine

NHWC = (0, 2, 3, 1)


# with a wide QLinearConv's two digit sums (ops/quant_wide.py; schedule/integer.py's INTEGER_OPS)
CONV_LIKE = ("Conv", "ConvTranspose", "MaxPool", "AveragePool", "QLinearConv", "ConvInteger", "QLinearConv.high_sum",
             "QLinearConv.low_sum", "QLinearConv.half_sum")


def conv_like(k):
    return k.op in CONV_LIKE and len(k.axes) in (4, 5)


def _split_groups(view_shape, tensor_shape):
    """Each tensor dim as the run of view dims whose product it is (views that only split
    dims, like a grouped convolution's [N, G, C/G, H, W] of [N, C, H, W]); None otherwise."""
    groups, j = [], 0
    for d in tensor_shape:
        run, size = [], 1
        if d == 1 and j < len(view_shape) and view_shape[j] == 1:
            run.append(j)
            j += 1
        while j < len(view_shape) and (size < d or (view_shape[j] == 1 and size == d and d != 1)):
            run.append(j)
            size *= view_shape[j]
            j += 1
        if size != d:
            return None
        groups.append(run)
    while j < len(view_shape) and view_shape[j] == 1:
        groups[-1].append(j) if groups else None
        j += 1
    return groups if j == len(view_shape) else None


def view_strides(view_shape, tensor_shape, perm=None, storage_shape=None):
    """Element strides of each dim of a view of a tensor stored as transpose(perm); with
    `storage_shape`, the tensor lives inside a larger one of that shape (an NHWC channel slice
    of a Concat output, concat_slices.py) whose pitches it uses."""
    view_shape, tensor_shape = list(view_shape), list(tensor_shape)
    row_major = [math.prod(view_shape[d + 1:]) for d in range(len(view_shape))]
    if perm is None or list(perm) == list(range(len(tensor_shape))):
        return row_major
    groups = _split_groups(view_shape, tensor_shape)
    if groups is None:
        return None
    stored = [(storage_shape or tensor_shape)[p] for p in perm]
    pitch = {p: math.prod(stored[i + 1:]) for i, p in enumerate(perm)}
    out = [0] * len(view_shape)
    for d, run in enumerate(groups):
        sub = 1
        for j in reversed(run):
            out[j] = sub * pitch[d]
            sub *= view_shape[j]
    return out


def _views(program):
    """tensor -> set of view shapes, over every kernel buffer."""
    out = {}
    for k in program.kernels:
        for b in k.buffers.values():
            out.setdefault(b.tensor, set()).add(tuple(b.shape))
    return out


def choose_layouts(program, hw=None):
    """{tensor: perm} for the tensors stored NHWC. A tensor with fewer channels than one
    channel block of __bang_conv (`conv_ci_multiple_bytes` of floats) stays NCHW: the
    convolution pads and gathers its channels either way, and in HWC the element-wise kernel
    that makes it from NCHW data (an image quantized by a QDQ model) would gather element by
    element."""
    min_c = int((hw or {}).get("conv_ci_multiple_bytes", 0)) // 4
    g = program.graph
    external = set(program.inputs) | set(program.outputs)
    aliased = set(program.aliases) | set(program.aliases.values())
    views = _views(program)
    cand = set()
    for k in program.kernels:
        if conv_like(k):
            cand.update(b.tensor for b in k.buffers.values())
    def eligible(t):
        tt = g.tensors[t]
        return (len(tt.shape) == 4 and tt.data is None and t not in external and t not in aliased and tt.shape[1] >= min_c
                and all(view_strides(v, tt.shape, NHWC) is not None for v in views.get(t, ())))
    out = {t: NHWC for t in sorted(cand) if eligible(t)}
    # NHWC spreads through point-wise kernels (element-wise, BatchNormalization, Concat): one
    # of their tensors NHWC and another NCHW would make their copies transpose, element by
    # element (a DenseNet block's BN -> Relu -> Conv and its Concat did).
    spread = [k for k in program.kernels if k.kind == "compute" and not k.reduce_axes and len(k.axes) == 4]
    changed = True
    while changed:
        changed = False
        for k in spread:
            ts = {b.tensor for b in k.buffers.values()}
            if ts & out.keys():
                for t in sorted(ts - out.keys()):
                    if eligible(t):
                        out[t] = NHWC
                        changed = True
    return dict(sorted(out.items()))


def access_offset(k, load_or_out, layouts, graph):
    """Flat element offset of an access (a Load, or the kernel's output) in its tensor's
    storage, as {var: coef, None: const}; None when not affine or the view is incompatible."""
    if isinstance(load_or_out, Load):
        b = k.buffers[load_or_out.buf]
        idx = list(load_or_out.index)
    else:
        b = k.buffers[k.out]
        idx = [Var(a.name) if not o else Var(a.name) + o for a, o in zip(k.axes, k.out_offset)]
    st = view_strides(b.shape, graph.tensors[b.tensor].shape, layouts.get(b.tensor))
    if st is None:
        return None
    out = {None: 0}
    for e, s in zip(idx, st):
        a = affine(e)
        if a is None:
            return None
        for v, c in a.items():
            out[v] = out.get(v, 0) + c * s
    return {v: c for v, c in out.items() if c or v is None}


def eliminate_identity_copies(program, layouts):
    """Drop copy kernels whose output bytes equal their input bytes: the output becomes an
    alias of the input (or, for a graph output, the input's producer writes it directly)."""
    g = program.graph
    ext_in, ext_out = set(program.inputs), set(program.outputs)
    changed = True
    while changed:
        changed = False
        producers = {}
        for k in program.kernels:
            producers.setdefault(program.root(k.buffers[k.out].tensor), []).append(k)
        for k in list(program.kernels):
            if k.combine or not isinstance(k.body, Load) or k.body.pad is not None or not isinstance(k.epilogue, Acc) \
                    or k.kind != "compute" or k.op in ("Scan", "Loop"):   # a conversion changes the bytes; loop states copy
                continue
            src, dst = k.buffers[k.body.buf].tensor, k.buffers[k.out].tensor
            rs, rd = program.root(src), program.root(dst)
            if rs == rd or g.tensors[rs].data is not None or k.points != g.tensors[dst].size \
                    or g.tensors[src].size != g.tensors[dst].size:
                continue
            if access_offset(k, k.body, layouts, g) != access_offset(k, None, layouts, g):
                continue
            if dst not in ext_out and dst not in program.aliases and dst not in program.aliases.values():
                program.aliases[dst] = src
            elif (src not in ext_in | ext_out and src not in program.aliases and src not in program.aliases.values()
                  and len(producers.get(rs, [])) == 1 and dst == rd):
                program.aliases[src] = dst
            else:
                continue
            program.kernels.remove(k)
            program.notes.append(f"{k.name}: identity copy after layout assignment, removed")
            changed = True
            break
    return program
