"""Work split and staging: a loop-nest Kernel → a device kernel (devir.DevKernel).

Every kernel runs as 16 tasks (UNION1: 4 clusters × 4 cores); the cluster and core ids
are the two outermost loops. Data moves GDRAM → NRAM in tiles (and convolution weights
GDRAM → SRAM → WRAM, each cluster's four cores loading a quarter into the shared SRAM and
then copying the whole block into their WRAM). Tiles have constant full extents; tails,
halos, channel padding and tasks without work are guards on the statements (partition.py
removes them, preprocess.py resolves the rest).

Kernel classes:
  elementwise  no reduction, affine accesses: flat tiles, three-address statements
  conv         Conv / ConvTranspose (and Gemm / 2-D MatMul as a 1×1 convolution over
               rows): HWC input tiles with halo, WRAM weights in the bank layout,
               rows split over tasks (weights shared through SRAM) or output-channel
               blocks split over tasks (each task its own weights); a stem on the
               channels-first image staged by rows and transposed on chip, its kernel
               height folded into its channels where cheaper (stem.py)
  pool         MaxPool / AveragePool with a constant window count: HWC tiles with halo
  lrn          LRN: [C][T] tiles, the channel window as row-shifted adds (lrn.py)
  rowreduce    max / sum over one contiguous axis (softmax's): a row per __bang_max /
               __bang_sum (rowreduce.py)
  scalar       anything else: scalar C on GDRAM, counted as not tensorized
"""
from __future__ import annotations

from dataclasses import replace

from ....ir.loopnest import Acc
from .builder import KB, Unschedulable
from .conv import sched_conv
from .conv_geometry import global_pool_window
from .elementwise import sched_elementwise
from .integer import INTEGER_OPS, digit_floor, integer_as_conv
from .lrn import sched_lrn
from .rowreduce import sched_rowreduce
from .narrow import saturated_store
from .pool_sum import sum_from_mean
from .quantize import identity_on_domain, pair_requantize, vector_quantize


CONV_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")   # __bang_conv (a reduction by sum)
POOL_OPS = ("MaxPool", "AveragePool")                    # __bang_maxpool / __bang_avgpool


def schedule_kernel(k, program, tc, layouts, store):
    """DevKernel of one loop-nest kernel; the scalar class when nothing else applies."""
    attempts = []
    if any(b.dtype != "float32" for b in k.buffers.values()):    # index tensors (Gather): scalar C
        return sched_scalar(KB(k, program, tc, layouts, store), ["integer buffers"])
    o8 = program.root(k.buffers[k.out].tensor) in (getattr(program.target_state, "int8_storage", None) or ())
    k = _vector_quantize(k, program, o8, tc.hardware)
    k = digit_floor(k, program)         # a wide QLinearConv's digit: floor on the vector unit
    if k.op not in INTEGER_OPS and o8:
        k = saturated_store(k, program)     # stored as bytes: the conversion saturates (narrow.py)
        k = identity_on_domain(k, program)  # a max pool's requantization that gives its input back
        k = pair_requantize(k, program)     # a function of two int8 leaves: four passes, proven per pair
    if k.op in INTEGER_OPS and k.combine == "sum" and o8:
        k = pair_requantize(k, program)     # a residual Add fused here: four passes, proven per pair
    if k.op in INTEGER_OPS and k.combine == "sum":    # the zero point into the epilogue, then a conv
        try:
            k = integer_as_conv(k, program, tc.hardware)
        except Unschedulable as e:
            return sched_scalar(KB(k, program, tc, layouts, store), [str(e)])
    if INTEGER_OPS.get(k.op, k.op) in CONV_OPS and k.combine == "sum":
        attempts.append(lambda kb: sched_conv(kb))
    if k.op in POOL_OPS:
        attempts.append(lambda kb: sched_conv(kb, pool=True))
    window = global_pool_window(k)
    if window is not None:          # the whole image as one window: __bang_avgpool
        attempts.append(lambda kb: sched_conv(_as_kernel(kb, window), pool=True))
    summed = sum_from_mean(k, program)
    if summed is not None:          # an integer global pool's exact sum from __bang_avgpool (pool_sum.py)
        attempts.append(lambda kb: sched_conv(_as_kernel(kb, summed), pool=True))
    if k.op == "LRN":
        attempts.append(sched_lrn)
    elif k.combine in ("max", "sum") and len(k.reduce_axes) == 1 and INTEGER_OPS.get(k.op, k.op) not in CONV_OPS:
        attempts.append(sched_rowreduce)
    if not k.combine:
        attempts.append(sched_elementwise)
    if k.extra.get("fixed_point"):       # the int8 tile pads Ci to 64: when it does not fit, the float one
        attempts.append(lambda kb: sched_conv(_conv_as(kb, 0)))
    why = []
    for fn in attempts:
        kb = KB(k, program, tc, layouts, store)
        try:
            dk = fn(kb)
            if dk.info["nram_bytes"] > tc.nram_budget or dk.info["wram_bytes"] > tc.wram_budget \
                    or dk.info["sram_bytes"] > tc.sram_budget:
                raise Unschedulable("on-chip memory")
            return dk
        except Unschedulable as e:
            why.append(str(e))
    return sched_scalar(KB(k, program, tc, layouts, store), why)


def _vector_quantize(k, program, o8, hw=None):
    """Every QuantizeLinear of the kernel on the vector unit (quantize.py); o8: the stored value
    is converted to int8 bytes, which saturates (the element-wise and pool kernels' store)."""
    stored_in_body = isinstance(k.epilogue, Acc) and not k.combine
    body, nb = vector_quantize(k.body, k, program, o8 and stored_in_body, hw)
    epi, ne = vector_quantize(k.epilogue, k, program, o8 and not stored_in_body, hw)
    for s, r in nb + ne:
        note = f"{k.name}: QuantizeLinear by {s!r} on the vector unit, " + (
            "as x * fl(1 / s) plus its exact error (exact_quotient.py, proven bit for bit)" if r == "two floats" else
            f"as a product by {r!r} (proven bit for bit)" if r is not None else
            "its division kept (no reciprocal proven bit for bit)")
        if note not in program.notes:       # schedule_kernels may schedule a kernel twice
            program.notes.append(note)
    return replace(k, body=body, epilogue=epi) if (body, epi) != (k.body, k.epilogue) else k


def _as_kernel(kb, k):
    kb.k = k
    return kb


def _conv_as(kb, fx):
    """The integer kernel on float __bang_conv (fx = 0: exact integers in float32, integer.py
    proved the sums exact)."""
    kb.k = replace(kb.k, extra={**kb.k.extra, "fixed_point": fx})
    return kb


def sched_scalar(kb, why=()):
    """The whole kernel in scalar C on GDRAM (one compute statement, not tensorized)."""
    k = kb.k
    views = {}
    for name, b in k.buffers.items():
        st = kb.gstrides(b)
        if st is None:
            raise Unschedulable(f"kernel {k.name}: view {b.shape} of {b.tensor} is incompatible with its layout")
        views[name] = (kb.gparam(b.tensor), st, tuple(b.shape), b.dtype)
    sid = kb.sid("compute", "scalar")
    dk = kb.finish("scalar", [], why="; ".join(why))
    dk.gview = views
    dk.info["scalar_sid"] = sid
    return dk
