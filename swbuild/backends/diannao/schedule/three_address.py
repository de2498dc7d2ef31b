"""Three-address form of an element-wise expression: one instruction candidate per statement."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ....ir.loopnest import children, Acc, Bin, Const, Load, Select, Un, Var, iconst
from ..devir import SLoop, Stmt, simp
from .builder import Unschedulable
from .integer import MAGIC


@dataclass
class Operand:
    kind: str          # "buf" | "scalar"
    ref: object        # buffer name | Expr


class ThreeAddress:
    """expr over tile operands → compute statements over lanes `ln`, each one instruction
    candidate; temporaries are reused, and an operand whose last use this is is overwritten
    in place (so `relu(x)` runs in place on x's tile). A subtree the expression holds more
    than once is computed once and its tile kept until its last use (exact_quotient.py reads
    its clamped x and split halves several times)."""

    def __init__(self, kb, sid_label, lanes_fn, readonly=()):
        self.kb, self.label, self.lanes_fn = kb, sid_label, lanes_fn
        self.readonly = set(readonly)
        self.stmts, self.free, self.ntemps, self.uses = [], [], 0, {}
        self.temps = set()
        self.peak = 0
        self.rounding = 0      # depth of integer roundings (round, floor, ceil) around the expression
        self.shared, self.memo = {}, {}    # compound subtree -> its occurrences; computed -> its operand

    def run(self, expr, leaf, guard):
        self.guard = guard
        self._count(expr, leaf)
        return self._go(expr, leaf)

    def _key(self, e):
        """A subtree's identity for sharing: with a division inside, whether it lies under a
        rounding too (_compute keeps the division there), so both are computed, and counted, apart."""
        return e, self.rounding > 0 and _divides(e)

    def _count(self, e, leaf):
        if isinstance(e, (Load, Acc)):
            o = leaf(e)
            if o.kind == "buf":
                self.uses[o.ref] = self.uses.get(o.ref, 0) + 1
            return
        if isinstance(e, (Bin, Un, Select)):
            key = self._key(e)
            seen = self.shared.get(key, 0)
            self.shared[key] = seen + 1
            if seen:            # computed once: its operands are read by that one computation
                return
        if _clamp_form(e, leaf):        # x is evaluated once (_go)
            self._count(e.a, leaf)
            return
        # the rounding depth as _compute tracks it, so _count and _go share the same subtrees
        inner = (isinstance(e, Un) and e.op in ("round", "floor", "ceil")) or \
            (isinstance(e, Bin) and e.op == "+" and isinstance(e.b, Const) and e.b.value == MAGIC)
        for j, c in enumerate(children(e)):
            self.rounding += inner and j == 0
            self._count(c, leaf)
            self.rounding -= inner and j == 0

    def _temp(self):
        if self.free:
            return self.free.pop()
        self.ntemps += 1
        name = f"t{self.ntemps - 1}_{self.label}"
        self.temps.add(name)
        self.peak = max(self.peak, self.ntemps)
        return name

    def _release(self, o):
        if o.kind == "buf" and o.ref in self.uses:
            self.uses[o.ref] -= 1

    def _dst(self, ops):
        for o in ops:
            if o.kind == "buf" and self.uses.get(o.ref, 0) <= 0 and o.ref not in self.readonly:
                return o.ref       # last use: write in place
        return self._temp()

    def _val(self, o):
        return Load(o.ref, (Var("ln"),)) if o.kind == "buf" else o.ref

    def _emit(self, dst, expr):
        sid = self.kb.sid("compute", f"s{self.label}_")
        self.stmts.append(Stmt("compute", Load(dst, (Var("ln"),)), expr, [SLoop("ln", iconst(0), self.lanes_fn())],
                               guard=self.guard, over=True, sid=sid))

    def _go(self, e, leaf):
        key = self._key(e)
        if key in self.memo:
            return self.memo[key]
        o = self._compute(e, leaf)
        n = self.shared.get(key, 0)
        if n > 1 and o.kind == "buf":       # read n times: kept (not overwritten, not freed) until then
            # (a tile written in place may have counted below zero: its earlier reads are done)
            self.uses[o.ref] = max(0, self.uses.get(o.ref, 0)) + n
            self.memo[key] = o
        return o

    def _compute(self, e, leaf):
        if isinstance(e, (Load, Acc)):
            return leaf(e)
        if isinstance(e, Const):
            return Operand("scalar", e)
        if isinstance(e, Bin):
            # v + 1.5 * 2^23 rounds v to an integer (integer.py, quantize.py): v is under a rounding
            magic = e.op == "+" and isinstance(e.b, Const) and e.b.value == MAGIC
            self.rounding += magic
            a = self._go(e.a, leaf)
            self.rounding -= magic
            b = self._go(e.b, leaf)
            if a.kind == b.kind == "scalar":
                return Operand("scalar", Bin(e.op, a.ref, b.ref))
            # x / s -> x * (1 / s): within an ulp of x / s, except under a rounding to an
            # integer, where one ulp can move a tie (QuantizeLinear must match bit for bit)
            if e.op == "/" and b.kind == "scalar" and not self.rounding:
                e, b = Bin("*", e.a, e.b), Operand("scalar", simp(Bin("/", Const(1.0), b.ref)))
            if e.op in ("min", "max") and a.kind == "scalar":
                a, b = b, a
            rewrite = None
            # the relu forms of min and max need a finite s (s = inf: inf - inf), so a run-time
            # scalar (a graph input's element) keeps the plain, element-wise min/max; they round
            # x - s (docs/diannao.md, "Known gap": a bound far from x is wrong)
            finite = b.kind == "scalar" and isinstance(b.ref, Const) and math.isfinite(b.ref.value)
            if e.op == "-" and a.kind == "scalar":          # s - x = (x * -1) + s
                a, b = b, a
                rewrite = [("*", Const(-1.0)), ("+", "s")]
            elif e.op == "max" and finite and b.ref.value != 0:
                rewrite = [("-", "s"), ("relu",), ("+", "s")]              # max(x, s) = relu(x - s) + s
            elif e.op == "min" and finite:                                # min(x, s) = s - relu(s - x)
                rewrite = [("*", Const(-1.0)), ("+", "s"), ("relu",), ("*", Const(-1.0)), ("+", "s")]
            if rewrite:
                self._release(a)
                t = self._dst([a])
                src = self._val(a)
                for step in rewrite:
                    if step[0] == "relu":
                        self._emit(t, Bin("max", src, Const(0.0)))
                    else:
                        self._emit(t, Bin(step[0], src, b.ref if step[1] == "s" else step[1]))
                    src = Load(t, (Var("ln"),))
                self._retire([a], t)
                return Operand("buf", t)
            self._release(a)
            self._release(b)
            t = self._dst([a, b])
            self._emit(t, Bin(e.op, self._val(a), self._val(b)))
            self._retire([a, b], t)
            return Operand("buf", t)
        if isinstance(e, Un):
            inner = e.op in ("round", "floor", "ceil")
            self.rounding += inner
            a = self._go(e.a, leaf)
            self.rounding -= inner
            if a.kind == "scalar":
                return Operand("scalar", Un(e.op, a.ref))
            self._release(a)
            t = self._dst([a])
            self._emit(t, Un(e.op, self._val(a)))
            self._retire([a], t)
            return Operand("buf", t)
        if _clamp_form(e, leaf):
            # x >= s ? x : s (x <= s ? x : s): one statement, __bang_maxeq_scalar's form
            a, b = self._go(e.a, leaf), self._go(e.b, leaf)
            self._release(a)
            t = self._dst([a])
            x = self._val(a)
            self._emit(t, Select(Bin(e.cond.op, x, b.ref), x, b.ref))
            self._retire([a], t)
            return Operand("buf", t)
        if isinstance(e, Select):
            xs = [self._go(x, leaf) for x in (e.cond, e.a, e.b)]
            if all(x.kind == "scalar" for x in xs):
                return Operand("scalar", Select(*(x.ref for x in xs)))
            for x in xs:
                self._release(x)
            t = self._dst(xs)
            self._emit(t, Select(*(self._val(x) for x in xs)))
            self._retire(xs, t)
            return Operand("buf", t)
        raise Unschedulable(f"expression {e}")

    def _retire(self, ops, dst):
        for o in ops:
            if o.kind == "buf" and o.ref in self.temps and o.ref != dst and self.uses.get(o.ref, 0) == 0 \
                    and o.ref not in self.free:
                self.free.append(o.ref)


def _clamp_form(e, leaf):
    """x >= s ? x : s or x <= s ? x : s with s scalar and x not: a saturation's bound, one
    instruction (__bang_maxeq_scalar / __bang_mineq_scalar, NaN x giving s)."""
    if not (isinstance(e, Select) and isinstance(e.cond, Bin) and e.cond.op in (">=", "<=")
            and e.cond.a == e.a and e.cond.b == e.b):
        return False

    def scalar(x):
        if isinstance(x, (Load, Acc)):
            return leaf(x).kind == "scalar"
        return all(scalar(c) for c in children(x))
    return scalar(e.b) and not scalar(e.a)


def _divides(e):
    """e holds a division (which _compute rewrites as a product outside a rounding only)."""
    if isinstance(e, (Load, Acc, Const)):
        return False
    return (isinstance(e, Bin) and e.op == "/") or any(_divides(c) for c in children(e))


def loads_of(e, out):
    if isinstance(e, Load):
        if e not in out:
            out.append(e)
        return out
    for c in children(e):
        loads_of(c, out)
    return out




def peak_temps(expr, leaf, readonly=()):
    """Peak number of temporaries the three-address form of `expr` needs (dry run)."""
    class _KB:
        def sid(self, kind, label):
            return "probe"
    ta = ThreeAddress(_KB(), "p", lambda: iconst(1), readonly)
    ta.run(expr, leaf, ())
    return ta.peak
