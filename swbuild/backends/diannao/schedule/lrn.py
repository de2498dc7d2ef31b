"""LRN on the vector unit: the channel window as shifted adds of [C][T] tiles.

A tile is T pixels by all C channels, held on chip channel-major, [C][T]: a channel window
(c - lo .. c + hi) is then a shift by whole rows of T lanes, 64-B aligned, so the sum of
squares is `size - 1` __bang_add over the tile's C * T lanes of a buffer of squares with
`lo` zero rows before and `hi` after (the window's zero padding). A channels-last (NHWC)
tensor is copied in as [T][C] and turned with __bang_transpose, and back before the store;
a channels-first one is copied row by row (a strided copy of C segments). The power runs
as exp(-beta * log(bias + alpha / size * sum)) (__bang_active_log, __bang_active_exp), so
y = x * that: exact in form for a positive base, which bias > 0 and alpha >= 0 give;
other LRNs stay scalar.
"""
from __future__ import annotations

import math

from ....ir.loopnest import Acc, Bin, Const, Load, Un, Var, iconst
from ....ir.sizes import ceil_div, round_up
from ..devir import SLoop, Stmt, lin, simp, subst
from ..preprocess import staged_copy, vector_elems
from .builder import Unschedulable, ge, guards, loop, tasks
from .three_address import Operand, ThreeAddress, peak_temps

PIPELINE_TILES = 4


def lrn_form(k):
    """(x load, size, lo, alpha / size, bias, beta) of an LRN kernel as ops/nn.py lowers it
    (a fused consumer changes the epilogue: not this form); Unschedulable otherwise."""
    if k.op != "LRN" or k.combine != "sum" or len(k.reduce_axes) != 1 or len(k.axes) < 3:
        raise Unschedulable("not the LRN form")
    b, e = k.body, k.epilogue
    if not (isinstance(b, Bin) and b.op == "*" and isinstance(b.a, Load) and b.a == b.b and b.a.pad == 0.0):
        raise Unschedulable("LRN body is not x * x over the window")
    if not (isinstance(e, Bin) and e.op == "/" and isinstance(e.a, Load) and e.a.pad is None
            and e.a.buf == b.a.buf and isinstance(e.b, Bin) and e.b.op == "pow" and isinstance(e.b.b, Const)):
        raise Unschedulable("LRN epilogue is not x / pow(bias + k * sum, beta)")
    base = e.b.a
    if not (isinstance(base, Bin) and base.op == "+" and isinstance(base.a, Const) and isinstance(base.b, Bin)
            and base.b.op == "*" and isinstance(base.b.a, Const) and isinstance(base.b.b, Acc)):
        raise Unschedulable("LRN epilogue is not x / pow(bias + k * sum, beta)")
    bias, ka, beta = float(base.a.value), float(base.b.a.value), float(e.b.b.value)
    if not (bias > 0 and ka >= 0 and math.isfinite(bias) and math.isfinite(ka) and math.isfinite(beta)):
        raise Unschedulable("LRN with bias <= 0 or alpha < 0: the power's base may not be positive")
    size = k.reduce_axes[0].extent
    c = k.axes[1].name
    if [a.var for i, a in enumerate(k.axes) if i != 1] != [ix for i, ix in enumerate(e.a.index) if i != 1] \
            or e.a.index[1] != Var(c):
        raise Unschedulable("LRN reads x elsewhere than at the output point")
    w = lin(b.a.index[1])
    j = k.reduce_axes[0].name
    if w is None or w.get(c) != 1 or w.get(j) != 1 or len(w) != 3 or \
            [ix for i, ix in enumerate(b.a.index) if i != 1] != [ix for i, ix in enumerate(e.a.index) if i != 1]:
        raise Unschedulable("LRN window is not c + j - lo")
    return e.a, size, -w[None], ka, bias, beta


def _pixels(kb, a, names):
    """(stride of the batch axis, channel stride, pixel stride) of an access {var: coef}
    whose spatial axes fuse into one pixel axis; Unschedulable otherwise."""
    k = kb.k
    sp = [ax for ax in k.axes[2:] if ax.extent > 1]
    for x, y in zip(sp, sp[1:]):
        if a.get(x.name, 0) != y.extent * a.get(y.name, 0):
            raise Unschedulable("LRN spatial axes are not one run of pixels")
    pst = a.get(sp[-1].name, 0) if sp else 1
    return a.get(names[0], 0), a.get(names[1], 0), pst


