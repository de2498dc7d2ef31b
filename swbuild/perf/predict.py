"""Compile-time predictions per kernel: flops, DMA operations and bytes, LDM use.

The DMA counts enumerate every tile of every CPE with the same arithmetic the slave printer
emits, so the emulator's measured counters must equal them exactly.
"""
from __future__ import annotations

import math

from ..ir.loopnest import affine
from ..optimizer.partition import tile_counts


def _box_transfer(b, ranges, itemsize=4, ext_override=None):
    """(calls, bytes) of one load of box b for tile ranges {var: (start, count)}."""
    shape = b.shape
    if ext_override is not None:
        ext = ext_override
    else:
        ext = []
        for d in range(len(shape)):
            los, his = [], []
            for e in b.index[d]:
                aff = affine(e)
                lo = hi = aff.get(None, 0)
                for v, c in aff.items():
                    if v is None:
                        continue
                    s, n = ranges[v]
                    lo += c * (s if c > 0 else s + n - 1)
                    hi += c * (s + n - 1 if c > 0 else s)
                los.append(lo)
                his.append(hi)
            lo, hi = max(min(los), 0), min(max(his), shape[d] - 1)
            ext.append(hi - lo + 1)
        if any(x <= 0 for x in ext):
            return 0, 0
    m = b.merge_dim(b.extents(b.tiles), b.tiles)
    if m == 0:
        return 1, math.prod(shape) * itemsize
    c = m - 1
    inner = math.prod(shape[m:])
    if c == 0:
        return 1, ext[0] * inner * itemsize
    calls = math.prod(ext[:c - 1])
    return calls, calls * ext[c - 1] * ext[c] * inner * itemsize


def predict_kernel(k, cores, para_bytes):
    s = k.schedule
    t = s.tiles
    sp, red = list(k.axes), list(k.reduce_axes)
    counts = tile_counts(sp, t)
    total = math.prod(counts)
    get_ops = put_ops = 0
    get_bytes = put_bytes = 0
    boxes = [b for b in s.boxes if b.context != "out"]
    out_box = next(b for b in s.boxes if b.context == "out")
    red_tiles = [[(st, min(t[a.name], a.extent - st)) for st in range(0, a.extent, t[a.name])] for a in red]
    for tt in range(total):
        rem, ranges = tt, {}
        for a, c in reversed(list(zip(sp, counts))):
            st = (rem % c) * t[a.name]
            rem //= c
            ranges[a.name] = (st, min(t[a.name], a.extent - st))
        for b in boxes:
            if b.context == "body" and k.combine is not None and b.level >= 0:
                # issued once per iteration of the reduce-tile loops down to its level
                for combo in _product(red_tiles[:b.level + 1]):
                    r = dict(ranges)
                    r.update({a.name: v for a, v in zip(red, combo)})
                    for a in red[b.level + 1:]:
                        r[a.name] = (0, t[a.name])
                    n, by = _box_transfer(b, r)
                    get_ops += n
                    get_bytes += by
            else:
                r = dict(ranges)
                for a in red:
                    r[a.name] = (0, min(t[a.name], a.extent))
                n, by = _box_transfer(b, r)
                get_ops += n
                get_bytes += by
        n, by = _box_transfer(out_box, ranges, ext_override=[ranges[a.name][1] for a in sp])
        put_ops += n
        put_bytes += by
    spawned = cores
    return {"get": {"ops": get_ops + spawned, "bytes": get_bytes + spawned * para_bytes},
            "put": {"ops": put_ops, "bytes": put_bytes}}


def _product(lists):
    if not lists:
        yield ()
        return
    for x in lists[0]:
        for rest in _product(lists[1:]):
            yield (x,) + rest


def predict_program(program, tc):
    out = []
    for k in program.kernels:
        para = 8 * len(k.buffers)
        dma = predict_kernel(k, tc.cores, para)
        out.append({"name": k.name, "op": k.op, "node": k.node, "fused": list(k.fused), "flops": k.flops(),
                    "ldm_bytes": k.schedule.ldm_bytes, "ldm_budget": k.schedule.ldm_budget,
                    "tiles": k.schedule.tiles, "spatial_tiles": k.schedule.ntiles,
                    "dma": dma, "modeled_tile_seconds": k.schedule.modeled_tile_seconds})
    return out
