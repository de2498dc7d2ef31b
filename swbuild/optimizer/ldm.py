"""LDM buffer sizing: choose tile sizes so a kernel's buffers fit each CPE's local memory.

The search is an explicit constraint problem (Deeploy-style): minimise the modeled time of
the kernel, ceil(tiles / CPEs) x (DMA time + compute time) of one tile, subject to
sum(buffer bytes) <= budget. Tile sizes start at 1 and grow by doubling (swTVM starts at
powers of two and expands greedily while the buffers fit). When even the smallest tiles do
not fit, LdmError reports the bytes that would be needed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import LdmError
from .dma import box_plans
from .partition import spatial_tiles

ALIGN = 64          # each LDM buffer is rounded up to this many bytes


@dataclass
class Schedule:
    tiles: dict                 # axis name -> tile size
    order: list                 # compute loop order, outermost first
    boxes: list                 # BoxPlan per (buffer, context)
    ldm_bytes: int              # buffers per CPE at these tiles
    ldm_budget: int
    ntiles: int                 # spatial tiles dealt to CPEs
    modeled_tile_seconds: float = 0.0
    notes: list = field(default_factory=list)

    def __str__(self):
        t = ", ".join(f"{k}:{v}" for k, v in self.tiles.items())
        return (f"schedule tiles({t}) order({', '.join(self.order)}) spatial tiles {self.ntiles}, "
                f"LDM {self.ldm_bytes}/{self.ldm_budget} B")


def _al(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


def ldm_bytes(kernel, boxes, tiles, itemsize=4):
    acc = math.prod(tiles[a.name] for a in kernel.axes) * itemsize
    return _al(acc) + sum(_al(b.elems(tiles) * itemsize) for b in boxes if b.context != "out")


class TileCost:
    """Modeled seconds of a kernel for given tile sizes, from the target's numbers."""

    def __init__(self, kernel, boxes, hw):
        self.k, self.boxes, self.hw = kernel, boxes, hw
        self.cores = int(hw["cpes"])
        self.bw = float(hw["dma_fit_peak_bytes_per_s"]) / self.cores   # bandwidth shared by all CPEs
        self.half = float(hw["dma_fit_half_bytes"])
        self.flops_rate = float(hw["clock_hz"])
        self.ops = max(1, kernel.flops() // max(1, kernel.points * max(1, kernel.reduce_points)))

    def reduce_iters(self, tiles, upto=None):
        axes = self.k.reduce_axes if upto is None else self.k.reduce_axes[:upto + 1]
        return math.prod(math.ceil(a.extent / tiles[a.name]) for a in axes)

    def tile_seconds(self, tiles):
        bytes_, calls = 0.0, 0.0
        for b in self.boxes:
            times = self.reduce_iters(tiles, b.level) if b.context == "body" and b.level >= 0 else 1
            bytes_ += times * b.elems(tiles) * 4
            calls += times * b.runs(tiles)
        dma = (bytes_ + self.half * calls) / self.bw
        pts = math.prod(tiles[a.name] for a in self.k.axes) * math.prod(tiles[a.name] for a in self.k.reduce_axes)
        comp = pts * self.reduce_iters(tiles) * self.ops / self.flops_rate
        return dma + comp

    def seconds(self, tiles):
        waves = math.ceil(spatial_tiles(self.k, tiles) / self.cores)
        return waves * self.tile_seconds(tiles)


def place_body_boxes(kernel, boxes, tiles):
    """Issue each body box inside the innermost reduce-tile loop whose axis it depends on."""
    for b in boxes:
        if b.context != "body":
            continue
        b.level = -1
        for i, a in enumerate(kernel.reduce_axes):
            if a.name in b.vars and tiles[a.name] < a.extent:
                b.level = i


def compute_order(kernel):
    """Spatial axes, then reduce axes, with the innermost spatial axis innermost: the inner
    loop then runs along contiguous output (and usually input) elements."""
    sp = [a.name for a in kernel.axes]
    return sp[:-1] + [a.name for a in kernel.reduce_axes] + sp[-1:]


def size_buffers(kernel, hw, budget):
    boxes = box_plans(kernel)
    axes = list(kernel.axes) + list(kernel.reduce_axes)
    tiles = {a.name: 1 for a in axes}
    place_body_boxes(kernel, boxes, tiles)
    need = ldm_bytes(kernel, boxes, tiles)
    if need > budget:
        raise LdmError(kernel.name, need, budget)
    cost = TileCost(kernel, boxes, hw)
    best = cost.seconds(tiles)
    while True:
        cand = None
        for a in axes:
            t = tiles[a.name]
            if t >= a.extent:
                continue
            for nt in {min(2 * t, a.extent), a.extent}:
                trial = dict(tiles)
                trial[a.name] = nt
                place_body_boxes(kernel, boxes, trial)
                if ldm_bytes(kernel, boxes, trial) > budget:
                    continue
                s = cost.seconds(trial)
                if s < best * (1 - 1e-9) and (cand is None or s < cand[0]):
                    cand = (s, trial)
        if cand is None:
            break
        best, tiles = cand
    place_body_boxes(kernel, boxes, tiles)
    for b in boxes:
        b.tiles = tiles
    sched = Schedule(tiles, compute_order(kernel), boxes, ldm_bytes(kernel, boxes, tiles), budget,
                     spatial_tiles(kernel, tiles), cost.tile_seconds(tiles))
    kernel.schedule = sched
    return kernel
