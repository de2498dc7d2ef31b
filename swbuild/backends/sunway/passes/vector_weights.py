"""Constants re-laid out for SIMD along the output channels (schedule/simd.py's alt_axis).

A 7x7 layer's innermost output axis is shorter than SW26010-Pro's 8 lanes, so its vector
plan runs along the output channels instead; in NCHW weights ([CO][CI][KH][KW]) the channel
is the outermost dim and the micro-kernel gathers every weight vector lane by lane. Here a
constant the body reads along that axis gets a transposed copy with the axis innermost
([CI][KH][KW][CO]): its vectors become one unaligned load. The DMA does not get shorter
runs, since constant boxes are re-laid out in contiguous blocks anyway (dma.py
apply_blocking).

A kernel takes the copy only where the predictor models it faster, the kernel run alone
through the scheduling passes both ways (as channel_blocks does for blocked activations).
Those trials search tiles, so they run like the tile searches (schedule/parallel.py): the
decisions are memoised by the kernel's search signature, and the kernels that would miss the
memo are first handed to the worker processes, which send back their decisions and the tiles
they searched; the pass then decides in order from the memo, the same bytes with one worker
or many.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ....ir.graph import Tensor
from ....ir.loopnest import Load, Var, iter_loads, transform
from ..schedule import parallel, simd
from ....config.recipe import option_on
from ..schedule.ldm import Search, ldm_budget, pending_seconds, signature
from ..schedule.passes import drop_untaken, drop_unused_constants
from .trial_seconds import KernelSeconds


def _constant(program, k, buf):
    """The graph tensor behind buffer `buf` when the buffer views a whole constant (its own
    shape, or a reshape of all of it, as a split reduction's W[co, s, ci', ...]), else None."""
    b = k.buffers.get(buf)      # none for a stage's buffer (stitching computes it in LDM)
    t = program.graph.tensors.get(b.tensor) if b is not None else None
    if t is None or t.data is None or b.tensor != program.root(b.tensor) or math.prod(b.shape) != t.size:
        return None
    return t


def _candidate(program, k, lanes):
    """(buffer, dim) of the one constant factor of k's body indexed by simd.alt_axis at a dim
    other than its last, read by one plain-index load; None when there is none."""
    if k.kind != "compute" or k.loop is not None or k.stages or not simd.eligible(k, lanes):
        return None
    alt = simd.alt_axis(k)
    if alt is None or next(a.extent for a in k.axes if a.name == alt) < lanes:
        return None
    loads = {}
    for e in (k.body, k.epilogue):
        for ld in iter_loads(e):
            loads.setdefault(ld.buf, set()).add(ld)
    for f in simd.factors(k.body):
        if not isinstance(f, Load) or f.pad is not None or len(loads[f.buf]) != 1 or len(f.index) < 2:
            continue
        if _constant(program, k, f.buf) is None or not all(isinstance(i, Var) for i in f.index):
            continue
        dims = [d for d, i in enumerate(f.index) if i.name == alt]
        if len(dims) == 1 and dims[0] != len(f.index) - 1:
            return f.buf, dims[0]
    return None


def _transposed(program, k, buf, dim):
    """k reading a copy of constant `buf` with dim `dim` moved innermost."""
    b = k.buffers[buf]
    t = _constant(program, k, buf)
    perm = [d for d in range(len(b.shape)) if d != dim] + [dim]
    name = f"%swvw:{k.name}:{buf}"
    if name not in program.graph.tensors:
        data = np.broadcast_to(np.asarray(t.data), t.shape).reshape(b.shape)
        arr = np.ascontiguousarray(data.transpose(perm))
        program.graph.tensors[name] = Tensor(name, tuple(arr.shape), t.dtype, arr)
    bufs = dict(k.buffers)
    bufs[buf] = replace(b, tensor=name, shape=tuple(b.shape[d] for d in perm))

    def fix(e):
        if isinstance(e, Load) and e.buf == buf:
            return Load(buf, tuple(e.index[d] for d in perm), e.pad)
        return None
    return replace(k, body=transform(k.body, fix), epilogue=transform(k.epilogue, fix), buffers=bufs)


_DECISIONS = {}     # ("vector_weights",) + the kernel's search signature -> True: transposed
parallel.MEMOS.append(lambda: _DECISIONS)      # workers send decisions back with the tiles


class _Trial:
    """One candidate kernel: k, its transposed twin kt, and their searches (memo keys, work)."""

    def __init__(self, program, target, options, k, c):
        self.k, self.kt, self.buf = k, _transposed(program, k, *c), c[0]
        hw, budget = target.hardware, ldm_budget(target, options)
        self.s, self.st = (Search(x, hw, budget, options, program.graph, target.sha256) for x in (self.k, self.kt))
        self.key = ("vector_weights",) + signature(self.s)

    def work(self):
        """Estimated seconds of the trial: the searches whose tiles are not known yet."""
        return pending_seconds((self.s, self.st))


def _decide(t, variants):
    """Whether t's kernel takes the transposed weights: memoised, else both modelled (module doc)."""
    if t.key not in _DECISIONS:
        _DECISIONS[t.key] = variants._seconds(t.kt) < variants._seconds(t.k)
    return _DECISIONS[t.key]


def vector_weights(program, target, options):
    """Option `simd`: weights read along the output channels transposed where the kernel then models faster.

    Constants read along simd.alt_axis, each kernel alone through the scheduling passes both
    ways (module doc)."""
    lanes = int(target.hardware.get("simd_lanes", 1))
    if not option_on(options, "simd") or lanes <= 1 or program.graph is None:
        return program
    before = set(program.graph.tensors)
    consts = set()
    variants = KernelSeconds(program, target, options)
    trials = {}
    for i, k in enumerate(program.kernels):
        c = _candidate(program, k, lanes)
        if c is not None:
            trials[i] = _Trial(program, target, options, k, c)
    parallel.prefetch_trials(lambda t: _decide(t, variants), trials.values(), _DECISIONS, _Trial.work)
    for i, t in trials.items():
        if _decide(t, variants):
            consts.add(t.k.buffers[t.buf].tensor)
            program.kernels[i] = t.kt
    drop_untaken(program, before)     # copies not taken
    drop_unused_constants(program, consts)
    return program
