"""The DianNao pipeline: the passes, in the order they run (`swbuild pipeline --target T`).

    fuse epilogues → an integer convolution's DequantizeLinear into its element-wise readers
    → a standalone DequantizeLinear into the convolution epilogues reading it
    → storage layouts (NHWC around convolutions, identity copies removed) → channel Concats
    written in place
    → static arena → work split and staging (schedule; the arena again when int8 activations
    are stored as bytes) → loop partitioning (Algorithm 2,
    option `partition`) → pre-processing of what is left (Algorithm 1: extra computation,
    padded lengths) → instruction mapping (ISA Mapper) → load / compute / store pipelines
    (option `double_buffer`) → BANG C.

Every pass is `(Program, Target, Options) -> Program`; `program.target_state` is a
`DianNaoState` while they run and what the printer reads after. See docs/diannao.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ...optimizer.fuse import fuse_epilogues
from ...support.errors import UnsupportedError
from ...ir.loopnest import data_loads
from ...optimizer.grouping import group_kernels
from ...optimizer.memory import plan_memory
from ...config.recipe import option_on
from .concat_slices import concat_in_place
from .read_slices import narrow_offsets, partners, read_slices_in_place
from .defer_dequantize import defer_dequantize
from .inline_dequantize import inline_dequantize
from .devir import Stmt, stmts
from .layout import choose_layouts, eliminate_identity_copies
from .mapper import map_kernel, map_stmt
from .partition import partition_kernel
from .pingpong import pipeline_kernel
from .preprocess import align_extents, choose_fills, resolve_guards, resolve_stmt
from .recurrence import sched_recurrence
from .schedule import narrow, schedule_kernel
from .schedule.builder import Store
from .cross_layer import prefetch_across
from .schedule.residency_split import chunk_hints
from .residency import keep_intermediates_on_chip
from .residency_concat import keep_concats_on_chip
from .stitch import group_launches


@dataclass
class DianNaoState:
    """What the DianNao passes decide (`program.target_state`)."""
    layouts: dict = field(default_factory=dict)   # tensor -> storage layout (NHWC)
    store: Store | None = None    # constants staged for the device image (schedule_kernels)
    dev: list = field(default_factory=list)       # DevKernel per kernel, in order
    partitioned: bool = True                      # option `partition` (loop partitioning ran)
    launches: list = None                         # option grouping: stitch.Launch list (None: one per kernel)
    double_buffer: bool = True                    # option double_buffer: tiles chosen for pingpong.py
    int8_storage: frozenset = frozenset()         # tensors held as int8 bytes in GDRAM (schedule/narrow.py)
    cluster_split: bool = True                    # option cluster_split: schedule/conv.py's clusters mode
    weight_prefetch: bool = True                  # option weight_prefetch: schedule/conv.py's next weight block async
    weight_broadcast: str = "off"                 # option weight_broadcast (off/on/all): schedule/weight_broadcast.py
    input_stationary: str = "on"                  # option input_stationary (off/on/all): schedule/conv.py's input tile kept over blocks
    on_chip: dict = field(default_factory=dict)   # option sram_residency: tensor -> where it stayed (residency.py)
    chunk_hints: dict = field(default_factory=dict)  # option residency_split: kernel -> axis-0 elements per task
    storage_shapes: dict = field(default_factory=dict)  # option concat_in_place: tensor -> its Concat's NHWC shape
    read_slices: dict = field(default_factory=dict)  # option concat_in_place: channel slice -> the tensor it is read in


STATE = DianNaoState
SPECIAL_SCHEDULERS = {"recurrence": sched_recurrence}   # kernel kind -> its own scheduler (and printer)


def choose_storage_layouts(program, target, options):
    """NHWC storage around convolutions; copies that became identities are removed."""
    program.target_state.layouts = choose_layouts(program, target.hardware)
    return eliminate_identity_copies(program, program.target_state.layouts)


def write_concats_in_place(program, target, options):
    """Option `concat_in_place`: NHWC channel Concats' inputs written into their slices, copies dropped."""
    if option_on(options, "concat_in_place"):
        shapes = concat_in_place(program, program.target_state.layouts)
        # and channel windows copied out of an NHWC tensor read where they are (read_slices.py)
        program.target_state.storage_shapes = {**shapes, **read_slices_in_place(program, program.target_state.layouts)}
    return program


