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
from functools import cached_property

import numpy as np

from ...ir.loopnest import index_range, iter_loads


@dataclass(frozen=True)
class KernelGraph:
    names: tuple          # kernel names in program order (a topological order)
    writers: dict         # root -> kernel names writing it, or writing a part inside it (a Concat output)
    reads: dict           # kernel name -> tuple of roots it reads (activations and constants)
    consumers: dict       # root -> tuple of kernel names reading it
    constants: frozenset  # roots holding compile-time data (weights)
    graph_io: frozenset   # roots of graph inputs and outputs (always in main memory)

    def readers(self, root, program):
        """Kernels reading `root` or a Concat output it lives inside."""
        return [n for r in containing(program, root) for n in self.consumers.get(r, ())]

    @cached_property
    def _pos(self):
        return {n: i for i, n in enumerate(self.names)}

    def writers_before(self, name, root):
        """The writers of `root` that come before kernel `name` in program order: what it
        depends on. A tensor written in parts (a Gather of several index runs, ConvTranspose's
        zeroing and scatter-adds) lists every part's kernel as a writer, and each part reads
        its own output root to come after the earlier ones; the later parts are not its
        producers (counting them made the group graph cyclic)."""
        at = self._pos[name]
        return tuple(w for w in self.writers.get(root, ()) if self._pos[w] < at)


def containing(program, root):
    """`root` and the Concat outputs it lives inside (inplace_concat), innermost first."""
    out = [root]
    while out[-1] in program.slices:
        out.append(program.root(program.slices[out[-1]][0]))
    return out


def _placed(program, root):
    """(outermost container, byte offset) of a root (itself at 0 when it lives in none)."""
    off = 0
    while root in program.slices:
        c, d = program.slices[root]
        root, off = program.root(c), off + d
    return root, off


def _overlapping(program, root):
    """The roots living in the same container as `root` whose bytes meet its bytes, but for
    the ones it lives inside (`containing`): siblings.py places a kernel's output over the
    head of a Concat it does not live in."""
    if not program.slices:
        return []
    top, lo = _placed(program, root)
    hi = lo + program.graph.tensors[root].nbytes
    inside = set(containing(program, root))
    out = []
    strided = program.strided_slices
    for x in sorted({program.root(t) for t in program.slices} | {program.root(c) for c, _ in program.slices.values()}):
        t, a = _placed(program, x)
        if t != top or x in inside:
            continue
        if root in strided or x in strided:     # channel slices: bytes shared only with what they live in
            if root in containing(program, x):
                out.append(x)
        elif a < hi and lo < a + program.graph.tensors[x].nbytes:
            out.append(x)
    return out


def out_root(program, k):
    return program.root(k.buffers[k.out].tensor)


def written(program, k):
    """Roots a kernel's output writes: its own and every Concat output around it."""
    return containing(program, out_root(program, k))


def kernel_graph(program):
    g = program.graph
    writers, reads, consumers = {}, {}, {}
    for k in program.kernels:
        for r in written(program, k):
            writers.setdefault(r, []).append(k.name)
    for k in program.kernels:     # a whole tensor's writer writes every tensor its bytes hold (passes/siblings.py)
        for r in _overlapping(program, out_root(program, k)):
            if k.name not in writers.setdefault(r, []) and not any(k.out_offset) \
                    and tuple(k.buffers[k.out].shape) == tuple(g.tensors[out_root(program, k)].shape):
                writers[r].append(k.name)
    first = {}
    for k in program.kernels:
        rs = {program.root(b.tensor) for n, b in k.buffers.items() if n != k.out}
        own = out_root(program, k)
        if first.setdefault(own, k.name) != k.name:
            rs.add(own)     # an earlier kernel wrote this tensor (ConvTranspose: zero, then scatter-add): it comes after
        rs = sorted(rs)
        reads[k.name] = tuple(rs)
        for r in rs:
            consumers.setdefault(r, []).append(k.name)
    consts = frozenset(r for rs in reads.values() for r in rs if g.tensors[r].data is not None)
    io = frozenset(program.root(t) for t in list(program.inputs) + list(program.outputs))
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
