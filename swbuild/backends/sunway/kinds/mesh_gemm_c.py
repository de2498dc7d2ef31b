"""The CPE function of a mesh SUMMA kernel (mesh_gemm.py): Athread v1 DMA through the slave
file's helpers (sw_get / sw_put, SW_WAIT), register messages through REG_PUTR / REG_GETR /
REG_PUTC / REG_GETC (slave.h under the emulator; swGEMM's inline-asm spelling on the chip)."""
from __future__ import annotations

from ....support.names import c_comment
from ...cexpr import render
from ..schedule.kernel_schedule import ldm_align
from .gather import special_prologue
from .mesh_gemm import MESH, MSG_FLOATS, VECS, rows_of, x_halves

# The chip's instructions where slave.h does not define them (swGEMM include/common_slave.h).
REG_MACROS = """#ifndef REG_PUTR
#define REG_PUTR(var, dst) asm volatile("putr %0,%1\\n" : : "r"(var), "r"(dst))
#define REG_GETR(var) asm volatile("getr %0\\n" : "=r"(var))
#define REG_PUTC(var, dst) asm volatile("putc %0,%1\\n" : : "r"(var), "r"(dst))
#define REG_GETC(var) asm volatile("getc %0\\n" : "=r"(var))
#endif"""


def _send_or_take(w, me, direction, own, recv, count):
    """One phase of a sub-step: the sender broadcasts `count` messages of `own`, the others
    take them into `recv`."""
    put, get = ("REG_PUTR", "REG_GETR") if direction == "r" else ("REG_PUTC", "REG_GETC")
    w(f"        if ({me} == s) for (int m = 0; m < {count}; m++) {{ intv8 v; simd_loadu(v, {own} + {MSG_FLOATS} * m); "
      f"{put}(v, 8); }}")
    w(f"        else for (int m = 0; m < {count}; m++) {{ intv8 v; {get}(v); simd_storeu(v, {recv} + {MSG_FLOATS} * m); }}")


def _micro(w, R, V, mc, kc, pc, cond, acc="acc"):
    """Blocks of R output channels x V vectors of 4 pixels, accumulated in registers over the
    kc slice (the X vector loaded once for the R rows); mesh_gemm.micro_cycles costs it."""
    ind = " " * 20
    w(f"{ind}for (; {cond}; e += {4 * V}) {{")
    regs = [(r, v) for r in range(R) for v in range(V)]
    w(f"{ind}    floatv4 {', '.join(f'o{r}{v}' for r, v in regs)}, {', '.join(f'x{v}' for v in range(V))};")
    for r, v in regs:
        w(f"{ind}    simd_loadu(o{r}{v}, {acc} + (i + {r}) * {pc} + e + {4 * v});")
    w(f"{ind}    for (int q = 0; q < {kc}; q++) {{")
    w(f"{ind}        const float *x = b + q * pv + e;")
    for v in range(V):
        w(f"{ind}        simd_loadu(x{v}, x + {4 * v});")
    for r in range(R):
        w(f"{ind}        const floatv4 a{r} = sw_bcast4(a[(i + {r}) * {kc} + q]);")
        for v in range(V):
            w(f"{ind}        o{r}{v} = simd_vmas(a{r}, x{v}, o{r}{v});")
    w(f"{ind}    }}")
    for r, v in regs:
        w(f"{ind}    simd_storeu(o{r}{v}, {acc} + (i + {r}) * {pc} + e + {4 * v});")
    w(f"{ind}}}")


class _W(list):
    def __call__(self, s):
        self.append("    " + s)



def put_and_close(w, dst, acc, mc, P, bufs):
    """The last layer's rows (packed to pv) put to `dst`, the loops closed, the LDM freed."""
    w(f"            sw_put({dst}, {acc}, {mc} * pv * 4, pv * 4, ({P} - pv) * 4, &rp);")
    w("            ng++;")
    w("            SW_WAIT(rp, ng);")
    w("        }")
    w("    }")
    w("}")
    for name, size in reversed(bufs):
        w(f"ldm_free({name}, {size});")