def schedule_kernels(program, target, options):
    """Per kernel: its class, work split over the cores and staging through NRAM/WRAM/SRAM."""
    st = program.target_state
    st.double_buffer = option_on(options, "double_buffer")
    st.cluster_split = option_on(options, "cluster_split")
    st.weight_prefetch = option_on(options, "weight_prefetch")
    st.weight_broadcast = str(options.get("weight_broadcast", "off")).lower()
    st.input_stationary = str(options.get("input_stationary", "on")).lower()
    st.stem_fold = option_on(options, "stem_fold")
    st.cycle_ops = option_on(options, "cycle_ops")
    # int8 activations as bytes in GDRAM where every kernel touching them can (schedule/narrow.py)
    st.int8_storage = narrow.candidates(program) if int(target.hardware.get("conv_int8_macs_per_cycle", 0)) > 0 \
        else frozenset()
    while True:
        st.store = Store(program.graph)
        st.dev = [SPECIAL_SCHEDULERS.get(k.kind, schedule_kernel)(k, program, target, st.layouts, st.store)
                  for k in program.kernels]
        bad = partners(narrow.unfulfilled(st.dev, st.int8_storage), st.read_slices, program.root) & st.int8_storage
        if not bad:
            break
        st.int8_storage = st.int8_storage - bad
    # option residency_split: element-wise producers split like their convolutions, again
    if option_on(options, "residency_split") and option_on(options, "sram_residency"):
        st.chunk_hints = chunk_hints(program, st.dev, option_on(options, "sram_concats"))
        st.dev = [schedule_kernel(k, program, target, st.layouts, st.store) if k.name in st.chunk_hints else dk
                  for k, dk in zip(program.kernels, st.dev)]
    return program


def replan_memory(program, target, options):
    """int8 activations stored as bytes (schedule/narrow.py) take one byte per element in the arena."""
    narrow = program.target_state.int8_storage
    if narrow:
        narrow_offsets(program, narrow)
        plan_memory(program, target, options, itemsize={t: 1 for t in narrow})
    return program


def remember_whole_fills(program, target, options):
    """Keep each halo fill unguarded too: one whole-tile fill may beat its fragments later.

    preprocess.choose_fills decides after partitioning."""
    for dk in program.target_state.dev:
        dk.info["fills"] = {s.sid: {"whole": _whole_fill(s)}
                            for s in stmts(dk.body) if s.kind == "fill" and s.note == "halo"}
    return program


def partition_loops(program, target, options):
    """Option `partition`: split loop ranges so tiling guards become always true or false."""
    st = program.target_state
    st.partitioned = option_on(options, "partition")
    if st.partitioned:
        for dk in st.dev:
            partition_kernel(dk)
    return program


def preprocess_guards(program, target, options):
    """What guards are left become extra computation; lengths padded to the alignment."""
    for dk in program.target_state.dev:
        dk.body = resolve_guards(dk.body)
        align_extents(dk.body, dk, target.hardware)
    return program


def _whole_fill(s):
    """The fill of the whole tile, within its don't-care bounds (folded into its loops) where
    that leaves no guard; else of the whole tile."""
    w = replace(s, guard=s.whole_guard, guard_any=())
    if w.guard:
        r = resolve_stmt(w, {})
        w = r[0] if len(r) == 1 and isinstance(r[0], Stmt) and not r[0].guard else replace(s, guard=(), guard_any=())
    return w


