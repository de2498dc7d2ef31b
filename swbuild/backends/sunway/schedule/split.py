"""Splitting a reduction over the CPEs (a Sunway schedule pass).

With 64 CPEs each computing whole output tiles, a reduction with a small output (a 1x1
convolution on 7x7 or 14x14 pixels, a Gemm with one row) forces tiny tiles: every CPE
re-reads inputs and weights and moves short rows. Splitting the largest reduce axis r into
S parts makes the output S times larger (S partial results), so tiles can grow, and a second
kernel adds the S partials and applies the epilogue:

    part[s, axes] = sum over r' < R/S (and the other reduce axes) of body[r = s*R/S + r']
    out[axes]     = epilogue(sum over s of part[s, axes])

Both are ordinary kernels (tiled, DMA-planned, SIMD) and the partials are an ordinary
intermediate of the memory plan. The split is kept only when the cost model says the pair
is at least SPLIT_GAIN faster than the original kernel. A trial is not searched when what
every tiling of the pair must take (its compulsory bytes at the fastest DMA, its multiply-adds
at the SIMD peak) already loses, nor a kernel of the pair whose search table's least bound
(ldm.floor_seconds) already loses, nor its sum kernel when its partials alone do. The
decision is remembered like tiles are (this process, the persistent schedule cache), so a
rebuild runs no trials.
"""
from __future__ import annotations

from dataclasses import replace as _replace

from ....ir.graph import Tensor
from ....ir.loopnest import Acc, Axis, Bin, Buffer, Kernel, Load, Var, iconst, iter_loads, transform
from ....config.recipe import option_on
from ..cost import model
from ..cost.predict import compulsory_bytes
from . import cache, parallel
from .ldm import Search, floor_seconds, ldm_budget, search_seconds, signature, search_tiles

SPLITS = (2, 4, 8, 16)
SPLIT_MIN_FLOPS = 2e7
SPLIT_GAIN = 0.85
SPLIT_MIN_SLOWDOWN = 2.0     # only kernels modelled slower than this many times their roofline
TRIAL_SEARCHES = 2           # a decision costs about this many searches of the kernel (for parallel.py)


def _split_kernel(k, S, graph):
    red = max(k.reduce_axes, key=lambda a: a.extent)
    if red.extent % S or red.extent // S < 2:
        return None
    part = red.extent // S
    names = {a.name for a in list(k.axes) + list(k.reduce_axes)}
    s_name = "sk"
    while s_name in names:
        s_name += "x"
    s_ax = Axis(s_name, S)
    views = _split_views(k, red, S, graph)
    new_idx = Bin("+", Bin("*", Var(s_name), iconst(part)), Var(red.name))

    def split_index(e):
        if isinstance(e, Var) and e.name == red.name:
            return new_idx
        return _split_load(e, views, red.name, s_name, split_index)
    body = transform(k.body, split_index)
    shape = (S,) + tuple(a.extent for a in k.axes)
    tname = f"%swsplit:{k.name}"
    graph.tensors[tname] = Tensor(tname, shape, "float32")
    used = {ld.buf for ld in iter_loads(k.body)}
    nums = [int(n[1:]) for n in k.buffers if n[1:].isdigit()]
    pname = f"b{max(nums, default=-1) + 1}"
    pbuf = Buffer(pname, tname, shape)
    b1 = {n: views.get(n, b) for n, b in k.buffers.items() if n in used}
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


