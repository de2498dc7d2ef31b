"""Row reductions on the vector unit: softmax's max and sum (and a ReduceMax / ReduceSum)
over one axis that is contiguous in GDRAM.

Per row: the row copied to NRAM (D floats, padded to the vector size), the body evaluated
over it in three-address form (softmax's sum: x - max as `__bang_sub_scalar`, then
`__bang_active_exp`), the padding lanes filled with the combine's identity (-inf for max,
0 for sum), then `__bang_max` / `__bang_sum` into the row's own 128-B slot of a result
buffer, stored at once (a 4-B copy). Rows whose
padded length does not fit NRAM, other combines, epilogues other than the reduced value
and reductions over a strided axis stay scalar.
"""
from __future__ import annotations

import math

from ....ir.loopnest import Acc, Bin, Const, Load, Var, iconst
from ....ir.sizes import ceil_div, round_up
from ..devir import SLoop, ScalarLoad, Stmt, When, lin, scoped, simp
from ..preprocess import vector_elems
from .builder import Unschedulable, ge, guards, loop, tasks
from .three_address import Operand, ThreeAddress, loads_of, peak_temps

IDENTITY = {"max": -math.inf, "sum": 0.0}


def sched_rowreduce(kb):
    k = kb.k
    if k.combine not in IDENTITY or len(k.reduce_axes) != 1 or not isinstance(k.epilogue, Acc):
        raise Unschedulable("not a row reduction by max or sum")
    d = k.reduce_axes[0]
    D = d.extent
    loads = loads_of(k.body, [])
    if not loads or any(ld.pad is not None for ld in loads):
        raise Unschedulable("row reduction without loads or with padded loads")
    acc = {}
    for i, ld in enumerate(loads):
        a = lin(kb.offset(ld))
        if a is None:
            raise Unschedulable("non-affine access")
        acc[i] = a
    row = [i for i, a in acc.items() if a.get(d.name, 0)]
    if not row or any(acc[i][d.name] != 1 for i in row):
        raise Unschedulable("the reduced axis is not contiguous")
    out = lin(kb.out_offset())
    # the output points as one flat index r with stride 1 (rows), every load affine in r
    axes = [a for a in k.axes if a.extent > 1]
    for x, y in zip(axes, axes[1:]):
        if out.get(x.name, 0) != y.extent * out.get(y.name, 0):
            raise Unschedulable("output points are not one run")
    if axes and out.get(axes[-1].name, 0) != 1:
        raise Unschedulable("output points are not contiguous")
    for a in acc.values():
        for x, y in zip(axes, axes[1:]):
            if a.get(x.name, 0) != y.extent * a.get(y.name, 0):
                raise Unschedulable("a load's row index is not affine in the flat row")
    O = math.prod(a.extent for a in axes)
    stride = {i: (a.get(axes[-1].name, 0) if axes else 0) for i, a in acc.items()}
    hw = kb.hw
    ve = vector_elems(hw)
    Dp = round_up(D, ve)
    temps = peak_temps(k.body, lambda ld: Operand("buf", f"x{loads.index(ld)}") if loads.index(ld) in row
                       else Operand("scalar", Var("v")))
    R0 = ceil_div(O, 16)                       # rows a task
    need = (len(row) + temps) * Dp * 4 + R0 * ve * 4
    if need > kb.nram_budget():
        raise Unschedulable("a row does not fit NRAM")
    for i in row:
        kb.alloc("NRAM", f"x{i}", Dp)
    res = kb.alloc("NRAM", "res", R0 * ve)
    gout = kb.gparam(k.buffers[k.out].tensor)
    c0 = out.get(None, 0)
    kb.info_tile = dict(rows=O, row=D, chunk=R0)
    ln = Var("ln")

    def body(t):
        def per_row(rl):
            r = simp(Bin("+", Bin("*", t, iconst(R0)), rl))
            # a task past the last row skips the whole row: one run-time guard around it (the row
            # max read and its users in one C scope)
            when = guards(ge(Bin("-", iconst(O - 1), r))) if 16 * R0 > O else ()
            st, leaf = [], {}
            for i, ld in enumerate(loads):
                g = kb.gparam(k.buffers[ld.buf].tensor)
                base = simp(Bin("+", iconst(acc[i].get(None, 0)), Bin("*", r, iconst(stride[i]))))
                if i in row:
                    st.append(Stmt("copy", Load(f"x{i}", (ln,)), Load(g, (simp(Bin("+", base, ln)),)),
                                   [SLoop("ln", iconst(0), iconst(D))], sid=kb.sid("copy", "in")))
                    leaf[ld] = Operand("buf", f"x{i}")
                else:
                    st.append(ScalarLoad(f"v{i}", Load(g, (base,))))
                    leaf[ld] = Operand("scalar", Var(f"v{i}"))
            ta = ThreeAddress(kb, "r", lambda: iconst(Dp))
            v = ta.run(k.body, lambda ld: leaf[ld], ())
            for name in sorted(ta.temps):
                if name not in kb.bufs:
                    kb.alloc("NRAM", name, Dp)
            st += ta.stmts
            if v.kind != "buf":
                raise Unschedulable("row reduction of a constant")
            if Dp > D:      # the padding lanes hold the combine's identity
                st.append(Stmt("fill", Load(v.ref, (simp(Bin("+", ln, iconst(D))),)), Const(IDENTITY[k.combine]),
                               [SLoop("ln", iconst(0), iconst(Dp - D))], sid=kb.sid("fill", "id")))
            st.append(Stmt("compute", Load(res, (simp(Bin("*", rl, iconst(ve))),)), Load(v.ref, (Var("d"),)), [],
                           [SLoop("d", iconst(0), iconst(Dp))], combine=k.combine, sid=kb.sid("compute", "red")))
            # the row's result out at once: a row is a whole tile (pingpong.py may overlap rows)
            st.append(Stmt("copy", Load(gout, (simp(Bin("+", Bin("+", iconst(c0), r), Var("ln"))),)),
                           Load(res, (simp(Bin("+", Bin("*", rl, iconst(ve)), Var("ln"))),)),
                           [SLoop("ln", iconst(0), iconst(1))], sid=kb.sid("copy", "out")))
            return [When(when, st)] if when else scoped(st)

        return loop("rr", R0, per_row)

    b = tasks(body)
    return kb.finish("rowreduce", b, tile=kb.info_tile)
