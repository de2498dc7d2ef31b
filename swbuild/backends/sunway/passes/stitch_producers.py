"""Buffer stitching by recomputation (option `stitch`, with `grouping`): a cheap producer
(pooling or an element-wise kernel) whose output only one kernel of its group reads is no
longer a kernel. Its consumer fetches the box of the producer's *input* that a box of the
intermediate needs (the halo included) and computes the intermediate in LDM when that box
lands (slave.py: the stage). The intermediate never reaches main memory: the producer's
read and write, its launch slot and its first-fetch and last-put exposure all go.

The consumer's box machinery stays as it was: the fetched box is an ordinary box of the
producer's input (schedule/dma.py composes the consumer's index into the producer's), so
the predictor's DMA counts stay exact; the computed box is the intermediate's, read by the
consumer's compute as before. What the stage costs (the recomputed window per fetch) is in
the tile search and the predictor (simd.stage_cycles).

When (each rule keeps the recomputation cheap and the composition exact):
- both kernels are compute kernels of one GraphTurbo group, outside static loops, and the
  producer is not stitched into anything itself;
- the intermediate is a plain tensor (no graph input or output, no alias, no Concat part
  or container) that the producer writes whole and only the consumer reads, through one
  buffer with the producer's shape and loads that never fall outside it;
- the producer reads one activation buffer, with affine indices where every output axis
  moves one input dimension with stride 1 (no down-sampling: a box's halo is at most the
  window) and each input dimension moves with at most one output axis and one window axis;
  its window has at most MAX_WINDOW points; anything else it reads is a constant indexed by
  its output axes alone (BatchNormalization's scale and shift), fetched in a box of its own.

Whether: the tile search's model of the stitched consumer against the producer's and the
consumer's (`_Seconds`). On the light models it rarely pays (docs/grouping.md): a consumer
that shares its boxes along a mesh row recomputes the stage on each of the row's CPEs, and
small images make the halo as large as a CPE's pixel block.
"""
from __future__ import annotations

import math
from dataclasses import replace

from ....support.errors import LdmError
from ....ir.loopnest import Stage, affine, index_range, iter_loads
from ....config.recipe import option_on
from ..schedule.ldm import Search, ldm_budget, search_tiles

MAX_WINDOW = 49


def stitch_producers(program, target, options):
    """Option `stitch` (on with `grouping`): recompute cheap producers in their consumers' LDM."""
    grouping = program.grouping
    if grouping is None or not option_on(options or {}, "stitch"):
        return program
    pairs, refused = [], set()
    seconds = _Seconds(program, target, options)
    while True:
        found = _next_pair(program, grouping, refused)
        if found is None:
            break
        prod, cons, bn, root, act = found
        stitched = _stitched(prod, cons, bn, act)
        # the cost model decides: a consumer that fetches the input box many times (one
        # per tile of its output channels) recomputes the window as often, and its halo
        # makes every fetch bigger; that can cost more than the producer's own pass
        if seconds(stitched) >= seconds(prod) + seconds(cons):
            refused.add((prod.name, cons.name))
            continue
        i = next(i for i, k in enumerate(program.kernels) if k is cons)
        program.kernels[i] = stitched
        program.kernels.remove(prod)
        pairs.append((prod.name, cons.name, root))
    if pairs:
        program.grouping = replace(grouping, stitched=grouping.stitched + tuple(pairs))
        program.notes.append(f"stitch: {len(pairs)} producers recomputed in their consumers' LDM "
                             f"({', '.join(f'{p} -> {c}' for p, c, _ in pairs)})")
    return program


class _Seconds:
    """A kernel's modelled seconds at the tiles the search picks for it (the search's own cost
    model); the searches of the producer and the consumer are the ones the build reuses
    (ldm.py memoises tiles by signature)."""

    def __init__(self, program, target, options):
        self.graph, self.hw, self.sha = program.graph, target.hardware, target.sha256
        self.budget, self.options = ldm_budget(target, options), options

    def __call__(self, k):
        s = Search(k, self.hw, self.budget, self.options, self.graph, self.sha)
        try:
            r = s.evaluate(search_tiles(s))
        except LdmError:          # the stitched consumer fits no tiling: not stitched
            return math.inf
        return math.inf if r is None else r[0]


