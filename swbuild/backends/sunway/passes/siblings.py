"""Sibling 1x1 convolutions that read one activation run as one kernel (Sunway).

An Inception module starts with 1x1 convolutions of one input (the 3x3 and 5x5 branches'
reductions, and the 1x1 branch). Each is a kernel that reads the whole input again, and
their output channels are few (16 to 128), so each one's tiles also re-read it (light
Inception-v1's reductions move 1.7-4.2x their own compulsory bytes). Run as one kernel with
their weights stacked along the output channels, the input is read once for all of them
and the output-channel axis is long enough to tile and share.

The merged kernel writes one new tensor [1, sum of channels, H, W]; each sibling's output
lives inside it at its channels' offset (`program.slices`, as a Concat's parts live in the
Concat: at batch 1 a channel range is contiguous), so their readers do not change and no
copy is made. Siblings merge when they have the same input, extents and epilogue (bias and
activation, the per-channel constants stacked as the weights are), and no output is a graph
input or output, a view, or already lives inside another tensor (the 1x1 branch written in
place into its module's Concat stays alone).

Only where the cost model says the merged kernel (its tile search) is faster than the
siblings' kernels together; trials run like the tile searches (schedule/parallel.py),
decisions memoised by the kernels' search signatures. Runs after `inplace_concat` (which
decides what lives in a Concat) and before the memory plan.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ....config.recipe import option_on
from ....ir.graph import Tensor
from ....ir.loopnest import Load, iter_loads, transform
from ..kinds.mesh_gemm import gemm_shape
from ..schedule import parallel
from ..schedule.ldm import Search, ldm_budget, pending_seconds, search_tiles, signature
from ..schedule.passes import drop_untaken

GAIN = 1.0      # the merged kernel must model faster than its siblings together

_DECISIONS = {}     # ("siblings",) + the search signatures -> True: the merged kernel pays
parallel.MEMOS.append(lambda: _DECISIONS)      # workers send decisions back with the tiles


def _candidate(program, k):
    """(GemmShape, output root) of a kernel that may merge, else None."""
    if k.kind != "compute" or k.loop is not None or k.stages:
        return None
    g, _ = gemm_shape(k, program.graph)
    if g is None or g.N != 1 or g.res:
        return None
    out = k.buffers[k.out].tensor
    root = program.root(out)
    contained = {program.root(c) for c, _ in program.slices.values()}
    if (root != out or root in program.inputs or root in program.outputs or root in program.slices
            or root in contained or any(program.root(a) == root for a in program.aliases)):
        return None
    consts = [program.graph.tensors.get(k.buffers[b].tensor) for b in (g.w, *g.vecs)]
    if any(t is None or t.data is None for t in consts):
        return None
    return g, root


def _rename(k, g, to_k, to_g):
    """k's body and epilogue with its buffer names as to_k's (by role), for comparison."""
    names = {g.x: to_g.x, g.w: to_g.w, k.out: to_k.out, **dict(zip(g.vecs, to_g.vecs))}

    def fn(e):
        return replace(e, buf=names.get(e.buf, e.buf), index=tuple(transform(i, fn) for i in e.index)) \
            if isinstance(e, Load) else None
    return str(transform(k.body, fn)), str(transform(k.epilogue, fn))


def _same_form(k1, g1, k2, g2):
    """Whether k2 computes what k1 does but for its channel count and constants."""
    if (g1.CI, g1.P, len(g1.vecs)) != (g2.CI, g2.P, len(g2.vecs)) or k1.combine != k2.combine \
            or [a.name for a in k1.axes] != [a.name for a in k2.axes] \
            or [(a.name, a.extent) for a in k1.reduce_axes] != [(a.name, a.extent) for a in k2.reduce_axes] \
            or [a.extent for a in k1.axes[2:]] != [a.extent for a in k2.axes[2:]]:
        return False
    return _rename(k2, g2, k1, g1) == (str(k1.body), str(k1.epilogue))


def _co_dim(k, buf):
    """The dimension of `buf` that k's output-channel axis indexes."""
    co = k.axes[1].name
    ld = next(ld for ld in iter_loads(k.epilogue) if ld.buf == buf)
    return next(d for d, e in enumerate(ld.index) if co in str(e))


