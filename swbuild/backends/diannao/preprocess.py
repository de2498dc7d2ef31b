"""Hardware-constraint pre-processing (the paper's Algorithm 1).

1. Alignment constraints → expanded allocations: on-chip tiles are allocated rounded up to
   the vector size (and convolution channels to 64 B / 64 filters, pooling channels to
   128 B), so an instruction may run over the padded length (`align_extents`).
2. Layout constraints → an equivalent instruction sequence: a tile whose source has a
   different layout, padding or channel gaps is staged as a fill of the tile followed by a
   (strided) copy of the valid part (`staged_copy`): the "zero fill + strided copy".
3. Branches inside complex operations → extra computation: a convolution never tests for
   its halo, it runs over a zero-filled (or -inf-filled, for max pooling) tile; and what
   loop partitioning could not (or was told not to) remove is resolved the same way
   (`resolve_guards`): a compute statement whose guarded lanes are don't-care runs over all
   lanes, a copy's bounds are clamped at run time, a halo fill covers the whole tile, and a
   guard on the tile itself stays a run-time `if`.
"""
from __future__ import annotations

from dataclasses import replace

from ...ir.loopnest import Bin, Const, Load, iconst
from . import isa
from .devir import For, ScalarLoad, SLoop, Stmt, When, const, free_vars, lin, loop_ranges, neg, scoped, simp, subst
from ...ir.sizes import round_up
from .partition import simplify_conds, simplify_stmt


def vector_elems(hw):
    return hw["vector_size_multiple_bytes"] // 4


def conv_ci_elems(hw):
    return hw["conv_ci_multiple_bytes"] // 4


def pool_c_elems(hw):
    return hw["pool_c_multiple_bytes"] // 4


def staged_copy(sid, dst_buf, dst_index, src, loops, halo=(), bound=(), common=(), fill=None, need_fill_bound=False):
    """The instruction sequence that stages a tile: [fill of the lanes no copy writes,]
    copy of the valid lanes. halo: conditions whose false region must read `fill` (padding);
    bound: conditions whose false region is outside the tensor but don't-care (unless
    need_fill_bound, e.g. channels a convolution reduces over); common: conditions of both
    statements (the tile exists, the rows are needed)."""
    out = []
    holes = list(halo) + (list(bound) if need_fill_bound else [])
    # outside a don't-care bound nothing needs the fill either (a fixed-point tile's padded
    # channels: any integer times their zero weights adds nothing), nor its whole-tile form
    keep = () if need_fill_bound else tuple(bound)
    if fill is not None and holes:
        out.append(Stmt("fill", Load(dst_buf, (dst_index,)), Const(float(fill)), list(loops),
                        guard=tuple(common) + keep, guard_any=tuple(neg(c) for c in holes), sid=sid + ".fill",
                        note="halo", whole_guard=keep))
    out.append(Stmt("copy", Load(dst_buf, (dst_index,)), src, list(loops),
                    guard=tuple(common) + tuple(halo) + tuple(bound), sid=sid))
    return out


# ---- guards left after partitioning -> extra computation ------------------------------

def _fold(loop, c):
    """Clamp a statement loop so that `c >= 0` holds on it (c affine, coefficient ±1)."""
    a = lin(c)
    k = a.get(loop.var, 0)
    rest = simp(subst(c, {loop.var: 0}))
    lo, hi = loop.lo, simp(Bin("+", loop.lo, loop.ext))
    if k == 1:      # var >= -rest
        lo = simp(Bin("max", lo, simp(Bin("-", iconst(0), rest))))
    else:           # var <= rest
        hi = simp(Bin("min", hi, simp(Bin("+", rest, iconst(1)))))
    ext = simp(Bin("max", iconst(0), simp(Bin("-", hi, lo))))
    return SLoop(loop.var, lo, ext)


def resolve_stmt(s, ranges):
    """The statement (or a When around it) with no guard left the mapper cannot take."""
    s = simplify_stmt(s, ranges)
    if s is None:
        return []
    names = set(s.vars())
    outer = tuple(c for c in s.guard if not (free_vars(c) & names))
    keep, loops = [], list(s.loops)
    for c in s.guard:
        if c in outer:
            continue
        vs = free_vars(c) & names
        a = lin(c)
        spatial = [i for i, lp in enumerate(loops) if lp.var in vs]
        if s.kind == "compute" and s.over:
            continue                                   # extra computation on don't-care lanes
        if len(vs) == 1 and len(spatial) == 1 and a is not None and abs(a[next(iter(vs))]) == 1:
            j = spatial[0]
            loops[j] = _fold(loops[j], c)
            continue
        keep.append(c)
    s = replace(s, loops=loops, guard=tuple(keep), guard_any=() if s.kind == "fill" else s.guard_any)
    return [When(outer, [s])] if outer else [s]


