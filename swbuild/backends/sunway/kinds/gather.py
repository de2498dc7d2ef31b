"""Gather with indices known only at run time (embedding lookups): a special kernel.

Its footprint depends on data, so it is not a box: each CPE takes chunks of indices
round-robin, DMAs the chunk of indices into LDM, then moves each selected row through LDM
(a get of the row, a put to its place in the output). The kernel is out[o, q, i] =
data[o, idx[q], i] over the views [O, N, I] (data), [Q] (indices), [O, Q, I] (out).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ....support.errors import LdmError
from ....support.names import c_comment
from ..schedule.kernel_schedule import ldm_align


@dataclass
class FixedSchedule:
    """The schedule of a kernel with fixed buffers: nothing to model but its LDM."""
    ldm_bytes: int
    ldm_budget: int
    modeled_seconds: float = 0.0
    roofline_seconds: float = 0.0
    compulsory_bytes: int = 0


class GatherSchedule(FixedSchedule):
    def predict(self, k, cores, para_bytes):
        return gather_predict(k, cores, para_bytes)


IDX_CHUNK = 64          # indices fetched per DMA
ROW_CHUNK_BYTES = 16384     # of a row moved per DMA: 16 KB, within either chip's LDM


def _shape(k):
    data = k.buffers[k.extra["data"]]
    out = k.buffers[k.out]
    O, N, I = data.shape
    Q = out.shape[1]
    return O, N, I, Q


def elem_bytes(k):
    """Bytes of one gathered element: int64/float64 tables (RoBERTa's token-type ids) move 8,
    everything else is held in 4-byte words."""
    return 8 if k.buffers[k.extra["data"]].dtype in ("int64", "float64") else 4


def row_chunk(k):
    """Elements of a row moved per DMA."""
    return min(_shape(k)[2], ROW_CHUNK_BYTES // elem_bytes(k))


def special_prologue(k):
    """The opening of a special CPE kernel: fetch its parameter struct, wait, know its CPE."""
    return [f"void {k.name}(void *arg)", "{", f"    struct {k.name}_para p;", "    SW_REPLY rp = 0;", "    int ng = 1;",
            "    sw_get(&p, arg, (int)sizeof(p), 0, 0, &rp);", "    SW_WAIT(rp, ng);", "    const int cpe = SW_CPE_ID();"]


def gather_c(k, cores, itemsize=4):
    O, N, I, Q = _shape(k)
    T, es = row_chunk(k), elem_bytes(k)
    ib = k.buffers[k.extra["indices"]]
    ity = "long long" if ib.dtype == "int64" else "int"
    d, x, o = k.extra["data"], k.extra["indices"], k.out
    nchunks = math.ceil(Q / IDX_CHUNK)
    return "\n".join([
        f"/* Gather (node {c_comment(k.node)}): rows chosen at run time */",
        *special_prologue(k),
        f"    {ity} *ix = ({ity} *)ldm_malloc({IDX_CHUNK * 8});",
        f"    char *row = (char *)ldm_malloc({ldm_align(T * es)});",
        f"    for (long t = cpe; t < {O * nchunks}L; t += {cores}) {{",
        f"        const long oo = t / {nchunks}, q0 = (t % {nchunks}) * {IDX_CHUNK};",
        f"        const int nq = (int)SW_MIN({IDX_CHUNK}, {Q} - q0);",
        f"        sw_get(ix, (const {ity} *)p.{x} + q0, nq * (int)sizeof({ity}), 0, 0, &rp);",
        "        ng++;",
        "        SW_WAIT(rp, ng);",
        "        for (int j = 0; j < nq; j++) {",
        "            long v = (long)ix[j];",
        f"            if (v < 0) v += {N};",
        f"            v = SW_MAX(0, SW_MIN(v, {N - 1}));   /* out-of-range ids are clamped */",
        f"            for (long i0 = 0; i0 < {I}; i0 += {T}) {{",
        f"                const int n = (int)SW_MIN({T}, {I} - i0);",
        f"                sw_get(row, p.{d} + (oo * {N} + v) * {I} + i0, n * {es}, 0, 0, &rp);",
        "                ng++;",
        "                SW_WAIT(rp, ng);",
        f"                sw_put(p.{o} + (oo * {Q} + q0 + j) * {I} + i0, row, n * {es}, 0, 0, &rp);",
        "                ng++;",
        "                SW_WAIT(rp, ng);",
        "            }",
        "        }",
        "    }",
        f"    ldm_free(row, {ldm_align(T * es)});",
        f"    ldm_free(ix, {IDX_CHUNK * 8});",
        "}",
        ""])


def gather_predict(k, cores, para_bytes):
    O, N, I, Q = _shape(k)
    T = row_chunk(k)
    isz = 8 if k.buffers[k.extra["indices"]].dtype == "int64" else 4
    per_row = math.ceil(I / T)
    gets = cores + O * math.ceil(Q / IDX_CHUNK) + O * Q * per_row
    es = elem_bytes(k)
    get_bytes = cores * para_bytes + O * Q * isz + O * Q * I * es
    return {"get": {"ops": gets, "bytes": get_bytes}, "put": {"ops": O * Q * per_row, "bytes": O * Q * I * es}}


def gather_ldm_bytes(k):
    return IDX_CHUNK * 8 + ldm_align(row_chunk(k) * elem_bytes(k))


def gather_schedule(k, hw, budget, options):
    """No tiling to choose: check the fixed buffers against the budget and record them."""
    need = gather_ldm_bytes(k)
    if need > budget:
        raise LdmError(k.name, need, budget)
    k.schedule = GatherSchedule(need, budget)