def _next_pair(program, grouping, refused):
    writers, readers = {}, {}
    for k in program.kernels:
        writers.setdefault(program.root(k.buffers[k.out].tensor), []).append(k)
        for n, b in k.buffers.items():
            if n != k.out:
                readers.setdefault(program.root(b.tensor), []).append((k, n))
    external = {program.root(t) for t in list(program.inputs) + list(program.outputs)}
    aliased = set(program.aliases) | set(program.aliases.values())
    sliced = set(program.slices) | {program.root(c) for c, _ in program.slices.values()}
    for root, ws in writers.items():
        rs = readers.get(root, [])
        if len(ws) != 1 or len(rs) != 1 or root in external or root in aliased or root in sliced:
            continue
        prod, (cons, bn) = ws[0], rs[0]
        if cons is prod or (prod.name, cons.name) in refused or not _same_group(grouping, prod, cons):
            continue
        act = _stitchable(program, prod, cons, bn)
        if act is not None:
            return prod, cons, bn, root, act
    return None


def _same_group(grouping, prod, cons):
    g = grouping.group_of(prod.name)
    return g is not None and g is grouping.group_of(cons.name)


def _stitchable(program, prod, cons, bn):
    """The producer's activation buffer when the pair may be stitched (module doc), else None."""
    if prod.kind != "compute" or cons.kind != "compute" or prod.loop is not None or cons.loop is not None:
        return None
    if prod.stages or prod.combine not in (None, "sum", "max", "min"):
        return None
    shape = tuple(a.extent for a in prod.axes)
    out = prod.buffers[prod.out]
    tensor = program.graph.tensors[program.root(out.tensor)]
    if any(prod.out_offset) or tuple(out.shape) != shape or int(tensor.size) != prod.points:
        return None
    if tuple(cons.buffers[bn].shape) != shape:
        return None
    if any(b.dtype != "float32" for b in prod.buffers.values()) or cons.buffers[bn].dtype != "float32":
        return None               # the stage computes in float, into a float LDM buffer
    full = {a.name: (0, a.extent - 1) for a in list(cons.axes) + list(cons.reduce_axes)}
    for e in (cons.body, cons.epilogue):
        for ld in iter_loads(e):
            if ld.buf != bn:
                continue
            for d, x in enumerate(ld.index):
                if affine(x) is None:
                    return None
                lo, hi = index_range(x, full)
                if lo < 0 or hi > shape[d] - 1:
                    return None
    if prod.reduce_points > MAX_WINDOW:
        return None
    loads = _loads(prod)
    if any(ld.buf == prod.out for ld in loads):
        return None
    const = {ld.buf for ld in loads if program.graph.tensors[program.root(prod.buffers[ld.buf].tensor)].data is not None}
    acts = [ld for ld in loads if ld.buf not in const]
    if len({ld.buf for ld in acts}) != 1 or len({ld.pad for ld in acts}) != 1:
        return None
    names = {a.name for a in prod.axes}
    axes = {a.name for a in prod.axes if a.extent > 1}      # extent-1 axes are always 0
    window = {a.name for a in prod.reduce_axes}
    for ld in loads:
        moved = set()
        for x in ld.index:
            aff = affine(x)
            if aff is None:
                return None
            own = [v for v in aff if v in axes]
            red = [v for v in aff if v in window]
            if len(own) > 1 or len(red) > 1 or any(aff[v] != 1 for v in own):
                return None
            if any(v is not None and v not in names and v not in window for v in aff):
                return None
            if ld.buf in const and (red or ld.pad is not None):
                return None       # constants: per-output-element parameters (scale, shift)
            moved.update(own)
        if ld.buf not in const and moved != axes:
            return None           # an output axis that moves no input dimension: a broadcast
    return acts[0].buf


def _loads(prod):
    return list(iter_loads(prod.body)) + list(iter_loads(prod.epilogue))


def _stitched(prod, cons, bn, act):
    """The consumer reading `bn` through a stage of `prod`: a buffer of its own for each of
    the producer's inputs (the activation first)."""
    order = [act]
    for ld in _loads(prod):
        if ld.buf not in order:
            order.append(ld.buf)
    buffers = {n: b for n, b in cons.buffers.items() if n != bn}
    inputs = []
    for src_in in order:
        i = 0
        while f"s{i}" in buffers:
            i += 1
        buffers[f"s{i}"] = replace(prod.buffers[src_in], name=f"s{i}")
        inputs.append((src_in, f"s{i}"))
    stage = Stage(bn, tuple(a.extent for a in prod.axes), prod, tuple(inputs))
    return replace(cons, buffers=buffers, stages=cons.stages + (stage,),
                   fused=tuple(cons.fused) + (prod.node,) + tuple(prod.fused))
