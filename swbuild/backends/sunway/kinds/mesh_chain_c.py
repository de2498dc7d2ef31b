"""The CPE function of a chained pair of 1x1 convolutions (mesh_chain.py): two SUMMA layers
per pixel tile, the intermediate's pieces kept in LDM (buffer M) and broadcast from there
along the columns for the second layer."""
from __future__ import annotations

from ....support.names import c_comment
from ...cexpr import render
from .gather import special_prologue
from .mesh_chain import chain_buffers
from .mesh_gemm import MESH, MSG_FLOATS, VECS, rows_of, x_halves
from .mesh_gemm_c import REG_MACROS, _W, _micro, _send_or_take, put_and_close


def first_name(b):
    """The consumer's parameter-struct field of the producer's buffer b (mesh.py renames them)."""
    return f"f_{b}"


def _substeps(w, own_a, a_msgs, own_b, recv_a, recv_b, nb, mc, kc, pc, acc):
    """The 8 sub-steps of one k step: row and column broadcasts, then the micro-kernel."""
    w(f"            for (int s = 0; s < {MESH}; s++) {{")
    w(f"                const float *a = c == s ? {own_a} : {recv_a}, *b = r == s ? {own_b} : {recv_b};")
    inner = _W()
    _send_or_take(inner, "c", "r", f"({own_a})", recv_a, a_msgs)
    _send_or_take(inner, "r", "c", f"({own_b})", recv_b, nb)
    w.extend("        " + x for x in inner)
    R = rows_of(mc)
    w(f"                for (int i = 0; i < {mc}; i += {R}) {{")
    w("                    int e = 0;")
    _micro(w, R, VECS, mc, kc, pc, f"e + {4 * VECS} <= pv", acc)
    _micro(w, R, 1, mc, kc, pc, "e < pv", acc)
    w("                }")
    w("            }")


def _weights(w, A, ptr, slices, kc, vecs, vname, mc):
    """A layer's own W pieces for co tile t (`slices` k slices of kc channels: one run,
    mesh_gemm.mesh_weights) and its per-channel epilogue vectors."""
    n = slices * mc * kc
    w(f"        sw_get({A}, {ptr} + ((long)t * {MESH} + r) * {MESH * n} + c * {n}, {4 * n}, 0, 0, &rp);")
    w("        ng++;")
    for b, field in vecs:
        w(f"        sw_get({vname}{b}, p.{field} + co, {4 * mc}, 0, 0, &rp);")
        w("        ng++;")
    w("        SW_WAIT(rp, ng);")


def _residuals(w, res, rname, CO, P, mc):
    for b, field in res:
        w(f"            sw_get({rname}{b}, p.{field} + ((long)n * {CO} + co) * {P} + p0, {mc} * pv * 4, pv * 4, "
          f"({P} - pv) * 4, &rp);")
        w("            ng++;")
    if res:
        w("            SW_WAIT(rp, ng);")


