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


def group_counts(counts, lane_pos):
    """Tile counts of the row-group grid: the lane axis' count divided by the row width."""
    g = list(counts)
    g[lane_pos] //= ROW
    return g


def cpe_sequence(counts, cores, cpe, mode, lane_pos=None):
    """Flattened global tile indices (grid `counts`, outermost first) that CPE `cpe`
    processes, in order. With `lane_pos`, row sharing as in the module docstring."""
    total = math.prod(counts)
    if lane_pos is None:
        g0, n, step = cpe_share(total, cores, cpe, mode)
        return g0 + np.arange(n, dtype=np.int64) * step
    gc = group_counts(counts, lane_pos)
    g0, n, step = cpe_share(math.prod(gc), cores // ROW, cpe // ROW, mode)
    coords = mixed_radix(g0 + np.arange(n, dtype=np.int64) * step, gc)
    coords[lane_pos] = coords[lane_pos] * ROW + cpe % ROW
    g = np.zeros(n, np.int64)
    for c, x in zip(counts, coords):
        g = g * c + x
    return g


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


# -- splitting a reduction over the CPEs ------------------------------------------------------
#
# With 64 CPEs each computing whole output tiles, a reduction with a small output (a 1x1
# convolution on 7x7 or 14x14 pixels, a Gemm with one row) forces tiny tiles: every CPE
# re-reads inputs and weights and moves short rows. Splitting the largest reduce axis r into
# S parts makes the output S times larger (S partial results), so tiles can grow, and a second
# kernel adds the S partials and applies the epilogue:
#
#     part[s, axes] = sum over r' < R/S (and the other reduce axes) of body[r = s*R/S + r']
#     out[axes]     = epilogue(sum over s of part[s, axes])
#
# Both are ordinary kernels (tiled, DMA-planned, SIMD) and the partials are an ordinary
# intermediate of the memory plan. The split is kept only when the cost model says the pair
# is at least SPLIT_GAIN faster than the original kernel.

SPLITS = (2, 4, 8, 16)
SPLIT_MIN_FLOPS = 2e7
SPLIT_GAIN = 0.85
SPLIT_MIN_SLOWDOWN = 2.0     # only kernels modelled slower than this many times their roofline


def _split_kernel(k, S, graph):
    from dataclasses import replace as _replace

    from ..ir.graph import Tensor
    from ..ir.loopnest import Acc, Axis, Bin, Buffer, Kernel, Load, Var, iconst, iter_loads, transform
    red = max(k.reduce_axes, key=lambda a: a.extent)
    if red.extent % S or red.extent // S < 2:
        return None
    part = red.extent // S
    names = {a.name for a in list(k.axes) + list(k.reduce_axes)}
    s_name = "sk"
    while s_name in names:
        s_name += "x"
    s_ax = Axis(s_name, S)
    new_idx = Bin("+", Bin("*", Var(s_name), iconst(part)), Var(red.name))
    body = transform(k.body, lambda e: new_idx if isinstance(e, Var) and e.name == red.name else None)
    shape = (S,) + tuple(a.extent for a in k.axes)
    tname = f"%swsplit:{k.name}"
    graph.tensors[tname] = Tensor(tname, shape, "float32")
    used = {ld.buf for ld in iter_loads(k.body)}
    nums = [int(n[1:]) for n in k.buffers if n[1:].isdigit()]
    pname = f"b{max(nums, default=-1) + 1}"
    pbuf = Buffer(pname, tname, shape)
    b1 = {n: b for n, b in k.buffers.items() if n in used}
    b1[pname] = pbuf
    k1 = Kernel(f"{k.name}_part", k.op, k.node, pname, (s_ax,) + tuple(k.axes), body, b1,
                reduce_axes=tuple(_replace(a, extent=part) if a is red else a for a in k.reduce_axes),
                combine="sum", init=0.0, epilogue=Acc(), fused=k.fused)
    epi_used = {ld.buf for ld in iter_loads(k.epilogue)}
    b2 = {n: b for n, b in k.buffers.items() if n in epi_used or n == k.out}
    b2[pname] = pbuf
    k2 = Kernel(f"{k.name}_sum", k.op, k.node, k.out, tuple(k.axes),
                Load(pname, (Var(s_name),) + tuple(a.var for a in k.axes)), b2,
                reduce_axes=(s_ax,), combine="sum", init=0.0, epilogue=k.epilogue,
                out_offset=tuple(k.out_offset), fused=k.fused)
    return k1, k2


def split_reductions(program, tc, options, budget=None):
    """Replace kernels whose reduction is better split over the CPEs (see above)."""
    from .ldm import Search, search_tiles
    from ..recipe import option_on
    if not option_on(options, "split_reductions"):
        return program
    budget = budget or tc.ldm_budget
    hw, g = tc.hardware, program.graph
    out = []
    for k in program.kernels:
        if (getattr(k, "kind", "compute") != "compute" or k.combine != "sum" or k.init != 0.0
                or not k.reduce_axes or not k.axes or k.flops() < SPLIT_MIN_FLOPS):
            out.append(k)
            continue
        from ..perf import model
        from ..perf.predict import compulsory_bytes
        s = Search(k, hw, budget, options, g)
        t0 = s.evaluate(search_tiles(s))[0]
        if t0 < SPLIT_MIN_SLOWDOWN * model.roofline_seconds(hw, k.flops(), compulsory_bytes(k)):
            out.append(k)                    # already close to its bound
            continue
        best = (t0 * SPLIT_GAIN, None)
        quick = dict(options, search_effort="quick")
        for S in SPLITS:
            pair = _split_kernel(k, S, g)
            if pair is None:
                continue
            t = 0.0
            for kk in pair:
                ss = Search(kk, hw, budget, quick, g)
                t += ss.evaluate(search_tiles(ss))[0]
            if t < best[0]:
                best = (t, pair)
            elif best[1] is not None:        # past the best split: larger S only adds partials
                break
            for kk in pair:                  # drop the trial's partials from the graph
                g.tensors.pop(kk.buffers[kk.out].tensor, None) if kk.out != k.out else None
        if best[1] is None:
            out.append(k)
            continue
        k1, k2 = _split_kernel(k, best[1][0].axes[0].extent, g)
        program.notes.append(f"{k.name}: reduction split {k1.axes[0].extent} ways over the CPEs")
        out += [k1, k2]
    program.kernels = out
    return program