def _stack(program, ks, gs, buf_of, dim, name):
    """A new constant: the siblings' constants (buffer buf_of(g) of each) stacked along `dim`."""
    parts = []
    for k, g in zip(ks, gs):
        b = k.buffers[buf_of(g)]
        t = program.graph.tensors[b.tensor]
        parts.append(np.asarray(t.data).reshape(b.shape))
    arr = np.ascontiguousarray(np.concatenate(parts, axis=dim)).astype(parts[0].dtype, copy=False)
    program.graph.tensors[name] = Tensor(name, tuple(arr.shape), arr.dtype.name, arr)
    return name, tuple(arr.shape)


def _merged(program, ks, gs):
    """The merged kernel and {sibling output: byte offset in the merged output}."""
    k1, g1 = ks[0], gs[0]
    co = sum(g.CO for g in gs)
    bufs = dict(k1.buffers)
    wname, wshape = _stack(program, ks, gs, lambda g: g.w, 0, f"%swsib:{k1.name}:{g1.w}")
    bufs[g1.w] = replace(bufs[g1.w], tensor=wname, shape=wshape)
    for i, v in enumerate(g1.vecs):
        vname, vshape = _stack(program, ks, gs, lambda g, i=i: g.vecs[i], _co_dim(k1, v), f"%swsib:{k1.name}:{v}")
        bufs[v] = replace(bufs[v], tensor=vname, shape=vshape)
    ob = bufs[k1.out]
    oshape = (1, co, *ob.shape[2:])
    out = f"%swsib:{k1.name}"
    program.graph.tensors[out] = Tensor(out, oshape, program.graph.tensors[ob.tensor].dtype)
    bufs[k1.out] = replace(ob, tensor=out, shape=oshape)
    axes = (k1.axes[0], replace(k1.axes[1], extent=co), *k1.axes[2:])
    fused = tuple(x for k in ks[1:] for x in (k.node, *k.fused))
    merged = replace(k1, axes=axes, buffers=bufs, fused=(*k1.fused, *fused), schedule=None)
    plane = g1.P * np.dtype(program.graph.tensors[out].dtype).itemsize
    offsets, c = {}, 0
    for k, g in zip(ks, gs):
        offsets[k.buffers[k.out].tensor] = c * plane
        c += g.CO
    return merged, out, offsets


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
    """Kernel indices of sibling sets (two or more, program order), each with its GemmShapes."""
    by_input = {}
    for i, k in enumerate(program.kernels):
        c = _candidate(program, k)
        if c is not None:
            by_input.setdefault(program.root(k.buffers[c[0].x].tensor), []).append((i, c[0]))
    out = []
    for _, members in sorted(by_input.items(), key=lambda kv: kv[1][0][0]):
        while members:
            i0, g0 = members[0]
            same = [(i, g) for i, g in members if _same_form(program.kernels[i0], g0, program.kernels[i], g)]
            members = [m for m in members if m not in same]
            if len(same) > 1:
                out.append(same)
    return out


def merge_siblings(program, target, options):
    """Option `siblings`: 1x1 convolutions of one input as one kernel where it models faster (module doc)."""
    if not option_on(options, "siblings") or program.graph is None:
        return program
    before = set(program.graph.tensors)
    trials = []
    for same in _groups(program):
        idx = [i for i, _ in same]
        trials.append(_Trial(program, target, options, idx, _merged(program, [program.kernels[i] for i in idx],
                                                                      [g for _, g in same])))
    parallel.prefetch_trials(_decide, trials, _DECISIONS, _Trial.work)
    drop, at = set(), {}
    for t in trials:
        if not _decide(t):
            continue
        merged, out, offsets = t.merged
        at[t.idx[0]] = merged
        drop.update(t.idx[1:])
        program.slices = {**program.slices, **{x: (out, off) for x, off in offsets.items()}}
        program.notes.append(f"{merged.name}: siblings {', '.join(program.kernels[i].name for i in t.idx)} "
                             f"as one kernel writing {out}")
    program.kernels = [at.get(i, k) for i, k in enumerate(program.kernels) if i not in drop]
    drop_untaken(program, before)     # the stacked constants and outputs of merges not taken
    return program


__all__ = ["merge_siblings"]