def resolve_guards(nodes, ranges=None):
    ranges = {} if ranges is None else ranges
    out = []
    for n in nodes:
        if isinstance(n, For):
            r = loop_ranges(n, ranges)
            body = resolve_guards(n.body, r)
            if body:
                out.append(replace(n, body=body))
        elif isinstance(n, When):
            g = simplify_conds(n.conds, ranges)
            if g is None:
                continue
            body = resolve_guards(n.body, ranges)
            if body:
                out += [When(g, body)] if g else scoped(body)
        elif isinstance(n, Stmt):
            out += resolve_stmt(n, ranges)
        elif isinstance(n, ScalarLoad):
            g = simplify_conds(n.guard, ranges)
            if g is None:
                continue
            out.append(replace(n, guard=g))    # printed as a conditional read: the name stays in scope
        else:
            out.append(n)
    return _merge_whens(out)


def _merge_whens(nodes):
    """Adjacent run-time guards with the same conditions become one `if`."""
    out = []
    for n in nodes:
        if isinstance(n, When) and n.conds and out and isinstance(out[-1], When) and out[-1].conds == n.conds:
            out[-1] = When(n.conds, out[-1].body + n.body)
        else:
            out.append(n)
    return out


# ---- alignment: run vector instructions over the padded length ------------------------

def align_extents(nodes, dk, hw):
    m = vector_elems(hw)
    for n in list(nodes):
        if isinstance(n, (For, When)):
            align_extents(n.body, dk, hw)
        elif isinstance(n, Stmt) and n.kind == "compute" and n.over and len(n.loops) == 1 and not n.red:
            lp = n.loops[0]
            e, lo = const(lp.ext), const(lp.lo)
            if e is None or lo != 0 or e % m == 0:
                continue
            want = round_up(e, m)
            caps = [dk.bufs[ld.buf].elems - (const(ld.index[0]) or 0) for ld in _nram_loads(n, dk)]
            if not all(want <= cap for cap in caps):
                continue
            # Partitioning may have split this statement's lanes: the piece right after it
            # ([e, ...), same statement) covers lanes the padding would cover too. Statements in
            # place (x = x + c) must not run twice on a lane: the padded piece absorbs that
            # tail when it lies within the padding and is unguarded, else nothing is padded.
            k = next((i for i, x in enumerate(nodes) if x is n), None)
            if k is None:       # a tail absorbed by the piece before it
                continue
            nxt = nodes[k + 1] if k + 1 < len(nodes) else None
            if isinstance(nxt, Stmt) and nxt.sid == n.sid and _lanes(nxt) and _lanes(nxt)[0] == e and _in_place(n):
                if nxt.guard or nxt.guard_any or not nxt.over or _lanes(nxt)[1] > want:
                    continue
                nodes.remove(nxt)
            n.loops[0] = SLoop(lp.var, lp.lo, iconst(want))
            n.note = (n.note + " " if n.note else "") + f"padded {e}->{want}"


def _in_place(s):
    """The statement reads the buffer it writes (x = x + c): running a lane twice changes it."""
    from .mapper import _accesses
    return any(ld.buf == s.dst.buf for ld in _accesses(s) if ld is not s.dst)


def _lanes(s):
    """[lo, hi) of a one-loop statement's lanes when constant, else None."""
    if len(s.loops) != 1:
        return None
    lo, e = const(s.loops[0].lo), const(s.loops[0].ext)
    return None if lo is None or e is None else (lo, lo + e)


def _nram_loads(s, dk):
    from .mapper import _accesses
    out = []
    for ld in _accesses(s):
        if dk.bufs[ld.buf].space == "NRAM":
            z = simp(subst(ld.index[0], {lp.var: 0 for lp in s.loops}))
            out.append(Load(ld.buf, (z,)))
    return out


# ---- fills: fragments after partitioning, or one fill of the whole tile ---------------

def choose_fills(nodes, dk, hw):
    """A halo fill split by partitioning into many small fills is replaced by one fill of
    the whole tile when that is cheaper by the cost table (the copy overwrites the rest)."""
    i = 0
    while i < len(nodes):
        n = nodes[i]
        if isinstance(n, (For, When)):
            choose_fills(n.body, dk, hw)
        if isinstance(n, Stmt) and n.kind == "fill" and n.note == "halo" and "whole" in dk.info.get("fills", {}).get(n.sid, {}):
            j = i
            group = []
            while j < len(nodes) and isinstance(nodes[j], Stmt) and nodes[j].sid == n.sid:
                group.append(nodes[j])
                j += 1
            whole = dk.info["fills"][n.sid]["whole"]
            frag = sum(_fill_cost(s, hw) for s in group)
            if isinstance(whole, Stmt) and not any(g.guard for g in group):
                w = _fill_cost(whole, hw)
                if w < frag:
                    nodes[i:j] = [replace(whole, note="halo whole")]
                    j = i + 1
            i = j
            continue
        i += 1


def _fill_cost(s, hw):
    if s.mapped is None:
        return 1 << 40
    calls = 1
    for lp in s.mapped.outer:
        calls *= const(lp.ext) or 1 << 10
    return calls * isa.cycles(s.mapped.name, {k: v for k, v in s.mapped.params.items() if isinstance(v, int)}, hw)

