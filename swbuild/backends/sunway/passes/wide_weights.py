"""Weight boxes that hold several reduce tiles: one longer DMA instead of several short ones.

A convolution's weight box is re-laid out in blocks of its tile (schedule/dma.py, `blocked`),
one DMA per reduce step. Where the tile search keeps the reduce tile short (the activation box
of ci x pixels fills the LDM), that block is small: light ResNet-50's 1x1 layers fetch blocks
of 64-512 bytes, at 2-6 GB/s of the core group's 20.6 (toolchains/sunway.toml `dma_curve`),
every reduce step. Here such a box's block grows along its reduce axis to f tiles (the
re-laid-out constant with it), so it is fetched once every f steps (double-buffered as before),
f times longer: the same bytes in fewer, faster transfers. The box's footprint is the block
holding the step's tile (`BoxPlan.wide`, in the predictor and the printer alike), and the
compute indexes it as any box, from its origin.

A kernel takes the f with the smallest modelled time (the exact replay, cost/predict.py)
among those whose LDM fits the kernel's budget; f = 1 (as it was) when none is faster.

The tile search does not know wide blocks, and its tiles may fill the LDM (light ResNet-50's
stage-2 expansions: 52 of 56 KB, no room for two tiles of weights). Such a kernel, where a
wider block did not fit, is searched again with a quarter and a half of its budget left free,
widened with the whole budget, and takes the fastest of these variants when it models faster
than it does widened as it was (`retile`).
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ....ir.graph import Tensor, is_splat
from ..cost import model
from ..cost.predict import _replay_key, simulate
from ..schedule.dma import blocked_array
from ..schedule.kernel_schedule import ldm_align
from ..schedule.ldm import Search, ldm_budget, search_tiles
from ..schedule.passes import Draft, SunwayState, schedule_drafted

# The tile search does not know wide blocks: where a wider block did not fit, the kernel is
# searched again with this fraction of the budget left free for it (1/8, 1/4).
RESERVES = (4, 2)


def candidates(k):
    """(box, dim, reduce axis) of k's re-laid-out constant body boxes with one dim on a tiled
    reduce axis (the box is fetched every step of it), not broadcast: it is the CPE's own."""
    s = k.schedule
    tiled = {a.name for a in k.reduce_axes if s.tiles[a.name] < a.extent}
    out = []
    for b in s.boxes:
        if b.context != "body" or b.blocked is None or b.shared or b.stage is not None or b.feeds or b.wide:
            continue
        dims = [d for d in range(len(b.shape)) if b.dim_vars(d) & tiled]
        if len(dims) == 1 and len(b.dim_vars(dims[0])) == 1:
            out.append((b, dims[0], next(iter(b.dim_vars(dims[0])))))
    return out


def unblocked(arr, shape, blocks):
    """The inverse of dma.blocked_array: [grid..., block...] back to `shape`."""
    nd = len(shape)
    grid = arr.shape[:nd]
    a = np.asarray(arr).transpose([x for i in range(nd) for x in (i, nd + i)])
    a = a.reshape([g * k for g, k in zip(grid, blocks)])
    return a[tuple(slice(0, n) for n in shape)]


