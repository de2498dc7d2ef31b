"""Static memory plan: every intermediate gets an offset in one arena, by liveness.

`inplace_concat` (a pass before planning) lets a Concat input live inside the Concat output:
the lowering copies each input into its slice of the output; when that slice is contiguous
(all dimensions before the concat axis have extent 1, e.g. channel concat at batch 1) the
input tensor is placed at the slice's address instead, its producer then writes straight
into the output, and the copy kernel is dropped. Chains (DenseNet's concat of concats)
nest: a whole dense block shares one buffer. The planner treats such a group as one
allocation whose lifetime is the union of its members'.

`plan_memory` places the allocations with several first-fit heuristics (largest first, as
TFLite's arena planner does; earliest first; longest-lived first; largest size x lifetime)
and keeps the smallest arena. It reports the liveness lower bound: the largest total size of
the allocations live at one kernel.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..ir.loopnest import Acc, Load, Var
from ..ir.sizes import round_up

ALIGN = 64


@dataclass
class MemoryPlan:
    offsets: dict        # root tensor -> arena offset
    sizes: dict          # root tensor -> bytes
    lifetimes: dict      # root tensor -> (first kernel, last kernel)
    arena_bytes: int
    lower_bound: int
    groups: dict = field(default_factory=dict)   # tensor -> (allocation it lives in, byte offset)
    heuristic: str = ""

    def __str__(self):
        extra = f", {len(self.groups)} tensors placed inside others" if self.groups else ""
        return (f"arena {self.arena_bytes} bytes (liveness lower bound {self.lower_bound}, {self.heuristic}) "
                f"for {len(self.offsets)} tensors{extra}")


def _copy_of(k):
    """(source buffer, view shape) when kernel k is a plain copy of a whole tensor view."""
    if k.combine is not None or not isinstance(k.epilogue, Acc) or not isinstance(k.body, Load):
        return None
    ld = k.body
    if ld.pad is not None or ld.index != tuple(Var(a.name) for a in k.axes):
        return None
    if tuple(k.buffers[ld.buf].shape) != tuple(a.extent for a in k.axes):
        return None
    return ld.buf


def inplace_concat(program, target=None, options=None):
    """Place contiguous Concat inputs inside the Concat output; their copy kernels vanish.

    Records `program.slices = {tensor: (container, byte offset)}`."""
    g = program.graph
    slices = dict(program.slices)
    external = {program.root(t) for t in program.inputs + program.outputs}
    keep = []
    for k in program.kernels:
        src = _copy_of(k) if k.op == "Concat" and k.loop is None else None
        if src is None:
            keep.append(k)
            continue
        x = program.root(k.buffers[src].tensor)
        c = program.root(k.buffers[k.out].tensor)
        oshape = tuple(k.buffers[k.out].shape)
        xshape = tuple(a.extent for a in k.axes)
        tx, tc = g.tensors[x], g.tensors[c]
        ok = (x != c and x not in external and c not in external and tx.data is None and tc.data is None
              and x not in slices and len(oshape) == len(xshape) and tx.nbytes == math.prod(xshape) * tx_itemsize(tx)
              and tx.dtype == tc.dtype and not _inside(slices, c, x))
        if ok:
            diff = [d for d in range(len(oshape)) if oshape[d] != xshape[d]]
            d0 = diff[0] if diff else 0
            ok = all(oshape[d] == 1 for d in range(d0)) and all(oshape[d] == xshape[d] for d in diff[1:] if d != d0) \
                and len(diff) <= 1
        if not ok:
            keep.append(k)
            continue
        pitch = [math.prod(oshape[d + 1:]) for d in range(len(oshape))]
        delta = sum(o * p for o, p in zip(k.out_offset, pitch)) * tx_itemsize(tx)
        slices[x] = (c, delta)
        program.notes.append(f"{k.name}: {x} lives inside {c} at byte {delta}; copy dropped")
    program.kernels = keep
    program.slices = slices
    return program


def tx_itemsize(t):
    import numpy as np
    return np.dtype(t.dtype).itemsize


def _inside(slices, a, b):
    """Is a (transitively) inside b?"""
    while a in slices:
        a = slices[a][0]
        if a == b:
            return True
    return False


def _base(slices, t):
    off = 0
    while t in slices:
        t, d = slices[t]
        off += d
    return t, off


def _first_fit(order, sizes, life):
    placed, offsets = [], {}
    for t in order:
        lo, hi = life[t]
        busy = sorted((offsets[u], offsets[u] + sizes[u]) for u in placed
                      if not (life[u][1] < lo or hi < life[u][0]))
        off = 0
        for a, b in busy:
            if off + sizes[t] <= a:
                break
            off = max(off, b)
        offsets[t] = off
        placed.append(t)
    arena = max((offsets[t] + sizes[t] for t in offsets), default=0)
    return arena, offsets


def plan_memory(program, target=None, options=None, itemsize=None):
    """The static arena: every intermediate tensor's byte offset, by liveness (first fit).
    `itemsize`: bytes per element of tensors a backend stores narrower than their dtype (DianNao's
    int8 activations, backends/diannao/schedule/narrow.py)."""
    g = program.graph
    itemsize = itemsize or {}

    def nbytes(t):
        return g.tensors[t].size * itemsize[t] if t in itemsize else g.tensors[t].nbytes
    slices = program.slices
    external = {program.root(t) for t in program.inputs + program.outputs}
    life, members = {}, {}
    # Kernels that share a launch (option grouping) reuse bytes too: a barrier separates them,
    # which both families' emulators take as ordering the writes before it from those after.
    for i, k in enumerate(program.kernels):
        for b in k.buffers.values():
            r = program.root(b.tensor)
            if r in program.loop_slices:        # a static loop's slice: a part of its container
                r = program.root(program.loop_slices[r].container)
            if r in external or g.tensors[r].data is not None:
                continue
            base, off = _base(slices, r)
            members[r] = (base, off)
            lo, hi = life.get(base, (i, i))
            life[base] = (min(lo, i), max(hi, i))
    for lid, loop in program.loops.items():     # carried values live through every iteration
        idx = [i for i, k in enumerate(program.kernels) if k.loop == lid]
        for t in loop.carried:
            base = _base(slices, program.root(t))[0]
            if idx and base in life:
                life[base] = (min(life[base][0], idx[0]), max(life[base][1], idx[-1]))
    sizes = {t: round_up(nbytes(t), ALIGN) for t in life}
    heuristics = {
        "largest first": lambda t: (-sizes[t], life[t][0], t),
        "earliest first": lambda t: (life[t][0], -sizes[t], t),
        "longest-lived first": lambda t: (-(life[t][1] - life[t][0]), -sizes[t], t),
        "largest size x lifetime first": lambda t: (-sizes[t] * (life[t][1] - life[t][0] + 1), t),
    }
    best = None
    for name, key in heuristics.items():
        arena, offsets = _first_fit(sorted(life, key=key), sizes, life)
        if best is None or arena < best[0]:
            best = (arena, offsets, name)
    arena, offsets, name = best
    bound = 0
    n = len(program.kernels)
    if life:
        delta = [0] * (n + 1)
        for t, (lo, hi) in life.items():
            delta[lo] += sizes[t]
            delta[hi + 1] -= sizes[t]
        run = 0
        for i in range(n):
            run += delta[i]
            bound = max(bound, run)
    all_offsets = dict(offsets)
    lifetimes = dict(life)
    groups = {}
    for r, (base, off) in members.items():
        if r != base:
            all_offsets[r] = offsets[base] + off
            lifetimes[r] = life[base]
            groups[r] = (base, off)
    all_sizes = dict(sizes)
    for r in groups:
        all_sizes[r] = round_up(nbytes(r), ALIGN)
    program.memory = MemoryPlan(all_offsets, all_sizes, lifetimes, arena, bound, groups, name)
    return program
