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

from ...support.errors import UnsupportedError
from ...ir.graph import Tensor
from ...ir.sizes import round_up
from ...support.names import c_comment
from ..cell_c import flops as cell_flops, gru_gates, masked_update, scratch
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
    nram = {"hf": B * Hp, "gr": B * Cop, "xw": B * G * NJ, "hp": B * NJ, "hn": B * NJ} | scratch(ex, rb, B, NJ)
    for n, e in nram.items():
        kb.alloc("NRAM", n, e)
    kb.alloc("WRAM", "w", CB * Hp)
    kb.sid("compute", "gemv")            # the step's GEMVs: __bang_conv
    cell = kb.sid("compute", "cell")     # the cell update: scalar C
    dk = kb.finish("recurrence", [], geometry=geo, roles=params, resident=geo["nblk"] == 1, scalar_sids=[cell])
    dk.flops = cell_flops(ex)          # the kernel's loop nest is the cell's, not the T steps' GEMVs
    cycles, step = model_cycles(k, geo, tc.hardware)
    wbytes = G * ex["H"] * ex["H"] * 4
    dk.info["recurrence"] = {"steps": ex["T"], "modeled_cycles": cycles, "step_cycles": step,
                             "weights": "resident" if geo["nblk"] == 1 else "streamed", "weight_bytes": wbytes,
                             "weight_bytes_per_sequence": wbytes * (1 if geo["nblk"] == 1 else ex["T"]),
                             "gdram_bytes": traffic_bytes(k, geo), "compulsory_bytes": compulsory_bytes(k)}
    return dk


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
    L.extend("      " + s for s in masked_update(ex, xw_, gr, zr, NJ, "pp" in dk.bufs, "rb" in dk.bufs))
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


# ---- the cost of the kernel, in the emulator's cycles (runtime/bang: memcpy, conv, barriers) ----

def _granules(a, n, write, G):
    if n <= 0:
        return 0
    e = a + n
    first, last = a // G, (e - 1) // G
    g = last - first + 1
    if write:
        g += 1 if a % G else 0
        g += 1 if e % G and (first != last or a % G == 0) else 0
    return g


def _copy(hw, size, offsets, write):
    """Cycles of one __memcpy with a GDRAM side: `offsets` are its segments' byte offsets
    there (tensor bases are 64-B aligned: arena, image and cnrtMalloc blocks)."""
    G = int(hw["gdram_granule_bytes"])
    c = int(hw["memcpy_startup_cycles"]) + (len(offsets) - 1) * int(hw["strided_segment_cycles"])
    return c + sum(_granules(o, size, write, G) for o in offsets) * int(hw["gdram_cycles_per_granule"])