def map_instructions(program, target, options):
    """ISA Mapper: statements become tensor instructions where a pattern matches."""
    for dk in program.target_state.dev:
        map_kernel(dk, target.hardware)
        for f in dk.info.get("fills", {}).values():
            w = f["whole"]
            w.mapped = map_stmt(w, dk, target.hardware, {})
            f["whole"] = w if w.mapped else None
        if option_on(options, "partition"):
            choose_fills(dk.body, dk, target.hardware)
    return program


def pipeline_tiles(program, target, options):
    """Option `double_buffer`: tile loops as load / compute / store over ping-pong buffers."""
    if option_on(options, "double_buffer"):
        for dk in program.target_state.dev:
            pipeline_kernel(dk, target)
    return program


def refuse_doubles(program, target, options):
    """float64 and int32/int64 arithmetic are refused by node: the MLU's vector and matrix units
    compute in float32 / half / fixed point (docs/diannao.md), and computing a float64 model or
    64-bit integers in float32 would silently lose values. Integer indices (Gather's) and the
    boundary's conversions are not arithmetic and stay as before."""
    for k in program.kernels:
        if k.kind != "compute":
            continue
        data = {k.out_dtype} | {
            k.buffers[ld.buf].dtype for e in (k.body, k.epilogue) for ld in data_loads(e)}
        bad = sorted(data & {"float64", "int32", "int64"})
        if bad:
            e = UnsupportedError(f"node '{k.node}' ({k.op}): dtype {bad[0]} at run time is not supported on "
                                 f"{target.name} (the MLU computes in float32, half and fixed point; no double, int32 or "
                                 "int64 arithmetic); the Sunway targets compute it exactly")
            e.kernel = k.name       # `swbuild ops` answers for this node and goes on with the others
            raise e
    return program


def prefetch_next_weights(program, target, options):
    """Option `cross_layer_prefetch`: a launch's next convolution's first weight chunk fetched
    while the kernel before it computes (cross_layer.py)."""
    if option_on(options, "cross_layer_prefetch") and program.target_state.launches is not None:
        hw = target.hardware
        prefetch_across(program, int(hw["sram_bytes"]) - int(hw["sram_reserve_bytes"]))
    return program


def keep_on_chip(program, target, options):
    """Option `sram_residency`: a grouped launch's intermediates in its clusters' SRAM."""
    on = option_on(options, "sram_residency")     # default on: it pays once launches are merged (docs/diannao.md)
    if on and program.target_state.launches is not None:
        hw = target.hardware
        limit = int(hw["sram_bytes"]) - int(hw["sram_reserve_bytes"])
        # option sram_concats: Concat containers first, the longest-lived (residency_concat.py)
        concats = keep_concats_on_chip(program, limit) if option_on(options, "sram_concats") else {}
        program.target_state.on_chip = {**keep_intermediates_on_chip(program, limit), **concats}
    return program


PIPELINE = [
    refuse_doubles,             # float64 kernels: refused by name
    fuse_epilogues,             # element-wise consumers into their producer's epilogue
    defer_dequantize,           # an integer convolution's DequantizeLinear into its element-wise readers
    inline_dequantize,          # a standalone DequantizeLinear of int8 bytes into the epilogues reading it
    choose_storage_layouts,     # NHWC around convolutions
    write_concats_in_place,     # option concat_in_place: channel Concats of NHWC tensors without copies
    group_kernels,              # option grouping: GraphTurbo groups, instances, binding, scope
    plan_memory,                # the static arena
    schedule_kernels,           # work split and staging
    replan_memory,              # the arena again with int8 activations as bytes
    remember_whole_fills,       # halo fills kept whole for choose_fills
    partition_loops,            # Algorithm 2: loop partitioning
    preprocess_guards,          # Algorithm 1: extra computation, padded lengths
    map_instructions,           # ISA Mapper
    pipeline_tiles,             # option double_buffer: __memcpy_async over ping-pong halves
    group_launches,             # option grouping: a group's kernels in one launch
    keep_on_chip,               # option sram_residency: a launch's intermediates in SRAM
    prefetch_next_weights,      # option cross_layer_prefetch: the next conv's first weight chunk early
]
