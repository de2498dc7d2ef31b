"""Sibling convolutions that read one activation run as one kernel (Sunway).

An Inception module starts with 1x1 convolutions of one input (the 3x3 and 5x5 branches'
reductions, and the 1x1 branch). Each is a kernel that reads the whole input again, and
their output channels are few (16 to 128), so each one's tiles also re-read it (light
Inception-v1's reductions move 1.7-4.2x their own compulsory bytes). Run as one kernel with
their weights stacked along the output channels, the input is read once for all of them
and the output-channel axis is long enough to tile and share.

Siblings read the same activation the same way (window, strides, pads: the body is the same
but for the weights), at batch 1, and have the same epilogue but for the values of its
per-channel constants (bias, batch norm), which are stacked as the weights are. The merged
kernel writes one new tensor [1, sum of channels, H, W]; each sibling's output lives inside it
at its channels' offset (`program.slices`, as a Concat's parts live in the Concat: at batch 1
a channel range is contiguous), so their readers do not change and no copy is made. An
output that is a graph input or output or a view keeps its kernel alone.

The 1x1 branch is written in place as the first part of its module's Concat. It may join as
the last sibling: a new tensor holds the merged output at byte 0 and the Concat right after
the other siblings' channels, so the 1x1 branch's channels are both the merged output's last
and the Concat's first (grouping/kgraph.py counts a whole tensor's writer as the writer of
every tensor its bytes meet).

Only where the cost model says the merged kernel (its tile search) is faster than the
siblings' kernels together; trials run like the tile searches (schedule/parallel.py),
decisions memoised by the kernels' search signatures. Runs after `inplace_concat` (which
decides what lives in a Concat) and before the memory plan.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ....config.recipe import option_on
from ....ir.graph import Tensor
from ....ir.loopnest import Bin, Load, Var, affine, iconst, iter_loads, transform
from ..kinds.mesh_gemm import flat_offsets
from ..schedule import parallel
from ..schedule.ldm import Search, ldm_budget, pending_seconds, search_tiles, signature
from ..schedule.passes import drop_untaken

GAIN = 1.0      # the merged kernel must model faster than its siblings together

_DECISIONS = {}     # ("siblings",) + the search signatures -> True: the merged kernel pays
parallel.MEMOS.append(lambda: _DECISIONS)      # workers send decisions back with the tiles


@dataclass(frozen=True)
class Conv:
    """The roles of a convolution's buffers: activation x, weights w [CO, ...] indexed by the
    output-channel axis alone in their first dimension, per-channel constants of the epilogue."""
    x: str
    w: str
    vecs: tuple
    CO: int


def _conv(k, graph):
    """Conv of a kernel the merge can take (a sum of x * w, w constant and indexed by the
    output channel in its first dimension only, x not at all; epilogue constants per channel),
    else None."""
    if k.kind != "compute" or k.combine != "sum" or k.init != 0.0 or k.stages or k.loop is not None \
            or any(k.out_offset) or len(k.axes) != 4 or k.axes[0].extent != 1:
        return None
    co = k.axes[1].name
    body = k.body
    if not (isinstance(body, Bin) and body.op == "*" and isinstance(body.a, Load) and isinstance(body.b, Load)):
        return None
    const = lambda b: graph.tensors.get(k.buffers[b].tensor) is not None \
        and graph.tensors[k.buffers[b].tensor].data is not None    # noqa: E731
    w = next((ld for ld in (body.a, body.b) if const(ld.buf)), None)
    x = body.b if w is body.a else body.a
    if w is None or const(x.buf) or x.buf == w.buf or w.pad is not None:
        return None
    uses = lambda e: co in _vars(e)      # noqa: E731
    if str(w.index[0]) != co or any(uses(e) for e in w.index[1:]) or any(uses(e) for e in x.index) \
            or k.buffers[w.buf].shape[0] != k.axes[1].extent:
        return None
    vecs = []
    for ld in iter_loads(k.epilogue):
        if ld.pad is not None or not const(ld.buf) or flat_offsets(ld, k.buffers[ld.buf].shape) != {co: 1} \
                or k.buffers[ld.buf].dtype != k.buffers[k.out].dtype:
            return None
        vecs.append(ld.buf)
    return Conv(x.buf, w.buf, tuple(dict.fromkeys(vecs)), k.axes[1].extent)


def _vars(e):
    out = set()

    def fn(x):
        if isinstance(x, Var):
            out.add(x.name)
        return None
    transform(e, fn)
    return out


def _without_unit_axes(k):
    """k with its epilogue's indices rid of the axes of extent 1 (always 0): batch norm's
    constants read at `n * C + co` at batch 1, C differing between siblings, read at `co`."""
    unit = {a.name for a in k.axes if a.extent == 1}

    def index(e):
        a = affine(e)
        if a is None or not unit & set(a):
            return e
        out = iconst(a.get(None, 0))
        for v, c in sorted((v, c) for v, c in a.items() if v is not None and v not in unit and c):
            out = Var(v) if out == iconst(0) and c == 1 else out + (Var(v) if c == 1 else Var(v) * iconst(c))
        return out

    def fn(e):
        return replace(e, index=tuple(index(i) for i in e.index)) if isinstance(e, Load) else None
    epilogue = transform(k.epilogue, fn)
    return k if str(epilogue) == str(k.epilogue) else replace(k, epilogue=epilogue)


def _candidate(program, k):
    """(Conv, head) of a kernel that may merge, else None: its output is a whole tensor of its
    own (head None), or the first part of a Concat written in place (head: the Concat's
    output, which lives in no other tensor)."""
    g = _conv(k, program.graph)
    if g is None:
        return None
    out = k.buffers[k.out].tensor
    root = program.root(out)
    contained = {program.root(c) for c, _ in program.slices.values()}
    external = set(program.inputs) | set(program.outputs)
    if (root != out or root in external or root in contained or any(program.root(a) == root for a in program.aliases)
            or tuple(k.buffers[k.out].shape) != tuple(a.extent for a in k.axes)):
        return None
    if root not in program.slices:
        return g, None
    cat, off = program.slices[root]
    cat = program.root(cat)
    t = program.graph.tensors[cat]
    if off or cat in program.slices or cat in external or any(program.root(a) == cat for a in program.aliases) \
            or len(t.shape) != 4 or tuple(t.shape[2:]) != tuple(a.extent for a in k.axes[2:]):
        return None
    return g, cat


def _rename(k, g, to_k, to_g, vecs=True):
    """k's body and epilogue with its buffer names as to_k's (by role), for comparison."""
    names = {g.x: to_g.x, g.w: to_g.w, k.out: to_k.out, **(dict(zip(g.vecs, to_g.vecs)) if vecs else {})}

    def fn(e):
        return replace(e, buf=names.get(e.buf, e.buf), index=tuple(transform(i, fn) for i in e.index)) \
            if isinstance(e, Load) else None
    return str(transform(k.body, fn)), str(transform(k.epilogue, fn))


def _same_input(program, k1, g1, k2, g2):
    """Whether k2 reads what k1 reads the way k1 does, but for its weights' values and its
    channel count (its epilogue may differ)."""
    if program.root(k1.buffers[g1.x].tensor) != program.root(k2.buffers[g2.x].tensor) \
            or tuple(k1.buffers[g1.x].shape) != tuple(k2.buffers[g2.x].shape) or k1.combine != k2.combine \
            or [a.name for a in k1.axes] != [a.name for a in k2.axes] \
            or [(a.name, a.extent) for a in k1.reduce_axes] != [(a.name, a.extent) for a in k2.reduce_axes] \
            or [a.extent for a in k1.axes[2:]] != [a.extent for a in k2.axes[2:]] \
            or tuple(k1.buffers[g1.w].shape[1:]) != tuple(k2.buffers[g2.w].shape[1:]) \
            or k1.buffers[k1.out].dtype != k2.buffers[k2.out].dtype:
        return False
    return _rename(k2, g2, k1, g1, vecs=False)[0] == str(k1.body)


def _same_epilogue(k1, g1, k2, g2):
    """Whether k2's epilogue is k1's but for its per-channel constants' values and lengths."""
    if len(g1.vecs) != len(g2.vecs) or _rename(k2, g2, k1, g1)[1] != str(k1.epilogue):
        return False
    for a, b in zip(g1.vecs, g2.vecs):
        d = _co_dim(k1, a)
        sa, sb = list(k1.buffers[a].shape), list(k2.buffers[b].shape)
        if len(sa) != len(sb) or sa[:d] + sa[d + 1:] != sb[:d] + sb[d + 1:]:
            return False
    return True