def model_cycles(k, geo, hw):
    """(kernel cycles, cycles of one step) of the busiest task, all sequences whole."""
    ex = k.extra
    T, B, H, G, D, d = (ex[x] for x in ("T", "B", "H", "G", "D", "d"))
    NJ, Hp, CB, nblk = geo["NJ"], geo["Hp"], geo["CB"], geo["nblk"]
    GH, NXW, lay = G * H, D * G * H, ex["layout"]
    sb = H if lay == 0 else D * H
    base = d * B * H if lay == 0 else d * H
    roles = ex["bufs"]
    lbr0 = ex["cell"] == "GRU" and not ex["lbr"]
    conv = int(hw["conv_startup_cycles"]) + -(-B * CB * Hp // int(hw["conv_float_macs_per_cycle"]))
    wblk = _copy(hw, CB * Hp * 4, [0], False)
    sync = int(hw["sync_all_cycles"])
    clocks = []
    for t in range(TASKS):
        j0 = t * NJ
        n = max(0, min(NJ, H - j0))
        if not n:
            clocks.append((0, [0] * T, 0))
            continue
        prime = wblk if nblk == 1 else 0
        if Hp != H:
            prime += int(hw["vector_startup_cycles"]) + -(-B * Hp * 4 // int(hw["vector_bytes_per_cycle"]))
        if "lens" in roles:
            prime += _copy(hw, B * 4, [0], False)
        if "p" in roles:
            prime += _copy(hw, n * 4, [4 * (d * 3 * H + q * H + j0) for q in range(3)], False)
        if "rbh" in roles:
            prime += _copy(hw, n * 4, [4 * (d * H + j0)], False)
        if "c0" in roles:
            prime += _copy(hw, n * 4, [4 * (base + b * sb + j0) for b in range(B)], False)
        steps = []
        for s in range(T):
            c = 0
            if s == 0 and "h0" in roles:
                c += _copy(hw, H * 4, [4 * (base + b * sb) for b in range(B)], False)
            elif s > 0:
                c += _copy(hw, H * 4, [4 * (((s + 1) & 1) * B * H + b * H) for b in range(B)], False)
            tb = T - 1 - s if ex["reverse"] else s
            for b in range(B):
                row = tb * B + b if lay == 0 else b * T + tb
                c += _copy(hw, n * 4, [4 * (row * NXW + d * GH + q * H + j0) for q in range(G)], False)
            passes = 2 if lbr0 else 1
            c += passes * nblk * (conv + (wblk if nblk > 1 else 0))
            if lbr0:
                c += _copy(hw, n * 4, [4 * (b * H + j0) for b in range(B)], True)
                c += _copy(hw, H * 4, [4 * (b * H) for b in range(B)], False)
            c += _copy(hw, n * 4, [4 * ((s & 1) * B * H + b * H + j0) for b in range(B)], True)
            if "y" in roles:
                for b in range(B):
                    y = ((tb * D + d) * B + b) * H if lay == 0 else ((b * T + tb) * D + d) * H
                    c += _copy(hw, n * 4, [4 * (y + j0)], True)
            steps.append(c)
        fin = sum(_copy(hw, n * 4, [4 * (base + b * sb + j0) for b in range(B)], True) for r in ("yh", "yc") if r in roles)
        clocks.append((prime, steps, fin))
    # barriers align the tasks' clocks every step (twice for GRU with linear_before_reset=0)
    now = max(p for p, _, _ in clocks)
    first = now
    for s in range(T):
        now = max(now + st[s] for _, st, _ in clocks) + sync * (2 if lbr0 else 1)
    step = (now - first) / T
    now += max(f for _, _, f in clocks)
    return now + int(hw["launch_cycles"]), step


def traffic_bytes(k, geo):
    """GDRAM bytes the kernel's copies move (the weight image padded to the WRAM layout)."""
    ex, roles = k.extra, k.extra["bufs"]
    T, B, H, G = ex["T"], ex["B"], ex["H"], ex["G"]
    NJ, Hp, CB, nblk = geo["NJ"], geo["Hp"], geo["CB"], geo["nblk"]
    lbr0 = ex["cell"] == "GRU" and not ex["lbr"]
    total = 0
    for t in range(TASKS):
        n = max(0, min(NJ, H - t * NJ))
        if not n:
            continue
        w = nblk * CB * Hp * 4
        total += w if nblk == 1 else w * T
        total += (B * 4 if "lens" in roles else 0) + (3 * n * 4 if "p" in roles else 0) + (n * 4 if "rbh" in roles else 0)
        total += B * n * 4 * (("c0" in roles) + ("yh" in roles) + ("yc" in roles))
        total += B * H * 4 * (T if "h0" in roles else T - 1) + T * B * G * n * 4 + T * B * n * 4
        total += T * B * n * 4 if "y" in roles else 0
        total += T * (B * n * 4 + B * H * 4) if lbr0 else 0
    return total


def compulsory_bytes(k):
    """Weights, inputs and outputs once."""
    ex, roles = k.extra, k.extra["bufs"]
    T, B, H, G = ex["T"], ex["B"], ex["H"], ex["G"]
    return 4 * (G * H * H + T * B * G * H + B * H * (T * ("y" in roles) + ("yh" in roles) + ("yc" in roles)
                                                     + ("h0" in roles) + ("c0" in roles)))


def copy_bytes(dk):
    """{direction: bytes} the printed kernel (recurrence_body) copies over its 16 tasks: the
    same copies, counted as the emulator counts them (size x segments)."""
    ex = dk.kernel.extra
    geo, par = dk.info["geometry"], dk.info["roles"]
    T, B, H, G = (ex[x] for x in ("T", "B", "H", "G"))
    NJ, Hp, CB, nblk = geo["NJ"], geo["Hp"], geo["CB"], geo["nblk"]
    lbr0 = ex["cell"] == "GRU" and not ex["lbr"]
    out = {}

    def add(d, n):
        out[d] = out.get(d, 0) + 4 * n
    for t in range(16):
        nown = min(NJ, H - t * NJ) if t * NJ < H else 0
        if nown <= 0:
            continue
        add("GDRAM2WRAM", CB * Hp if nblk == 1 else 0)                 # priming
        add("GDRAM2NRAM", (B if "lens" in par else 0) + (3 * nown if "p" in par else 0)
            + (nown if "rbh" in par else 0) + (B * nown if ex["cell"] == "LSTM" and "c0" in par else 0))
        steps_h = T if "h0" in par else T - 1          # h(t-1) read: step 0 only from h0
        passes = 2 if lbr0 else 1                      # GRU without linear_before_reset: r * h(t-1) too
        add("GDRAM2NRAM", steps_h * B * H + T * B * G * nown + (T * B * H if lbr0 else 0))
        add("GDRAM2WRAM", T * passes * nblk * CB * Hp if nblk > 1 else 0)
        add("NRAM2GDRAM", T * B * nown * ((2 if lbr0 else 1) + (1 if "y" in par else 0))
            + B * nown * (("yh" in par) + ("yc" in par)))
    return {d: v for d, v in sorted(out.items()) if v}
