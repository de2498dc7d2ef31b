"""Instruction selection the ISA Mapper way: match a guard-free statement against every
instruction description (isa.py) and rewrite it into one call inside the loops the
instruction does not cover.

A match is a correspondence of
  - buffers: each operand of the description ↔ an access of the statement (expression
    trees compared structurally; + * max min commute; a scalar parameter of the description
    matches any loop-invariant value),
  - axes: each loop of the description ↔ a loop of the statement (reduce ↔ reduce),
  - dimensions: per operand and dimension, the description's stride of each loop (a
    monomial in its parameters) equals the statement's stride of the corresponding loop;
solving those equations gives the parameters (sizes, strides, window, channels), then the
description's rules are checked. When no description matches the statement as written,
the mapper retries after an algebraic rewrite (adjacent loops that are contiguous in every
access fused into one). Statements that still match nothing stay scalar and are counted.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from ...ir.loopnest import Bin, Const, Load, Select, Un, Var
from . import isa
from .devir import SLoop, Stmt, bounds, const, lin, simp, subst

COMMUTATIVE = ("+", "*", "max", "min")


@dataclass
class Mapped:
    desc: object
    params: dict           # name -> int or Expr
    ops: dict              # operand -> (buffer, element offset Expr [, bank dim offset])
    scalars: dict          # scalar parameter -> Expr
    outer: list            # [SLoop] the statement's loops left around the call
    direction: str = ""

    @property
    def name(self):
        return self.desc.name


# ---- description polynomials ---------------------------------------------------------

def poly(e):
    """{monomial (sorted var names): coef} of an integer polynomial expression."""
    if isinstance(e, Var):
        return {(e.name,): 1}
    if isinstance(e, Const):
        return {(): int(e.value)} if int(e.value) else {}
    if isinstance(e, Bin) and e.op in "+-":
        a, b = poly(e.a), poly(e.b)
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + (v if e.op == "+" else -v)
        return {k: v for k, v in out.items() if v}
    if isinstance(e, Bin) and e.op == "*":
        a, b = poly(e.a), poly(e.b)
        out = {}
        for (ka, va), (kb, vb) in itertools.product(a.items(), b.items()):
            k = tuple(sorted(ka + kb))
            out[k] = out.get(k, 0) + va * vb
        return {k: v for k, v in out.items() if v}
    raise ValueError(f"description index {e} is not a polynomial")


def stride_poly(p, var):
    """The coefficient of `var` (terms linear in it) as a polynomial in the other names."""
    out = {}
    for mono, c in p.items():
        k = mono.count(var)
        if k > 1:
            raise ValueError("description index is not linear in its loops")
        if k == 1:
            rest = list(mono)
            rest.remove(var)
            out[tuple(rest)] = out.get(tuple(rest), 0) + c
    return out


def _solve(eqs, params):
    """Bind parameters from equations poly == value (int or Expr for extents); False on a
    contradiction, None if something stays unknown."""
    pending = list(eqs)
    progress = True
    while pending and progress:
        progress = False
        rest = []
        for p, v in pending:
            unknown = {n for mono in p for n in mono if n not in params}
            if not unknown:
                got = sum(c * math.prod(_num(params[n]) for n in mono) for mono, c in p.items())
                if not _same(got, v):
                    return False
                progress = True
                continue
            if len(unknown) == 1 and len(p) == 1:
                (mono, c), = p.items()
                u = next(iter(unknown))
                if mono.count(u) == 1 and all(n == u or isinstance(params[n], int) for n in mono):
                    k = c * math.prod(params[n] for n in mono if n != u)
                    if mono == (u,) and c == 1 and not isinstance(v, int):
                        params[u] = v              # a symbolic extent binds as is
                        progress = True
                        continue
                    if isinstance(v, int) and k and v % k == 0:
                        params[u] = v // k
                        progress = True
                        continue
                    return False
            rest.append((p, v))
        pending = rest
    return None if pending else True


def _num(v):
    if isinstance(v, int):
        return v
    c = const(v)
    if c is None:
        raise _Symbolic()
    return c


class _Symbolic(Exception):
    pass


def _same(a, b):
    if isinstance(b, int):
        return a == b
    return const(b) == a


# ---- structural matching -------------------------------------------------------------

def _is_scalar(e, loop_vars):
    if isinstance(e, Load):
        return False
    if isinstance(e, Var):
        return e.name not in loop_vars
    if isinstance(e, Const):
        return True
    if isinstance(e, Bin):
        return _is_scalar(e.a, loop_vars) and _is_scalar(e.b, loop_vars)
    if isinstance(e, Un):
        return _is_scalar(e.a, loop_vars)
    if isinstance(e, Select):
        return all(_is_scalar(x, loop_vars) for x in (e.cond, e.a, e.b))
    return False


def smatch(d, p, bind, loop_vars):
    """Yield bindings ({operand: Load}, {scalar: Expr}) extending `bind` so that the
    description expression d equals the program expression p."""
    ops, sc = bind
    if isinstance(d, Load):
        if isinstance(p, Load) and d.buf not in ops:
            yield ({**ops, d.buf: p}, sc)
        elif ops.get(d.buf) == p:        # an operand the description reads twice (a select)
            yield bind
        return
    if isinstance(d, Var):
        if _is_scalar(p, loop_vars) and d.name not in sc:
            yield (ops, {**sc, d.name: p})
        elif d.name in sc and sc[d.name] == p:
            yield bind
        return
    if isinstance(d, Const):
        if isinstance(p, Const) and p.dtype != "int" and float(p.value) == float(d.value):
            yield bind
        return
    if isinstance(d, Bin) and isinstance(p, Bin) and d.op == p.op:
        orders = [(p.a, p.b)] + ([(p.b, p.a)] if d.op in COMMUTATIVE else [])
        for pa, pb in orders:
            for b1 in smatch(d.a, pa, bind, loop_vars):
                yield from smatch(d.b, pb, b1, loop_vars)
        return
    if isinstance(d, Un) and isinstance(p, Un) and d.op == p.op:
        yield from smatch(d.a, p.a, bind, loop_vars)
    if isinstance(d, Select) and isinstance(p, Select):
        for b1 in smatch(d.cond, p.cond, bind, loop_vars):
            for b2 in smatch(d.a, p.a, b1, loop_vars):
                yield from smatch(d.b, p.b, b2, loop_vars)


# ---- the match context (rules read it) ------------------------------------------------

class Ctx:
    def __init__(self, desc, params, ops, scalars, outer, dk, hw, ranges, direction=""):
        self.desc, self.params, self.ops, self.scalars = desc, params, ops, scalars
        self.outer, self.dk, self.hw, self.ranges, self.direction = outer, dk, hw, ranges, direction

    def const(self, name):
        v = self.params.get(name)
        return v if isinstance(v, int) else const(v) if v is not None else None

    def upper(self, name):
        v = self.params.get(name)
        if isinstance(v, int):
            return v
        b = bounds(v, self.ranges) if v is not None else None
        return b[1] if b else None

    def space(self, op):
        return self.dk.bufs[self.ops[op][0]].space

    def layout(self, op):
        return self.dk.bufs[self.ops[op][0]].layout

    def aligned(self, op, align):
        buf, off = self.ops[op][0], self.ops[op][1]
        b = self.dk.bufs[buf]
        a = lin(off)
        if a is None or b.space == "GDRAM":
            return b.space == "GDRAM" and align <= 1
        if (b.offset + b.elem_bytes * a.get(None, 0)) % align:
            return False
        return all((b.elem_bytes * c) % align == 0 for v, c in a.items() if v is not None)

    def elem_bytes(self, op):
        return self.dk.bufs[self.ops[op][0]].elem_bytes


# ---- loop canonicalisation (the algebraic rewrite) ------------------------------------

def _accesses(st):
    out = [st.dst]
    _collect_loads(st.expr, out)
    return out


def _collect_loads(e, out):
    if isinstance(e, Load):
        out.append(e)
    elif isinstance(e, Bin):
        _collect_loads(e.a, out)
        _collect_loads(e.b, out)
    elif isinstance(e, Un):
        _collect_loads(e.a, out)
    elif isinstance(e, Select):
        for x in (e.cond, e.a, e.b):
            _collect_loads(x, out)


def _coefs(st, var):
    """Per access and dim: the integer stride of `var` (None when not affine)."""
    out = []
    for ld in _accesses(st):
        for ix in ld.index:
            a = lin(ix)
            out.append(None if a is None else a.get(var, 0))
    return out


def _drop_unit_loops(st):
    env, loops, red = {}, [], []
    for lst, into in ((st.loops, loops), (st.red, red)):
        for lp in lst:
            if const(lp.ext) == 1:
                env[lp.var] = lp.lo
            else:
                into.append(lp)
    if not env:
        return st
    return Stmt(st.kind, simp(subst(st.dst, env)), simp(subst(st.expr, env)), loops, red, st.combine,
                (), (), st.over, st.sid)


def fuse_loops(st):
    """Fuse adjacent loops that are contiguous in every access (spatial with spatial,
    reduce with reduce), innermost first."""
    st = _drop_unit_loops(st)
    for which in ("loops", "red"):
        changed = True
        while changed:
            changed = False
            lst = getattr(st, which)
            for k in range(len(lst) - 2, -1, -1):
                a, b = lst[k], lst[k + 1]
                ea, eb = const(a.ext), const(b.ext)
                if ea is None or eb is None or const(a.lo) is None or const(b.lo) is None:
                    continue
                ca, cb = _coefs(st, a.var), _coefs(st, b.var)
                if None in ca or None in cb or any(x != eb * y for x, y in zip(ca, cb)):
                    continue
                env = {a.var: a.lo, b.var: simp(Bin("+", b.lo, Var(b.var)))}
                new = list(lst[:k]) + [SLoop(b.var, Const(0, "int"), Const(ea * eb, "int"))] + list(lst[k + 2:])
                st = Stmt(st.kind, simp(subst(st.dst, env)), simp(subst(st.expr, env)),
                          new if which == "loops" else st.loops, st.red if which == "loops" else new,
                          st.combine, (), (), st.over, st.sid)
                changed = True
                break
    return st


# ---- the search ----------------------------------------------------------------------

def _try(desc, st, dk, hw, ranges):
    loop_vars = set(st.vars())
    best = None
    for ops, sc in _structural(desc, st, loop_vars):
        spaces_ok = all(desc.space.get(o) in (None, dk.bufs[ld.buf].space) for o, ld in ops.items())
        if not spaces_ok or any(len(ld.index) != len(_desc_load(desc, o).index) for o, ld in ops.items()):
            continue
        dpolys = {o: [poly(ix) for ix in _desc_load(desc, o).index] for o in ops}
        scoefs = {o: [lin(ix) for ix in ld.index] for o, ld in ops.items()}
        if any(a is None for v in scoefs.values() for a in v):
            continue
        dl, dr = [v.name for v, _ in desc.loops], [v.name for v, _ in desc.red]
        dext = {v.name: e for v, e in list(desc.loops) + list(desc.red)}
        if len(dr) != len(st.red) or len(dl) > len(st.loops):
            continue
        for sp in itertools.permutations(range(len(st.loops)), len(dl)):
            for rp in itertools.permutations(range(len(st.red))):
                assign = {d: st.loops[j] for d, j in zip(dl, sp)}
                assign.update({d: st.red[j] for d, j in zip(dr, rp)})
                m = _solve_assign(desc, st, assign, ops, sc, dpolys, scoefs, dext, dk, hw, ranges,
                                  [st.loops[j] for j in range(len(st.loops)) if j not in sp])
                if m is None:
                    continue
                score = _score(m, ranges)
                if best is None or score > best[0]:
                    best = (score, m)
    return best


def _desc_load(desc, name):
    if desc.dst.buf == name:
        return desc.dst
    out = []
    _collect_loads(desc.body, out)
    return next(ld for ld in out if ld.buf == name)


def _structural(desc, st, loop_vars):
    if not isinstance(st.dst, Load):
        return
    for b in smatch(desc.body, st.expr, ({desc.dst.buf: st.dst}, {}), loop_vars):
        yield b


def _solve_assign(desc, st, assign, ops, sc, dpolys, scoefs, dext, dk, hw, ranges, outer):
    eqs = []
    for d, lp in assign.items():
        eqs.append(({(dext[d].name,): 1}, const(lp.ext) if const(lp.ext) is not None else lp.ext))
    for o in ops:
        for j, (dp, sa) in enumerate(zip(dpolys[o], scoefs[o])):
            for d, lp in assign.items():
                eqs.append((stride_poly(dp, d), sa.get(lp.var, 0)))
            # statement loops left outside must not be mapped inside: nothing to check;
    params = {}
    try:
        ok = _solve(eqs, params)
    except _Symbolic:
        return None
    if ok is not True:
        return None
    for k, f in desc.derived.items():
        try:
            params[k] = f(params)
        except (TypeError, KeyError):
            return None
    # pointers: mapped loops at their first iteration; outer loops stay as variables
    env = {lp.var: lp.lo for lp in assign.values()}
    opptr = {}
    for o, ld in ops.items():
        idx = [simp(subst(ix, env)) for ix in ld.index]
        if len(idx) == 2:      # bank layout: the call needs the whole block
            if const(idx[0]) != 0 or const(idx[1]) != 0:
                return None
        opptr[o] = (ld.buf, idx[-1] if len(idx) == 1 else idx[1])
    direction = ""
    if desc.kind == "copy":
        direction = f"{dk.bufs[ops['src'].buf].space}2{dk.bufs[ops['dst'].buf].space}"
    ctx = Ctx(desc, params, opptr, sc, outer, dk, hw, _ranges_with(ranges, outer), direction)
    if not all(fn(ctx) for _, fn in desc.rules):
        return None
    return Mapped(desc, params, opptr, sc, outer, direction)


def _ranges_with(ranges, loops):
    r = dict(ranges)
    for lp in loops:
        lo, ext = bounds(lp.lo, r), bounds(lp.ext, r)
        if lo and ext:
            r[lp.var] = (lo[0], lo[1] + max(ext[1], 1) - 1)
    return r


def _score(m, ranges):
    work = 1
    for v, e in list(m.desc.loops) + list(m.desc.red):
        x = m.params.get(e.name)
        if not isinstance(x, int):
            b = bounds(x, ranges)
            x = b[1] if b else 1 << 20
        work *= max(1, x)
    calls = 1
    for lp in m.outer:
        b = bounds(lp.ext, ranges)
        calls *= b[1] if b else 1 << 10
    # equal work and calls: the fewest copy segments (a strided copy whose segments are
    # contiguous on both sides is one segment, each further one costs strided_segment_cycles)
    segs = m.params.get("segs", 1)
    return (work, -calls, -(segs if isinstance(segs, int) else 1 << 10))


def map_stmt(st, dk, hw, ranges):
    """The best Mapped for a guard-free statement, or None (it stays scalar)."""
    if st.guard or st.guard_any:
        return None
    best = None
    forms = [st]
    for f in (_drop_unit_loops(st), fuse_loops(st)):
        if len(f.loops) + len(f.red) != len(forms[-1].loops) + len(forms[-1].red):
            forms.append(f)
    for form in forms:
        for desc in isa.DESCRIPTIONS:
            if desc.kind != st.kind or desc.combine != st.combine:
                continue
            r = _try(desc, form, dk, hw, ranges)
            if r and (best is None or r[0] > best[0]):
                best = r
    if not best:
        return None
    m = best[1]
    unit = {lp.var: lp.lo for lp in m.outer if const(lp.ext) == 1}
    if unit:   # a one-iteration loop around the call is just its first value
        m.outer = [lp for lp in m.outer if lp.var not in unit]
        m.ops = {o: (v[0], simp(subst(v[1], unit))) for o, v in m.ops.items()}
        m.scalars = {k: simp(subst(e, unit)) for k, e in m.scalars.items()}
    return m


def map_kernel(dk, hw):
    """Select an instruction for every statement of a device kernel (in place)."""
    def visit(nodes, ranges):
        from .devir import For, When, loop_ranges
        for n in nodes:
            if isinstance(n, For):
                r = loop_ranges(n, ranges)
                visit(n.body, r)
            elif isinstance(n, When):
                visit(n.body, ranges)
            elif isinstance(n, Stmt):
                n.mapped = map_stmt(n, dk, hw, ranges)
    visit(dk.body, {})
    return dk

