"""Weights leave GDRAM once (option `weight_broadcast`, issue 34, docs/diannao.md).

In rows mode every cluster needs every weight block, and staged through SRAM each cluster
loaded the whole block from GDRAM (its cores a quarter each): four times the weight bytes.
Here cluster c loads only its quarter (each core a sixteenth) and sends it to the other three
clusters' SRAM with `__memcpy(..., SRAM2SRAM, id_dst_cluster)` (clang's BANG header,
zhourunyu/llvm-mlu, clang/lib/Headers/__clang_bang_intrinsics.h): core k sends to cluster
(c + k) % 4, so the three sends run side by side. A `__sync_all` after the sends makes the
block every cluster's before any core copies it SRAM -> WRAM, and one before the first load
keeps the sends off bytes another cluster still reads (the emulator checks both).

The block lies in SRAM as in GDRAM (element e at e). Chunked (option `weight_prefetch`), chunk
j is the elements [j * CH, (j + 1) * CH), sixteen parts of CH / 16, so a cluster's quarter of
a chunk is one contiguous send; chunk j + 1 goes GDRAM -> SRAM (IO queue) while chunk j goes
SRAM -> WRAM (move queue). The sends are synchronous (no async form is declared): each waits
for every queue of its core.
"""
from __future__ import annotations

from ....ir.loopnest import Bin, Load, Var, iconst
from ....ir.sizes import ceil_div, round_up
from ..devir import Barrier, SLoop, Stmt, Sync, simp
from .builder import ge, guards
from .weight_prefetch import W_CHUNKS, staged_weight_cycles

CLUSTERS = 4    # a Union1 launch of 16 tasks (traffic.TASKS): 4 clusters x 4 cores


def broadcast_cycles(blk, hw, chunked):
    """A core's cycles for one weight block of `blk` bytes: its sixteenth GDRAM -> SRAM, the
    cluster's quarter to one other cluster (cores 1..3), the whole block SRAM -> WRAM, and the
    barriers; chunked, chunk j + 1's load overlaps chunk j's SRAM -> WRAM."""
    n = W_CHUNKS if chunked else 1
    gran = hw["gdram_cycles_per_granule"] / hw["gdram_granule_bytes"]
    L, S, M = blk * gran / 16 / n, blk / 4 / n / hw["sram_bytes_per_cycle"], blk / n / hw["sram_bytes_per_cycle"]
    sa, sc = hw["sync_all_cycles"], hw["sync_cluster_cycles"]
    return sa + L + n * (sc + S + sa) + (n - 1) * max(L, M) + M


def broadcasts(mode, blk, hw, chunked, setting, nib_prefetched=False, stationary=False):
    """Whether a block staged in `mode` is broadcast: rows mode (every cluster needs every
    block), not the per-block SRAM halves of a prefetched NIB > 1 convolution nor the
    input-stationary blocks; `setting` on: where the estimate says it is no slower, all:
    wherever it applies (fewer GDRAM bytes at any time)."""
    if setting not in ("on", "all") or mode != "rows" or nib_prefetched or stationary:
        return False
    return setting == "all" or broadcast_cycles(blk, hw, chunked) <= staged_weight_cycles(blk, hw, chunked)


def staged_cycles(mode, blk, hw, chunked, setting):
    """The estimate's cycles for one staged block, broadcast or not (as broadcasts() decides)."""
    if broadcasts(mode, blk, hw, chunked, setting):
        return broadcast_cycles(blk, hw, chunked)
    return staged_weight_cycles(blk, hw, chunked)


def sram_elems(BSw, chunked):
    """SRAM words the broadcast staging buffer holds: 16 parts of 64-B multiples per chunk."""
    return 16 * round_up(ceil_div(BSw, 16), 16 * (W_CHUNKS if chunked else 1))


def block(kb, sw_, wk, gw, blk, BSw, chunked, exists):
    """The statements that bring weight block `blk` (its first word in the image gw) into WRAM
    wk through SRAM buffer sw_ (sram_elems words), broadcast between the clusters."""
    n = W_CHUNKS if chunked else 1
    QK = sram_elems(BSw, chunked) // 16 // n       # one core's part of a chunk
    CH = 16 * QK
    tc, tk = Var("tc"), Var("tk")

    def below(start, v):        # element start + v of the block exists
        return ge(Bin("-", Bin("-", iconst(BSw - 1), start), v))

    def load(j):        # this core's part of chunk j, GDRAM -> SRAM
        q, at = Var("q"), simp(Bin("+", iconst(j * CH), Bin("*", Bin("+", Bin("*", tc, iconst(4)), tk), iconst(QK))))
        return Stmt("copy", Load(sw_, (simp(Bin("+", at, q)),)), Load(gw, (simp(Bin("+", Bin("+", blk, at), q)),)),
                    [SLoop("q", iconst(0), iconst(QK))], guard=exists + guards(below(at, q)), sid=kb.sid("copy", "w"),
                    asynchronous=chunked)

    def send(j):        # the cluster's quarter of chunk j to cluster (c + k) % 4, by core k > 0
        i, at = Var("i"), simp(Bin("+", iconst(j * CH), Bin("*", tc, iconst(4 * QK))))
        return Stmt("copy", Load(sw_, (simp(Bin("+", at, i)),)), Load(sw_, (simp(Bin("+", at, i)),)),
                    [SLoop("i", iconst(0), iconst(4 * QK))], guard=exists + guards(ge(Bin("-", tk, iconst(1))), below(at, i)),
                    sid=kb.sid("copy", "w"), dst_cluster=simp(Bin("%", Bin("+", tc, tk), iconst(CLUSTERS))))

    def to_wram(j):     # the whole chunk j, SRAM -> WRAM
        i = Var("i")
        return Stmt("copy", Load(wk, (simp(Bin("+", i, iconst(j * CH))),)), Load(sw_, (simp(Bin("+", i, iconst(j * CH))),)),
                    [SLoop("i", iconst(0), iconst(min(CH, BSw - j * CH)))], guard=exists, sid=kb.sid("copy", "w"),
                    asynchronous=chunked)

    out = [Barrier("all"), load(0)]
    for j in range(n):
        if j * CH >= BSw:
            break
        out += ([Sync("io")] if chunked else []) + [Barrier("cluster"), send(j), Barrier("all")]
        if chunked and j + 1 < n and (j + 1) * CH < BSw:
            out.append(load(j + 1))
        if chunked and j == 0:
            out.append(Sync("compute"))     # the previous convolution is done with WRAM
        out.append(to_wram(j))
    return out + ([Sync("move")] if chunked else [])
