"""The stem's channels-first input: the pixels of its transposed tile, and its kernel width
folded into its input channels (issue 36, option stem_fold): the
7x7 stride-2 convolution on a 3-channel image becomes a 7x1 one over 21 channels, channel
(kx, c) being channel c shifted by kx columns. __bang_conv pads its input channels to 64 B
(64 int8, 16 floats), so 7 taps of 3 channels cost 7 x 64 int8 MACs a tap and pixel where
the folded window costs 64 (float: 7 x 16 against 32). The relayout is the tile's staging
itself: each shifted row is its own strided copy from GDRAM (on-chip copies and
__bang_transpose need 64-B aligned ends, a shift of kx bytes is not), costed by the
schedule's estimate, which keeps the fold only where it is cheaper and fits NRAM."""
from __future__ import annotations

from dataclasses import replace

from ....ir.loopnest import Bin, Const, Load, Var, iconst
from ..devir import SLoop, Stmt, simp
from ..preprocess import staged_copy
from .builder import Unschedulable, ge, guards
from ....ir.sizes import round_up
from .conv_geometry import input_offset


def folded(G, pool):
    """The stem's geometry with its kernel width folded into the input channels (issue 36):
    input channel (kx, c) of a kw = 1 convolution is channel c shifted by kx columns, so
    __bang_conv reduces over kw * Cig channels padded once to its multiple instead of Cig
    padded kw times (7 x 3 = 21 channels padded to 64 int8 / 32 floats, against 7 taps of
    3 padded to 64 / 16). Only where the input is staged channels-first and transposed on
    chip (the shifted rows are copies from GDRAM: on-chip copies need 64-B aligned ends)."""
    if pool or G.G != 1 or G.kw == 1 or not (G.xst["c"] != 1 and G.xst["w"] == 1 and G.W > 1):
        return None
    return replace(G, Cig=G.Cig * G.kw, kw=1)


def cheaper_fold(G, pool, on, plan):
    """(G, plan(G, 1)), or the folded geometry and its plan when `on` and its estimate (the
    plan's first option's first field) is lower; plan(geometry, fold) raises Unschedulable
    when no tile fits."""
    best = plan(G, 1)
    GF = folded(G, pool) if on else None
    if GF is None:
        return G, best
    try:
        alt = plan(GF, G.kw)
    except Unschedulable:       # the folded tiles do not fit NRAM
        return G, best
    return (GF, alt) if alt[0][0] < best[0][0] else (G, best)


def folded_rows(kb, G, fold, xt, Cib, P, rin, W_in, n, g, hrow, exists, needed, fx):
    """The channels-first tile of a folded stem (`folded`): row kx * cf + c of xt [Cib][P]
    holds channel c's input rows shifted by kx columns, each a strided copy from GDRAM (a
    segment per image row; the GDRAM side takes any offset) with its own halo; a float
    tile's padded channels are zeroed (their weights are 0, but garbage could be NaN)."""
    cf = G.Cig // fold
    gx = kb.gparam(kb.k.buffers[G.xbuf].tensor)
    r, x, c = Var("r"), Var("x"), Var("c")
    out = []
    for kx in range(fold):
        wcol = simp(Bin("+", x, iconst(kx - G.pl)))
        halo = guards(ge(hrow), ge(Bin("-", iconst(G.H - 1), hrow)), ge(wcol), ge(Bin("-", iconst(G.W - 1), wcol)))
        dst = simp(Bin("+", Bin("*", Bin("+", c, iconst(kx * cf)), iconst(P)), Bin("+", Bin("*", r, iconst(W_in)), x)))
        out += staged_copy(kb.sid("copy", "x"), xt, dst, Load(gx, (input_offset(G, n, g, c, hrow, wcol),)),
                           [SLoop("c", iconst(0), iconst(cf)), SLoop("r", iconst(0), iconst(rin)),
                            SLoop("x", iconst(0), iconst(W_in))], halo=halo, common=exists + needed, fill=G.fill)
    if not fx and Cib > G.Cig:
        i = Var("i")
        out.append(Stmt("fill", Load(xt, (simp(Bin("+", i, iconst(G.Cig * P))),)), Const(0.0),
                        [SLoop("i", iconst(0), iconst((Cib - G.Cig) * P))], guard=tuple(exists),
                        sid=kb.sid("copy", "xpad"), note="padded channels"))
    # every fill (each on rows of its own) before the first copy: pingpong.py pipelines a tile
    # whose buffer is filled, then loaded, and keeps serial one filled again after a load
    return [s for s in out if s.kind == "fill"] + [s for s in out if s.kind != "fill"]


def tile_pixels(hw, rin, W_in, eb, tr):
    """Pixels of an input tile of `rin` rows; transposed on chip (tr), padded so that both
    sides of __bang_transpose are multiples of transpose_multiple_bytes (elements of eb bytes)."""
    return round_up(rin * W_in, int(hw["transpose_multiple_bytes"]) // eb) if tr else rin * W_in
