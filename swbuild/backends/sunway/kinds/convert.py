"""Conversion kernels between typed graph inputs/outputs and float32 (Cast across dtypes).

Kernels compute in float32; a graph input of another dtype (int64 ids and masks, bool) is
read into float32 by one of these, and a float32 result written into a typed graph output.
The view is flat: each CPE takes chunks of CHUNK elements round-robin, DMAs them into LDM,
converts (C conversion: truncation toward zero into integers, `!= 0` into bool; float16,
held as `unsigned short`, through cexpr's sw_h2f / sw_f2h) and puts
them back. The kernel is out[i] = convert(in[i]) over [N].

DMA lengths must be multiples of the toolchain's `dma_align_bytes` (4 B): with 1- or 2-byte
elements the last few (fewer than 4) cannot move by DMA, so CPE 0 converts them with direct
main-memory loads and stores after the chunks (the CPEs' gld/gst; slow, but a few bytes).
"""
from __future__ import annotations

import math

from ....support.errors import LdmError
from ....support.names import c_comment
from ...cexpr import CTYPE, from_float, to_float
from .gather import FixedSchedule, special_prologue
from ..schedule.kernel_schedule import ldm_align

CHUNK = 1024            # elements per DMA: at most 8 KB of int64/float64 and 4 KB of float32 in LDM
SIZES = {"float32": 4, "float16": 2, "float64": 8, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "uint16": 2, "bool": 1}


def _bufs(k):
    src, dst = k.buffers[k.extra["src"]], k.buffers[k.out]
    return src, dst, dst.shape[0]


def dma_elements(k):
    """Elements the chunks move by DMA: a whole number of 4-byte words on both sides."""
    src, dst, n = _bufs(k)
    unit = max(4 // min(4, SIZES[src.dtype]), 4 // min(4, SIZES[dst.dtype]))
    return n - n % unit


def _conv(k, x):
    """C text converting element `x` of the source buffer into the destination's type."""
    src, dst = k.buffers[k.extra["src"]], k.buffers[k.out]
    if src.dtype == dst.dtype and not k.extra.get("to_bool"):
        return x                        # a copy (a float16 output that is a constant: its bits)
    x = to_float(src.dtype, x)
    if k.extra.get("to_bool"):
        return f"({x} != 0 ? 1.0f : 0.0f)" if dst.dtype == "float32" else f"({CTYPE[dst.dtype]})({x} != 0)"
    return from_float(dst.dtype, x, src.dtype)


def convert_c(k, cores, itemsize=4):
    src, dst, n = _bufs(k)
    it, ot = CTYPE[src.dtype], CTYPE[dst.dtype]
    conv = _conv(k, "a[j]")
    s, d = k.extra["src"], k.out
    na = dma_elements(k)
    nch = math.ceil(na / CHUNK)
    tail = [f"    if (cpe == 0)   /* the last {n - na} element(s): fewer bytes than one DMA word */",
            f"        for (long i = {na}L; i < {n}L; i++) (({ot} *)p.{d})[i] = {_conv(k, f'(({it} *)p.{s})[i]')};"] \
        if na < n else []
    return "\n".join([
        f"/* Cast {src.dtype} -> {dst.dtype} (node {c_comment(k.node)}) */",
        *special_prologue(k),
        f"    {it} *a = ({it} *)ldm_malloc({ldm_align(CHUNK * SIZES[src.dtype])});",
        f"    {ot} *b = ({ot} *)ldm_malloc({ldm_align(CHUNK * SIZES[dst.dtype])});",
        f"    for (long t = cpe; t < {nch}L; t += {cores}) {{",
        f"        const long i0 = t * {CHUNK};",
        f"        const int n = (int)SW_MIN({CHUNK}, {na} - i0);",
        f"        sw_get(a, (const {it} *)p.{s} + i0, n * (int)sizeof({it}), 0, 0, &rp);",
        "        ng++;",
        "        SW_WAIT(rp, ng);",
        f"        for (int j = 0; j < n; j++) b[j] = {conv};",
        f"        sw_put(({ot} *)p.{d} + i0, b, n * (int)sizeof({ot}), 0, 0, &rp);",
        "        ng++;",
        "        SW_WAIT(rp, ng);",
        "    }",
        *tail,
        f"    ldm_free(b, {ldm_align(CHUNK * SIZES[dst.dtype])});",
        f"    ldm_free(a, {ldm_align(CHUNK * SIZES[src.dtype])});",
        "}",
        ""])


def convert_predict(k, cores, para_bytes):
    src, dst, _ = _bufs(k)
    na = dma_elements(k)
    nch = math.ceil(na / CHUNK)
    return {"get": {"ops": cores + nch, "bytes": cores * para_bytes + na * SIZES[src.dtype]},
            "put": {"ops": nch, "bytes": na * SIZES[dst.dtype]}}


def convert_ldm_bytes(k):
    src, dst, _ = _bufs(k)
    return ldm_align(CHUNK * SIZES[src.dtype]) + ldm_align(CHUNK * SIZES[dst.dtype])


class ConvertSchedule(FixedSchedule):
    def predict(self, k, cores, para_bytes):
        return convert_predict(k, cores, para_bytes)


def convert_schedule(k, hw, budget, options):
    """No tiling to choose: check the fixed buffers against the budget and record them."""
    need = convert_ldm_bytes(k)
    if need > budget:
        raise LdmError(k.name, need, budget)
    k.schedule = ConvertSchedule(need, budget)
