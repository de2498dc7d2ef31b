"""Weight prefetch's constants, a staged weight block's cost and its chunked staging (option
weight_prefetch, docs/diannao.md): blocks through SRAM move in chunks whose two copies overlap."""
from __future__ import annotations

from ....ir.loopnest import Bin, Load, Var, iconst
from ..devir import Barrier, SLoop, Stmt, Sync, simp
from .builder import ge, guards

PREFETCH_MAX_NIB = 8   # weight prefetch unrolls the input-channel blocks (constant SRAM halves)
# weight prefetch: a block through SRAM moves in this many chunks, chunk j + 1 GDRAM -> SRAM
# while chunk j goes SRAM -> WRAM: max + min / W_CHUNKS of the two instead of their sum,
# for W_CHUNKS - 1 more cluster barriers
W_CHUNKS = 4


def staged_weight_cycles(blk, hw, chunked):
    """A core's cycles for one weight block of `blk` bytes through SRAM: its quarter GDRAM ->
    SRAM, then the whole block SRAM -> WRAM; chunked, the two queues overlap chunk by chunk."""
    P, M = blk * hw["gdram_cycles_per_granule"] / hw["gdram_granule_bytes"] / 4, blk / hw["sram_bytes_per_cycle"]
    if not chunked:
        return P + M
    return (P + M) / W_CHUNKS + (W_CHUNKS - 1) * max(P, M) / W_CHUNKS + W_CHUNKS * hw["sync_cluster_cycles"]


def chunked_block(kb, sw_, wk, gw, blk, tk, exists, Q, QK, BSw):
    """Weight block `blk` (its first word in the image gw) to WRAM wk through SRAM buffer sw_,
    a quarter of Q words by each core of the cluster, in W_CHUNKS chunks of QK words each:
    chunk j + 1's quarters GDRAM -> SRAM (IO queue) while chunk j goes SRAM -> WRAM (move
    queue); __sync_io + barrier: every core's quarter of a chunk landed before any core reads
    it; __sync_compute: the previous conv is done with WRAM."""
    def to_sram(j):     # this core's part of chunk j, GDRAM -> SRAM, asynchronous
        q, part = Var("q"), simp(Bin("+", Bin("*", tk, iconst(Q)), iconst(j * QK)))
        return Stmt("copy", Load(sw_, (simp(Bin("+", part, q)),)), Load(gw, (simp(Bin("+", Bin("+", blk, part), q)),)),
                    [SLoop("q", iconst(0), iconst(QK))],
                    guard=exists + guards(ge(Bin("-", Bin("-", iconst(BSw - 1), part), q))), sid=kb.sid("copy", "w"),
                    asynchronous=True)

    def to_wram(p, j):  # core p's part of chunk j, SRAM -> WRAM, asynchronous (each core takes every part)
        i, at = Var("i"), p * Q + j * QK
        return Stmt("copy", Load(wk, (simp(Bin("+", i, iconst(at))),)), Load(sw_, (simp(Bin("+", i, iconst(at))),)),
                    [SLoop("i", iconst(0), iconst(min(QK, BSw - at)))], guard=exists, sid=kb.sid("copy", "w"),
                    asynchronous=True)

    out = [Barrier("cluster"), to_sram(0)]
    for j in range(W_CHUNKS):
        out += [Sync("io"), Barrier("cluster")]
        if j + 1 < W_CHUNKS:
            out.append(to_sram(j + 1))
        if j == 0:
            out.append(Sync("compute"))
        out += [to_wram(p, j) for p in range(4) if p * Q + j * QK < BSw]
    return out + [Sync("move")]
