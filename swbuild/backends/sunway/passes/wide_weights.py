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
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ....ir.graph import is_splat
from ..cost import model
from ..cost.predict import _replay_key, simulate
from ..schedule.dma import blocked_array
from ..schedule.kernel_schedule import ldm_align
from ..schedule.ldm import ldm_budget


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


def widen(k, hw, cores, budget, memo):
    """Widen k's candidate boxes, one after the other, where the modelled time falls.
    Returns [(box, blocks before)] of the boxes widened (their constants not yet re-laid out)."""
    s = k.schedule
    para = 8 * len(k.buffers)

    def seconds():
        key = _replay_key(k, cores, para)
        if key not in memo:
            memo[key] = model.kernel_seconds(hw, simulate(k, cores, para, hw)["cpe_seconds"])
        return memo[key]

    done = []
    for b, d, v in candidates(k):
        t = s.tiles[v]
        steps = math.ceil(b.axis_extents[v] / t)
        old, size = b.blocked, k.buf_bytes(b.buf)
        best = (seconds(), old, s.ldm_bytes)
        for f in (x for x in range(2, steps + 1) if steps % x == 0):   # whole blocks: no zero padding
            blocks = old[:d] + (f * t,) + old[d + 1:]
            grow = (ldm_align(math.prod(blocks) * size) - ldm_align(math.prod(old) * size)) * b.halves
            if s.ldm_bytes + grow > budget:
                break
            b.blocked, b.wide = blocks, (d,)
            sec = seconds()
            if sec < best[0]:
                best = (sec, blocks, s.ldm_bytes + grow)
        b.blocked, b.wide = best[1], ((d,) if best[1] != old else ())
        if best[1] != old:
            s.ldm_bytes = best[2]
            done.append((b, old))
    return done


def wide_weights(program, target, options):
    """Weight boxes fetched in blocks of several reduce tiles where the modelled time falls
    (module doc): never a slower model, so no option turns it off (as flat_pixels)."""
    if program.graph is None:
        return program
    budget = ldm_budget(target, options)
    memo = {}
    for k in program.kernels:
        if k.kind != "compute" or k.schedule is None or k.combine is None:
            continue
        for b, old in widen(k, target.hardware, target.cores, budget, memo):
            new = b.blocked
            b.blocked = old
            _relayout(program.graph, b, new)
            b.blocked = new
            b.notes.append(f"constant re-laid out in blocks {list(new)}: {new[b.wide[0]] // b.tiles[next(iter(b.dim_vars(b.wide[0])))]} "
                           "reduce tiles per fetch")
    return program


__all__ = ["wide_weights", "candidates", "unblocked"]
