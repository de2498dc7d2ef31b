"""Parallel split: the grid of output tiles is dealt to the 64 CPEs.

The output is cut into disjoint tiles (tile sizes from `ldm.py`), so no two CPEs ever write
the same bytes. The tile grid is flattened in `order` (a permutation of the spatial axes,
outermost first): splitting the highest dimension over the CPEs is the grid with only that
dimension cut; a dimension smaller than 64 is fused with the next ones by the flattening;
a 2-D 8x8 split is the grid cut in two dimensions with 8 tiles (or a multiple) each.

Two ways to deal the flattened grid:

* `cyclic`: CPE c takes tiles c, c+64, c+128, ... (good balance for any tile count);
* `block`:  CPE c takes one contiguous run of ceil/floor(T/64) tiles, so consecutive tiles of
  a CPE are neighbours and boxes that do not move with the innermost grid axis stay in LDM
  (the footprint comparison in the generated code then skips their DMA).

Both give every CPE at most ceil(T/64) tiles.

Row sharing (`lane`): the 8 CPEs of a mesh row take tiles that differ only in one spatial
axis, the lane axis (tile l*8 + column), so every box that does not depend on that axis has
the same footprint on the whole row at every step and one broadcast DMA (athread
BCAST_MODE, row mask) feeds all 8 (slave.py). The other grid coordinates ("groups", the
grid with the lane axis' tile count divided by 8) are dealt to the 8 rows, cyclic or block
as above; a row's 8 CPEs therefore run the same number of steps in lockstep.

Array sharing is the same with all 64 CPEs as one "row" (`width` 64): the lane axis' tile
count is a multiple of 64, tile l*64 + cpe goes to CPE `cpe`, and every CPE runs every group
in lockstep, so a box that does not depend on the lane axis is broadcast to all 64 (athread
BCAST_MODE, mask of all rows) and read from memory once.

2-D sharing (SW26010-Pro RMA, `cols`) is row sharing dealt so that the 8 rows also run in
lockstep: the groups, flattened in grid order, are dealt cyclic to the rows and their count is
a multiple of 8, so at every step row r holds group 8j + r. An axis whose group coordinate
moves only every 8 groups or more (its stride in the flattened groups a multiple of 8, or a
single group) then has the same tile on the 8 CPEs of a mesh column (`column_axes`): a box
that depends on no other spatial axis has the same footprint on the whole column, and one
CPE of the column fetches it and broadcasts it along the column (CRTS_rma_col_ibcast); a box
on neither the lane nor another axis is the same on all 64 (CRTS_rma_ibcast).
"""
from __future__ import annotations

import math

import numpy as np

MODES = ("cyclic", "block")
ROW = 8          # CPEs per row of the mesh


def tile_counts(axes, tiles):
    return [math.ceil(a.extent / tiles[a.name]) for a in axes]


def spatial_tiles(kernel, tiles):
    return math.prod(tile_counts(kernel.axes, tiles))


def cpe_share(total, cores, cpe, mode):
    """(first global tile index, tiles of this CPE, index step) — the C printer uses the same."""
    if mode == "block":
        q, r = divmod(total, cores)
        return cpe * q + min(cpe, r), q + (1 if cpe < r else 0), 1
    n = (total - cpe + cores - 1) // cores if cpe < total else 0
    return cpe, n, cores


def mixed_radix(idx, counts):
    """Coordinates (list of arrays, outermost first) of flat indices in a mixed radix."""
    out = []
    rem = idx
    for c in reversed(counts):
        out.append(rem % c)
        rem = rem // c
    return list(reversed(out))


def group_counts(counts, lane_pos, width=ROW):
    """Tile counts of the group grid: the lane axis' count divided by the sharing width."""
    g = list(counts)
    g[lane_pos] //= width
    return g


def column_axes(counts, lane_pos, width=ROW):
    """2-D sharing: positions (in `counts`' order) of the axes whose tile is the same on the 8
    CPEs of a mesh column at every step of a cyclic deal (module docstring), or None when the
    rows do not run in lockstep (the group count is no multiple of 8)."""
    gc = group_counts(counts, lane_pos, width)
    if width != ROW or math.prod(gc) % ROW:
        return None
    out, stride = set(), 1
    for p in reversed(range(len(gc))):
        if gc[p] == 1 or stride % ROW == 0:
            out.add(p)
        stride *= gc[p]
    return out


def cpe_sequence(counts, cores, cpe, mode, lane_pos=None, width=ROW):
    """Flattened global tile indices (grid `counts`, outermost first) that CPE `cpe`
    processes, in order. With `lane_pos`, row (or array: `width` 64) sharing as in the
    module docstring."""
    total = math.prod(counts)
    if lane_pos is None:
        g0, n, step = cpe_share(total, cores, cpe, mode)
        return g0 + np.arange(n, dtype=np.int64) * step
    gc = group_counts(counts, lane_pos, width)
    g0, n, step = cpe_share(math.prod(gc), cores // width, cpe // width, mode)
    coords = mixed_radix(g0 + np.arange(n, dtype=np.int64) * step, gc)
    coords[lane_pos] = coords[lane_pos] * width + cpe % width
    g = np.zeros(n, np.int64)
    for c, x in zip(counts, coords):
        g = g * c + x
    return g


def all_cpe_sequences(counts, cores, mode, lane_pos=None, width=ROW):
    """cpe_sequence of every CPE at once, concatenated in CPE order: (global tiles, the CPE of
    each, its place in its CPE's run)."""
    units = cores if lane_pos is None else cores // width
    gc = list(counts) if lane_pos is None else group_counts(counts, lane_pos, width)
    share = np.array([cpe_share(math.prod(gc), units, u, mode) for u in range(units)], np.int64).reshape(units, 3)
    unit = np.arange(cores) if lane_pos is None else np.arange(cores) // width
    g0, n, step = share[unit, 0], share[unit, 1], share[unit, 2]
    cpe_of = np.repeat(np.arange(cores, dtype=np.int64), n)
    pos = np.arange(len(cpe_of), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    g = g0[cpe_of] + pos * step[cpe_of]
    if lane_pos is not None:
        coords = mixed_radix(g, gc)
        coords[lane_pos] = coords[lane_pos] * width + cpe_of % width
        g = np.zeros(len(cpe_of), np.int64)
        for c, x in zip(counts, coords):
            g = g * c + x
    return g, cpe_of, pos


def cpe_tile_lists(total, cores, mode):
    out = []
    for c in range(cores):
        g0, n, step = cpe_share(total, cores, c, mode)
        out.append([g0 + j * step for j in range(n)])
    return out


def decode(g, axes_in_order, counts_in_order):
    """Grid coordinates (tile index per axis, in order) of flattened tile index g."""
    coords = []
    for c in reversed(counts_in_order):
        coords.append(g % c)
        g //= c
    return list(reversed(coords))


def tiles_of_cpe(kernel, tiles, cpe, cores, order=None, mode="cyclic"):
    """Tile starts (per spatial axis, in kernel order) that CPE `cpe` processes, in order."""
    order = order or [a.name for a in kernel.axes]
    ext = {a.name: a.extent for a in kernel.axes}
    counts = [math.ceil(ext[n] / tiles[n]) for n in order]
    total = math.prod(counts)
    g0, n, step = cpe_share(total, cores, cpe, mode)
    for j in range(n):
        coords = decode(g0 + j * step, order, counts)
        start = {name: c * tiles[name] for name, c in zip(order, coords)}
        yield tuple(start[a.name] for a in kernel.axes)
