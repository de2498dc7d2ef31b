"""DMA footprints: the rectangular box of a buffer that one tile touches.

Each (buffer, context) pair gets one LDM box: the union of the bounding boxes of its loads
(PPCG's rectangular over-approximation), clamped to the tensor. Trailing dimensions the box
always covers whole merge into one contiguous run; the dimension above them becomes the
`bsize`/`stride` of one strided DMA; dimensions above that are loops of strided DMAs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..ir.loopnest import affine, index_range, iter_loads


@dataclass
class BoxPlan:
    buf: str
    context: str          # "body" (inside reduce loops), "epi" (after them) or "out"
    index: list           # per dim: list of index Exprs to cover (union)
    shape: tuple          # the buffer view's shape
    vars: frozenset       # axis names the box depends on
    pad: bool             # some load may fall outside the tensor
    axis_extents: dict    # extent of every axis of the kernel
    level: int = -1       # body boxes: reduce-tile loop depth it is issued at (-1: before them)
    tiles: dict = None    # the tile sizes the schedule chose (set by ldm.size_buffers)

    def extents(self, tiles):
        """Largest extent per dim over all tiles of the given sizes (clamped to the tensor)."""
        ranges = {v: (0, t - 1) for v, t in tiles.items()}
        out = []
        for d, exprs in enumerate(self.index):
            lo = min(index_range(e, ranges)[0] for e in exprs)
            hi = max(index_range(e, ranges)[1] for e in exprs)
            out.append(min(hi - lo + 1, self.shape[d]))
        return tuple(out)

    def whole(self, d, tiles, ext):
        """Dim d is covered whole by every tile: its axes are not split (boundary tiles of a
        split axis are smaller, so their boxes can be too) and the box spans the tensor."""
        vs = {v for e in self.index[d] for v in affine(e) if v}
        return ext[d] >= self.shape[d] and all(tiles[v] >= self.axis_extents[v] for v in vs)

    def merge_dim(self, ext, tiles):
        """First dim from which every dim is covered whole (a contiguous tail)."""
        m = len(self.shape)
        while m > 0 and self.whole(m - 1, tiles, ext):
            m -= 1
        return m

    def elems(self, tiles):
        return math.prod(self.extents(tiles))

    def transfers(self, tiles):
        """DMA calls per box load (a strided call moves a whole 2-D slab)."""
        ext = self.extents(tiles)
        m = self.merge_dim(ext, tiles)
        return math.prod(ext[:max(m - 2, 0)])

    def run_bytes(self, tiles, itemsize=4):
        """Bytes of one contiguous run in main memory."""
        ext = self.extents(tiles)
        m = self.merge_dim(ext, tiles)
        tail = math.prod(self.shape[m:])
        return (ext[m - 1] if m else 1) * tail * itemsize

    def runs(self, tiles):
        ext = self.extents(tiles)
        m = self.merge_dim(ext, tiles)
        return math.prod(ext[:max(m - 1, 0)])


def box_plans(kernel):
    """One BoxPlan per (buffer, context); the output box last."""
    plans = []
    extents = {a.name: a.extent for a in tuple(kernel.axes) + tuple(kernel.reduce_axes)}
    for ctx, expr in (("body", kernel.body), ("epi", kernel.epilogue)):
        by_buf = {}
        for ld in iter_loads(expr):
            by_buf.setdefault(ld.buf, []).append(ld)
        for buf, loads in by_buf.items():
            shape = kernel.buffers[buf].shape
            index = [[ld.index[d] for ld in loads] for d in range(len(shape))]
            for exprs in index:
                for e in exprs:
                    if affine(e) is None:
                        raise ValueError(f"kernel {kernel.name}: non-affine index {e} of {buf}")
            names = frozenset(v for exprs in index for e in exprs for v in affine(e) if v)
            plans.append(BoxPlan(buf, ctx, index, shape, names, any(ld.pad is not None for ld in loads), extents))
    out = kernel.buffers[kernel.out]
    index = [[a.var + o if o else a.var] for a, o in zip(kernel.axes, kernel.out_offset)]
    plans.append(BoxPlan(kernel.out, "out", index, out.shape, frozenset(a.name for a in kernel.axes), False, extents))
    return plans
