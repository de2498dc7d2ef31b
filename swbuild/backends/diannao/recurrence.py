"""The recurrence of a GRU/LSTM/RNN direction (ops/recurrent.py) as ONE BANG C kernel of 16
tasks that runs every step, in the ISA Mapper paper's three iterations:

  priming    each task copies its slice of the recurrent weights GDRAM -> WRAM (in the
             __bang_conv bank layout, reordered at compile time), its peepholes / biases,
             the initial cell state, and zeroes the padding of the h buffer in NRAM
  recursive  per step: h(t-1) [B, H] GDRAM -> NRAM, the step's input projections of the
             task's units, ONE __bang_conv (a 1x1 convolution over B pixels: the GEMV of
             every gate of the task's units), the cell update of its units, their new h
             -> the exchange buffer hx[step % 2] (and Y); __sync_all before the next step
  finish     Y_h and Y_c

Task t owns NJ = ceil(H / 16) consecutive units; its conv has Co = G*NJ rows padded to 64.
When that slice does not fit the WRAM budget, it is split into blocks of rows copied to
WRAM every step (streamed). The cell update is scalar C (a few operations per unit).
GRU with linear_before_reset=0 needs r * h(t-1) of all units: one more exchange and conv.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import UnsupportedError
from ...ir.graph import Tensor
from ...ir.sizes import round_up
from ...names import c_comment
from ..cell_c import gru_gates, unit_update
from .schedule.builder import KB

TASKS = 16


def _geometry(k, wram_budget, banks=64):
    ex = k.extra
    H, G = ex["H"], ex["G"]
    NJ = math.ceil(H / TASKS)
    Hp = round_up(H, 16)                  # Ci * 4 B a multiple of 64 B
    Cop = round_up(G * NJ, banks)         # Co a multiple of the 64 banks
    per_block = max(banks, (wram_budget // (Hp * 4)) // banks * banks)
    CB = min(Cop, per_block)
    while Cop % CB:
        CB -= banks
    return dict(NJ=NJ, Hp=Hp, Cop=Cop, CB=CB, nblk=Cop // CB)


def _weight_image(k, R, geo, banks=64):
    """[tasks, blocks, CB, Hp]: task t's rows q*NJ+u (unit t*NJ+u of gate q) in the bank layout."""
    ex = k.extra
    H, G, d = ex["H"], ex["G"], ex["d"]
    NJ, Hp, CB, nblk = geo["NJ"], geo["Hp"], geo["CB"], geo["nblk"]
    R = np.asarray(R, dtype=np.float32)[d]          # [G*H, H]
    img = np.zeros((TASKS, nblk, CB, Hp), dtype=np.float32)
    for t in range(TASKS):
        for q in range(G):
            for u in range(NJ):
                j = t * NJ + u
                if j >= H:
                    break
                c = q * NJ + u
                blk, cl = divmod(c, CB)
                slot = (cl % banks) * (CB // banks) + cl // banks
                img[t, blk, slot, :H] = R[q * H + j]
    return img


def sched_recurrence(k, program, tc, layouts, store):
    """The DevKernel of a recurrence: parameters, on-chip buffers; printed by recurrence_body."""
    ex, rb = k.extra, k.extra["bufs"]
    for role, b in rb.items():
        if layouts.get(program.root(k.buffers[b].tensor)):
            raise UnsupportedError(f"kernel {k.name}: {role} tensor '{k.buffers[b].tensor}' has a non-plain layout")
    kb = KB(k, program, tc, layouts, store)
    banks = int(tc.hardware.get("wram_banks", 64))
    geo = _geometry(k, tc.wram_budget, banks)
    B, G = ex["B"], ex["G"]
    NJ, Hp, Cop, CB = geo["NJ"], geo["Hp"], geo["Cop"], geo["CB"]
    g = program.graph
    R = g.tensors[program.root(k.buffers[rb["r"]].tensor)].data
    name = f"%swrnn:{k.name}:wram"
    g.tensors[name] = Tensor(name, (TASKS * geo["nblk"] * CB * Hp,), "float32", _weight_image(k, R, geo, banks).reshape(-1))
    params = {role: kb.gparam(k.buffers[b].tensor) for role, b in rb.items() if role != "r"}
    params["wimg"] = kb.gparam(name)
    nram = {"hf": B * Hp, "gr": B * Cop, "xw": B * G * NJ, "hp": B * NJ, "hn": B * NJ}
    if ex["cell"] == "LSTM":
        nram["cs"] = B * NJ
    if ex["cell"] == "GRU":
        nram["zr"] = 2 * B * NJ
        if not ex["lbr"]:
            nram["rhb"] = B * NJ
    if "p" in rb:
        nram["pp"] = 3 * NJ
    if "rbh" in rb:
        nram["rb"] = NJ
    if "lens" in rb:
        nram["ln"] = B
        if "y" in rb:
            nram["zero"] = NJ
    for n, e in nram.items():
        kb.alloc("NRAM", n, e)
    kb.alloc("WRAM", "w", CB * Hp)
    kb.sid("compute", "gemv")            # the step's GEMVs: __bang_conv
    cell = kb.sid("compute", "cell")     # the cell update: scalar C
    return kb.finish("recurrence", [], geometry=geo, roles=params, resident=geo["nblk"] == 1, scalar_sids=[cell])


def recurrence_body(dk, P):
    """The kernel's C lines (inside the __mlu_global__ function)."""
    k = dk.kernel
    ex = k.extra
    geo, par = dk.info["geometry"], dk.info["roles"]
    T, B, H, G, D, d = (ex[x] for x in ("T", "B", "H", "G", "D", "d"))
    NJ, Hp, CB, nblk = geo["NJ"], geo["Hp"], geo["CB"], geo["nblk"]
    GH, NXW = G * H, D * G * H
    lay = ex["layout"]
    sb = H if lay == 0 else D * H
    base = d * B * H if lay == 0 else d * H
    cell = ex["cell"]
    lbr0 = cell == "GRU" and not ex["lbr"]
    L = []
    w = L.append

    def nram(n):
        b = dk.bufs[n]
        return f"(float *)({P}_nram + {b.offset})" if b.offset else f"(float *){P}_nram"
    w(f"/* {cell} (node {c_comment(k.node)}), direction {d}{' (reverse)' if ex['reverse'] else ''}: {T} steps, "
      f"{NJ} unit(s) per task, recurrent weights {'resident in WRAM' if nblk == 1 else f'streamed to WRAM in {nblk} blocks per step'} */")
    for n in dk.bufs:
        if dk.bufs[n].space == "NRAM":
            w(f"float *{n} = {nram(n)};")
    wb = dk.bufs["w"]
    w(f"float *w = (float *)({P}_wram + {wb.offset});" if wb.offset else f"float *w = (float *){P}_wram;")
    w("const int t = taskId;")
    w(f"const int j0 = t * {NJ};")
    w(f"const int nown = j0 < {H} ? SW_MIN({NJ}, {H} - j0) : 0;")
    w(f"int tb[{B}], act[{B}];")
    w(f"const float *wimg = {par['wimg']} + (long)t * {nblk * CB * Hp};")
    if "lens" in par:
        w("int *lens = (int *)ln;")

    def blocks(src):
        for blk in range(nblk):
            if nblk > 1:
                w(f"    __memcpy(w, wimg + {blk * CB * Hp}, {CB * Hp * 4}, GDRAM2WRAM);")
            w(f"    __bang_conv(gr + {blk * B * CB}, {src}, w, {Hp}, 1, {B}, 1, 1, 1, 1, {CB});")

    def gr(q):
        c = f"({q} * {NJ} + u)"
        if nblk == 1:
            return f"gr[b * {CB} + {c}]"
        return f"gr[({c} / {CB} * {B} + b) * {CB} + {c} % {CB}]"

    def xw_(q):
        return f"xw[(b * {G} + {q}) * {NJ} + u]"

    def geth(src, stride):
        w(f"    __memcpy(hf, {src}, {H * 4}, GDRAM2NRAM, {Hp * 4}, {stride * 4}, {B - 1});")

    w("/* priming */")
    w("if (nown > 0) {")
    if nblk == 1:
        w(f"    __memcpy(w, wimg, {CB * Hp * 4}, GDRAM2WRAM);")
    if Hp != H:
        w(f"    __bang_write_zero(hf, {B * Hp});")
    if "lens" in par:
        w(f"    __memcpy(lens, (int *){par['lens']}, {B * 4}, GDRAM2NRAM);")
    if "p" in par:
        w(f"    __memcpy(pp, {par['p']} + {d * 3 * H} + j0, nown * 4, GDRAM2NRAM, {NJ * 4}, {H * 4}, 2);")
    if "rbh" in par:
        w(f"    __memcpy(rb, {par['rbh']} + {d * H} + j0, nown * 4, GDRAM2NRAM);")
    if cell == "LSTM":
        if "c0" in par:
            w(f"    __memcpy(cs, {par['c0']} + {base} + j0, nown * 4, GDRAM2NRAM, {NJ * 4}, {sb * 4}, {B - 1});")
        else:
            w(f"    for (int i = 0; i < {B * NJ}; i++) cs[i] = 0.0f;")
    if "zero" in dk.bufs:
        w(f"    for (int i = 0; i < {NJ}; i++) zero[i] = 0.0f;")
    w("}")
    w("/* recursive: one iteration per step on the resident buffers */")
    w(f"for (int s = 0; s < {T}; s++) {{")
    w("  if (nown > 0) {")
    if "h0" in par:
        w("    if (s == 0)")
        geth(f"{par['h0']} + {base}", sb)
    else:
        w(f"    if (s == 0) for (int i = 0; i < {B * Hp}; i++) hf[i] = 0.0f;")
    w("    if (s > 0)")
    geth(f"{par['hx']} + ((s + 1) & 1) * {B * H}", H)
    w(f"    for (int b = 0; b < {B}; b++) {{")
    w(f"      const int len = {'lens[b]' if 'lens' in par else T};")
    w("      act[b] = s < len;")
    w(f"      tb[b] = {'act[b] ? len - 1 - s : s' if ex['reverse'] else 's'};")
    row = "(tb[b] * %d + b)" % B if lay == 0 else "(b * %d + tb[b])" % T
    w(f"      __memcpy(xw + b * {G * NJ}, {par['xw']} + (long){row} * {NXW} + {d * GH} + j0, nown * 4, GDRAM2NRAM, "
      f"{NJ * 4}, {H * 4}, {G - 1});")
    w("    }")
    w(f"    for (int b = 0; b < {B}; b++) for (int u = 0; u < nown; u++) hp[b * {NJ} + u] = hf[b * {Hp} + j0 + u];")
    blocks("hf")
    zr = (f"zr[b * {NJ} + u]", f"zr[{B * NJ} + b * {NJ} + u]")
    if lbr0:
        w(f"    for (int b = 0; b < {B}; b++) for (int u = 0; u < nown; u++) {{")
        L.extend("      " + s for s in gru_gates(ex, xw_, gr, *zr))
        w(f"      rhb[b * {NJ} + u] = {zr[1]} * hp[b * {NJ} + u]; }}")
        w(f"    __memcpy({par['rh']} + j0, rhb, nown * 4, NRAM2GDRAM, {H * 4}, {NJ * 4}, {B - 1});")
        w("  }")
        w("  __sync_all();   /* r * h(t-1) of every unit is in GDRAM */")
        w("  if (nown > 0) {")
        geth(par["rh"], H)
        blocks("hf")
    w(f"    for (int b = 0; b < {B}; b++) for (int u = 0; u < nown; u++) {{")
    w(f"      const int i = b * {NJ} + u;")
    w("      float hn_ = hp[i];")
    if cell == "LSTM":
        w("      float cn_ = cs[i];")
    w("      if (act[b]) {")
    w("        float hn, cn;")
    w("        (void)cn;")
    if cell == "GRU" and ex["lbr"]:
        L.extend("        " + s for s in gru_gates(ex, xw_, gr, *zr))
    upd = unit_update(ex, xw_, gr, "hp[i]", cp="cs[i]" if cell == "LSTM" else None,
                      pp=(lambda q: f"pp[{q * NJ} + u]") if "pp" in dk.bufs else None,
                      rbh="rb[u]" if "rb" in dk.bufs else None, z=zr[0], r=zr[1])
    L.extend("        " + s for s in upd)
    w("        hn_ = hn;")
    if cell == "LSTM":
        w("        cn_ = cn;")
    w("      }")
    w("      hn[i] = hn_;")
    if cell == "LSTM":
        w("      cs[i] = cn_;")
    w("    }")
    w(f"    __memcpy({par['hx']} + (s & 1) * {B * H} + j0, hn, nown * 4, NRAM2GDRAM, {H * 4}, {NJ * 4}, {B - 1});")
    if "y" in par:
        if lay == 0:
            yoff = f"((long)(tb[b] * {D} + {d}) * {B} + b) * {H}"
        else:
            yoff = f"((long)(b * {T} + tb[b]) * {D} + {d}) * {H}"
        src = f"act[b] ? hn + b * {NJ} : zero" if "zero" in dk.bufs else f"hn + b * {NJ}"
        w(f"    for (int b = 0; b < {B}; b++) __memcpy({par['y']} + {yoff} + j0, {src}, nown * 4, NRAM2GDRAM);")
    w("  }")
    w("  __sync_all();   /* every unit's h(t) is in GDRAM */")
    w("}")
    w("/* finish */")
    w("if (nown > 0) {")
    if "yh" in par:
        w(f"    __memcpy({par['yh']} + {base} + j0, hn, nown * 4, NRAM2GDRAM, {sb * 4}, {NJ * 4}, {B - 1});")
    if "yc" in par:
        w(f"    __memcpy({par['yc']} + {base} + j0, cs, nown * 4, NRAM2GDRAM, {sb * 4}, {NJ * 4}, {B - 1});")
    w("}")
    return ["    " + s for s in L]
