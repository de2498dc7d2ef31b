"""Gather with indices known only at run time (embedding lookups): a special kernel.

Its footprint depends on data, so it is not a box: each CPE takes chunks of indices
round-robin, DMAs the chunk of indices into LDM, then moves each selected row through LDM
(a get of the row, a put to its place in the output). The kernel is out[o, q, i] =
data[o, idx[q], i] over the views [O, N, I] (data), [Q] (indices), [O, Q, I] (out).
"""
from __future__ import annotations

import math

from ...names import c_comment

IDX_CHUNK = 64          # indices fetched per DMA
ROW_CHUNK = 4096        # floats of a row moved per DMA: 16 KB, within either chip's LDM


def _shape(k):
    data = k.buffers[k.extra["data"]]
    out = k.buffers[k.out]
    O, N, I = data.shape
    Q = out.shape[1]
    return O, N, I, Q


def row_chunk(k):
    """Elements of a row moved per DMA."""
    return min(_shape(k)[2], ROW_CHUNK)


def gather_c(k, cores, itemsize=4):
    O, N, I, Q = _shape(k)
    T = row_chunk(k)
    ib = k.buffers[k.extra["indices"]]
    ity = "long long" if ib.dtype == "int64" else "int"
    d, x, o = k.extra["data"], k.extra["indices"], k.out
    nchunks = math.ceil(Q / IDX_CHUNK)
    return "\n".join([
        f"/* Gather (node {c_comment(k.node)}): rows chosen at run time */",
        f"void {k.name}(void *arg)",
        "{",
        f"    struct {k.name}_para p;",
        "    SW_REPLY rp = 0;",
        "    int ng = 1;",
        "    sw_get(&p, arg, (int)sizeof(p), 0, 0, &rp);",
        "    SW_WAIT(rp, ng);",
        "    const int cpe = SW_CPE_ID();",
        f"    {ity} *ix = ({ity} *)ldm_malloc({IDX_CHUNK * 8});",
        f"    float *row = (float *)ldm_malloc({_al(T * 4)});",
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
        f"                sw_get(row, p.{d} + (oo * {N} + v) * {I} + i0, n * 4, 0, 0, &rp);",
        "                ng++;",
        "                SW_WAIT(rp, ng);",
        f"                sw_put(p.{o} + (oo * {Q} + q0 + j) * {I} + i0, row, n * 4, 0, 0, &rp);",
        "                ng++;",
        "                SW_WAIT(rp, ng);",
        "            }",
        "        }",
        "    }",
        f"    ldm_free(row, {_al(T * 4)});",
        f"    ldm_free(ix, {IDX_CHUNK * 8});",
        "}",
        ""])


def _al(n):
    return (n + 63) // 64 * 64


def gather_predict(k, cores, para_bytes):
    O, N, I, Q = _shape(k)
    T = row_chunk(k)
    isz = 8 if k.buffers[k.extra["indices"]].dtype == "int64" else 4
    per_row = math.ceil(I / T)
    gets = cores + O * math.ceil(Q / IDX_CHUNK) + O * Q * per_row
    get_bytes = cores * para_bytes + O * Q * isz + O * Q * I * 4
    return {"get": {"ops": gets, "bytes": get_bytes}, "put": {"ops": O * Q * per_row, "bytes": O * Q * I * 4}}


def gather_ldm_bytes(k):
    return IDX_CHUNK * 8 + _al(row_chunk(k) * 4)


def gather_schedule(k, hw, budget, options):
    """No tiling to choose: check the fixed buffers against the budget and record them."""
    from types import SimpleNamespace

    from ...errors import LdmError
    need = gather_ldm_bytes(k)
    if need > budget:
        raise LdmError(k.name, need, budget)
    k.schedule = SimpleNamespace(ldm_bytes=need, ldm_budget=budget)


def register():
    """Hook the gather kernel into the scheduler, the slave printer and the DMA predictor."""
    from ...optimizer.ldm import SPECIAL_SCHEDULERS
    from ...perf.predict import SPECIAL_PREDICTORS
    from .slave import SPECIAL_PRINTERS
    SPECIAL_SCHEDULERS["gather"] = gather_schedule
    SPECIAL_PRINTERS["gather"] = gather_c
    SPECIAL_PREDICTORS["gather"] = gather_predict