def _split_views(k, red, S, graph):
    """{buffer: its view with dim d cut in (S, R/S)} for every constant the body indexes by
    the split axis alone at one dim d (a convolution's weights at ci). The part kernel then
    reads W[co, s, ci', ...] instead of W[co, s*R/S + ci', ...]: the same bytes, but every
    dim is one axis, so its boxes can still be re-laid out in blocks (dma.blockable: one DMA
    run per box, not one per row of kernel taps)."""
    dims = {}
    for ld in iter_loads(k.body):
        hits = tuple(d for d, e in enumerate(ld.index) if isinstance(e, Var) and e.name == red.name)
        dims.setdefault(ld.buf, set()).add(hits if len(hits) == 1 and ld.pad is None else None)
    out = {}
    for n, ds in dims.items():
        b = k.buffers[n]
        t = graph.tensors.get(b.tensor)
        if len(ds) != 1 or None in ds or t is None or t.data is None:
            continue
        (d,), = ds
        if b.shape[d] != red.extent:
            continue
        out[n] = _replace(b, shape=tuple(b.shape[:d]) + (S, red.extent // S) + tuple(b.shape[d + 1:]))
    return out


def _split_load(e, views, red, s_name, fn):
    """A load of a viewed constant (_split_views) indexed by the view's two dims (its other
    dims rewritten by `fn`)."""
    if not isinstance(e, Load) or e.buf not in views:
        return None
    d = next(i for i, x in enumerate(e.index) if isinstance(x, Var) and x.name == red)
    rest = [transform(x, fn) for x in e.index]
    return _replace(e, index=tuple(rest[:d]) + (Var(s_name), Var(red)) + tuple(rest[d + 1:]))


def _eligible(k):
    return (k.kind == "compute" and k.combine == "sum" and k.init == 0.0 and k.reduce_axes and k.axes
            and k.flops() >= SPLIT_MIN_FLOPS)


_DECISIONS = {}     # ("split",) + the kernel's search signature -> parts (1: whole), this process
parallel.MEMOS.append(lambda: _DECISIONS)      # workers send decisions back with the tiles


def _decision_key(s):
    return ("split",) + signature(s)


def _known(s):
    """The decision for `s`'s kernel from this process's memo or the persistent schedule
    cache (as one pseudo-axis "split"; a hit is memoised), or None."""
    key = _decision_key(s)
    if key not in _DECISIONS:
        stored = cache.load(cache.entry_key(key, s.toolchain_hash))
        if stored is None or len(stored) != 1 or stored[0][0] != "split" or stored[0][1] < 1:
            return None
        _DECISIONS[key] = stored[0][1]
    return _DECISIONS[key]


def decide(s, options):
    """The number of parts to split the reduction of `s`'s kernel into, or None (it stays
    whole): remembered (_known), or from the trials."""
    S = _known(s)
    if S is None:
        S = _trials(s, options) or 1
        key = _decision_key(s)
        cache.store(cache.entry_key(key, s.toolchain_hash), [("split", S)])
        _DECISIONS[key] = S
    return S if S > 1 else None


def _trials(s, options):
    k, hw, budget, g = s.k, s.hw, s.budget, s.graph
    t0 = s.evaluate(search_tiles(s))[0]
    if t0 < SPLIT_MIN_SLOWDOWN * model.roofline_seconds(hw, k.flops(), compulsory_bytes(k, boxes=s.boxes)):
        return None                          # already close to its bound
    best = (t0 * SPLIT_GAIN, None)
    quick = dict(options, search_effort="quick")
    for S in SPLITS:
        pair = _split_kernel(k, S, g)
        if pair is None:
            continue
        searches = [Search(kk, hw, budget, quick, g, s.toolchain_hash) for kk in pair]
        t = _moved_at_least(searches, hw)    # a pair that must move too much loses unsearched
        if t < best[0]:
            t = 0.0
            for ss in searches:
                if t + floor_seconds(ss) >= best[0]:     # its table's bounds already lose
                    t = best[0]
                    break
                t += ss.evaluate(search_tiles(ss))[0]
                if t >= best[0]:             # the partials alone lose: no need to search the sum
                    break
        if t < best[0]:
            best = (t, S)
        elif best[1] is not None:            # past the best split: larger S only adds partials
            break
        for kk in pair:                      # drop the trial's partials from the graph
            g.tensors.pop(kk.buffers[kk.out].tensor, None) if kk.out != k.out else None
    return best[1]


def _moved_at_least(searches, hw):
    """Seconds the pair (the searches of its kernels) takes at least under the search's model,
    whatever its tiles: per kernel, the larger of its DMA and its compute floors. Every tiling
    moves at least the kernel's compulsory bytes (what it reads, once, and its output; the
    partials are written by the first kernel and read by the second), and its modelled time is
    at least its busiest CPE's DMA seconds (dma_overlap <= 1), which are at least those bytes
    at the fastest the DMA curve goes; and at least its busiest CPE's multiply-adds at the
    SIMD peak. 0.0 when the bound does not hold (dma_overlap > 1)."""
    if float(model.hwget(hw, "dma_overlap")) > 1.0:
        return 0.0
    lanes = max(1, int(hw.get("simd_lanes", 1)))
    rate = lanes * float(model.hwget(hw, "fma_per_cycle_simd")) * model.clock(hw) * int(hw["cpes"])
    out = 0.0
    for s in searches:
        k = s.k
        out += max(compulsory_bytes(k, boxes=s.boxes) / model.max_dma_bandwidth(hw),
                   k.points * k.reduce_points / rate)
    return out


def split_reductions(program, target, options):
    """Split a long reduction with a small output over the CPEs when the cost model gains."""
    if not option_on(options, "split_reductions"):
        return program
    budget = ldm_budget(target, options)
    hw, g = target.hardware, program.graph
    searches = {id(k): Search(k, hw, budget, options, g, target.sha256) for k in program.kernels if _eligible(k)}
    parallel.prefetch(lambda s: decide(s, options), parallel.distinct_misses(searches.values(), signature, _known),
                      lambda s: TRIAL_SEARCHES * search_seconds(s))
    out = []
    for k in program.kernels:
        S = decide(searches[id(k)], options) if id(k) in searches else None
        if S is None:
            out.append(k)
            continue
        k1, k2 = _split_kernel(k, S, g)
        program.notes.append(f"{k.name}: reduction split {S} ways over the CPEs")
        out += [k1, k2]
    program.kernels = out
    return program
