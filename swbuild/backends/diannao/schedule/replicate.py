"""One row of lanes repeated over a tile's rows in NRAM by doubling copies (issue 36).

A per-channel operand of a convolution epilogue (bias, a per-channel requantization
multiplier) or an element-wise kernel's hoisted operand is the same row of lanes at every
pixel of the tile. The row comes from GDRAM once; the rest of the tile was one strided
NRAM2NRAM copy, source stride 0, one segment per row: the emulator (bangemu/memcpy.h)
charges every segment after the first `strided_segment_cycles`, which for a 112-pixel tile
of 64 channels is two thirds of the copy. Copying rows [0, m) to [m, 2m) for m = 1, 2, 4, ...
moves the same bytes in ceil(log2(rows)) contiguous copies, each paying the start-up once:
for that tile 7 x 32 + 222 cycles instead of 32 + 110 x 4 + 222.

Each copy reads rows already written by the previous one and writes rows no copy has
written (disjoint ranges), so the statements are ordered and free of overlap. Sizes are
whole rows, so a row that meets the NRAM2NRAM size and alignment rules keeps every copy
within them.
"""
from __future__ import annotations

from ....ir.loopnest import Bin, Load, Var, iconst
from ..devir import SLoop, Stmt, simp


def doubling_copies(buf, at, row, rows, guard, sid):
    """Copies filling rows [1, rows) of `buf` (row r at lanes at(r * row) .. + row) with row 0.

    at: lane offset expression of a lane index; sid: a callable giving each copy's source id."""
    out, m = [], 1
    while m < rows:
        n = min(m, rows - m)
        i = Var("i")
        out.append(Stmt("copy", Load(buf, (at(simp(Bin("+", i, iconst(m * row)))),)), Load(buf, (at(i),)),
                        [SLoop("i", iconst(0), iconst(n * row))], guard=tuple(guard), sid=sid()))
        m += n
    return out


def copies_needed(rows):
    """How many doubling copies fill `rows` rows from the first: ceil(log2(rows))."""
    return max(0, (rows - 1).bit_length())
