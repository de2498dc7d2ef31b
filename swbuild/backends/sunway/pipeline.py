"""The Sunway pipeline: the passes, in the order they run (`swbuild pipeline --target T`).

Every pass is `(Program, Target, Options) -> Program`; `program.target_state` is a
`SunwayState` (schedule/passes.py) while they run.
"""
from __future__ import annotations

from ...optimizer.fuse import fuse_epilogues
from ...support.errors import UnsupportedError
from ..cexpr import int_problem
from ...optimizer.grouping import group_kernels
from ...optimizer.memory import inplace_concat, plan_memory
from .kinds import schedule_special_kernels
from .passes.channel_blocks import channel_blocks
from .passes.vector_weights import vector_weights
from .passes.flat_pixels import flat_pixels
from .passes.mesh import choose_mesh_kernels
from .schedule.passes import (SunwayState, block_constants, choose_buffering, choose_partition, choose_row_sharing,
                              choose_tiles, drop_empty_reductions, lay_out_ldm, order_loops, price_traffic)
from .schedule.split import split_reductions
from .passes.prefetch import prefetch_next_kernel
from .passes.stitch import group_launches
from .passes.stitch_producers import stitch_producers
from .passes.siblings import merge_siblings
from .passes.subsample import subsample_inputs
from .passes.wide_weights import wide_weights

STATE = SunwayState

# A program with float64 or int32/int64 kernels (a float64 model: SW26010's native precision;
# integer arithmetic at run time) runs the plain path: its SIMD plans (floatv4), row-shared
# broadcasts, channel blocks, grouping and stitching are written for float32 boxes; tiles, LDM
# sizes and DMA (ldm.py, batch.py, predict.py) take each box's element size.
PLAIN_FOR_DOUBLES = {"simd": "off", "row_share": "off", "channel_blocks": "off", "grouping": "off", "stitch": "off",
                     "mesh_gemm": "off"}


def options_for(program, options):
    """The options the pipeline runs with: the plain path when a kernel holds a float64 or
    integer buffer; an integer kernel whose arithmetic has no exact C is refused, naming it."""
    typed = [k for k in program.kernels if k.kind == "compute"
             and any(b.dtype in ("float64", "int32", "int64") for b in k.buffers.values())]
    for k in typed:
        if k.out_dtype in ("int32", "int64"):
            why = next(filter(None, (int_problem(e) for e in (k.body, k.epilogue))), None)
            if why:
                e = UnsupportedError(f"node '{k.node}' ({k.op}): {why} has no exact arithmetic in C for dtype "
                                     f"{k.out_dtype} (kernel {k.name}); integers compute in C's integer types")
                e.kernel = k.name   # `swbuild ops` answers for this node and goes on with the others
                raise e
    return {**(options or {}), **PLAIN_FOR_DOUBLES} if typed else options

PIPELINE = [
    fuse_epilogues,             # element-wise consumers into their producer's epilogue
    inplace_concat,             # Concat inputs written in place: their copy kernels vanish
    merge_siblings,             # 1x1 convolutions of one input as one kernel, outputs inside its output
    subsample_inputs,           # strided activation reads (stride-2 1x1 convolutions) from a dense copy
    split_reductions,           # long reductions with small outputs split over the CPEs
    group_kernels,              # option grouping: GraphTurbo groups, instances, binding, scope
    stitch_producers,           # option stitch: cheap producers recomputed in their consumer's LDM
    plan_memory,                # the static arena
    channel_blocks,             # option channel_blocks: activations in 8-channel blocks
    flat_pixels,                # a row-major pair of spatial axes as one (1x1 convolutions' pixels)
    vector_weights,             # weights read along the output channels transposed for SIMD
    schedule_special_kernels,   # run-time Gather: fixed LDM buffers
    price_traffic,              # option traffic_target: the price of a byte of traffic
    drop_empty_reductions,      # a reduction over nothing becomes element-wise
    choose_tiles,               # tile sizes that fit LDM, by the cost model
    choose_buffering,           # double buffering and the SIMD plan
    choose_row_sharing,         # SW26010: a mesh row shares broadcast DMAs
    choose_mesh_kernels,        # option mesh_gemm: 1x1 convolutions as SUMMA over the mesh (messages)
    block_constants,            # constant boxes re-laid out in blocks
    order_loops,                # reduce-loop order with the fewest DMAs
    lay_out_ldm,                # LDM halves and bytes: the kernel's Schedule
    choose_partition,           # grid order and cyclic/block deal over the CPEs
    wide_weights,               # weight boxes of several reduce tiles: fewer, longer DMAs
    group_launches,             # option grouping: a group's kernels in one athread_spawn
    prefetch_next_kernel,       # in a launch, a kernel issues the next one's first fetches
]