def _relayout(graph, b, blocks):
    """Re-lay out b's constant in `blocks` (its tensor keeps its name: one reader, this box)."""
    t = graph.tensors[b.block_tensor]
    if is_splat(t.data):
        grid = [-(-n // x) for n, x in zip(b.shape, blocks)]
        arr = np.broadcast_to(np.asarray(t.data).reshape(-1)[0], tuple(grid) + tuple(blocks))
    else:
        arr, _ = blocked_array(unblocked(t.data, b.shape, b.blocked), b.shape, blocks)
        arr = arr.astype(t.dtype, copy=False)
    graph.tensors[b.block_tensor] = replace(t, shape=tuple(arr.shape), data=arr)


def seconds(k, hw, cores, memo):
    """k's modelled seconds as built (the exact replay), repeated layers once."""
    para = 8 * len(k.buffers)
    key = _replay_key(k, cores, para)
    if key not in memo:
        memo[key] = model.kernel_seconds(hw, simulate(k, cores, para, hw)["cpe_seconds"])
    return memo[key]


def widen(k, hw, cores, budget, memo, limited=None):
    """Widen k's candidate boxes, one after the other, where the modelled time falls.
    Returns [(box, blocks before)] of the boxes widened (their constants not yet re-laid out);
    a box whose wider blocks did not fit the budget is appended to `limited`."""
    s = k.schedule
    done = []
    for b, d, v in candidates(k):
        t = s.tiles[v]
        steps = math.ceil(b.axis_extents[v] / t)
        old, size = b.blocked, k.buf_bytes(b.buf)
        best = (seconds(k, hw, cores, memo), old, s.ldm_bytes)
        for f in (x for x in range(2, steps + 1) if steps % x == 0):   # whole blocks: no zero padding
            blocks = old[:d] + (f * t,) + old[d + 1:]
            grow = (ldm_align(math.prod(blocks) * size) - ldm_align(math.prod(old) * size)) * b.halves
            if s.ldm_bytes + grow > budget:
                if limited is not None:
                    limited.append(b)
                break
            b.blocked, b.wide = blocks, (d,)
            sec = seconds(k, hw, cores, memo)
            if sec < best[0]:
                best = (sec, blocks, s.ldm_bytes + grow)
        b.blocked, b.wide = best[1], ((d,) if best[1] != old else ())
        if best[1] != old:
            s.ldm_bytes = best[2]
            done.append((b, old))
    return done


def _original(graph, k):
    """k's buffers with each re-laid-out constant replaced by a temporary tensor in its
    original layout (what the tile search and dma.apply_blocking start from)."""
    bufs = dict(k.buffers)
    for b in k.schedule.boxes:
        if b.blocked is None or b.block_tensor is None:
            continue
        t, shape = graph.tensors[b.block_tensor], tuple(k.buffers[b.buf].shape)
        if is_splat(t.data):
            data = np.broadcast_to(np.asarray(t.data).reshape(-1)[0], shape)
        else:
            data = unblocked(t.data, b.shape, b.blocked).reshape(shape)
        name = f"%swwide:{k.name}:{b.buf}"
        graph.tensors[name] = Tensor(name, shape, t.dtype, data)
        bufs[b.buf] = replace(k.buffers[b.buf], tensor=name)
    return bufs


def _searched(program, k, bufs, target, options, budget):
    """k (with buffers `bufs`) through the scheduling passes with `budget` bytes of LDM."""
    trial = replace(k, buffers=dict(bufs), schedule=None)
    opts = dict(options, ldm_reserve=int(target.hardware["ldm_bytes"]) - budget)
    if program.target_state.traffic_weight is not None:
        opts["traffic_weight"] = program.target_state.traffic_weight
    mini = replace(program, kernels=[trial], notes=[], target_state=SunwayState())
    s = Search(trial, target.hardware, budget, opts, program.graph, target.sha256)
    mini.target_state.drafts[trial.name] = Draft(s, tiles=search_tiles(s))
    schedule_drafted(mini, target, opts)
    return trial


def _restore(graph, tensors):
    """graph.tensors back to the dict `tensors` (a copy taken earlier)."""
    for n in set(graph.tensors) - set(tensors):
        del graph.tensors[n]
    graph.tensors.update(tensors)


def retile(program, k, target, options, budget, memo, tried):
    """k searched again with part of its LDM left for wide blocks, then widened with the
    whole budget: (variant, its constants by name) of the fastest such variant when it models
    faster than k as it is (widened), else None. The graph is left as it was. `tried` holds,
    per kernel (the replay key: repeated layers), the reserve that won or None: a repeated
    layer searches that reserve alone, or nothing."""
    hw, cores, g = target.hardware, target.cores, program.graph
    key = _replay_key(k, cores, 8 * len(k.buffers))
    if key in tried and tried[key] is None:
        return None
    before = dict(g.tensors)
    best, best_s, won = None, seconds(k, hw, cores, memo), None
    try:
        bufs = _original(g, k)
        base = dict(g.tensors)
        for frac in ((tried[key],) if key in tried else RESERVES):
            trial = _searched(program, k, bufs, target, options, budget - budget // frac)
            trial.schedule.ldm_budget = budget
            done = widen(trial, hw, cores, budget, memo)
            sec = seconds(trial, hw, cores, memo)
            if done and sec < best_s:
                _apply(g, done)
                tensors = {b.tensor: g.tensors[b.tensor] for b in trial.buffers.values()
                           if b.tensor not in before or before[b.tensor] is not g.tensors[b.tensor]}
                best, best_s, won = (trial, tensors), sec, frac
            _restore(g, base)
    finally:
        _restore(g, before)
    tried[key] = won
    return best


def _apply(graph, done):
    """Re-lay out the constants of the boxes widen() widened."""
    for b, old in done:
        new = b.blocked
        b.blocked = old
        _relayout(graph, b, new)
        b.blocked = new
        b.notes.append(f"constant re-laid out in blocks {list(new)}: {new[b.wide[0]] // b.tiles[next(iter(b.dim_vars(b.wide[0])))]} "
                       "reduce tiles per fetch")


def _adopt(program, k, trial, tensors):
    """k takes trial's buffers, schedule and constants; k's own re-laid-out copies go."""
    g = program.graph
    old = {b.tensor for b in k.buffers.values()}
    g.tensors.update(tensors)
    k.buffers, k.schedule = trial.buffers, trial.schedule
    used = {b.tensor for x in program.kernels for b in x.buffers.values()}
    for n in old - used:
        if n.startswith(("%swblk:", "%swwide:")):
            del g.tensors[n]


def widest(k, target, options):
    """k's boxes widened as wide_weights widens them, the graph untouched (a trial's kernel,
    trial_seconds.py, then models what the build keeps). Not retile: its re-searches would
    double a trial's cost, so a kernel that retile later changes models as widened only."""
    widen(k, target.hardware, target.cores, ldm_budget(target, options), {})
    return k


def wide_weights(program, target, options):
    """Weight boxes fetched in blocks of several reduce tiles where the modelled time falls
    (module doc): never a slower model, so no option turns it off (as flat_pixels)."""
    if program.graph is None:
        return program
    budget = ldm_budget(target, options)
    memo, tried = {}, {}
    for k in program.kernels:
        if k.kind != "compute" or k.schedule is None or k.combine is None:
            continue
        limited = []
        _apply(program.graph, widen(k, target.hardware, target.cores, budget, memo, limited))
        if limited and not any(b.stage is not None for b in k.schedule.boxes):
            better = retile(program, k, target, options, budget, memo, tried)
            if better is not None:
                _adopt(program, k, *better)
    return program


__all__ = ["wide_weights", "widest", "candidates", "unblocked"]
