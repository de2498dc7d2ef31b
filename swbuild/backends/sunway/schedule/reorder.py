"""Loop reordering that minimises the number of DMA operations (swTVM Algorithm 2).

The loops of a scheduled kernel, per CPE, outermost first:

    spatial tile loop (the CPE's share of the flattened tile grid, in `grid order`)
      reduce-tile loops (in `reduce order`)
        compute loops (inside LDM)

Legality (swTVM's constraints carried over to this IR): a reduce-tile loop must stay inside
the spatial tile loop, because the accumulator of one output tile lives in LDM for the whole
reduction; compute loops stay innermost, because they only touch LDM; the reduce-tile loops
may be permuted freely (a sum is reassociated), and so may the spatial grid dimensions
(tiles are independent).

Cost: each box is fetched at the outermost loop where its footprint changes, i.e. once per
iteration of the loops down to the innermost loop it depends on. For a reduce order
(l_1, ..., l_k) a body box depending on reduce loops D is fetched prod(count(l_i), i <= max
position of D) times per tile. The order minimising sum(fetches x DMA calls per fetch) (then
bytes) wins; with at most a handful of tiled reduce loops the search is exhaustive.

For the grid order and the way tiles are dealt (cyclic/block, grid.py), a box that does
not depend on a tiled reduce loop can stay in LDM between consecutive tiles of a CPE when
the grid axes that change do not move it; those choices are compared by counting the exact
DMA operations with the compile-time predictor, only when such a box exists.
"""
from __future__ import annotations

import itertools
import math


def reduce_counts(kernel, tiles):
    return {a.name: math.ceil(a.extent / tiles[a.name]) for a in kernel.reduce_axes}


def tiled_reduce_axes(kernel, tiles):
    return [a.name for a in kernel.reduce_axes if tiles[a.name] < a.extent]


def box_level(box, order):
    """Position of the innermost loop of `order` the box depends on (-1: none)."""
    lv = -1
    for i, n in enumerate(order):
        if n in box.vars:
            lv = i
    return lv


def fetches_per_tile(box, order, counts):
    lv = box_level(box, order)
    return math.prod(counts[n] for n in order[:lv + 1])


def calls_per_fetch(box, tiles):
    """Static DMA calls and bytes of one fetch at the largest footprint."""
    if box.blocked is not None:
        return 1, math.prod(box.blocked) * 4
    ext = list(box.span(tiles))
    ext = [min(e, s) for e, s in zip(ext, box.shape)]
    m = box.merge_dim(tiles)
    if m == 0:
        return 1, math.prod(box.shape) * 4
    c = m - 1
    inner = math.prod(box.shape[m:])
    calls = math.prod(ext[:max(c - 1, 0)])
    return calls, math.prod(ext[:c + 1]) * inner * 4


def order_reduce(kernel, boxes, tiles):
    """(order of the tiled reduce loops, DMA operations per tile) minimising DMA count."""
    tiled = tiled_reduce_axes(kernel, tiles)
    counts = reduce_counts(kernel, tiles)
    body = [b for b in boxes if b.context == "body"]
    per = {id(b): calls_per_fetch(b, tiles) for b in body}
    best = None
    # kernel order first, so ties keep the lowering's order
    for perm in itertools.islice(itertools.permutations(tiled), 720):
        fetches = [(fetches_per_tile(b, perm, counts), per[id(b)]) for b in body]
        key = (sum(f * c for f, (c, _) in fetches), sum(f * by for f, (_, by) in fetches))
        if best is None or key < best[0]:
            best = (key, list(perm))
    order = best[1] if best else []
    for b in boxes:
        b.level = box_level(b, order) if b.context == "body" else -1
    return order, (best[0] if best else (0, 0))


def reusable_across_tiles(kernel, boxes, tiles):
    """Boxes that depend on no tiled reduce loop and not on every split spatial axis."""
    split = {a.name for a in kernel.axes if tiles[a.name] < a.extent}
    tiled = set(tiled_reduce_axes(kernel, tiles))
    out = []
    for b in boxes:
        if b.context == "out" or b.vars & tiled:
            continue
        if split - b.vars:
            out.append(b)
    return out


def grid_candidates(kernel, tiles):
    """Grid orders worth comparing: permutations of the split axes (others keep their place)."""
    names = [a.name for a in kernel.axes]
    split = [n for n in names if tiles[n] < dict((a.name, a.extent) for a in kernel.axes)[n]]
    if len(split) <= 1:
        return [names]
    out = []
    for perm in itertools.islice(itertools.permutations(split), 24):
        it = iter(perm)
        out.append([next(it) if n in split else n for n in names])
    return out


def order_grid(kernel, boxes, tiles, cores, count_dma):
    """(grid order, partition mode) with the fewest DMA operations (then bytes).

    `count_dma(order, mode)` returns (ops, bytes) for the kernel (the exact predictor)."""
    names = [a.name for a in kernel.axes]
    if not reusable_across_tiles(kernel, boxes, tiles):
        return names, "cyclic"
    best = None
    for order in grid_candidates(kernel, tiles):
        for mode in ("cyclic", "block"):
            key = count_dma(order, mode)
            if best is None or key < best[0]:
                best = (key, order, mode)
    return best[1], best[2]
