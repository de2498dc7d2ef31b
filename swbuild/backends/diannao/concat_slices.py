"""Channel concatenations in place on NHWC storage (a graph pass of the DianNao backend).

A Concat lowers to one copy kernel per input, each writing its slice of the output. Sunway's
`inplace_concat` drops a copy only when the slice is one contiguous byte range; a channel
slice of an NHWC tensor is not (each pixel holds every input's channels side by side), so on
the MLU every Concat around a convolution kept its copy kernels (Inception-v1: 36 kernels,
27 of them launched alone). Here an input x of a channel Concat into c, both NHWC, is stored
*inside* c: at c's element offset c0 (`program.slices`, so the arena places it there) with
c's pixel pitch (`DianNaoState.storage_shapes`: the strides of x's accesses come from c's
shape, layout.view_strides). Its producer then writes its tile straight into its channels
with segmented copies (one segment per pixel of Cx channels, stride Ct) and the copy kernel
is dropped; every reader of x reads it the same way. The copies stay exact: traffic.py and
the emulator count the segments the printed C moves.

x stays a tensor of its own when: it or c is a graph input / output, a constant, aliased, a
static loop's slice, an int8 value (narrow.py may store it as bytes) or already inside another
Concat; the Concat is not along channels of NHWC tensors; the copy is not of the whole of x.
"""
from __future__ import annotations

from ...optimizer.memory import _copy_of
from .layout import NHWC


def _outermost(program, t, slices):
    while t in slices:
        t = slices[t][0]
    return t


def concat_in_place(program, layouts):
    """Drop the copy kernels of NHWC channel Concats; returns {x: shape of its outermost
    container} (the storage its strides come from). Updates program.slices and notes."""
    g = program.graph
    external = {program.root(t) for t in program.inputs + program.outputs}
    aliased = set(program.aliases) | set(program.aliases.values())
    looped = set(program.loop_slices) | {s.container for s in program.loop_slices.values()}
    slices = dict(program.slices)
    keep, done = [], {}
    for k in program.kernels:
        src = _copy_of(k) if k.op == "Concat" and k.loop is None else None
        if src is None:
            keep.append(k)
            continue
        xb, cb = k.buffers[src], k.buffers[k.out]
        x, c = xb.tensor, cb.tensor
        tx, tc = g.tensors[x], g.tensors[c]
        xshape, cshape = tuple(xb.shape), tuple(cb.shape)
        ok = (x != c and not ({x, c} & (external | aliased | looped)) and tx.data is None and tc.data is None
              and x not in slices and layouts.get(x) == NHWC and layouts.get(c) == NHWC and tx.dtype == tc.dtype
              and tuple(tx.shape) == xshape and tuple(tc.shape) == cshape and len(xshape) == 4
              and all(xshape[d] == cshape[d] for d in (0, 2, 3)) and all(o == 0 for d, o in enumerate(k.out_offset)
                                                                        if d != 1)
              and _outermost(program, c, slices) != x
              # int8 activations may be stored as bytes (schedule/narrow.py, after this pass), a
              # Concat output only when no input lives in it: keep both the same element size
              and "int8" not in (g.exact_ints.get(x), g.exact_ints.get(c)))
        if not ok:
            keep.append(k)
            continue
        c0 = k.out_offset[1]
        slices[x] = (c, c0 * tx.nbytes // tx.size)     # NHWC: channel c0 of pixel 0
        done[x] = c
        program.notes.append(f"{k.name}: {x} written in place as channels {c0}..{c0 + xshape[1] - 1} of NHWC {c}; "
                             "copy dropped")
    program.kernels = keep
    program.slices = slices
    program.strided_slices = frozenset(program.strided_slices) | frozenset(done)
    return {x: tuple(g.tensors[_outermost(program, x, slices)].shape) for x in sorted(done)}


def storage_shape(storage, program, tensor):
    """The shape whose NHWC pitches a tensor's accesses use: its outermost Concat's (when it was
    placed inside one by concat_in_place), else None (its own)."""
    if not storage:
        return None
    return storage.get(tensor) or storage.get(program.root(tensor))

