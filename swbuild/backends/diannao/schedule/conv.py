"""The conv, gemm and pool classes: HWC tiles with halo, WRAM weights, rows or output-channel
blocks split over the tasks, or (clusters mode) output-channel blocks over the clusters and
rows over a cluster's cores, so that each weight byte leaves GDRAM once per launch."""
from __future__ import annotations

import math
from dataclasses import replace

from ....ir.loopnest import Acc, Bin, Load, Un, Var, iconst
from ..devir import Barrier, For, ScalarLoad, SLoop, Stmt, Sync, simp, subst
from ....ir.sizes import ceil_div, round_up
from ..preprocess import conv_ci_elems, pool_c_elems, staged_copy, vector_elems
from ..pingpong import pipelined_cycles
from .builder import ALIGN, Unschedulable, ge, guards, loop, tasks
from .integer import INTEGER_OPS, clamp_instructions, fewer_passes, rounded_in_conversion, saturating_int8
from . import conv_stationary as stationary
from .narrow import byte_pixels, narrow_ends
from .conv_geometry import epilogue_classes, output_offset, input_offset, conv_geometry, pool_geometry
from .stem import cheaper_fold, folded_copy_cycles, folded_rows, tile_pixels
from .weight_prefetch import PREFETCH_MAX_NIB, W_CHUNKS, chunked_block
from . import weight_broadcast
from .three_address import Operand, ThreeAddress, peak_temps
from .replicate import doubling_copies
from .cycle_ops import cyclable, cycle_reads


def sched_conv(kb, pool=False):
    hw = kb.hw
    G = pool_geometry(kb) if pool else conv_geometry(kb)
    # fixed point (schedule/integer.py): int8/int16 input tile converted in NRAM, int8 weights
    fx = 0 if pool else int(kb.k.extra.get("fixed_point", 0))
    # int8 GDRAM storage (narrow.py): an int8 input is copied straight into __bang_conv's tile
    # (no float staging, a byte per element), an int8 result is converted in NRAM and stored
    x8, o8 = narrow_ends(kb, G, fx, pool)
    if fx or INTEGER_OPS.get(kb.k.op):     # the requantization in fewer vector passes (integer.py)
        epi = rounded_in_conversion(kb.k, kb.g, saturating_int8(G.epilogue)) if o8 else G.epilogue
        G = replace(G, epilogue=fewer_passes(epi, clamp_instructions(hw)) if epi is G.epilogue else epi)
    # the stem's kernel height folded into its channels where the estimate says it is cheaper
    G, best = cheaper_fold(G, pool, getattr(kb.p.target_state, "stem_fold", False),
                           lambda g, fold: _plan(kb, g, pool, fx, x8, o8, fold))
    (_, _, _, tr, st, (Cob, Cib, NIB), mode, R), W_in, loads, kinds, fold = best
    return _emit_conv(kb, G, pool, mode, Cob, Cib, NIB, R, W_in, loads, kinds, fx, x8, o8, tr, st, fold)