def mesh_chain_c(k, cores, itemsize=4):
    s = k.schedule
    k1, g1, g2 = s.first, s.g1, s.g2
    mc1, kc1, mc2, pc = s.mc1, s.kc1, s.mc2, s.pc
    P, CI, CM, CO = g1.P, g1.CI, g1.CO, g2.CO
    bufs = chain_buffers(g1, g2, mc1, kc1, mc2, pc)
    mstride = dict(bufs)["M"] // 4 // s.nco1        # floats per intermediate piece
    w = _W()
    w("const int r = cpe / 8, c = cpe % 8;")
    for name, size in bufs:
        w(f"float *{name} = (float *)ldm_malloc({size});")
    w(f"float *const Bh[2] = {{B10, B1{x_halves(s.nk1) - 1}}};   /* X pieces: k step j in Bh[j & 1] */")
    w("SW_REPLY rx[2] = {0, 0};")
    w("int nx[2] = {0, 0};")
    w(f"for (int n = 0; n < {g1.N}; n++) for (int u = 0; u < {s.npt}; u++) {{")
    w(f"    const long p0 = ((long)u * {MESH} + c) * {pc};")
    w(f"    const int pv = (int)SW_MAX(0, SW_MIN({pc}, {P} - p0));   /* this column's pixels */")
    w(f"    for (int t = 0; t < {s.nco1}; t++) {{   /* layer 1: its co tile t stays in M */")
    w(f"        const long co = (long)t * {MESH * mc1} + r * {mc1};")
    _weights(w, "A1", f"p.{first_name(g1.w)}", s.nk1, kc1, [(b, first_name(b)) for b in g1.vecs], "V1_", mc1)
    w(f"        for (int i = 0; i < {mc1 * pc}; i++) acc1[i] = 0.0f;")
    w(f"        for (int j = 0; j < {s.nk1}; j++) {{")
    w("            float *const B1 = Bh[j & 1];")
    w("            if (pv > 0) {   /* this k step's X piece; the next one's fetched meanwhile */")
    w(f"                for (int f = j ? j + 1 : 0; f <= j + 1 && f < {s.nk1}; f++) {{")
    w(f"                    sw_get(Bh[f & 1], p.{first_name(g1.x)} + ((long)n * {CI} + f * {MESH * kc1} + r * {kc1}) * {P} "
      f"+ p0, {kc1} * pv * 4, pv * 4, ({P} - pv) * 4, &rx[f & 1]);")
    w("                    nx[f & 1]++;")
    w("                }")
    w("                SW_WAIT(rx[j & 1], nx[j & 1]);")
    w("            }")
    w(f"            const int nb = ({kc1} * pv + {MSG_FLOATS - 1}) / {MSG_FLOATS};")
    _substeps(w, f"A1 + j * {mc1 * kc1}", -(-mc1 * kc1 // MSG_FLOATS), "B1", "A1r", "B1r", "nb", mc1, kc1, pc, "acc1")
    w("        }")
    w("        if (pv > 0) {")
    _residuals(w, [(b, first_name(b)) for b in g1.res], "R1_", CM, P, mc1)
    load1 = lambda ld: f"V1_{ld.buf}[i]" if ld.buf in g1.vecs else f"R1_{ld.buf}[i * pv + e]"   # noqa: E731
    epi1 = render(k1.epilogue, lambda v: v, load1, acc=f"acc1[i * {pc} + e]")
    w(f"            float *m = M + t * {mstride};")
    w(f"            for (int i = 0; i < {mc1}; i++) for (int e = 0; e < pv; e++) m[i * pv + e] = {epi1};")
    w("        }")
    w("    }")
    w(f"    for (int t = 0; t < {s.nco2}; t++) {{   /* layer 2: its k step j is layer 1's co tile j */")
    w(f"        const long co = (long)t * {MESH * mc2} + r * {mc2};")
    _weights(w, "A2", f"p.{g2.w}", s.nco1, mc1, [(b, b) for b in g2.vecs], "V2_", mc2)
    w(f"        for (int i = 0; i < {mc2 * pc}; i++) acc2[i] = 0.0f;")
    w(f"        for (int j = 0; j < {s.nco1}; j++) {{")
    w(f"            const int nb = ({mc1} * pv + {MSG_FLOATS - 1}) / {MSG_FLOATS};")
    _substeps(w, f"A2 + j * {mc2 * mc1}", -(-mc2 * mc1 // MSG_FLOATS), f"M + j * {mstride}", "A2r", "B2r", "nb",
              mc2, mc1, pc, "acc2")
    w("        }")
    w("        if (pv > 0) {")
    _residuals(w, [(b, b) for b in g2.res], "R2_", CO, P, mc2)
    load2 = lambda ld: f"V2_{ld.buf}[i]" if ld.buf in g2.vecs else f"R2_{ld.buf}[i * pv + e]"   # noqa: E731
    epi2 = render(k.epilogue, lambda v: v, load2, acc=f"acc2[i * {pc} + e]")
    w(f"            for (int i = 0; i < {mc2}; i++) for (int e = 0; e < pv; e++) acc2[i * pv + e] = {epi2};")
    put_and_close(w, f"p.{g2.y} + ((long)n * {CO} + co) * {P} + p0", "acc2", mc2, P, bufs)
    return "\n".join([REG_MACROS, f"/* {c_comment(k1.op)} + {c_comment(k.op)} (nodes {c_comment(k1.node)}, "
                      f"{c_comment(k.node)}): {c_comment(str(s))} */", *special_prologue(k), *w, "}", ""])


__all__ = ["mesh_chain_c", "first_name"]
