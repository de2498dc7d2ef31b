"""The stem's channels-first input: the pixels of its transposed tile, and its kernel height
folded into its input channels (issue 36, option stem_fold). A 7x7 stride-2 convolution on a
3-channel image, one output row a tile, is a 1x7 one over 21 channels: channel (ky, c) of
the tile's single row is image row 2 * ho - pad + ky of channel c. __bang_conv pads its
input channels to 64 B (64 int8, 16 floats), so 7 rows of 3 channels cost 7 x 64 int8 MACs a
tap and pixel where the folded window costs 64 (float: 7 x 16 against 32). The relayout is
the tile's staging itself: a strided copy per image channel (a segment per image row, as
unfolded) into rows (ky, c) of the channels-first tile, then the one __bang_transpose;
costed by the schedule's estimate, which keeps the fold only where it is cheaper."""
from __future__ import annotations

from dataclasses import replace

from ....ir.loopnest import Bin, Const, Load, Var, iconst
from ....ir.sizes import round_up
from ..devir import SLoop, Stmt, simp
from ..preprocess import staged_copy
from .builder import Unschedulable, ge, guards
from .conv_geometry import input_offset


def folded(G, pool):
    """The geometry with the kernel height folded into the input channels: kh = 1, kh * Cig
    channels, tiles of one output row. Only where the input is channels-first (a stem),
    staged by rows and transposed on chip."""
    if pool or G.G != 1 or G.kh == 1 or not (G.xst["c"] != 1 and G.xst["w"] == 1 and G.W > 1):
        return None
    return replace(G, Cig=G.Cig * G.kh, kh=1)


def cheaper_fold(G, pool, on, plan):
    """(G, plan(G, 1)), or the folded geometry and its plan when `on` and its estimate (the
    plan's first option's first field) is lower; plan(geometry, fold) raises Unschedulable
    when no tile fits."""
    best = plan(G, 1)
    GF = folded(G, pool) if on else None
    if GF is None:
        return G, best
    try:
        alt = plan(GF, G.kh)
    except Unschedulable:       # the folded tile does not fit NRAM
        return G, best
    return (GF, alt) if alt[0][0] < best[0][0] else (G, best)


def folded_copy_cycles(G, fold, W_in, xb, hw):
    """A folded tile's copies as the emulator charges them: per image channel one strided
    copy of `fold` row segments."""
    seg = -(-min(G.W, W_in) * xb // hw["gdram_granule_bytes"])
    return G.Cig // fold * (hw["memcpy_startup_cycles"] + (fold - 1) * hw["strided_segment_cycles"]
                            + fold * seg * hw["gdram_cycles_per_granule"])


def folded_rows(kb, G, fold, xt, Cib, P, W_in, n, g, hrow, exists, fx):
    """The channels-first tile of a folded stem (`folded`, one output row): row ky * cf + c of
    xt [Cib][P] is image row `hrow` (ky its row variable r) of channel c, with its halo; a
    float tile's padded channels are zeroed (their weights are 0, but garbage could be NaN)."""
    cf = G.Cig // fold
    gx = kb.gparam(kb.k.buffers[G.xbuf].tensor)
    r, x, c = Var("r"), Var("x"), Var("c")
    wcol = simp(Bin("-", x, iconst(G.pl)))
    halo = guards(ge(hrow), ge(Bin("-", iconst(G.H - 1), hrow)), ge(wcol), ge(Bin("-", iconst(G.W - 1), wcol)))
    dst = simp(Bin("+", Bin("*", Bin("+", Bin("*", r, iconst(cf)), c), iconst(P)), x))
    # the halo: one memset of the tile's real rows, contiguous (its 21 rows x P), cheaper than
    # a fill per row or per halo fragment; a float tile's padded rows zeroed in the same pass
    # when its pad value is 0. The copy then overwrites the image's part.
    i = Var("i")
    whole = G.Cig if fx or Cib == G.Cig else Cib if G.fill == 0.0 else G.Cig
    out = [Stmt("fill", Load(xt, (i,)), Const(float(G.fill)), [SLoop("i", iconst(0), iconst(whole * P))],
                guard=tuple(exists), sid=kb.sid("copy", "xfill"), note="halo, whole tile")]
    if whole < Cib and not fx:
        out.append(Stmt("fill", Load(xt, (simp(Bin("+", i, iconst(G.Cig * P))),)), Const(0.0),
                        [SLoop("i", iconst(0), iconst((Cib - G.Cig) * P))], guard=tuple(exists),
                        sid=kb.sid("copy", "xpad"), note="padded channels"))
    return out + staged_copy(kb.sid("copy", "x"), xt, dst, Load(gx, (input_offset(G, n, g, c, hrow, wcol),)),
                             [SLoop("c", iconst(0), iconst(cf)), SLoop("r", iconst(0), iconst(fold)),
                              SLoop("x", iconst(0), iconst(W_in))], halo=halo, common=exists)


def tile_pixels(hw, rin, W_in, eb, tr):
    """Pixels of an input tile of `rin` rows; transposed on chip (tr), padded so that both
    sides of __bang_transpose are multiples of transpose_multiple_bytes (elements of eb bytes)."""
    return round_up(rin * W_in, int(hw["transpose_multiple_bytes"]) // eb) if tr else rin * W_in
