"""A compute kernel's Sunway schedule: what the scheduling passes decided and the printers,
the predictor and the plan read (tiles, loop orders, CPE partition, DMA boxes, LDM use)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ....ir.sizes import round_up

LDM_ALIGN = 64      # each LDM buffer (half) is rounded up to this many bytes


def ldm_align(n):
    """LDM bytes a buffer (half) of n bytes takes."""
    return round_up(n, LDM_ALIGN)


@dataclass
class Schedule:
    tiles: dict                 # axis name -> tile size
    red_order: list             # tiled reduce loops, outermost first (reorder.py)
    grid_order: list            # spatial axes, outermost first, in which the tile grid is flattened
    partition: str              # "cyclic" | "block" (grid.py)
    boxes: list                 # BoxPlan per (buffer, context, pad)
    ldm_bytes: int              # LDM buffers per CPE at these tiles
    ldm_budget: int
    ntiles: int                 # spatial tiles dealt to CPEs
    double_buffer: bool = False
    vector: object = None       # simd.VectorPlan or None
    iterators: dict = field(default_factory=dict)
    modeled_tile_seconds: float = 0.0
    notes: list = field(default_factory=list)
    lane: str = None            # row sharing: the axis a mesh row splits (grid.py), or None
    share_width: int = 8        # CPEs a broadcast feeds: a mesh row, or all 64 (array sharing)
    cols: bool = False          # 2-D sharing: boxes also go along mesh columns (BoxPlan.share_form)
    prefetched: tuple = ()      # constant boxes whose first fetch the previous kernel of the launch issues (prefetch.py)
    hook: bool = False          # issues the next kernel's prefetch once its own first fetches are under way

    @property
    def order(self):
        """Loop order, outermost first: grid, reduce tiles (compute loops follow)."""
        return list(self.grid_order) + list(self.red_order)

    def __str__(self):
        t = ", ".join(f"{k}:{v}" for k, v in self.tiles.items())
        extra = []
        if self.double_buffer:
            extra.append("double-buffered")
        if self.vector is not None:
            extra.append(str(self.vector))
        blk = [b.buf for b in self.boxes if b.blocked is not None]
        if blk:
            extra.append(f"blocked {blk}")
        staged = [f"{b.stage.stage.producer.op} from {b.buf}" for b in self.boxes if b.stage is not None]
        if staged:
            extra.append(f"recomputes {staged} in LDM")
        if self.prefetched:
            extra.append(f"first fetch of {list(self.prefetched)} issued by the previous kernel")
        if self.lane and self.cols:
            extra.append(f"rows split {self.lane}, columns the rest, broadcast "
                         f"{[(b.buf, b.share_form) for b in self.boxes if b.shared]}")
        elif self.lane:
            who = "rows" if self.share_width == 8 else f"all {self.share_width} CPEs"
            extra.append(f"{who} split {self.lane}, broadcast {[b.buf for b in self.boxes if b.shared]}")
        return (f"schedule tiles({t}) grid({', '.join(self.grid_order)}, {self.partition}) "
                f"reduce({', '.join(self.red_order)}) spatial tiles {self.ntiles}, "
                f"LDM {self.ldm_bytes}/{self.ldm_budget} B" + ("; " + "; ".join(extra) if extra else ""))


def classify_iterators(kernel, boxes, tiles):
    used = set()
    for b in boxes:
        used |= b.vars
    out = {}
    for a in list(kernel.axes) + list(kernel.reduce_axes):
        kinds = []
        if a.name in used:
            kinds.append("size")
        if tiles[a.name] < a.extent:
            kinds.append("num")
        out[a.name] = "+".join(kinds) or "comp"
    return out