def _co_dim(k, buf):
    """The dimension of `buf` that k's output-channel axis indexes."""
    co = k.axes[1].name
    ld = next(ld for ld in iter_loads(k.epilogue) if ld.buf == buf)
    return next(d for d, e in enumerate(ld.index) if co in _vars(e))


def _data(program, k, buf):
    b = k.buffers[buf]
    return np.asarray(program.graph.tensors[b.tensor].data).reshape(b.shape)


def _stack(program, parts, dim, name):
    """A new constant: `parts` (arrays) stacked along `dim`."""
    arr = np.ascontiguousarray(np.concatenate(parts, axis=dim)).astype(parts[0].dtype, copy=False)
    program.graph.tensors[name] = Tensor(name, tuple(arr.shape), arr.dtype.name, arr)
    return name, tuple(arr.shape)


def _merged(program, ks, gs, head=None):
    """(The merged kernel, where tensors now live {tensor: (container, byte offset)}, new
    tensors no kernel names): the weights and the epilogue's per-channel constants stacked
    along the output channels, the siblings' outputs inside the merged one. With `head`, the
    last sibling's output heads that Concat (module doc)."""
    k1, g1 = ks[0], gs[0]
    co = sum(g.CO for g in gs)
    bufs = dict(k1.buffers)
    wname, wshape = _stack(program, [_data(program, k, g.w) for k, g in zip(ks, gs)], 0, f"%swsib:{k1.name}:{g1.w}")
    bufs[g1.w] = replace(bufs[g1.w], tensor=wname, shape=wshape)
    for i, v in enumerate(g1.vecs):
        name, shape = _stack(program, [_data(program, k, g.vecs[i]) for k, g in zip(ks, gs)], _co_dim(k1, v),
                             f"%swsib:{k1.name}:{v}")
        bufs[v] = replace(bufs[v], tensor=name, shape=shape)
    ob = bufs[k1.out]
    oshape = (1, co, *ob.shape[2:])
    out = f"%swsib:{k1.name}"
    program.graph.tensors[out] = Tensor(out, oshape, program.graph.tensors[ob.tensor].dtype)
    bufs[k1.out] = replace(ob, tensor=out, shape=oshape)
    axes = (k1.axes[0], replace(k1.axes[1], extent=co), *k1.axes[2:])
    fused = tuple(x for k in ks[1:] for x in (k.node, *k.fused))
    merged = replace(k1, axes=axes, buffers=bufs, fused=(*k1.fused, *fused), schedule=None)
    plane = math.prod(oshape[2:]) * np.dtype(program.graph.tensors[out].dtype).itemsize
    placed, c = {}, 0
    for k, g in zip(ks, gs):
        placed[k.buffers[k.out].tensor] = (out, c * plane)
        c += g.CO
    if head is None:
        return merged, placed, set()
    # the last sibling heads Concat `head`: the merged output and the Concat overlap in one new
    # tensor, the free siblings' channels first, so the last one's bytes are the Concat's first
    cat = program.graph.tensors[head]
    outer = f"%swsib:{k1.name}:outer"
    lead = (co - gs[-1].CO) * plane
    program.graph.tensors[outer] = Tensor(outer, (1, co - gs[-1].CO + cat.shape[1], *cat.shape[2:]), cat.dtype)
    placed.update({out: (outer, 0), head: (outer, lead)})
    return merged, placed, {outer}