def sched_lrn(kb):
    k = kb.k
    x, size, lo, ka, bias, beta = lrn_form(k)
    hi = size - 1 - lo
    if lo < 0 or hi < 0:
        raise Unschedulable("LRN window outside [c - size + 1, c + size - 1]")
    names = [ax.name for ax in k.axes]
    N, C = k.axes[0].extent, k.axes[1].extent
    Np = math.prod(ax.extent for ax in k.axes[2:])
    ain, aout = lin(kb.offset(x)), lin(kb.out_offset())
    if ain is None or aout is None:
        raise Unschedulable("non-affine access")
    sn_i, cs_i, ps_i = _pixels(kb, ain, names)
    sn_o, cs_o, ps_o = _pixels(kb, aout, names)
    last_in, last_out = cs_i == 1, cs_o == 1        # channels-last: [T][C] in GDRAM, transposed on chip
    if (not last_in and ps_i != 1) or (not last_out and ps_o != 1):
        raise Unschedulable("LRN tensor neither channels-last nor pixel-contiguous")
    hw = kb.hw
    ve = vector_elems(hw)
    tm = int(hw["transpose_multiple_bytes"]) // 4
    Cp = round_up(C, tm) if (last_in or last_out) else C
    # tile lanes: T a multiple of the vector size (C * T lanes per instruction, rows 64-B aligned)
    T_unit = max(ve, tm)
    expr = Bin("*", Load("X", ()), Un("exp", Bin("*", Un("log", Bin("+", Const(bias), Bin("*", Const(ka), Acc()))),
                                                   Const(-beta))))
    temps = peak_temps(expr, lambda ld: Operand("buf", "acc" if isinstance(ld, Acc) else "X"))
    dbl = 2 if getattr(kb.p.target_state, "double_buffer", False) else 1
    per_pixel = (dbl * Cp * last_in + dbl * Cp + (C + size - 1) + dbl * C + dbl * Cp * last_out + temps * Cp)
    tmax = kb.nram_budget() // 4 // per_pixel // T_unit * T_unit
    if tmax < T_unit:
        raise Unschedulable("LRN tile of one vector of pixels does not fit NRAM")
    C0 = ceil_div(Np, 16)
    # at least PIPELINE_TILES tiles a task where the chunk has the pixels: pingpong.py overlaps
    # a tile's copies with its neighbours' compute only when there are neighbours
    S = max(ceil_div(round_up(C0, T_unit), tmax), min(PIPELINE_TILES if dbl == 2 else 1, C0 // T_unit))
    T = min(tmax, round_up(ceil_div(C0, S), T_unit))
    S = ceil_div(C0, T)
    lanes = C * T
    xin = kb.alloc("NRAM", "xin", T * Cp) if last_in else None
    xt = kb.alloc("NRAM", "xt", Cp * T)
    q = kb.alloc("NRAM", "q", (C + size - 1) * T)
    s = kb.alloc("NRAM", "s", lanes) if size > 1 else q
    yout = kb.alloc("NRAM", "yout", T * Cp) if last_out else None
    gx, gy = kb.gparam(k.buffers[x.buf].tensor), kb.gparam(k.buffers[k.out].tensor)
    kb.info_tile = dict(pixels=Np, tile=T, chunk=C0, channels=C, layout_in="NHWC" if last_in else "NCHW",
                        layout_out="NHWC" if last_out else "NCHW")
    ln, lv, cv = Var("ln"), Var("l"), Var("c")

    def lanes_loop(n):
        return [SLoop("ln", iconst(0), iconst(n))]

    def compute(dst, expr_, n, guard):
        return Stmt("compute", Load(dst, (ln,)), expr_, lanes_loop(n), guard=guard, over=True,
                    sid=kb.sid("compute", "lrn"))

    def body(t):
        prefix = []
        for start, rows in ((0, lo), (lo + C, hi)):          # the window's zero padding, once per task
            if rows:
                prefix.append(Stmt("fill", Load(q, (simp(Bin("+", ln, iconst(start * T))),)), Const(0.0),
                                   lanes_loop(rows * T), sid=kb.sid("fill", "pad")))

        def per_n(n):
            def per_s(si):
                base = simp(Bin("+", Bin("*", t, iconst(C0)), Bin("*", si, iconst(T))))
                c_chunk = ge(Bin("-", Bin("-", iconst(C0 - 1), Bin("*", si, iconst(T))), lv)) if C0 % T else None
                c_end = ge(Bin("-", Bin("-", iconst(Np - 1), base), lv)) if 16 * C0 > Np else None
                tail = guards(c_chunk, c_end)
                exists = guards(*(_at0(c) for c in tail))
                pix = Bin("+", base, lv)
                off_in = simp(Bin("+", Bin("+", iconst(ain.get(None, 0)), Bin("*", n, iconst(sn_i))),
                                  Bin("+", Bin("*", cv, iconst(cs_i)), Bin("*", pix, iconst(ps_i)))))
                off_out = simp(Bin("+", Bin("+", iconst(aout.get(None, 0)), Bin("*", n, iconst(sn_o))),
                                   Bin("+", Bin("*", cv, iconst(cs_o)), Bin("*", pix, iconst(ps_o)))))
                loops_lc = [SLoop("l", iconst(0), iconst(T)), SLoop("c", iconst(0), iconst(C))]
                loops_cl = [SLoop("c", iconst(0), iconst(C)), SLoop("l", iconst(0), iconst(T))]
                st = []
                if last_in and ps_i == C == Cp:     # whole pixels: one contiguous run of T * C floats
                    st += staged_copy(kb.sid("copy", "in"), xin, ln, Load(gx, (_flat(off_in, C),)),
                                      lanes_loop(T * C), bound=_flat_tail(tail, C))
                elif last_in:
                    st += staged_copy(kb.sid("copy", "in"), xin, simp(Bin("+", Bin("*", lv, iconst(Cp)), cv)),
                                      Load(gx, (off_in,)), loops_lc, bound=tail)
                if last_in:
                    st.append(Stmt("compute", Load(xt, (simp(Bin("+", Bin("*", cv, iconst(T)), lv)),)),
                                   Load(xin, (simp(Bin("+", Bin("*", lv, iconst(Cp)), cv)),)),
                                   [SLoop("c", iconst(0), iconst(Cp)), SLoop("l", iconst(0), iconst(T))],
                                   guard=exists, over=True, sid=kb.sid("compute", "tr")))
                else:
                    st += staged_copy(kb.sid("copy", "in"), xt, simp(Bin("+", Bin("*", cv, iconst(T)), lv)),
                                      Load(gx, (off_in,)), loops_cl, bound=tail)
                xl = Load(xt, (ln,))
                st.append(compute(q, Bin("*", xl, xl), lanes, exists))
                st[-1].dst = Load(q, (simp(Bin("+", ln, iconst(lo * T))),))
                if size > 1:
                    st.append(compute(s, Bin("+", Load(q, (ln,)), Load(q, (simp(Bin("+", ln, iconst(T))),))),
                                      lanes, exists))
                    for jj in range(2, size):
                        st.append(compute(s, Bin("+", Load(s, (ln,)), Load(q, (simp(Bin("+", ln, iconst(jj * T))),))),
                                          lanes, exists))
                acc_buf = s if size > 1 else q
                ta = ThreeAddress(kb, "e", lambda: iconst(lanes))
                res = ta.run(expr, lambda ld: Operand("buf", acc_buf if isinstance(ld, Acc) else xt), exists)
                for name in sorted(ta.temps):
                    if name not in kb.bufs:
                        kb.alloc("NRAM", name, Cp * T)
                st += ta.stmts
                r = res.ref
                if last_out:
                    st.append(Stmt("compute", Load(yout, (simp(Bin("+", Bin("*", lv, iconst(Cp)), cv)),)),
                                   Load(r, (simp(Bin("+", Bin("*", cv, iconst(T)), lv)),)),
                                   [SLoop("l", iconst(0), iconst(T)), SLoop("c", iconst(0), iconst(Cp))],
                                   guard=exists, over=True, sid=kb.sid("compute", "tr")))
                    if ps_o == C == Cp:
                        st.append(Stmt("copy", Load(gy, (_flat(off_out, C),)), Load(yout, (ln,)), lanes_loop(T * C),
                                       guard=_flat_tail(tail, C), sid=kb.sid("copy", "out")))
                    else:
                        st.append(Stmt("copy", Load(gy, (off_out,)),
                                       Load(yout, (simp(Bin("+", Bin("*", lv, iconst(Cp)), cv)),)),
                                       loops_lc, guard=tail, sid=kb.sid("copy", "out")))
                else:
                    st.append(Stmt("copy", Load(gy, (off_out,)), Load(r, (simp(Bin("+", Bin("*", cv, iconst(T)), lv)),)),
                                   loops_cl, guard=tail, sid=kb.sid("copy", "out")))
                return st
            return loop("s", S, per_s)
        return prefix + loop("n", N, per_n)

    b = tasks(body)
    return kb.finish("lrn", b, tile=kb.info_tile)


def _flat(off, C):
    """A channels-last offset at pixel l, channel c (pixel stride C) as one at lane ln = l * C + c."""
    return simp(subst(off, {"l": iconst(0), "c": Var("ln")}))


def _flat_tail(tail, C):
    """Tail guards `rest - l >= 0` on pixels as `C * rest + C - 1 - ln >= 0` on lanes."""
    out = []
    for g in tail:
        rest = simp(subst(g, {"l": iconst(0)}))
        out.append(simp(Bin("-", Bin("+", Bin("*", rest, iconst(C)), iconst(C - 1)), Var("ln"))))
    return tuple(out)


def _at0(c):
    """A tail guard at the tile's first pixel: the tile exists."""
    return simp(subst(c, {"l": 0}))
