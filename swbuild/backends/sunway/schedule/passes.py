"""The Sunway kernel-scheduling passes, one decision each, in the order pipeline.py runs them.

Each pass is `(Program, Target, Options) -> Program`. Between passes a compute kernel's
decisions so far live in `program.target_state.drafts[kernel.name]` (a `Draft`); the pass
`lay_out_ldm` turns them into the kernel's `Schedule`, which the printers and the predictor
read. Kernels the backend prints by itself (`kind != "compute"`) are scheduled in kinds/.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ....support.errors import LdmError
from ....support.progress import Steps
from ....ir.loopnest import Acc, Const, substitute_acc
from ..cost.predict import boxes_key, compulsory_bytes, simulate
from . import parallel, reorder
from .dma import apply_blocking
from .grid import ROW, spatial_tiles
from .kernel_schedule import Schedule, classify_iterators, ldm_align
from .ldm import Search, known_tiles, ldm_budget, search_seconds, search_tiles, signature

TRAFFIC_WEIGHTS = (0.0, 1e-11, 2e-11, 5e-11, 1e-10, 2e-10, 5e-10, 1e-9, 2e-9, 5e-9)


@dataclass
class Draft:
    """One compute kernel's schedule while the passes decide it."""
    search: Search                # the cost model and LDM arithmetic of this kernel
    tiles: dict = None            # axis -> tile size (choose_tiles)
    seconds: float = 0.0          # modelled seconds per tile at these tiles (choose_buffering)
    double_buffer: bool = False   # (choose_buffering)
    vector: object = None         # simd.VectorPlan or None (choose_buffering)
    lane: str = None              # row sharing: the axis a mesh row splits (choose_row_sharing)
    share_width: int = ROW        # CPEs one broadcast feeds: a row (8), or all of them
    cols: bool = False            # 2-D sharing: columns share too (grid.column_axes)
    red_order: list = field(default_factory=list)   # tiled reduce loops, outermost first (order_loops)


@dataclass
class SunwayState:
    """What the Sunway passes carry between them (`program.target_state`)."""
    traffic_weight: float = None   # seconds per byte of traffic, when `traffic_target` priced it
    drafts: dict = field(default_factory=dict)   # kernel name -> Draft
    launches: list = None          # stitch.Launch per athread_spawn (option grouping), else one per kernel
    channel_blocks: list = None    # option channel_blocks: the tensors stored [N][C/8][H][W][8], sorted


def _compute(program):
    return [k for k in program.kernels if k.kind == "compute"]


def traffic_weight_for(program, hw, budget, options, target, toolchain_hash=""):
    """The smallest price of main-memory traffic (seconds per byte, from TRAFFIC_WEIGHTS) at
    which the modelled traffic of the whole program is at most `target` times its compulsory
    traffic (a Lagrangian relaxation of that global constraint: every kernel then minimises
    time + price x bytes on its own). The largest price when no price is low enough."""
    comp = sum(compulsory_bytes(k) for k in _compute(program))
    for w in TRAFFIC_WEIGHTS:
        est = 0
        for k in _compute(program):
            s = Search(k, hw, budget, dict(options, traffic_weight=w), program.graph, toolchain_hash)
            est += s.evaluate(search_tiles(s))[3]
        if est <= target * comp:
            return w
    return TRAFFIC_WEIGHTS[-1]


def price_traffic(program, target, options):
    """Option `traffic_target`: the price of a byte of traffic every tile search then pays."""
    if options.get("traffic_target") in (None, "", "off"):
        return program
    w = traffic_weight_for(program, target.hardware, ldm_budget(target, options), options,
                           float(options["traffic_target"]), target.sha256)
    program.target_state.traffic_weight = w
    program.notes.append(f"traffic weight {w:g} s/B for traffic <= {options['traffic_target']} x compulsory")
    return program


def drop_empty_reductions(program, target, options):
    """A reduction over nothing is its initial value: an element-wise kernel of the epilogue."""
    for k in _compute(program):
        if k.combine is not None and any(a.extent == 0 for a in k.reduce_axes):
            k.body = substitute_acc(k.epilogue, Const(float(k.init)))
            k.epilogue, k.combine, k.reduce_axes = Acc(), None, ()
    return program


def choose_tiles(program, target, options):
    """Tile sizes that fit LDM and minimise the modelled time (swTVM Algorithm 1, ldm.py)."""
    state = program.target_state
    if state.traffic_weight is not None:
        options = dict(options, traffic_weight=state.traffic_weight)
    budget = ldm_budget(target, options)
    kernels = _compute(program)
    searches = [Search(k, target.hardware, budget, options, program.graph, target.sha256) for k in kernels]
    parallel.prefetch(search_tiles, parallel.distinct_misses(searches, signature, known_tiles), search_seconds)
    with Steps(len(kernels), "schedule") as progress:    # the long pass: [37/59] schedule: k36_conv
        for k, s in zip(kernels, searches):
            progress.step(k.name)
            state.drafts[k.name] = Draft(s, tiles=search_tiles(s))
    return program


def choose_buffering(program, target, options):
    """Double-buffer the boxes (and the vector plan) when the cost model says it pays."""
    for k in _compute(program):
        d = program.target_state.drafts[k.name]
        d.seconds, d.double_buffer, d.vector, _, _ = d.search.evaluate(d.tiles)
    return program


def choose_row_sharing(program, target, options):
    """SW26010: the axis a mesh row (or the whole array) splits so one broadcast DMA feeds
    the row (array), or none. SW26010-Pro (RMA) may also share along mesh columns (2-D
    sharing, grid.column_axes)."""
    for k in _compute(program):
        d = program.target_state.drafts[k.name]
        lane = d.search.evaluate(d.tiles)[4] or (None, ROW)
        d.lane, d.share_width, d.cols = lane[0], lane[1], len(lane) == 3
    return program