def mesh_gemm_c(k, cores, itemsize=4):
    s = k.schedule
    g, mc, pc, kc = s.shape, s.mc, s.pc, s.kc
    nk, nco, npt = s.nk, s.nco, s.npt
    CI, P = g.CI, g.P
    bufs = [("A", ldm_align(4 * (mc * CI // MESH + MSG_FLOATS))), ("Ar", ldm_align(4 * (mc * kc + MSG_FLOATS))),
            *[(f"B{h}", ldm_align(4 * (kc * pc + MSG_FLOATS))) for h in range(x_halves(nk))],
            ("Br", ldm_align(4 * (kc * pc + MSG_FLOATS))),
            ("acc", ldm_align(4 * mc * pc))]
    bufs += [(f"V_{b}", ldm_align(4 * mc)) for b in g.vecs] + [(f"R_{b}", ldm_align(4 * mc * pc)) for b in g.res]
    w = _W()
    w("const int r = cpe / 8, c = cpe % 8;")
    for name, size in bufs:
        w(f"float *{name} = (float *)ldm_malloc({size});")
    w(f"float *const Bh[2] = {{B0, B{x_halves(nk) - 1}}};   /* X pieces: k step j in Bh[j & 1] */")
    w("SW_REPLY rx[2] = {0, 0};")
    w("int nx[2] = {0, 0};")
    w(f"for (int t = 0; t < {nco}; t++) {{")
    w(f"    const long co = (long)t * {MESH * mc} + r * {mc};")
    w(f"    sw_get(A, p.{g.w} + ((long)t * {MESH} + r) * {MESH * nk * mc * kc} + c * {nk * mc * kc}, {4 * nk * mc * kc}, 0, 0, "
      "&rp);   /* W[co.., the c-th slice of every k step], one run (mesh_weights) */")
    w("    ng++;")
    for b in g.vecs:
        w(f"    sw_get(V_{b}, p.{b} + co, {4 * mc}, 0, 0, &rp);")
        w("    ng++;")
    w("    SW_WAIT(rp, ng);")
    w(f"    for (int n = 0; n < {g.N}; n++) for (int u = 0; u < {npt}; u++) {{")
    w(f"        const long p0 = ((long)u * {MESH} + c) * {pc};")
    w(f"        const int pv = (int)SW_MAX(0, SW_MIN({pc}, {P} - p0));   /* this column's pixels */")
    w(f"        for (int i = 0; i < {mc * pc}; i++) acc[i] = 0.0f;")
    w(f"        for (int j = 0; j < {nk}; j++) {{")
    w("            float *const B = Bh[j & 1];")
    w("            if (pv > 0) {   /* X[the r-th slice of k step j, c-block]; the next step's fetched meanwhile */")
    w(f"                for (int f = j ? j + 1 : 0; f <= j + 1 && f < {nk}; f++) {{")
    w(f"                    sw_get(Bh[f & 1], p.{g.x} + ((long)n * {CI} + f * {MESH * kc} + r * {kc}) * {P} + p0, "
      f"{kc} * pv * 4, pv * 4, ({P} - pv) * 4, &rx[f & 1]);")
    w("                    nx[f & 1]++;")
    w("                }")
    w("                SW_WAIT(rx[j & 1], nx[j & 1]);")
    w("            }")
    w(f"            const int nb = ({kc} * pv + {MSG_FLOATS - 1}) / {MSG_FLOATS};   /* the column's messages */")
    w(f"            for (int s = 0; s < {MESH}; s++) {{")
    w(f"                const float *a = c == s ? A + j * {mc * kc} : Ar, *b = r == s ? B : Br;")
    inner = _W()
    _send_or_take(inner, "c", "r", f"(A + j * {mc * kc})", "Ar", -(-mc * kc // MSG_FLOATS))
    _send_or_take(inner, "r", "c", "B", "Br", "nb")
    w.extend("        " + x for x in inner)
    R = rows_of(mc)
    w(f"                for (int i = 0; i < {mc}; i += {R}) {{")
    w("                    int e = 0;")
    _micro(w, R, VECS, mc, kc, pc, f"e + {4 * VECS} <= pv")
    _micro(w, R, 1, mc, kc, pc, "e < pv")
    w("                }")
    w("            }")
    w("        }")
    w("        if (pv > 0) {")
    for b in g.res:
        w(f"            sw_get(R_{b}, p.{b} + ((long)n * {g.CO} + co) * {P} + p0, {mc} * pv * 4, pv * 4, ({P} - pv) * 4, &rp);")
        w("            ng++;")
    if g.res:
        w("            SW_WAIT(rp, ng);")
    # in place, rows packed to pv (a destination never passes its source), then one put
    load = lambda ld: f"V_{ld.buf}[i]" if ld.buf in g.vecs else f"R_{ld.buf}[i * pv + e]"   # noqa: E731
    epi = render(k.epilogue, lambda v: {"n": "n"}.get(v, v), load, acc=f"acc[i * {pc} + e]")
    w(f"            for (int i = 0; i < {mc}; i++) for (int e = 0; e < pv; e++) acc[i * pv + e] = {epi};")
    put_and_close(w, f"p.{g.y} + ((long)n * {g.CO} + co) * {P} + p0", "acc", mc, P, bufs)
    return "\n".join([REG_MACROS, f"/* {c_comment(k.op)} (node {c_comment(k.node)}): {c_comment(str(s))} */",
                      *special_prologue(k), *w, "}", ""])


__all__ = ["mesh_gemm_c"]