class _Trial:
    def __init__(self, program, target, options, idx, merged):
        hw, budget = target.hardware, ldm_budget(target, options)
        self.idx, self.merged = idx, merged
        self.ss = [Search(program.kernels[i], hw, budget, options, program.graph, target.sha256) for i in idx]
        self.s = Search(merged[0], hw, budget, options, program.graph, target.sha256)
        self.key = ("siblings", signature(self.s)) + tuple(signature(s) for s in self.ss)

    def work(self):
        """Estimated seconds of the trial: the searches whose tiles are not known yet."""
        return pending_seconds([self.s] + self.ss)


def _decide(t):
    if t.key not in _DECISIONS:
        apart = sum(s.evaluate(search_tiles(s))[0] for s in t.ss)
        _DECISIONS[t.key] = t.s.evaluate(search_tiles(t.s))[0] < GAIN * apart
    return _DECISIONS[t.key]


def _groups(program):
    """Sibling sets (two or more): [(kernel index, Conv, head)], the kernels whose output is
    a whole tensor in program order, then at most one that heads a Concat."""
    by_input = {}
    for i, k in enumerate(program.kernels):
        k = _without_unit_axes(k)
        c = _candidate(program, k)
        if c is not None:
            by_input.setdefault(program.root(k.buffers[c[0].x].tensor), []).append((i, *c))
    out = []
    for _, members in sorted(by_input.items(), key=lambda kv: kv[1][0][0]):
        while members:
            i0, g0, _ = members[0]
            k0 = _without_unit_axes(program.kernels[i0])
            same = [m for m in members if _same_input(program, k0, g0, program.kernels[m[0]], m[1])
                    and _same_epilogue(k0, g0, _without_unit_axes(program.kernels[m[0]]), m[1])]
            members = [m for m in members if m not in same]
            free = [m for m in same if m[2] is None]
            heads = [m for m in same if m[2] is not None]
            members += heads[1:]
            if free and len(free) + len(heads[:1]) > 1:
                out.append(free + heads[:1])
    return out


def merge_siblings(program, target, options):
    """Option `siblings`: convolutions of one input as one kernel where it models faster (module doc)."""
    if not option_on(options, "siblings") or program.graph is None:
        return program
    before = set(program.graph.tensors)
    trials = []
    for same in _groups(program):
        idx = [m[0] for m in same]
        trials.append(_Trial(program, target, options, idx, _merged(
            program, [_without_unit_axes(program.kernels[i]) for i in idx], [m[1] for m in same], same[-1][2])))
    parallel.prefetch_trials(_decide, trials, _DECISIONS, _Trial.work)
    drop, at, keep = set(), {}, set()
    for t in trials:
        if not _decide(t):
            continue
        merged, placed, outer = t.merged
        first = min(t.idx)          # every sibling's inputs exist there: one activation, constants
        at[first] = merged
        drop.update(set(t.idx) - {first})
        program.slices = {**program.slices, **placed}
        keep.update(outer)
        program.notes.append(f"{merged.name}: siblings {', '.join(program.kernels[i].name for i in t.idx)} "
                             f"as one kernel writing {merged.buffers[merged.out].tensor}")
    program.kernels = [at.get(i, k) for i, k in enumerate(program.kernels) if i not in drop]
    drop_untaken(program, before | keep)     # the stacked constants and outputs of merges not taken
    return program


__all__ = ["merge_siblings"]