def block_constants(program, target, options):
    """Fix each box at the chosen tiles; re-lay out constant boxes in blocks (dma.py)."""
    drop_unused_constants(program, fix_boxes(program))
    return program


def fix_boxes(program):
    """block_constants without freeing the originals: the constants it re-laid out."""
    relaid = set()
    for k in _compute(program):
        d = program.target_state.drafts[k.name]
        forms = d.search.mesh_forms(d.tiles, d.lane) if d.cols else None
        for b in d.search.boxes:
            b.finish(d.tiles)
            b.shared = d.lane is not None and b.context != "out" and d.lane not in b.vars
            b.share_form = forms.get(id(b)) if forms is not None else None
            if forms is not None:       # 2-D: a row's, a column's, the array's or nobody's broadcast
                b.shared = b.share_form is not None
        if program.graph is not None:
            before = dict(k.buffers)
            apply_blocking(k, program.graph, d.search.boxes, d.tiles)
            relaid.update(before[n].tensor for n in k.buffers if k.buffers[n].tensor != before[n].tensor)
    return relaid


def drop_untaken(program, before):
    """Remove the tensors added to the graph since `before` (its tensor names) that no kernel
    reads: the copies of variants a pass tried and did not take."""
    used = {b.tensor for k in program.kernels for b in k.buffers.values()}
    for name in set(program.graph.tensors) - before - used:
        del program.graph.tensors[name]


def drop_unused_constants(program, names):
    """Free the data of constants every reader of which now reads a re-laid-out copy: the
    original would otherwise stay in memory beside its copy (vgg16: half a gigabyte)."""
    if not names:
        return
    used = set(program.inputs) | set(program.outputs)
    for k in program.kernels:
        for b in k.buffers.values():
            used.update((b.tensor, program.root(b.tensor)))
    used.update(program.aliases.keys())
    used.update(program.aliases.values())
    g = program.graph
    for n in sorted(names - used):
        g.tensors[n] = replace(g.tensors[n], data=None)


def order_loops(program, target, options):
    """The order of the tiled reduce loops with the fewest DMAs (reorder.py)."""
    for k in _compute(program):
        d = program.target_state.drafts[k.name]
        d.red_order, _ = reorder.order_reduce(k, d.search.boxes, d.tiles)
    return program


def lay_out_ldm(program, target, options):
    """Give every moving box its halves, count the LDM and set the kernel's Schedule."""
    budget = ldm_budget(target, options)
    for k in _compute(program):
        d = program.target_state.drafts[k.name]
        s, tiles, boxes = d.search, d.tiles, d.search.boxes
        for b in boxes:
            b.halves = 2 if d.double_buffer and b.context != "out" and s.moves(b, tiles) else 1
        E = k.elem_bytes
        ldm = ldm_align(math.prod(tiles[a.name] for a in k.axes) * E)
        ldm += sum(ldm_align(b.cap(tiles) * k.buf_bytes(b.buf)) * b.halves for b in boxes if b.context != "out")
        ldm += sum(ldm_align(b.stage.box.cap(tiles) * k.buf_bytes(b.buf)) for b in boxes if b.stage is not None)
        if ldm > budget:        # cannot happen: the search only keeps fitting tiles
            raise LdmError(k.name, ldm, budget)
        k.schedule = Schedule(tiles, d.red_order, [a.name for a in k.axes], "cyclic", boxes, ldm, budget,
                              spatial_tiles(k, tiles), d.double_buffer, d.vector,
                              classify_iterators(k, boxes, tiles), d.seconds, lane=d.lane,
                              share_width=d.share_width, cols=d.cols)
    return program


def choose_partition(program, target, options):
    """Grid order and cyclic/block deal over the CPEs with the fewest DMAs (exact count).

    Only when some box can stay in LDM across a CPE's consecutive tiles; the predictor counts.
    Repeated layers (the same axes, tiles and boxes) are counted once."""
    chosen = {}
    for k in _compute(program):
        sched, cores = k.schedule, program.target_state.drafts[k.name].search.cores
        if sched.cols or not reorder.reusable_across_tiles(k, sched.boxes, sched.tiles):
            continue        # 2-D sharing needs the cyclic deal in axis order it was costed with

        def count(order, mode, k=k):
            r = simulate(k, cores, 0, None, order, mode)
            return int(r["get_ops"].sum()), int(r["get_bytes"].sum())
        key = _partition_key(k, sched, cores)
        if key not in chosen:
            chosen[key] = reorder.order_grid(k, sched.boxes, sched.tiles, cores, count)
        sched.grid_order, sched.partition = list(chosen[key][0]), chosen[key][1]
    return program


def schedule_drafted(program, target, options):
    """The pipeline's passes from a drafted tile choice to a kernel's Schedule (buffering, row
    sharing, boxes, loop order, LDM, partition): a program of one trial kernel runs them as the
    build does (trial_seconds.py, wide_weights.py's re-search)."""
    for run in (choose_buffering, choose_row_sharing):
        run(program, target, options)
    fix_boxes(program)
    for run in (order_loops, lay_out_ldm, choose_partition):
        run(program, target, options)
    return program


def _partition_key(k, sched, cores):
    """What the DMA counts of choose_partition depend on (predict.simulate without hw): the
    axes, the tiles and reduce order, the sharing, and the boxes (predict.boxes_key)."""
    return (cores, tuple((a.name, a.extent) for a in k.axes), tuple((a.name, a.extent) for a in k.reduce_axes),
            k.combine, tuple(sched.tiles.items()), tuple(sched.red_order), sched.lane, sched.share_width,
            boxes_key(sched))