def _plan(kb, G, pool, fx, x8, o8, fold=1):
    """(best option, W_in, epilogue loads, their kinds, fold) by the schedule's estimate;
    fold > 1: G is folded(), only the transposed staging serves it."""
    hw = kb.hw
    ve = vector_elems(hw)
    K1 = G.kh * G.kw
    W_in = (G.Wo - 1) * G.sw + G.kw
    loads, kinds = epilogue_classes(kb, G, G.epilogue)
    staged = [ld for ld in loads if kinds[ld] != "scalar"]
    chan = {f"q{i}" for i, ld in enumerate(loads) if kinds[ld] == "channel"}
    ta_peak = peak_temps(G.epilogue, lambda e: Operand("buf", "acc") if isinstance(e, Acc) else
                         Operand("scalar", Var("v")) if kinds[e] == "scalar" else Operand("buf", f"q{loads.index(e)}"),
                         chan)
    n_lane_bufs = 1 + len(staged) + ta_peak            # acc + staged epilogue operands + temps
    n_pixel = sum(kinds[ld] == "pixel" for ld in loads)
    n_pixel8 = len(byte_pixels(kb, loads, kinds, pool))
    budget = kb.nram_budget()
    wbytes = 1 if fx else 4
    xb, ob = (1 if x8 else 4), (1 if o8 else 4)
    rate_key = {0: "conv_float_macs_per_cycle", 1: "conv_int8_macs_per_cycle", 2: "conv_int16_macs_per_cycle"}[fx]
    # pingpong.py pipelines the row tiles when no input-channel loop sits inside them: their
    # input, per-pixel operands and result then take two halves each
    piped = getattr(kb.p.target_state, "double_buffer", False)
    split_clusters = getattr(kb.p.target_state, "cluster_split", False)
    prefetch = not pool and getattr(kb.p.target_state, "weight_prefetch", False)
    bc = getattr(kb.p.target_state, "weight_broadcast", "off")     # weight_broadcast.py

    # A channels-first input (NCHW image of a stem) is gathered one element per copy segment
    # into the HWC tile; the alternative copies its rows (long segments) into a CHW tile and
    # transposes it on chip (__bang_transpose): the estimate decides per candidate
    chw = not pool and G.xst["c"] != 1 and G.xst["w"] == 1 and G.W > 1

    cpg, gb, seg, ms = hw["gdram_cycles_per_granule"], hw["gdram_granule_bytes"], hw["strided_segment_cycles"], \
        hw["memcpy_startup_cycles"]

    def copy(rows, pixels, chans, xst, write, eb=4):
        """Copies of a tile: a strided copy per row when channels are contiguous (HWC),
        else one element-gather copy per pixel (each element its own granule)."""
        if xst["c"] == 1:
            return rows * (ms + (pixels - 1) * seg + pixels * ceil_div(chans * eb, gb) * (1 + write) * cpg)
        return rows * pixels * (ms + (chans - 1) * seg + chans * (1 + write) * cpg)

    def input_cycles(R, Cib, tr):
        """(copy, on-chip compute) cycles of staging one input tile."""
        rin = (R - 1) * G.sh + G.kh
        if not tr:
            return copy(rin, W_in, Cib, G.xst, False, xb), 0
        # a strided copy per real channel (a segment per row of the image), the tile filled
        # (halo, padded channels) and transposed on the compute queue
        nb = tile_pixels(hw, rin, W_in, xb, True) * Cib * xb
        vec = lambda per: hw["vector_startup_cycles"] + ceil_div(nb, hw["vector_bytes_per_cycle"]) * per  # noqa: E731
        rows = min(rin, G.H)
        cp = min(Cib, G.Cig) * (ms + (rows - 1) * seg + rows * ceil_div(min(G.W, W_in) * xb, gb) * cpg)
        cp = folded_copy_cycles(G, fold, W_in, xb, hw) if fold > 1 else cp     # folded: `fold` rows a copy
        return cp, vec(1) + vec(hw["transpose_cycles_per_chunk"])

    def nram(R, Cib, Cob, NIB, tr=False):
        lanes = R * G.Wo * Cob
        rin = (R - 1) * G.sh + G.kh
        pix = tile_pixels(hw, rin, W_in, xb, tr)
        xin_b, lane_b = round_up(round_up(pix * Cib, ve) * 4, ALIGN), round_up(round_up(lanes, ve) * 4, ALIGN)
        xq_b = round_up(round_up(round_up(pix * Cib, ve), ve * 4 // fx) * fx, ALIGN) if fx else 0
        o8_b = round_up(round_up(lanes, ve * 4), ALIGN) if o8 else 0
        if x8 and pool:                   # the byte tile the copies fill, widened into the float one
            xq_b = round_up(round_up(pix * Cib, ve * 4), ALIGN)
        elif x8:
            xin_b, xq_b = xq_b, 0
        xt_b = xin_b if tr else 0         # the CHW rows the transpose reads: as large as its result
        p8_b = n_pixel8 * round_up(round_up(lanes, ve * 4), ALIGN)     # byte copies of int8 pixel operands
        extra = ((xt_b or xin_b) + (1 + n_pixel) * lane_b + o8_b + p8_b) if piped and NIB == 1 else 0
        extra += xq_b if piped and NIB == 1 and x8 and pool else 0
        return xin_b + xq_b + xt_b + o8_b + p8_b + (NIB > 1) * lane_b + n_lane_bufs * lane_b + extra

    if pool:
        Cp = round_up(G.Cog, pool_c_elems(hw))
        cands = [(c, c, 1) for c in range(Cp, 0, -pool_c_elems(hw))]
    else:
        ci_al = int(hw["conv_ci_multiple_bytes"]) // fx if fx else conv_ci_elems(hw)
        co_al = int(hw["conv_co_multiple"])
        Cin_p, Co_p = round_up(G.Cig, ci_al), round_up(G.Cog, co_al)
        welems = kb.tc.wram_budget // wbytes
        cands = []
        for Cob in range(Co_p, 0, -co_al):
            cib_max = welems // (Cob * K1) // ci_al * ci_al
            if cib_max < ci_al:
                continue
            NIB = ceil_div(Cin_p, min(Cin_p, cib_max))
            Cib = round_up(ceil_div(Cin_p, NIB), ci_al)
            cands.append((Cob, Cib, NIB))

    def best_rows(cand, R_target, tr, more=lambda R: 0):
        Cob, Cib, NIB = cand
        for R in range(max(1, R_target), 0, -1):
            if nram(R, Cib, Cob, NIB, tr) + more(R) <= budget:
                return R
        return None

    def estimate_piped(mode, cand, R, tr):
        """Prologue + per-step maxima + epilogue of the pipelined row tiles (pingpong.py)."""
        Cob, Cib, NIB = cand
        lanes = R * G.Wo * Cob
        x_copy, x_comp = input_cycles(R, Cib, tr)
        load = x_copy + n_pixel * copy(R, G.Wo, Cob, G.ost, False)
        store = copy(R, G.Wo, Cob, G.ost, True, ob)
        NRT = ceil_div(G.Ho, R)
        if pool:
            comp = hw["vector_startup_cycles"] + R * G.Wo * K1 * ceil_div(Cob * 4, hw["vector_bytes_per_cycle"])
            if mode == "channels":      # channel blocks over the tasks, each its row tiles
                return G.N * ceil_div(ceil_div(G.Cog, Cob), 16) * pipelined_cycles(NRT, load, comp, store)
            return G.N * ceil_div(G.Cog, Cob) * pipelined_cycles(ceil_div(NRT, 16), load, comp, store)
        NCB = ceil_div(round_up(G.Cog, int(hw.get("conv_co_multiple", 64))), Cob)
        rate = max(1, int(hw.get(rate_key, 512)))
        comp = lanes * K1 * Cib / rate + hw["conv_startup_cycles"] + x_comp
        blk = Cob * K1 * Cib * wbytes
        gran = cpg / gb
        if mode in ("rows", "clusters"):
            tasks_, blocks = (16, NCB) if mode == "rows" else (4, ceil_div(NCB, 4))
            steps = pipelined_cycles(ceil_div(NRT, tasks_), load, comp, store)
            return G.N * G.G * blocks * (steps + weight_broadcast.staged_cycles(mode, blk, hw, prefetch, bc))
        return G.N * G.G * ceil_div(NCB, 16) * (pipelined_cycles(NRT, load, comp, store) + blk * gran)

    def estimate(mode, cand, R, tr=False, st=False):
        Cob, Cib, NIB = cand
        if st:
            return stationary.estimate(G, hw, mode, cand, R, K1, wbytes, piped, input_cycles(R, cand[1], tr),
                                       n_pixel * copy(R, G.Wo, Cob, G.ost, False), copy(R, G.Wo, Cob, G.ost, True, ob),
                                       max(1, int(hw.get(rate_key, 512))))
        gran = hw["gdram_cycles_per_granule"] / hw["gdram_granule_bytes"]
        if piped and NIB == 1:
            return estimate_piped(mode, cand, R, tr)
        if pool:   # per task: its row tiles of every channel block (channels: of its blocks), window + input copy
            rin = (R - 1) * G.sh + G.kh
            per = ceil_div(ceil_div(G.Ho, R), 16) if mode == "rows" else ceil_div(G.Ho, R)
            blocks = ceil_div(G.Cog, Cob) if mode == "rows" else ceil_div(ceil_div(G.Cog, Cob), 16)
            return G.N * blocks * per * (R * G.Wo * K1 * ceil_div(Cob * 4, hw["vector_bytes_per_cycle"])
                                                       + rin * W_in * Cob * 4 * gran + hw["memcpy_startup_cycles"] * 3)
        NCB = ceil_div(round_up(G.Cog, ve if pool else int(hw.get("conv_co_multiple", 64))), Cob)
        NRT = ceil_div(G.Ho, R)
        macs_tile = R * G.Wo * Cob * K1 * Cib
        rate = max(1, int(hw.get(rate_key, 512)))
        gran = hw["gdram_cycles_per_granule"] / hw["gdram_granule_bytes"]
        in_tile = ((R - 1) * G.sh + G.kh) * W_in * Cib * xb * gran
        if chw:     # gathered or transposed: the copies as the emulator charges them
            in_tile = sum(input_cycles(R, Cib, tr))
        blk = Cob * K1 * Cib * wbytes
        if mode in ("rows", "clusters"):
            per, blocks = (ceil_div(NRT, 16), NCB) if mode == "rows" else (ceil_div(NRT, 4), ceil_div(NCB, 4))
            if prefetch and 1 < NIB <= PREFETCH_MAX_NIB:
                # per tile: block 0 to SRAM, then per block its input tile and the larger of the
                # next block's GDRAM -> SRAM (IO queue) and this one's SRAM -> WRAM + conv
                P, MC = blk * gran / 4, blk / hw["sram_bytes_per_cycle"] + macs_tile / rate
                return G.N * G.G * blocks * per * (NIB * in_tile + P + (NIB - 1) * max(P, MC) + MC)
            t = G.N * G.G * blocks * (per * NIB * (macs_tile / rate + in_tile) + NIB * weight_broadcast.staged_cycles(mode, blk, hw, prefetch, bc))
        else:
            per = ceil_div(NCB, 16)
            t = G.N * G.G * per * (NRT * NIB * (macs_tile / rate + in_tile) + (NIB if NIB == 1 else NRT * NIB) * blk * gran)
        return t

    options = []
    for cand in cands:
        for mode in ("rows", "clusters", "channels"):
            if (pool and mode == "clusters") or (mode == "clusters" and not split_clusters):
                continue
            for tr in ((True,) if fold > 1 else (False, True) if chw and cand[2] == 1 else (False,)):
                if tr and cand[2] != 1:
                    continue
                R = best_rows(cand, 1 if fold > 1 else      # a folded tile: one output row's input rows
                              {"rows": ceil_div(G.Ho, 16), "clusters": ceil_div(G.Ho, 4)}.get(mode, G.Ho), tr)
                if R is None:
                    continue
                # pipelined: fewer rows per tile buy overlap; every R that fits is a candidate
                for r in (range(R, 0, -1) if piped and cand[2] == 1 else (R,)):
                    options.append((estimate(mode, cand, r, tr), ("rows", "clusters", "channels").index(mode), -cand[0],
                                    tr, False, cand, mode, r))
    if not pool and fold == 1 and getattr(kb.p.target_state, "input_stationary", "off") in ("on", "all"):
        options += stationary.options(G, kb, Co_p, co_al, K1, Cin_p, wbytes, piped, split_clusters, chw,
                                      sum(kinds[ld] == "channel" for ld in loads), ve, best_rows, estimate)
    if not options:
        raise Unschedulable("no tile fits the on-chip memories")
    if getattr(kb.p.target_state, "input_stationary", "off") == "all" and any(o[4] for o in options):
        options = [o for o in options if o[4]]          # wherever it fits (tests, measurements)
    return min(options), W_in, loads, kinds, fold


def _emit_conv(kb, G, pool, mode, Cob, Cib, NIB, R, W_in, loads, kinds, fx=0, x8=False, o8=False, tr=False, st=False,
               fold=1):
    hw = kb.hw
    K1 = G.kh * G.kw
    rin = (R - 1) * G.sh + G.kh
    # tr: the input rows copied channels-first into xt [Cib][P], transposed on chip to the
    # [P][Cib] tile __bang_conv reads (P: the tile's pixels padded to the transpose's multiple)
    P = tile_pixels(hw, rin, W_in, 1 if x8 else 4, tr)
    lanes = R * G.Wo * Cob
    NRT = ceil_div(G.Ho, R)
    NCB = ceil_div(round_up(G.Cog, pool_c_elems(hw) if pool else int(hw["conv_co_multiple"])), Cob)
    if pool:
        NCB = ceil_div(G.Cog, Cob)
    BS = Cob * K1 * Cib
    BSw = BS // 4 if fx else BS         # weight block in 4-byte words (int8 weights: four to a word)
    gx = kb.gparam(kb.k.buffers[G.xbuf].tensor)
    go = kb.gparam(kb.k.buffers[kb.k.out].tensor)
    if x8 and pool:     # int8 in GDRAM: copied into a byte tile, widened into the float one
        xin = kb.alloc("NRAM", "xin", P * Cib)
        xq = kb.alloc("NRAM", "xq", P * Cib, ctype="int8_t", elem_bytes=1)
    elif x8:    # int8 in GDRAM: copied straight into the tile __bang_conv reads
        xin = xq = kb.alloc("NRAM", "xq", P * Cib, ctype="int8_t", elem_bytes=1)
    else:
        xin = kb.alloc("NRAM", "xin", P * Cib)
        # fixed point: the staged tile (exact integers in float) converted for __bang_conv
        xq = kb.alloc("NRAM", "xq", kb.bufs[xin].elems, ctype=("int8_t", "int16_t")[fx - 1], elem_bytes=fx) if fx else xin
    xt = kb.alloc("NRAM", "xt", Cib * P, ctype=kb.bufs[xin].ctype, elem_bytes=kb.bufs[xin].elem_bytes) if tr else None
    accb = kb.alloc("NRAM", "acc", lanes)
    cv = kb.alloc("NRAM", "cv", lanes) if NIB > 1 else None
    prefetch = bcast = False
    st_blocks = (NCB if mode == "rows" else ceil_div(NCB, 4)) if st else 1
    if not pool:
        bank = ("conv_bank", Cob, K1 * Cib)
        wk = kb.alloc("WRAM", "wk", BSw, layout=() if fx else bank)
        wconv = kb.view("wk8", wk, "int8_t", 1, layout=bank) if fx else wk
        # cf: the weights' real input channels, channel ci of the block being channel ci % cf of
        # tap row y + ci / cf (a folded stem; unfolded, ci / cf is 0)
        geo = dict(G=G.G, Cog=G.Cog, Cig=G.Cig, kh=G.kh, kw=G.kw, NCB=NCB, NIB=NIB, Cob=Cob, Cib=Cib, st=dict(G.wst),
                   cf=G.Cig // fold)
        if fx:
            geo["wbytes"] = 1
        spec = ("conv", kb.p.root(G.wtensor), geo)
        gw = kb.image(("conv", kb.p.root(G.wtensor), NCB, NIB, Cob, Cib) + (("int8",) if fx else ())
                      + ((("fold", fold),) if fold > 1 else ()),
                      G.G * NCB * NIB * BSw, spec, f"{G.wtensor} (bank layout{', int8' if fx else ''})")
        # weight prefetch: block ib + 1 goes GDRAM -> the other SRAM half while block ib computes
        prefetch = mode in ("rows", "clusters") and 1 < NIB <= PREFETCH_MAX_NIB and \
            getattr(kb.p.target_state, "weight_prefetch", False)
        if st:      # the cluster's blocks (rows: all of them), a quarter by each core, held in SRAM
            Q2 = round_up(ceil_div(st_blocks * BSw, 4), 16)
            sw_ = kb.alloc("SRAM", "wres", 4 * Q2)
        elif mode in ("rows", "clusters"):
            chunked = getattr(kb.p.target_state, "weight_prefetch", False)
            Q = round_up(ceil_div(BSw, 4), 16 * (W_CHUNKS if chunked else 1))   # chunks of 64-B multiples
            QK = Q // W_CHUNKS
            bcast = weight_broadcast.broadcasts(mode, BSw * 4, hw, chunked, kb.p.target_state.weight_broadcast, prefetch)
            sw_ = kb.alloc("SRAM", "wsh", weight_broadcast.sram_elems(BSw, chunked) if bcast else 4 * Q * (2 if prefetch else 1))
    o8b = kb.alloc("NRAM", "o8", lanes, ctype="int8_t", elem_bytes=1) if o8 else None
    # per-channel operands kept as Cob lanes, read by cycle instructions (cycle_ops.py), or
    # replicated over the tile's lanes
    cyc = not pool and getattr(kb.p.target_state, "cycle_ops", False) and cyclable(G.epilogue, loads, kinds, lanes, Cob, hw)
    slot = Cob if cyc else lanes
    reps = {}
    for i, ld in enumerate(loads):
        if kinds[ld] != "scalar":
            reps[ld] = kb.alloc("NRAM", f"{'c' if kinds[ld] == 'channel' else 'p'}{i}",     # input-stationary:
                                slot * st_blocks if st and kinds[ld] == "channel" else      # a slot per block
                                slot if kinds[ld] == "channel" else lanes)
    # int8 per-pixel operands (narrow.py byte_pixels): a byte tile each, widened in NRAM
    p8 = {ld: kb.alloc("NRAM", f"{reps[ld]}b", lanes, ctype="int8_t", elem_bytes=1)
          for ld in byte_pixels(kb, loads, kinds, pool)}
    ro, xo, cc = Var("ro"), Var("xo"), Var("cc")
    lane_ix = simp(Bin("+", Bin("*", Bin("+", Bin("*", ro, iconst(G.Wo)), xo), iconst(Cob)), cc))
    out_loops = [SLoop("ro", iconst(0), iconst(R)), SLoop("xo", iconst(0), iconst(G.Wo)), SLoop("cc", iconst(0), iconst(Cob))]

    def chan_bound(cb):
        return ge(Bin("-", Bin("-", iconst(G.Cog - 1), Bin("*", cb, iconst(Cob))), cc))

    def w_to_sram(g, cb, ib, tk, exists, half, asynchronous=False):
        """This core's quarter of weight block ib, GDRAM -> SRAM half `half` (prefetch)."""
        blk = simp(Bin("*", Bin("+", Bin("*", Bin("+", Bin("*", g, iconst(NCB)), cb), iconst(NIB)), ib), iconst(BSw)))
        q, part = Var("q"), simp(Bin("*", tk, iconst(Q)))
        return Stmt("copy", Load(sw_, (simp(Bin("+", Bin("+", part, q), iconst(half * 4 * Q))),)),
                    Load(gw, (simp(Bin("+", Bin("+", blk, part), q)),)), [SLoop("q", iconst(0), iconst(Q))],
                    guard=exists + guards(ge(Bin("-", Bin("-", iconst(BSw - 1), part), q))), sid=kb.sid("copy", "w"),
                    asynchronous=asynchronous)

    def w_to_wram(exists, half, asynchronous=True):
        return Stmt("copy", Load(wk, (Var("i"),)), Load(sw_, (simp(Bin("+", Var("i"), iconst(half * 4 * Q))),)),
                    [SLoop("i", iconst(0), iconst(BSw))], guard=exists, sid=kb.sid("copy", "w"), asynchronous=asynchronous)

    def weights(n, g, cb, ib, tk, exists):
        """Load one weight block into WRAM: through SRAM, a quarter by each core of the cluster
        (rows and clusters modes; `exists` is the same on the cluster's cores, so the barriers
        stay uniform), broadcast between the clusters (weight_broadcast.py), or directly."""
        blk = simp(Bin("*", Bin("+", Bin("*", Bin("+", Bin("*", g, iconst(NCB)), cb), iconst(NIB)), ib), iconst(BSw)))
        if bcast:
            return weight_broadcast.block(kb, sw_, wk, gw, blk, BSw, chunked, exists)
        if mode in ("rows", "clusters") and chunked:
            return chunked_block(kb, sw_, wk, gw, blk, tk, exists, Q, QK, BSw)
        if mode in ("rows", "clusters"):
            return [Barrier("cluster"), w_to_sram(g, cb, ib, tk, exists, 0), Barrier("cluster"),
                    w_to_wram(exists, 0, False)]
        return [Stmt("copy", Load(wk, (Var("i"),)), Load(gw, (simp(Bin("+", blk, Var("i"))),)),
                     [SLoop("i", iconst(0), iconst(BSw))], guard=exists, sid=kb.sid("copy", "w"))]

    # a per-channel operand repeats one pixel's Cob lanes over the tile: those come from GDRAM
    # once and are copied on chip to the other pixels (doubling NRAM2NRAM copies, replicate.py)
    # instead of a strided GDRAM copy of every pixel's; when the lanes fit its size and
    # alignment rules (toolchain nram2nram_*)
    on_chip = R * G.Wo > 1 and Cob * 4 % hw["nram2nram_size_multiple_bytes"] == 0 \
        and Cob * 4 % hw["nram2nram_align_bytes"] == 0

    def channel_reps(n, g, cb, exists, base=iconst(0)):
        """Per-channel operands of block cb replicated over the tile's pixels, at lane `base`
        (input-stationary order: one slot per block of the cluster, built once per task)."""
        out = []
        at = lambda e: simp(Bin("+", base, e))   # noqa: E731
        for ld, buf in reps.items():
            if kinds[ld] != "channel":
                continue
            env = G.axes_env(n, g, simp(Bin("+", Bin("*", cb, iconst(Cob)), cc)), ro, xo)
            gp = kb.gparam(kb.k.buffers[ld.buf].tensor)
            if not on_chip and not cyc:
                out += staged_copy(kb.sid("copy", "rep"), buf, at(lane_ix), Load(gp, (kb.offset(ld, env),)), out_loops,
                                   bound=guards(chan_bound(cb)), common=exists)
                continue
            first = simp(subst(kb.offset(ld, env), {"ro": 0, "xo": 0}))     # a channel operand: the same at every pixel
            out += staged_copy(kb.sid("copy", "rep"), buf, at(cc), Load(gp, (first,)), out_loops[2:],
                               bound=guards(chan_bound(cb)), common=exists)
            if not cyc:
                out += doubling_copies(buf, at, Cob, R * G.Wo, exists, lambda: kb.sid("copy", "repn"))
        return out

    def tile(n, g, cb, row0, exists, tk, cexists=()):
        rowtail = ge(Bin("-", Bin("-", iconst(G.Ho - 1), row0), ro))
        lanetail = ge(Bin("-", Bin("*", Bin("-", iconst(G.Ho), row0), iconst(G.Wo * Cob)), Bin("+", Var("ln"), iconst(1))))
        stm = []
        r, x, c = Var("r"), Var("x"), Var("c")
        hrow = simp(Bin("+", Bin("-", Bin("*", row0, iconst(G.sh)), iconst(G.pt)), r))
        wcol = simp(Bin("-", x, iconst(G.pl)))
        halo = guards(ge(hrow), ge(Bin("-", iconst(G.H - 1), hrow)), ge(wcol), ge(Bin("-", iconst(G.W - 1), wcol)))
        needed = ge(Bin("-", Bin("+", Bin("*", Bin("-", iconst(G.Ho - 1), row0), iconst(G.sh)), iconst(G.kh - 1)), r))
        in_loops = [SLoop("r", iconst(0), iconst(rin)), SLoop("x", iconst(0), iconst(W_in)), SLoop("c", iconst(0), iconst(Cib))]
        in_ix = simp(Bin("+", Bin("*", Bin("+", Bin("*", r, iconst(W_in)), x), iconst(Cib)), c))

        def stage_input(ib):
            ch = simp(Bin("+", Bin("*", ib, iconst(Cib)), c)) if not pool else simp(Bin("+", Bin("*", cb, iconst(Cob)), c))
            src = Load(gx, (input_offset(G, n, g, ch, hrow, wcol),))
            bound = guards(ge(Bin("-", iconst(G.Cig - 1), ch)))
            fill = (-math.inf if G.combine == "max" else G.fill)
            if tr:      # rows of each channel (long segments), then the on-chip transpose
                if fold > 1:    # folded stem: row (ky, c) of xt is image row ky of the window, channel c
                    staged = folded_rows(kb, G, fold, xt, Cib, P, W_in, n, g, hrow, exists, fx)
                else:
                    staged = staged_copy(kb.sid("copy", "x"), xt, simp(Bin("+", Bin("*", c, iconst(P)), Bin("+", Bin(
                        "*", r, iconst(W_in)), x))), src, [in_loops[2], in_loops[0], in_loops[1]], halo=halo,
                        bound=bound, common=exists + guards(needed), fill=fill, need_fill_bound=not fx)
                p, c2 = Var("p"), Var("c2")
                staged.append(Stmt("compute", Load(xin, (simp(Bin("+", Bin("*", p, iconst(Cib)), c2)),)),
                                   Load(xt, (simp(Bin("+", Bin("*", c2, iconst(P)), p)),)),
                                   [SLoop("p", iconst(0), iconst(P)), SLoop("c2", iconst(0), iconst(Cib))],
                                   guard=exists, sid=kb.sid("compute", "transpose")))
            elif x8 and pool:
                staged = staged_copy(kb.sid("copy", "x"), xq, in_ix, src, in_loops, halo=halo, bound=bound,
                                     common=exists + guards(needed), fill=-128.0)
                i = Var("i")
                staged.append(Stmt("compute", Load(xin, (i,)), Un("from_int8", Load(xq, (i,))),
                                   [SLoop("i", iconst(0), iconst(kb.bufs[xin].elems))], guard=exists,
                                   sid=kb.sid("compute", "widen")))
            else:
                staged = staged_copy(kb.sid("copy", "x"), xin, in_ix, src, in_loops, halo=halo, bound=bound,
                                     common=exists + guards(needed), fill=fill, need_fill_bound=not (pool or fx))
            if fx and not x8:      # the whole tile to int8/int16: exact, the values are integers of that range
                i = Var("i")
                staged.append(Stmt("compute", Load(xq, (i,)), Un(("to_int8", "to_int16")[fx - 1], Load(xin, (i,))),
                                   [SLoop("i", iconst(0), iconst(kb.bufs[xin].elems))], guard=exists,
                                   sid=kb.sid("compute", "fix")))
            return staged

        ky, kx, kc = Var("ky"), Var("kx"), Var("kc")
        src_ix = simp(Bin("+", Bin("*", Bin("+", Bin("*", Bin("+", Bin("*", ro, iconst(G.sh)), ky), iconst(W_in)),
                                                Bin("+", Bin("*", xo, iconst(G.sw)), kx)), iconst(Cib)), cc if pool else kc))
        red = [SLoop("ky", iconst(0), iconst(G.kh)), SLoop("kx", iconst(0), iconst(G.kw))]

        def compute(dst, ex=None):
            exists_ = exists if ex is None else ex
            if pool:
                return Stmt("compute", Load(dst, (lane_ix,)), Load(xin, (src_ix,)), list(out_loops), red,
                            G.combine, guard=exists_ + guards(rowtail), over=True, sid=kb.sid("compute", "pool"))
            wv = Load(wconv, (cc, simp(Bin("+", Bin("*", Bin("+", Bin("*", ky, iconst(G.kw)), kx), iconst(Cib)), kc))))
            return Stmt("compute", Load(dst, (lane_ix,)), Bin("*", Load(xq, (src_ix,)), wv), list(out_loops),
                        red + [SLoop("kc", iconst(0), iconst(Cib))], "sum", guard=exists_ + guards(rowtail),
                        over=True, sid=csid)

        ln = Var("ln")
        lane_loop = [SLoop("ln", iconst(0), iconst(lanes))]
        if st:      # staged below, once for the blocks
            pass
        elif pool or NIB == 1:       # weights (if any) were loaded once per output-channel block
            stm += stage_input(iconst(0))
            stm.append(compute(accb))
        elif prefetch:
            # block 0 to WRAM through SRAM half 0; then per block ib: its input tile (synchronous, so
            # before the prefetch it would wait for), block ib + 1 GDRAM -> SRAM async (IO
            # queue), block ib SRAM -> WRAM async once the previous conv is done with WRAM
            # (move queue), the conv; __sync_io and the cluster barrier before block ib + 1
            # is read (every core's quarter landed; nobody still reads the half it overwrites)
            wguard = {"rows": (), "clusters": cexists}[mode]
            stm += weights(n, g, cb, iconst(0), tk, wguard)     # block 0 in chunks, through SRAM half 0
            for ib in range(NIB):
                if ib:
                    stm += [Sync("io"), Barrier("cluster")]
                stm += stage_input(iconst(ib))
                if ib + 1 < NIB:
                    stm.append(w_to_sram(g, cb, iconst(ib + 1), tk, wguard, (ib + 1) % 2, True))
                if ib:
                    stm += [Sync("compute"), w_to_wram(wguard, ib % 2), Sync("move")]
                stm.append(compute(accb if ib == 0 else cv))
                if ib:
                    stm.append(Stmt("compute", Load(accb, (ln,)), Bin("+", Load(accb, (ln,)), Load(cv, (ln,))),
                                    lane_loop, guard=exists + guards(lanetail), over=True, sid=asid))
        else:                      # input-channel blocks: the weights of each block, then accumulate
            # rows mode: every task takes part in the cooperative loads (barriers stay uniform)
            wguard = {"rows": (), "clusters": cexists}.get(mode, exists)
            stm += weights(n, g, cb, iconst(0), tk, wguard)
            stm += stage_input(iconst(0))
            stm.append(compute(accb))

            def more(ib):
                s2 = weights(n, g, cb, ib, tk, wguard)
                s2 += stage_input(ib)
                s2.append(compute(cv))
                s2.append(Stmt("compute", Load(accb, (ln,)), Bin("+", Load(accb, (ln,)), Load(cv, (ln,))), lane_loop,
                               guard=exists + guards(lanetail), over=True, sid=asid))
                return s2
            stm += [For("ib", iconst(1), iconst(NIB), more(Var("ib")))]

        def block_tail(cb, exists, jb=None):
            """Epilogue and store of block cb of this tile (jb: its slot of per-channel operands)."""
            stm = []
            # epilogue: per-pixel operands staged, then three-address statements over lanes
            leaf = {}
            for i, ld in enumerate(loads):
                if kinds[ld] == "pixel":
                    env = G.axes_env(n, g, simp(Bin("+", Bin("*", cb, iconst(Cob)), cc)), simp(Bin("+", row0, ro)), xo)
                    src = Load(kb.gparam(kb.k.buffers[ld.buf].tensor), (kb.offset(ld, env),))
                    stm += staged_copy(kb.sid("copy", "p"), p8.get(ld, reps[ld]), lane_ix, src, out_loops,
                                       bound=guards(rowtail, chan_bound(cb)), common=exists)
                    if ld in p8:
                        stm.append(Stmt("compute", Load(reps[ld], (ln,)), Un("from_int8", Load(p8[ld], (ln,))),
                                        lane_loop, guard=exists + guards(lanetail), over=True,
                                        sid=kb.sid("compute", "widen")))
                if kinds[ld] in ("pixel", "channel"):
                    leaf[ld] = Operand("buf", reps[ld])
                else:
                    env = G.axes_env(n, g, iconst(0), iconst(0), iconst(0))
                    name = f"v{i}"
                    stm.append(ScalarLoad(name, Load(kb.gparam(kb.k.buffers[ld.buf].tensor), (kb.offset(ld, env),)),
                                          guard=exists))
                    leaf[ld] = Operand("scalar", Var(name))
            ta = ThreeAddress(kb, "c", lambda: iconst(lanes), [reps[ld] for ld in loads if kinds[ld] == "channel"])
            res = ta.run(G.epilogue, lambda e: Operand("buf", accb) if isinstance(e, Acc) else leaf[e], exists + guards(lanetail))
            for name in sorted(ta.temps):
                if name not in kb.bufs:
                    kb.alloc("NRAM", name, lanes)
            chans = {reps[ld] for ld in loads if kinds[ld] == "channel"}
            pixtail = ge(Bin("-", Bin("*", Bin("-", iconst(G.Ho), row0), iconst(G.Wo)), Bin("+", Var("p"), iconst(1))))
            ta_stmts = cycle_reads(ta.stmts, chans, Cob, lanetail, pixtail) if cyc else ta.stmts
            stm += ta_stmts if jb is None else stationary.slot_reads(ta_stmts, chans, jb, slot)
            resb = res.ref if res.kind == "buf" else accb
            if o8:      # the requantized lanes (integers of int8's range, narrow.py) to bytes, stored as such
                stm.append(Stmt("compute", Load(o8b, (ln,)), Un("to_int8", Load(resb, (ln,))), lane_loop,
                                guard=exists + guards(lanetail), over=True, sid=kb.sid("compute", "narrow")))
                resb = o8b
            oc = simp(Bin("+", Bin("*", g, iconst(G.Cog)), Bin("+", Bin("*", cb, iconst(Cob)), cc))) if not pool else \
                simp(Bin("+", Bin("*", cb, iconst(Cob)), cc))
            stm.append(Stmt("copy", Load(go, (output_offset(G, n, iconst(0), oc, simp(Bin("+", row0, ro)), xo),)),
                            Load(resb, (lane_ix,)), list(out_loops),
                            guard=exists + guards(rowtail, chan_bound(cb)), sid=kb.sid("copy", "out")))
            return stm

        if st:      # the input tile stays; the cluster's blocks SRAM -> WRAM in turn
            stm += stage_input(iconst(0))

            def per_b(jb):
                cb_, bex = stationary.block(mode, st_blocks, NCB, jb)
                ex = exists + bex
                return [Stmt("copy", Load(wk, (Var("i"),)), Load(sw_, (simp(Bin("+", Bin("*", jb, iconst(BSw)), Var("i"))),)),
                             [SLoop("i", iconst(0), iconst(BSw))], guard=ex, sid=kb.sid("copy", "w"))] \
                    + [compute(accb, ex)] + block_tail(cb_, ex, jb)
            return stm + loop("jb", st_blocks, per_b)
        return stm + block_tail(cb, exists)

    csid = kb.sid("compute", "conv") if not pool else None
    asid = kb.sid("compute", "acc") if NIB > 1 else None

    def body(t):
        tk = Var("tk")

        if st:      # weights and per-channel operands of the cluster's blocks once per task (the
            # slots unrolled: pingpong.py would take a loop of loads for tiles and halve its buffer)
            reps_ = [x for jb in range(st_blocks) for x in channel_reps(
                iconst(0), iconst(0), *stationary.block(mode, st_blocks, NCB, iconst(jb)), iconst(jb * slot))]
            return stationary.weights_resident(kb, mode, st_blocks, NCB, BSw, Q2, sw_, gw, tk) + reps_ + \
                stationary.row_tiles(mode, G.N, NRT, R, NCB, st_blocks, t, tk, tile)

        def per_ng(n, g):
            if mode == "rows":
                S = ceil_div(NRT, 16)

                def per_cb(cb):
                    pre = channel_reps(n, g, cb, ())
                    if not pool and NIB == 1:
                        pre += weights(n, g, cb, iconst(0), tk, ())

                    def per_s(s):
                        rt = simp(Bin("+", Bin("*", t, iconst(S)), s))
                        exists = guards(ge(Bin("-", iconst(NRT - 1), rt)))
                        return tile(n, g, cb, simp(Bin("*", rt, iconst(R))), exists, tk)
                    return pre + loop("s", S, per_s)
                return loop("cb", NCB, per_cb)
            SC = ceil_div(NCB, 16)

            def per_j(jj):
                cb = simp(Bin("+", Bin("*", t, iconst(SC)), jj))
                exists = guards(ge(Bin("-", iconst(NCB - 1), cb)))
                pre = channel_reps(n, g, cb, exists)
                if not pool and NIB == 1:
                    pre += weights(n, g, cb, iconst(0), tk, exists)
                return pre + loop("rt", NRT, lambda rt: tile(n, g, cb, simp(Bin("*", rt, iconst(R))), exists, tk))
            if mode == "clusters":
                SCc, S = ceil_div(NCB, 4), ceil_div(NRT, 4)

                def per_jc(jj):
                    cb = simp(Bin("+", Bin("*", Var("tc"), iconst(SCc)), jj))
                    cex = guards(ge(Bin("-", iconst(NCB - 1), cb)))
                    pre = channel_reps(n, g, cb, cex)
                    if NIB == 1:
                        pre += weights(n, g, cb, iconst(0), tk, cex)

                    def per_s(s):
                        rt = simp(Bin("+", Bin("*", tk, iconst(S)), s))
                        exists = cex + guards(ge(Bin("-", iconst(NRT - 1), rt)))
                        return tile(n, g, cb, simp(Bin("*", rt, iconst(R))), exists, tk, cex)
                    return pre + loop("s", S, per_s)
                return loop("jc", SCc, per_jc)
            return loop("j", SC, per_j)
        return loop("bn", G.N, lambda n: loop("bg", G.G, lambda g: per_ng(n, g)))

    b = tasks(body)
    return kb.finish("pool" if pool else ("gemm" if INTEGER_OPS.get(kb.k.op, kb.k.op) in ("Gemm", "MatMul") else "conv"), b,
                     mode=mode, R=R, Cob=Cob, Cib=Cib, NIB=NIB, NRT=NRT, NCB=NCB, W_in=W_in, transposed_input=tr,
                     narrow_in=x8, narrow_out=o8, input_stationary=st, folded_height=fold, fixed_point=fx,
                     narrow_bufs=frozenset(ld.buf for ld in p8))
