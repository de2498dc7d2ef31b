"""The recurrence of a GRU/LSTM/RNN direction (ops/recurrent.py) as ONE CPE kernel that runs
every step of the sequence inside one spawn.

Each CPE owns NJ = ceil(H / 64) consecutive hidden units. Priming: it DMAs its slice of the
recurrent weights (G rows of H per unit) into LDM once, with its peepholes, biases and
initial cell state. Each step: it gets the whole h(t-1) [B, H] and its units' input
projections, computes the recurrent products and the cell update of its units, puts its
units' new h into the exchange buffer hx[step % 2] (and Y), and the 64 CPEs meet at an
array barrier before the next step reads it. GRU with linear_before_reset=0 needs r * h of
every unit before its h gate: one more put, barrier and get per step. Finish: Y_h and Y_c.

When the resident slice does not fit the LDM budget, the weights stream: one row of H per
unit and gate per step (each weight then read T times; the plan says `weights: streamed`).

The DMA pattern never depends on data (run-time sequence lengths change which rows are
read and whether Y gets values or zeros, not how many bytes move), so recurrence_predict
is exact.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ....support.errors import LdmError
from ....support.names import c_comment
from ...cell_c import flops as cell_flops, gru_gates, masked_update, scratch
from ..cost import model
from .gather import special_prologue
from ..schedule.kernel_schedule import ldm_align


@dataclass
class RecurrenceSchedule:
    ldm_bytes: int
    ldm_budget: int
    resident: bool
    bcast: bool = False       # SW26010: h(t-1) reaches a mesh row's 8 LDMs by one broadcast DMA
    modeled_seconds: float = 0.0
    roofline_seconds: float = 0.0
    compulsory_bytes: int = 0
    flops: int = 0
    report: dict = field(default_factory=dict)


def geometry(k, cores):
    ex = k.extra
    T, B, H, G, D, d = (ex[x] for x in ("T", "B", "H", "G", "D", "d"))
    NJ = math.ceil(H / cores)
    lay = ex["layout"]
    return dict(T=T, B=B, H=H, G=G, D=D, d=d, NJ=NJ, GH=G * H, NXW=D * G * H,
                sb=H if lay == 0 else D * H,               # floats between batches in h0/c0/Y_h/Y_c
                base=d * B * H if lay == 0 else d * H,     # where direction d starts there
                owners=[max(0, min(NJ, H - c * NJ)) for c in range(cores)])


def _bufs(k, resident, cores):
    """LDM buffers: name -> floats (or ints), in allocation order."""
    ex, b = k.extra, k.extra["bufs"]
    B, H, G = ex["B"], ex["H"], ex["G"]
    NJ = math.ceil(H / cores)
    return {"wr": G * NJ * H if resident else H, "hf": B * H, "xw": B * G * NJ, "gr": B * G * NJ,
            "hp": B * NJ, "hn": B * NJ} | scratch(ex, b, B, NJ)


def ldm_bytes(k, resident, cores):
    return sum(ldm_align(4 * n) for n in _bufs(k, resident, cores).values())


def _yoff(k, tb, b):
    ex = k.extra
    T, B, H, D, d = ex["T"], ex["B"], ex["H"], ex["D"], ex["d"]
    if ex["layout"] == 0:
        return f"((long)(({tb}) * {D} + {d}) * {B} + ({b})) * {H}"
    return f"((long)(({b}) * {T} + ({tb})) * {D} + {d}) * {H}"


def _row(k, tb, b):
    ex = k.extra
    return f"(({tb}) * {ex['B']} + ({b}))" if ex["layout"] == 0 else f"(({b}) * {ex['T']} + ({tb}))"


def recurrence_c(k, cores, itemsize=4):
    ex, rb = k.extra, k.extra["bufs"]
    g = geometry(k, cores)
    T, B, H, G, d, NJ, GH = g["T"], g["B"], g["H"], g["G"], g["d"], g["NJ"], g["GH"]
    res = k.schedule.resident
    bufs = _bufs(k, res, cores)
    cell = ex["cell"]
    lbr0 = cell == "GRU" and not ex["lbr"]
    L = []
    w = L.append
    w(f"/* {cell} (node {c_comment(k.node)}), direction {d}{' (reverse)' if ex['reverse'] else ''}: {T} steps in one spawn, "
      f"{NJ} unit(s) per CPE, recurrent weights {'resident in LDM' if res else 'streamed per step'} */")
    L += special_prologue(k)
    w(f"    const int j0 = cpe * {NJ};")
    w(f"    const int nown = j0 < {H} ? SW_MIN({NJ}, {H} - j0) : 0;")
    for name, n in bufs.items():
        ty = "int" if name == "ln" else "float"
        w(f"    {ty} *{name} = ({ty} *)ldm_malloc({ldm_align(4 * n)});")
    w(f"    int tb[{B}], act[{B}];")
    w(f"    const int rowbusy = (cpe / 8) * 8 * {NJ} < {H};   /* some CPE of my mesh row owns units */")
    w("    (void)tb; (void)act; (void)rowbusy;")

    def get(dst, src, n, bsize=None, gap=None):
        if bsize is None:
            w(f"        sw_get({dst}, {src}, {n}, 0, 0, &rp);")
        else:
            w(f"        sw_get({dst}, {src}, {n}, {bsize}, {gap}, &rp);")
        w("        ng++;")

    def put(dst, src, n, bsize=None, gap=None, ind="        "):
        w(f"{ind}sw_put({dst}, {src}, {n}, {bsize or 0}, {gap or 0}, &rp);")
        w(f"{ind}ng++;")

    bcast = k.schedule.bcast

    def fetch_h(src, bsize, gap):
        """h(t-1) [B, H] into hf: one broadcast per busy mesh row (SW26010), else per CPE."""
        if bcast:
            w(f"        if (rowbusy) {{")
            w("          if (cpe % 8 == 0) {")
            w(f"            sw_bget(hf, {src}, {B * H * 4}, {bsize or 0}, {gap or 0}, &rp, 1 << (cpe / 8));")
            w("            ng++;")
            w("            SW_WAIT(rp, ng);")
            w("          }")
            w("          SW_ROW_SYNC();   /* the row's copy has landed */")
            w("        }")
        else:
            w("        if (nown > 0) {")
            get("hf", src, B * H * 4, bsize, gap)
            w("          SW_WAIT(rp, ng);")
            w("        }")

    # priming: what stays in LDM for the whole sequence
    if bcast:
        w("    if (rowbusy) SW_ROW_SYNC();   /* every CPE of the row has its buffers: broadcasts may land */")
    w("    /* priming: the resident slice of the weights and the initial state */")
    w("    if (nown > 0) {")
    if "lens" in rb:
        get("ln", f"p.{rb['lens']}", B * 4)
    if res:
        for q in range(G):
            get(f"wr + {q} * nown * {H}", f"p.{rb['r']} + (long)({d * GH + q * H} + j0) * {H}", f"nown * {H * 4}")
    if "pp" in bufs:
        for q in range(3):
            get(f"pp + {q * NJ}", f"p.{rb['p']} + {d * 3 * H + q * H} + j0", "nown * 4")
    if "rb" in bufs:
        get("rb", f"p.{rb['rbh']} + {d * H} + j0", "nown * 4")
    if cell == "LSTM":
        if "c0" in rb:
            get("cs", f"p.{rb['c0']} + {g['base']} + j0", f"{B} * nown * 4", "nown * 4", f"({g['sb']} - nown) * 4")
        else:
            w(f"        for (int i = 0; i < {B} * nown; i++) cs[i] = 0.0f;")
    if "zero" in bufs:
        w(f"        for (int i = 0; i < {NJ}; i++) zero[i] = 0.0f;")
    w("        SW_WAIT(rp, ng);")
    w("    }")
    w(f"    for (int s = 0; s < {T}; s++) {{")
    w("      /* h(t-1) of every unit */")
    if "h0" in rb:
        w("      if (s == 0) {")
        fetch_h(f"p.{rb['h0']} + {g['base']}", H * 4, (g["sb"] - H) * 4)
        w("      }")
    else:
        w(f"      if (s == 0 && nown > 0) for (int i = 0; i < {B * H}; i++) hf[i] = 0.0f;")
    w("      if (s > 0) {")
    fetch_h(f"p.{rb['hx']} + ((s + 1) & 1) * {B * H}", None, None)
    w("      }")
    w("      if (nown > 0) {")
    w("        /* this step's input projections of my units */")
    w(f"        for (int b = 0; b < {B}; b++) {{")
    w(f"            const int len = {'ln[b]' if 'lens' in rb else T};")
    w("            act[b] = s < len;")
    w(f"            tb[b] = {'act[b] ? len - 1 - s : s' if ex['reverse'] else 's'};")
    w(f"            sw_get(xw + b * {G} * nown, p.{rb['xw']} + (long){_row(k, 'tb[b]', 'b')} * {g['NXW']} + {d * GH} + j0, "
      f"{G} * nown * 4, nown * 4, ({H} - nown) * 4, &rp);")
    w("            ng++;")
    w("        }")
    w("        SW_WAIT(rp, ng);")
    w(f"        for (int b = 0; b < {B}; b++) for (int u = 0; u < nown; u++) hp[b * nown + u] = hf[b * {H} + j0 + u];")

    def gemv(qs, src):
        for q in qs:
            if res:
                w(f"        for (int u = 0; u < nown; u++) {{ const float *wrow = wr + ({q} * nown + u) * {H};")
            else:
                w("        for (int u = 0; u < nown; u++) {")
                w(f"          sw_get(wr, p.{rb['r']} + (long)({d * GH + q * H} + j0 + u) * {H}, {H * 4}, 0, 0, &rp);")
                w("          ng++;")
                w("          SW_WAIT(rp, ng);")
                w("          const float *wrow = wr;")
            w(f"          for (int b = 0; b < {B}; b++) {{ float a = 0.0f; const float *hv = {src} + b * {H};")
            w(f"            for (int kk = 0; kk < {H}; kk++) a += wrow[kk] * hv[kk];")
            w(f"            gr[(b * {G} + {q}) * nown + u] = a; }}")
            w("        }")

    def xw_(q):
        return f"xw[(b * {G} + {q}) * nown + u]"

    def hr_(q):
        return f"gr[(b * {G} + {q}) * nown + u]"

    zr = ("zr[b * nown + u]", f"zr[{B} * nown + b * nown + u]")
    if lbr0:
        gemv([0, 1], "hf")
        w(f"        for (int b = 0; b < {B}; b++) for (int u = 0; u < nown; u++) {{")
        L += ["          " + s for s in gru_gates(ex, xw_, hr_, *zr)]
        w(f"          rhb[b * nown + u] = {zr[1]} * hp[b * nown + u]; }}")
        put(f"p.{rb['rh']} + j0", "rhb", f"{B} * nown * 4", "nown * 4", f"({H} - nown) * 4")
        w("        SW_WAIT(rp, ng);")
        w("      }")
        w("      SW_ARRAY_SYNC();   /* r * h(t-1) of every unit is in memory */")
        fetch_h(f"p.{rb['rh']}", None, None)
        w("      if (nown > 0) {")
        gemv([2], "hf")
    else:
        gemv(range(G), "hf")
    w("        /* the cell update of my units */")
    w(f"        for (int b = 0; b < {B}; b++) for (int u = 0; u < nown; u++) {{")
    w("          const int i = b * nown + u;")
    L += ["          " + s for s in masked_update(ex, xw_, hr_, zr, NJ, "pp" in bufs, "rb" in bufs)]
    w("        }")
    put(f"p.{rb['hx']} + (s & 1) * {B * H} + j0", "hn", f"{B} * nown * 4", "nown * 4", f"({H} - nown) * 4")
    if "y" in rb:
        w(f"        for (int b = 0; b < {B}; b++) {{")
        src = "act[b] ? hn + b * nown : zero" if "zero" in bufs else "hn + b * nown"
        put(f"p.{rb['y']} + {_yoff(k, 'tb[b]', 'b')} + j0", src, "nown * 4", ind="            ")
        w("        }")
    w("        SW_WAIT(rp, ng);")
    w("      }")
    w("      SW_ARRAY_SYNC();   /* every unit's h(t) is in memory */")
    w("    }")
    w("    /* finish: the last state of my units */")
    w("    if (nown > 0) {")
    if "yh" in rb:
        put(f"p.{rb['yh']} + {g['base']} + j0", "hn", f"{B} * nown * 4", "nown * 4", f"({g['sb']} - nown) * 4")
    if "yc" in rb:
        put(f"p.{rb['yc']} + {g['base']} + j0", "cs", f"{B} * nown * 4", "nown * 4", f"({g['sb']} - nown) * 4")
    w("        SW_WAIT(rp, ng);")
    w("    }")
    for name, n in reversed(list(bufs.items())):
        w(f"    ldm_free({name}, {ldm_align(4 * n)});")
    w("}")
    w("")
    return "\n".join(L)


def _transfers(k, cores, para_bytes, resident, bcast=False):
    """Every DMA of one spawn per CPE: ([(bytes, count)] gets, [(bytes, count)] puts)."""
    ex, rb = k.extra, k.extra["bufs"]
    g = geometry(k, cores)
    T, B, H, G = g["T"], g["B"], g["H"], g["G"]
    lbr0 = ex["cell"] == "GRU" and not ex["lbr"]
    steps_h = (T if "h0" in rb else T - 1) + (T if lbr0 else 0)    # fetches of a whole [B, H]
    per = []
    for c, n in enumerate(g["owners"]):
        gets, puts = [(para_bytes, 1)], []          # (bytes, count)
        if bcast and c % 8 == 0 and g["owners"][c]:
            gets.append((B * H * 4, steps_h))       # the row's broadcast, issued by its first CPE
        elif not bcast and n:
            gets.append((B * H * 4, steps_h))
        if n:
            if "lens" in rb:
                gets.append((B * 4, 1))
            if resident:
                gets.append((n * H * 4, G))
            if "p" in rb:
                gets.append((n * 4, 3))
            if "rbh" in rb:
                gets.append((n * 4, 1))
            if "c0" in rb:
                gets.append((B * n * 4, 1))
            gets.append((G * n * 4, T * B))
            if not resident:
                gets.append((H * 4, T * G * n))
            if lbr0:
                puts.append((B * n * 4, T))
            puts.append((B * n * 4, T))
            if "y" in rb:
                puts.append((n * 4, T * B))
            if "yh" in rb:
                puts.append((B * n * 4, 1))
            if "yc" in rb:
                puts.append((B * n * 4, 1))
        per.append((gets, puts))
    return per


def recurrence_predict(k, cores, para_bytes):
    per = _transfers(k, cores, para_bytes, k.schedule.resident, k.schedule.bcast)
    out = {"get": {"ops": 0, "bytes": 0}, "put": {"ops": 0, "bytes": 0}}
    for gets, puts in per:
        for d, xs in (("get", gets), ("put", puts)):
            for nb, c in xs:
                out[d]["ops"] += c
                out[d]["bytes"] += nb * c
    return out


def _model(k, hw, resident, para_bytes, bcast=False):
    """Modelled seconds of the spawn and of one step, on the busiest CPE (CPE 0)."""
    ex = k.extra
    cores = int(hw["cpes"])
    g = geometry(k, cores)
    T, B, H, G = g["T"], g["B"], g["H"], g["G"]
    gets, puts = _transfers(k, cores, para_bytes, resident, bcast)[0]
    dma = sum(c * model.dma_seconds_per_cpe(hw, nb, nb) for nb, c in gets + puts)
    n = g["owners"][0]
    macs = T * B * G * n * H
    cyc = macs * model.issue(hw, 1, 2) + T * B * n * (8 * float(model.hwget(hw, "transcendental_cycles")))
    syncs = T * (2 if ex["cell"] == "GRU" and not ex["lbr"] else 1)
    cyc += syncs * float(model.hwget(hw, "row_sync_cycles")) * (2 if bcast else 1)   # + the row's wait for its copy
    comp = cyc / model.clock(hw)
    total = model.kernel_seconds(hw, dma + comp)
    flops = cell_flops(ex)
    weights = G * H * H * 4
    comp_bytes = weights + T * B * G * H * 4 + 4 * B * H * (T * ("y" in ex["bufs"]) + ("yh" in ex["bufs"]) + ("yc" in ex["bufs"]))
    return total, (dma + comp) / T, flops, comp_bytes, weights


def recurrence_schedule(k, hw, budget, options):
    """Weights resident in LDM when their slice fits the budget, else streamed per step."""
    cores = int(hw["cpes"])
    resident = ldm_bytes(k, True, cores) <= budget
    need = ldm_bytes(k, resident, cores)
    if need > budget:
        raise LdmError(k.name, need, budget)
    para = 8 * len(k.buffers)
    bcast = bool(model.hwget(hw, "row_broadcast"))
    total, step, flops, comp, weights = _model(k, hw, resident, para, bcast)
    T = k.extra["T"]
    k.schedule = RecurrenceSchedule(
        need, budget, resident, bcast, modeled_seconds=total, roofline_seconds=model.roofline_seconds(hw, flops, comp),
        compulsory_bytes=comp, flops=flops,
        report={"steps": T, "step_seconds": step, "weights": "resident" if resident else "streamed",
                "weight_bytes": weights, "weight_bytes_per_sequence": weights if resident else weights * T})
