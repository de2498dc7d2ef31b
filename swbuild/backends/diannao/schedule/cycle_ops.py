"""Per-channel epilogue operands read by cycle instructions instead of replicated (issue 36).

A convolution epilogue's per-channel operand (bias, a per-channel requantization multiplier)
is the same Cob lanes at every pixel of the HWC tile. replicate.py fills the whole tile with
it (doubling NRAM2NRAM copies, synchronous, before every output-channel block); BANG's
`__bang_cycle_add/sub/mul(dst, src, cycle_src, elem_count, cycle_count)` repeat the
operand's cycle_count elements over src instead (isa.py, bangemu/vector.h), at the cost of
the plain op of the same length. So the operand stays one row of Cob lanes, and each
epilogue statement reading it is written over (pixel p, channel c): dst[p·Cob + c] =
x[p·Cob + c] op q[c], which is what the cycle instruction describes.

It applies only where every statement of the epilogue's three-address form that reads a
per-channel tile has that form (op + or *, either side; − with the operand subtracted), so
nothing else ever reads lanes of the operand that are not there. Otherwise the tile is
replicated as before. The decision is taken on a dry run of the same ThreeAddress the
emitter runs (same expression, same leaves, same read-only set), so both see the same
statements.
"""
from __future__ import annotations

from dataclasses import replace

from ....ir.loopnest import Acc, Bin, Load, Var, iconst, transform
from ..devir import SLoop, simp
from .three_address import Operand, ThreeAddress

CYCLE_OPS = ("+", "-", "*")


class _Sids:
    """The one thing ThreeAddress asks of the kernel builder in a dry run: statement ids."""

    def sid(self, kind, label):
        return label


def _channel_loads(e, chans, out):
    transform(e, lambda x: out.append(x) if isinstance(x, Load) and x.buf in chans else None)
    return out


def cycle_form(st, chans):
    """True when statement st reads per-channel tiles only as dst[ln] = x[ln] op q[ln], x a
    tile that is not per-channel, op one the cycle instructions have (q subtracted for -)."""
    loads = _channel_loads(st.expr, chans, [])
    if not loads:
        return True
    e = st.expr
    if len(loads) != 1 or not isinstance(e, Bin) or e.op not in CYCLE_OPS or st.dst.buf in chans:
        return False
    sides = [e.b] if e.op == "-" else [e.a, e.b]
    q = next((s for s in sides if isinstance(s, Load) and s.buf in chans), None)
    x = e.a if q is e.b else e.b
    ln = (Var("ln"),)
    return q is not None and q.index == ln and isinstance(x, Load) and x.buf not in chans and x.index == ln


def cyclable(epilogue, loads, kinds, lanes, Cob, hw):
    """Whether the epilogue's per-channel operands can stay Cob lanes read by cycle instructions:
    some operand is per-channel, Cob lanes make whole vectors (the cycle count's rule) and
    every statement reading one has the cycle form."""
    chans = {f"q{i}" for i, ld in enumerate(loads) if kinds[ld] == "channel"}
    if not chans or Cob * 4 % hw["vector_size_multiple_bytes"] or lanes % Cob:
        return False
    leaf = {ld: Operand("scalar", Var(f"v{i}")) if kinds[ld] == "scalar" else Operand("buf", f"q{i}")
            for i, ld in enumerate(loads)}
    ta = ThreeAddress(_Sids(), "c", lambda: iconst(lanes), sorted(chans))
    ta.run(epilogue, lambda e: Operand("buf", "acc") if isinstance(e, Acc) else leaf[e], ())
    return all(cycle_form(st, chans) for st in ta.stmts)


def cycle_reads(stmts, chans, Cob, lanetail, pixtail):
    """The epilogue statements reading per-channel tiles `chans`, rewritten over (p, c): tiles
    at p·Cob + c, the per-channel operand at c; the lane tail guard becomes the pixel tail
    (lanes = pixels · Cob, so ln < t·Cob iff p < t)."""
    p, c = Var("p"), Var("c")
    at = simp(Bin("+", Bin("*", p, iconst(Cob)), c))
    out = []
    for st in stmts:
        if not _channel_loads(st.expr, chans, []):
            out.append(st)
            continue
        assert cycle_form(st, chans), st     # cyclable() checked the same statements
        lanes = st.loops[0].ext
        expr = transform(st.expr, lambda x: Load(x.buf, (c if x.buf in chans else at,)) if isinstance(x, Load) else None)
        guard = tuple(pixtail if g == lanetail else g for g in st.guard)
        out.append(replace(st, dst=Load(st.dst.buf, (at,)), expr=expr, guard=tuple(g for g in guard if g is not None),
                           loops=[SLoop("p", iconst(0), simp(Bin("//", lanes, iconst(Cob)))), SLoop("c", iconst(0), iconst(Cob))]))
    return out
