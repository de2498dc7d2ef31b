"""The enumerative part of the tile search (ldm.py): every spatial tile shape whose
accumulator fits, each with the largest size of the main reduce axis that fits (with and
without double buffering, and one size smaller), the other reduce axes whole.

Shapes are visited largest first and a shape whose compute alone, at the SIMD peak, already
costs more than the best so far is skipped; the enumeration stops after ENUMERATE_LIMIT
evaluations. The shapes are costed in chunks with numpy (batch.py: LDM sizes for the binary
search of the reduce tile, DMA shapes, vector plans, modelled times, bit for bit the scalar
model's); then the visit is replayed in order, so the tilings recorded in the search's cache,
the skipped shapes, the limit and the result are exactly those of visiting one tiling at a time.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..cost import model
from . import batch

ENUMERATE_LIMIT = (400, 2000)  # evaluations of the enumerative search: every kernel, kernels >= 1e8 flops
ENUMERATE_BIG = 1e8
CHUNK = (256, 1024)            # shapes costed at once: the first chunk, the largest


def enumerate_tiles(s, cands):
    """(tiles, cost) of the best enumerated tiling, or None."""
    k = s.k
    sp = [a.name for a in k.axes]
    red = sorted(k.reduce_axes, key=lambda a: -a.extent)
    main = red[0].name if red else None
    best, evals = None, 0
    ext = {a.name: a.extent for a in k.axes}
    lanes = max(1, int(s.hw.get("simd_lanes", 1)))
    rate = lanes * float(model.hwget(s.hw, "fma_per_cycle_simd")) * model.clock(s.hw)
    limit = ENUMERATE_LIMIT[1] if k.flops() >= ENUMERATE_BIG else ENUMERATE_LIMIT[0]
    if s.quick:
        limit = ENUMERATE_LIMIT[0] // 4
    combos = [c for c in itertools.product(*[cands[n] for n in sp]) if math.prod(c) * 4 <= s.budget * 0.9]
    combos.sort(key=lambda c: (-math.prod(c), c))      # large tiles first: good costs early

    def skipped(combo, best):           # compute alone, at the SIMD peak, already loses
        if best is None or s.red_points <= 1:
            return False
        ntiles = math.prod(-(-ext[n] // t) for n, t in zip(sp, combo))
        return math.ceil(ntiles / s.cores) * math.prod(combo) * s.red_points / rate >= best[1]

    names = [a.name for a in s.axes]
    pos, size = 0, CHUNK[0]
    while pos < len(combos):
        chunk = [c for c in combos[pos:pos + size] if not skipped(c, best)]
        pos = pos + size
        tried, pre, spatial = _cost_chunk(s, chunk, main, cands)
        for combo in chunk:
            if skipped(combo, best):
                continue
            for key in tried[combo]:
                r = s.cache.get(key, s)
                if r is s:                      # not evaluated yet: what Search.evaluate records
                    r = s.cache[key] = pre[key]
                    if r is not None and combo not in s._vp:
                        s._vp[combo] = spatial[combo]
                c = math.inf if r is None else s.objective(r)       # Search.cost
                evals += 1
                if best is None or c < best[1]:
                    best = (dict(zip(names, key)), c)
            if evals > limit:
                return best
        # the next chunk: twice as large, but about what the cap still allows (a shape tries
        # about 3 tilings), so little is costed past it
        size = max(CHUNK[0], min(size * 2, CHUNK[1], (limit - evals) // 3))
    return best


def _cost_chunk(s, chunk, main, cands):
    """For each shape of the chunk: the tilings the visit tries (tried, as Search.evaluate's
    keys), the evaluation of those not yet in the search's cache (pre, by key), and the
    spatial part (vector plan...) the first evaluation of the shape would memoise (spatial)."""
    k = s.k
    tried, pre, spatial = {}, {}, {}
    if not chunk:
        return tried, pre, spatial
    names = [a.name for a in k.axes]
    shapes = np.array(chunk, np.int64).reshape(len(chunk), len(names))
    cm = cands[main] if main else [None]
    T = {n: np.repeat(shapes[:, i], len(cm)) for i, n in enumerate(names)}
    for a in k.reduce_axes:
        T[a.name] = np.tile(np.array(cm, np.int64), len(chunk)) if a.name == main \
            else np.full(len(chunk) * len(cm), a.extent, np.int64)
    n = len(chunk) * len(cm)
    st = batch.statics(s, T, n)
    L0 = batch.ldm(s, T, n, st, False) <= s.budget
    picks = []                       # per shape: indices into cm of the tilings tried
    if main:
        fits = []
        for db in (False, True):      # LDM grows with the tile: binary search the largest fit
            L = (L0 if not db else batch.ldm(s, T, n, st, True) <= s.budget).reshape(len(chunk), len(cm))
            lo, hi = np.zeros(len(chunk), np.int64), np.full(len(chunk), len(cm) - 1)
            r = np.arange(len(chunk))
            while (lo < hi).any():
                mid = (lo + hi + 1) // 2
                ok = L[r, mid]
                act = lo < hi
                lo = np.where(act & ok, mid, lo)
                hi = np.where(act & ~ok, mid - 1, hi)
            fits.append(np.where(L[:, 0], lo, -1).tolist())
        for j in range(len(chunk)):
            picks.append(sorted({x for f in fits if f[j] >= 0 for x in (f[j], max(f[j] - 1, 0))}))
    else:
        picks = [[0] if f else [] for f in L0.tolist()]
    # a tiling's key (Search.evaluate's): the shape, then the reduce tiles (main: cm[i])
    red = [tuple(cm[i] if a.name == main else a.extent for a in k.reduce_axes) for i in range(len(cm))]
    todo = []                        # (shape, key, row of the table)
    for j, combo in enumerate(chunk):
        tried[combo] = keys = [combo + red[i] for i in picks[j]]
        for i, key in zip(picks[j], keys):
            if key not in s.cache:
                todo.append((combo, key, j * len(cm) + i))
    if not todo:
        return tried, pre, spatial
    sel = np.array([r for _, _, r in todo])
    fit = L0[sel].tolist()
    first = {}                         # shape -> the row whose tiles set its spatial memo
    for i, (combo, _, r) in enumerate(todo):
        if fit[i] and combo not in s._vp and combo not in first:
            first[combo] = r
    if first:
        rows = np.array(list(first.values()))
        spatial = dict(zip(first, batch.spatial(s, {a: c[rows] for a, c in T.items()}, len(rows))))
    dummy = (None, 0.0, 0.0, 0.0, 0, 0.0)
    sps = [s._vp.get(combo) or spatial.get(combo) or dummy for combo, _, _ in todo]
    Ts = {a: c[sel] for a, c in T.items()}
    sts = {b: tuple(x[sel] for x in v) for b, v in st.items()}
    for (_, key, _), r in zip(todo, batch.evaluate(s, Ts, len(sel), sts, sps)):
        pre[key] = r
    return tried, pre, spatial
