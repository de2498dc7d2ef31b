"""The fused kernel graph grouping works on: kernels as nodes, tensors (by storage root)
as edges, and the boxes a kernel reads when it computes a box of its output.

Boxes are per-dimension inclusive (lo, hi) pairs over a buffer's view. A consumer's view
of a producer's tensor maps onto the producer's output axes only when both views have the
producer's axis extents; anything else (a reshape between them, a Concat slice) is taken
whole, which over-counts but never under-counts a footprint.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...ir.loopnest import index_range, iter_loads


@dataclass(frozen=True)
class KernelGraph:
    names: tuple          # kernel names in program order (a topological order)
    writers: dict         # store -> kernel names writing it (a Concat container: one per part)
    reads: dict           # kernel name -> tuple of stores it reads (activations and constants)
    consumers: dict       # store -> tuple of kernel names reading it
    constants: frozenset  # stores holding compile-time data (weights)
    graph_io: frozenset   # stores of graph inputs and outputs (always in main memory)


def store(program, t):
    """The tensor whose memory `t` is: its alias root, or the Concat output it lives inside."""
    r = program.root(t)
    while r in program.slices:
        r = program.root(program.slices[r][0])
    return r


def out_root(program, k):
    return store(program, k.buffers[k.out].tensor)


def kernel_graph(program):
    g = program.graph
    writers, reads, consumers = {}, {}, {}
    for k in program.kernels:
        writers.setdefault(out_root(program, k), []).append(k.name)
    for k in program.kernels:
        rs = sorted({store(program, b.tensor) for n, b in k.buffers.items() if n != k.out})
        reads[k.name] = tuple(rs)
        for r in rs:
            consumers.setdefault(r, []).append(k.name)
    consts = frozenset(r for rs in reads.values() for r in rs if g.tensors[r].data is not None)
    io = frozenset(store(program, t) for t in list(program.inputs) + list(program.outputs))
    return KernelGraph(tuple(k.name for k in program.kernels), {r: tuple(v) for r, v in writers.items()}, reads,
                       {r: tuple(v) for r, v in consumers.items()}, consts, io)


def tensor_bytes(program, root):
    t = program.graph.tensors[root]
    return int(t.size) * np.dtype(t.dtype).itemsize


def full_box(shape):
    return tuple((0, int(e) - 1) for e in shape)


def box_points(box):
    return math.prod(max(0, hi - lo + 1) for lo, hi in box)


def box_union(a, b):
    if a is None:
        return b
    return tuple((min(x[0], y[0]), max(x[1], y[1])) for x, y in zip(a, b))


def boxes_meet(a, b):
    return all(x[0] <= y[1] and y[0] <= x[1] for x, y in zip(a, b))


def out_shape(k):
    return tuple(a.extent for a in k.axes)


def input_boxes(k, out_box):
    """{buffer name: box of its view} a kernel reads to compute `out_box` of its axes;
    the whole view where an index is not analysable."""
    ranges = {a.name: r for a, r in zip(k.axes, out_box)}
    ranges.update({a.name: (0, a.extent - 1) for a in k.reduce_axes})
    got = {}
    for ld in list(iter_loads(k.body)) + list(iter_loads(k.epilogue)):
        shape = k.buffers[ld.buf].shape
        try:
            box = []
            for d, e in enumerate(ld.index):
                lo, hi = index_range(e, ranges)
                box.append((max(lo, 0), min(hi, int(shape[d]) - 1)))
            box = tuple(box)
        except (ValueError, KeyError):
            box = full_box(shape)
        got[ld.buf] = box_union(got.get(ld.buf), box)
    return got


def producer_box(program, cons, buf, box, prod):
    """The box of `prod`'s output axes that `cons` reads through its buffer `buf`."""
    view = tuple(cons.buffers[buf].shape)
    same = program.root(cons.buffers[buf].tensor) == program.root(prod.buffers[prod.out].tensor)
    if same and view == out_shape(prod) == tuple(prod.buffers[prod.out].shape) and not any(prod.out_offset):
        return box
    return full_box(out_shape(prod))
