"""The head of a model's CPE (slave) file: includes, the C helpers, and the DMA helpers that
put one get/put shape onto the chip's API (cpe_api.py), the SIMD broadcasts and the in-LDM
pad materialisation. The kernels (slave.py) follow it."""
from __future__ import annotations

from ....support.names import c_comment
from ... import cexpr
from .cpe_api import api_of, dma_call

SW_EXPAND = """/* Pads in LDM: the DMA left the clamped part of the box [lo, hi] at the start of b;
 * move its rows to their places in the unclamped layout (last row first: a row never
 * lands below its source) and fill everything else with the pad value. */
static void sw_expand(float *b, int nd, const int *lo, const int *hi, const int *shape, float pad)
{
    int E[8], cx[8], off[8], empty = 0;
    long rows = 1;
    for (int d = 0; d < nd; d++) {
        const int cl = lo[d] < 0 ? 0 : lo[d];
        const int ch = hi[d] > shape[d] - 1 ? shape[d] - 1 : hi[d];
        E[d] = hi[d] - lo[d] + 1;
        cx[d] = ch - cl + 1;
        off[d] = cl - lo[d];
        if (cx[d] <= 0) empty = 1;
        if (d < nd - 1) rows *= E[d];
    }
    const int L = E[nd - 1], cl = cx[nd - 1], ol = off[nd - 1];
    for (long i = rows - 1; i >= 0; i--) {
        long rem = i, src = 0, sp = 1;
        int inside = !empty;
        for (int d = nd - 2; d >= 0; d--) {
            const int r = (int)(rem % E[d]) - off[d];
            rem /= E[d];
            if (r < 0 || r >= cx[d]) inside = 0;
            src += (long)r * sp;
            sp *= cx[d];
        }
        float *dst = b + i * L;
        if (inside) {
            const float *s = b + src * cl;
            for (int j = cl - 1; j >= 0; j--) dst[ol + j] = s[j];
            for (int j = 0; j < ol; j++) dst[j] = pad;
            for (int j = ol + cl; j < L; j++) dst[j] = pad;
        } else {
            for (int j = 0; j < L; j++) dst[j] = pad;
        }
    }
}
"""


def dma_helpers(api):
    """static inline sw_get / sw_put (/ sw_bget), SW_WAIT, SW_CPE_ID, SW_REPLY, sw_bcastN."""
    out = []
    for d in ("get", "put"):
        head = "void *ldm, const void *mem" if d == "get" else "void *mem, const void *ldm"
        args = dict(mem="(void *)mem" if d == "get" else "mem", ldm="ldm" if d == "get" else "(void *)ldm",
                    len="len", gap="gap", rp="rp")
        out += [f"static inline void sw_{d}({head}, int len, int bsize, int gap, {api.reply} *rp)", "{"]
        if api.stride_takes_zero_gap:
            out.append(f"    {dma_call(api, d, True, bsize='gap ? bsize : 0', **args)};")
        else:
            out += [f"    if (gap) {dma_call(api, d, True, bsize='bsize', **args)};",
                    f"    else {dma_call(api, d, False, **args)};"]
        out.append("}")
    if api.bcast_get:
        call = api.bcast_get.format(mem="(void *)mem", ldm="ldm", len="len", rp="rp", mask="mask", gap="gap",
                                    bsize="gap ? bsize : 0")
        out += ["/* one DMA read once from memory into the same LDM address of every CPE of the rows in `mask` */",
                f"static inline void sw_bget(void *ldm, const void *mem, int len, int bsize, int gap, {api.reply} *rp, int mask)",
                "{", f"    {call};", "}"]
    if api.rma:
        out += ["/* Row (array) sharing by RMA: the issuer DMAs a box's fetch into its own LDM (sw_bget adds",
                " * up its bytes), then broadcasts it to the same LDM offset of every CPE of its row (the array);",
                " * each member waits for its landing on sw_rma_r, counting them in sw_rma_n. LDM variables:",
                " * the same offset in every CPE, as RMA's reply words must be. */",
                "static __thread_local crts_rply_t sw_rma_l, sw_rma_r;      /* static: two models link into one program */",
                "static __thread_local int sw_rma_n, sw_blen;",
                f"static inline void sw_bget(void *ldm, const void *mem, int len, int bsize, int gap, {api.reply} *rp, int mask)",
                "{", "    (void)mask;", "    sw_get(ldm, mem, len, bsize, gap, rp);", "    sw_blen += len;", "}",
                "static inline void sw_rbcast(void *ldm, int len, int width)",
                "{",
                "    if (width == 8) CRTS_rma_row_ibcast(ldm, ldm, len, &sw_rma_l, &sw_rma_r);",
                "    else CRTS_rma_ibcast(ldm, ldm, &sw_rma_l, len, &sw_rma_r);",
                "}",
                "/* 2-D sharing: along this CPE's mesh column */",
                "static inline void sw_cbcast(void *ldm, int len)",
                "{", "    CRTS_rma_col_ibcast(ldm, ldm, len, &sw_rma_l, &sw_rma_r);", "}",
                "#define SW_RMA_WAIT() CRTS_rma_wait_value(&sw_rma_r, ++sw_rma_n)",
                "/* at a kernel's start, before the barrier that precedes its first broadcast */",
                "#define SW_RMA_RESET() do { sw_rma_l = 0; sw_rma_r = 0; sw_rma_n = 0; } while (0)"]
    if api.row_sync:
        out.append(f"#define SW_ROW_SYNC() {api.row_sync}")
    if api.array_sync:
        out.append(f"#define SW_ARRAY_SYNC() {api.array_sync}")
    out += [f"#define SW_WAIT(rp, n) {api.wait.format(r='(rp)', n='(n)')}", f"#define SW_CPE_ID() {api.tid}",
            f"#define SW_REPLY {api.reply}"]
    for n in api.simd_widths:
        out.append(f"static inline floatv{n} sw_bcast{n}(float x) {{ return simd_set_floatv{n}({', '.join(['x'] * n)}); }}")
    return "\n".join(out) + "\n"


# sw_expand over boxes of the other element types (float64 / int64 / int32 kernels' LDM)
EXPAND_SUFFIX = {"float": "", "double": "_d", "long long": "_ll", "int": "_i"}
SW_EXPAND_TYPED = "".join(SW_EXPAND[SW_EXPAND.index("static void"):].replace("float", t).replace("sw_expand(", f"sw_expand{s}(")
                          for t, s in EXPAND_SUFFIX.items() if s)

SW_NEXT = """/* What the next kernel of a grouped launch issues while this one computes (prefetch.py) */
struct sw_next { void (*fn)(void *, void *); void *arg; void *st; };
"""


def slave_file(program, tc, version, kernels_c):
    linked = any(getattr(k.schedule, "hook", False) for k in program.kernels)
    head = [f"/* CPE (slave) code of model {c_comment(program.name)} for {tc.name}: generated by swbuild {version}. Do not edit. */"]
    api = api_of(tc)
    head += [api.include, *api.more_includes, *([api.wait_macro] if api.wait_macro else []),
             "#include <simd.h>", "#include <math.h>", f'#include "{program.prefix}_para.h"',
             "", cexpr.PRELUDE + (cexpr.HALF_HELPERS if cexpr.has_halves(program) else "")
             + (cexpr.DOUBLE_HELPERS + SW_EXPAND_TYPED if cexpr.has_doubles(program) else ""), dma_helpers(api) + SW_EXPAND + (SW_NEXT if linked else "")]
    return "\n".join(head + kernels_c)

