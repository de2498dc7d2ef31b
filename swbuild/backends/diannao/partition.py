"""Loop partitioning (the paper's Algorithm 2, PartitionBranchLoop).

The task id is a loop like any other (the cluster and core ids are the two outermost
loops of every kernel). For each loop, outermost first, every guard below it that depends
on its variable gives two thresholds: where the guard becomes true for every value of the
variables it also depends on (their ranges are boxes: outer intervals, inner loop bounds),
and where it stops being false for all of them. Splitting the loop's range at those points
leaves intervals in which each guard is provably always true or always false; the guard is
removed (or the statement is, with the loops that become empty), an interval of one
iteration is substituted, and the recursion goes on inside with the narrowed ranges. The
tile-local loops of a statement are partitioned the same way, so a tail tile becomes a
statement with constant, smaller extents and a convolution halo becomes the fills of
exactly the padding rows and columns.

The checks are interval arithmetic over boxes, which is exact for the affine guards the
schedules produce; guards that cannot be decided stay and are resolved by extra
computation (preprocess.resolve_guards).
"""
from __future__ import annotations

from dataclasses import replace

from ...ir.sizes import ceil_div
from .devir import (For, ScalarLoad, SLoop, Stmt, When, bounds, const, free_vars, lin, loop_ranges, scoped, simp,
                    stmt_ranges, subst, subst_node)


def simplify_stmt(s, ranges):
    """Drop guards that always hold over the statement's domain; None if one never holds."""
    r = stmt_ranges(s, ranges)
    guard = []
    for c in s.guard:
        b = bounds(c, r)
        if b and b[0] >= 0:
            continue
        if b and b[1] < 0:
            return None
        guard.append(c)
    anyg, always = [], False
    for c in s.guard_any:
        b = bounds(c, r)
        if b and b[0] >= 0:
            always = True
            break
        if b and b[1] < 0:
            continue
        anyg.append(c)
    if s.guard_any and not always and not anyg:
        return None
    if any(const(lp.ext) is not None and const(lp.ext) <= 0 for lp in s.loops):
        return None
    return replace(s, guard=tuple(guard), guard_any=() if always else tuple(anyg))


def simplify_conds(conds, ranges):
    out = []
    for c in conds:
        b = bounds(c, ranges)
        if b and b[0] >= 0:
            continue
        if b and b[1] < 0:
            return None
        out.append(c)
    return tuple(out)


def thresholds(c, var, ranges):
    """Points where `c >= 0` changes between always-false, mixed and always-true as `var`
    grows, the other variables ranging over `ranges`."""
    a = lin(c)
    if a is None or not a.get(var):
        return []
    k = a[var]
    rest = simp(subst(c, {var: 0}))
    b = bounds(rest, ranges)
    if b is None:
        return []
    rlo, rhi = b
    if k > 0:
        return [ceil_div(-rlo, k), (-rhi - 1) // k + 1]
    k = -k
    return [rlo // k + 1, ceil_div(rhi + 1, k)]


def _conds_below(nodes, var, ranges):
    """(cond, ranges of the other variables) for every guard under `nodes` that uses var."""
    for n in nodes:
        if isinstance(n, For):
            r = loop_ranges(n, ranges)
            yield from _conds_below(n.body, var, r)
        elif isinstance(n, When):
            for c in n.conds:
                if var in free_vars(c):
                    yield c, ranges
            yield from _conds_below(n.body, var, ranges)
        elif isinstance(n, ScalarLoad):
            for c in n.guard:
                if var in free_vars(c):
                    yield c, ranges
        elif isinstance(n, Stmt):
            r = stmt_ranges(n, ranges)
            for c in n.guard + n.guard_any:
                if var in free_vars(c):
                    yield c, r


def _cuts(lo, hi, conds, var):
    pts = {lo, hi}
    for c, r in conds:
        r = {k: v for k, v in r.items() if k != var}
        for t in thresholds(c, var, r):
            if lo < t < hi:
                pts.add(t)
    pts = sorted(pts)
    return list(zip(pts, pts[1:]))


def partition_nodes(nodes, ranges):
    out = []
    for n in nodes:
        out += _node(n, ranges)
    return out


def _node(n, ranges):
    if isinstance(n, For):
        return _for(n, ranges)
    if isinstance(n, Stmt):
        s = simplify_stmt(n, ranges)
        return [] if s is None else _split_stmt(s, ranges, 0)
    if isinstance(n, ScalarLoad):
        g = simplify_conds(n.guard, ranges)
        return [] if g is None else [replace(n, guard=g)]
    if isinstance(n, When):
        g = simplify_conds(n.conds, ranges)
        if g is None:
            return []
        body = partition_nodes(n.body, ranges)
        return ([When(g, body)] if g else scoped(body)) if body else []
    return [n]


def _for(f, ranges):
    lo, hi = const(f.lo), const(f.hi)
    if lo is None or hi is None:
        r = dict(ranges)
        bl, bh = bounds(f.lo, r), bounds(f.hi, r)
        if bl and bh:
            r[f.var] = (bl[0], bh[1] - 1)
        body = partition_nodes(f.body, r)
        return [For(f.var, f.lo, f.hi, body, f.task)] if body else []
    out = []
    for a, b in _cuts(lo, hi, list(_conds_below(f.body, f.var, ranges)), f.var):
        r = dict(ranges)
        r[f.var] = (a, b - 1)
        if b - a == 1:
            body = partition_nodes([subst_node(x, {f.var: a}) for x in f.body], r)
            if not body:
                continue
            out += [For(f.var, a, b, body, f.task)] if f.task else scoped(body)
        else:
            body = partition_nodes(f.body, r)
            if body:
                out.append(For(f.var, a, b, body, f.task))
    return out


def _split_stmt(s, ranges, k):
    """Partition the statement's own loops, k-th onwards."""
    if k >= len(s.loops):
        return [s]
    lp = s.loops[k]
    lo, ext = const(lp.lo), const(lp.ext)
    if lo is None or ext is None or not (s.guard or s.guard_any):
        return _split_stmt(s, ranges, k + 1)
    inner = stmt_ranges(s, ranges)
    conds = [(c, inner) for c in s.guard + s.guard_any if lp.var in free_vars(c)]
    out = []
    for a, b in _cuts(lo, lo + ext, conds, lp.var):
        loops = list(s.loops)
        loops[k] = SLoop(lp.var, simp(a), simp(b - a))
        s2 = simplify_stmt(replace(s, loops=loops), ranges)
        if s2 is not None:
            out += _split_stmt(s2, ranges, k + 1)
    return out


def partition_kernel(dk):
    """Algorithm 2 on a device kernel (in place); returns the number of loops split."""
    before = _count(dk.body)
    dk.body = partition_nodes(dk.body, {})
    dk.info["partitioned"] = True
    dk.info["statements_before_partition"], dk.info["statements_after_partition"] = before, _count(dk.body)
    return dk


def _count(nodes):
    n = 0
    for x in nodes:
        if isinstance(x, (For, When)):
            n += _count(x.body)
        elif isinstance(x, Stmt):
            n += 1
    return n

