"""The input-stationary order of schedule/conv.py (option input_stationary): a row tile's
input is copied to NRAM once and the cluster's output-channel blocks loop inside it; the
cluster's weight blocks (rows split: all of them, clusters split: its share) go GDRAM -> SRAM
once per launch, a quarter by each core, and SRAM -> WRAM per block and tile, the block loop
being pingpong.py's pipeline (block jb + 1 SRAM -> WRAM on the move queue, store of jb - 1 on
the IO queue, while jb computes). Per-channel epilogue operands hold one slot per block."""
from __future__ import annotations

from dataclasses import replace

from ....ir.loopnest import Bin, Load, Var, iconst, transform
from ....ir.sizes import ceil_div, round_up
from ..devir import Barrier, SLoop, Stmt, simp
from ..pingpong import pipelined_cycles
from .builder import ALIGN, ge, guards, loop


def blocks_of(G, hw, mode, Cob):
    """(output-channel blocks, blocks one cluster loops over)."""
    NCB = ceil_div(round_up(G.Cog, int(hw["conv_co_multiple"])), Cob)
    return NCB, (NCB if mode == "rows" else ceil_div(NCB, 4))


def candidates(Co_p, co_al, K1, Cin_p, welems, piped):
    """(Cob, Cib, NIB 1): every input channel in the tile, the weight block twice in WRAM when
    pipelined (pingpong.py's halves)."""
    return [(Cob, Cin_p, 1) for Cob in range(Co_p, 0, -co_al) if (1 + piped) * Cob * K1 * Cin_p <= welems]


def fits(G, kb, mode, cand, K1, wbytes, piped):
    """More than one block for a cluster to loop over, and the cluster's blocks in SRAM."""
    Cob, Cib, NIB = cand
    blocks = blocks_of(G, kb.hw, mode, Cob)[1]
    blk = Cob * K1 * Cib * wbytes
    return NIB == 1 and G.G == 1 and blocks > 1 and blocks * blk + 4 * 64 <= kb.tc.sram_budget \
        and (1 + piped) * blk <= kb.tc.wram_budget


def nram_more(G, hw, mode, cand, n_chan, ve):
    """NRAM beyond the tile's own: a per-channel operand holds a slot per block of the cluster."""
    Cob = cand[0]
    blocks = blocks_of(G, hw, mode, Cob)[1]
    return lambda R: (blocks - 1) * n_chan * round_up(round_up(R * G.Wo * Cob, ve) * 4, ALIGN)


def estimate(G, hw, mode, cand, R, K1, wbytes, piped, x_cost, load_extra, store, rate):
    """A task's cycles: its quarter of the cluster's blocks GDRAM -> SRAM and the barrier, then
    per row tile the input (x_cost: copy, on-chip compute; synchronous) and the block loop."""
    Cob, Cib, _ = cand
    blocks = blocks_of(G, hw, mode, Cob)[1]
    per = ceil_div(ceil_div(G.Ho, R), 16 if mode == "rows" else 4)
    blk = Cob * K1 * Cib * wbytes
    ms = hw["memcpy_startup_cycles"]
    comp = R * G.Wo * Cob * K1 * Cib / rate + hw["conv_startup_cycles"]
    load = ms + blk / hw["sram_bytes_per_cycle"] + load_extra
    steps = pipelined_cycles(blocks, load, comp, store) if piped else blocks * (load + comp + store)
    pro = ms + blocks * blk * hw["gdram_cycles_per_granule"] / hw["gdram_granule_bytes"] / 4 + hw["sync_cluster_cycles"]
    return G.N * (pro + per * (sum(x_cost) + steps))


def block(mode, st_blocks, NCB, jb):
    """Block jb of this cluster: (output-channel block, its guard)."""
    if mode == "rows":
        return jb, ()
    cb = simp(Bin("+", Bin("*", Var("tc"), iconst(st_blocks)), jb))
    return cb, guards(ge(Bin("-", iconst(NCB - 1), cb)))


def weights_resident(kb, mode, st_blocks, NCB, BSw, Q2, sram, gw, tk):
    """This core's quarter of the cluster's blocks GDRAM -> SRAM, then the cluster barrier."""
    start = iconst(0) if mode == "rows" else simp(Bin("*", Var("tc"), iconst(st_blocks * BSw)))
    q, part = Var("q"), simp(Bin("*", tk, iconst(Q2)))
    at = simp(Bin("+", Bin("+", start, part), q))
    return [Stmt("copy", Load(sram, (simp(Bin("+", part, q)),)), Load(gw, (at,)), [SLoop("q", iconst(0), iconst(Q2))],
                 guard=guards(ge(Bin("-", Bin("-", iconst(st_blocks * BSw - 1), part), q)),
                              ge(Bin("-", iconst(NCB * BSw - 1), at))), sid=kb.sid("copy", "w")),
            Barrier("cluster")]


def options(G, kb, Co_p, co_al, K1, Cin_p, wbytes, piped, split_clusters, chw, n_chan, ve, best_rows, estimate):
    """schedule/conv.py's option tuples for this order: every candidate, split and row count that fit."""
    out = []
    for cand in candidates(Co_p, co_al, K1, Cin_p, kb.tc.wram_budget // wbytes, piped):
        for mode in ("rows", "clusters") if split_clusters else ("rows",):
            if not fits(G, kb, mode, cand, K1, wbytes, piped):
                continue
            for tr in ((False, True) if chw else (False,)):
                R = best_rows(cand, ceil_div(G.Ho, 16 if mode == "rows" else 4), tr, nram_more(G, kb.hw, mode, cand, n_chan, ve))
                out += [(estimate(mode, cand, r, tr, True), ("rows", "clusters").index(mode), -cand[0], tr, True, cand, mode, r)
                        for r in range(R or 0, 0, -1)]
    return out


def row_tiles(mode, N, NRT, R, NCB, st_blocks, t, tk, tile):
    """The task's row tiles (rows: the 16 tasks share them out; clusters: a cluster's 4 cores,
    a cluster without blocks loading no input), each tile(n, g, cb, row0, exists, tk)."""
    S = ceil_div(NRT, 16) if mode == "rows" else ceil_div(NRT, 4)
    owner = () if mode == "rows" else guards(ge(Bin("-", iconst(NCB - 1), Bin("*", Var("tc"), iconst(st_blocks)))))

    def per_s(n, s):
        rt = simp(Bin("+", Bin("*", t if mode == "rows" else tk, iconst(S)), s))
        return tile(n, iconst(0), None, simp(Bin("*", rt, iconst(R))), owner + guards(ge(Bin("-", iconst(NRT - 1), rt))), tk)
    return loop("bn", N, lambda n: loop("s", S, lambda s: per_s(n, s)))


def slot_reads(stmts, chans, jb, lanes):
    """Epilogue statements reading block jb's slot of the per-channel operands `chans`."""
    slot = lambda e: Load(e.buf, (simp(Bin("+", e.index[0], Bin("*", jb, iconst(lanes)))),)) \
        if isinstance(e, Load) and e.buf in chans else None   # noqa: E731
    return [replace(x, expr=transform(x.expr, slot)) for x in stmts]
