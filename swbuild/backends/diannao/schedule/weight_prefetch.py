"""Weight prefetch's constants and a staged weight block's cost (option weight_prefetch,
docs/diannao.md): blocks through SRAM move in chunks whose two copies overlap."""
from __future__ import annotations

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
