"""Copy insertion: which references share an LDM buffer, and the DMA sets per tile.

Grouping (before tiling). All writes to an array go to one read-write group, with every
read that some write may feed (memory-based flow in source order): that read must see the
LDM copy. A read no write feeds can read main memory (it only ever needs values from before
the kernel or from other CPEs' finished work), so it gets a read-only group of its own;
read-only references with the same subscript shape share one buffer (a stencil's halo).

Placement (after tiling). A group is copied at the innermost tile loop that changes its
footprint (tiling.py picks the level); its exact footprint there comes from isl as
lo/hi per array dimension, functions of the enclosing tile iterators. The buffer is the
bounding box (rectangular over-approximation); since a read-write group copies its box in
before and out after, elements of the box the tile does not touch are written back
unchanged. All groups of one level form one copy statement: one transfer set, one reply
word, one wait.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl

from .dependences import ref_flow
from .tiling import Group


def group(kernel, model):
    refs = [r for r in model.refs if r.stmt in kernel.stmts]
    by_array = {}
    for r in refs:
        by_array.setdefault(r.array, []).append(r)
    groups = []
    for name in sorted(by_array):
        rs = by_array[name]
        writes = [r for r in rs if r.write]
        reads = [r for r in rs if not r.write]
        es = model.region.arrays[name].esize
        if writes:
            # a read shaped like a write shares its buffer (safe either way: the buffer is
            # copied in first); so does any read a write may feed, which must see the LDM copy
            wkeys = {_shape_key(w, kernel, model) for w in writes}
            fed = [r for r in reads if _shape_key(r, kernel, model) in wkeys
                   or any(ref_flow(w, r, model) for w in writes)]
            groups.append(Group(name, writes + fed, True, es))
            reads = [r for r in reads if r not in fed]
        shapes = {}
        for r in reads:
            shapes.setdefault(_shape_key(r, kernel, model), []).append(r)
        for key in sorted(shapes, key=str):
            groups.append(Group(name, shapes[key], False, es))
    for i, g in enumerate(groups):
        g.index = i
    return groups


def _shape_key(ref, kernel, model):
    """Subscripts without constants, in terms of band members where an iterator is one."""
    st = model.stmts[ref.stmt]
    affs = kernel.affs[ref.stmt]
    key = []
    for f in st.refs[ref.k].index:
        row = []
        for name, c in sorted(f.items()):
            if name == "" or name not in st.iters:
                continue
            pos = st.iters.index(name)
            m = next((m for m, a in enumerate(affs) if a is not None and a[0] == {pos: 1}), None)
            row.append((("m", m) if m is not None else ("i", ref.stmt, pos), c))
        key.append(tuple(row))
    return tuple(key)


@dataclass
class Copy:
    """One group's transfers at its level: lo/hi per dimension as PwAffs over params
    swk_t<k> (the enclosing tile iterators), and where they are defined."""
    group: Group
    lo: list
    hi: list
    domain: isl.Set            # tile points with a non-empty footprint (params only)
    copy_in: bool = True       # False: every element of the box is overwritten


@dataclass
class Level:
    depth: int
    copies: list = field(default_factory=list)
    domain: isl.Set = None     # CI<depth>[t0..] points


def place(kernel, theta, groups):
    """Exact footprints per group; copy-in/out statements per level (name CI<d>/CO<d>)."""
    levels = {}
    maps = {}
    theta.foreach_map(lambda m: maps.__setitem__(m.get_tuple_name(isl.dim_type.in_), m))
    total = next(iter(maps.values())).dim(isl.dim_type.out)
    for g in groups:
        d = g.level
        fp = None
        for r in g.refs:
            pm = _prefix(maps[r.stmt], d)
            f = pm.reverse().apply_range(r.access.align_params(pm.get_space()))
            fp = f if fp is None else fp.union(f)
        fp = fp.coalesce()
        lv = levels.setdefault(d, Level(d))
        dom = fp.domain().set_tuple_name(f"CI{d}")
        lv.domain = dom if lv.domain is None else lv.domain.union(dom).coalesce()
        pf = _to_params(fp, d)
        lo = [pf.dim_min(q).coalesce() for q in range(pf.dim(isl.dim_type.set))]
        hi = [pf.dim_max(q).coalesce() for q in range(pf.dim(isl.dim_type.set))]
        # a write-only buffer whose box is exactly what the tile writes need not be read
        copy_in = not (g.rw and all(r.write and not r.read for r in g.refs) and _is_box(fp))
        lv.copies.append(Copy(g, lo, hi, pf.params(), copy_in))
    sched = None
    for d, lv in sorted(levels.items()):
        for name, slot in ((f"CI{d}", 0), (f"CO{d}", 2)):
            if slot == 2 and not any(c.group.rw for c in lv.copies):
                continue
            dom = lv.domain.set_tuple_name(name)
            m = _copy_sched(dom, d, slot, total)
            sched = m if sched is None else sched.union(m)
    return [levels[d] for d in sorted(levels)], sched


def unsafe_write_backs(fp, model, groups, members):
    """Arrays whose read-write boxes might overlap another CPE's writes, for a mapping.

    A box copied out writes back the elements its tile did not change; if another CPE
    writes one of them in the same kernel, the stale copy could land last. Boxes are
    disjoint when, in some array dimension, every reference of the group is c * (a mapped
    member's iterator) plus terms whose whole range is narrower than |c|: then the
    member's tiles, which the CPEs partition, own disjoint index intervals."""
    bad = []
    for g in (g for g in groups if g.rw):
        nd = len(model.stmts[g.refs[0].stmt].refs[g.refs[0].k].index)
        if not any(_owns_dim(fp, model, g, q, members) for q in range(nd)):
            bad.append(g.array)
    return bad


def _owns_dim(fp, model, g, q, members):
    key, lo, hi = None, None, None
    for r in g.refs:
        st = model.stmts[r.stmt]
        f = st.refs[r.k].index[q]
        mine, off_lo, off_hi = None, f.get("", 0), f.get("", 0)
        for name, c in f.items():
            if name == "" or name not in st.iters:
                continue
            pos = st.iters.index(name)
            d = fp.direct(r.stmt, pos)
            if d is not None and d[0] in members and mine is None:
                mine = (d[0], c)
                off_lo -= c * d[1]                  # iterator = member - const
                off_hi -= c * d[1]
                continue
            rlo, rext = fp.iter_box[r.stmt][pos]
            if rext is None or rlo is None:
                return False                        # unbounded, or a shift we cannot compare
            a, b = c * rlo, c * (rlo + rext - 1)
            off_lo, off_hi = off_lo + min(a, b), off_hi + max(a, b)
        params = tuple(sorted((n, c) for n, c in f.items() if n and n not in st.iters))
        k = (mine, params)
        if mine is None or (key is not None and k != key):
            return False
        key = k
        lo = off_lo if lo is None else min(lo, off_lo)
        hi = off_hi if hi is None else max(hi, off_hi)
    return hi - lo < abs(key[0][1])


def _is_box(fp):
    """Whether, for every tile point, the footprint equals its bounding box."""
    n = fp.dim(isl.dim_type.out)
    box = None
    for q in range(n):
        f = fp.project_out(isl.dim_type.out, q + 1, n - q - 1).project_out(isl.dim_type.out, 0, q)
        le = isl.Map("{ [a] -> [b] : b >= a }").align_params(f.get_space())
        iv = f.apply_range(le).intersect(f.apply_range(le.reverse()))
        box = iv if box is None else box.flat_range_product(iv)
    box = box.set_tuple_id(isl.dim_type.out, fp.get_tuple_id(isl.dim_type.out))
    return box.is_equal(fp)


def _prefix(m, d):
    """Θ restricted to the first d tile iterators (dims 1, 3, ..., 2d-1)."""
    total = m.dim(isl.dim_type.out)
    m = m.project_out(isl.dim_type.out, 2 * d, total - 2 * d)
    for k in reversed(range(d)):
        m = m.project_out(isl.dim_type.out, 2 * k, 1)
    return m


def _to_params(fp, d):
    """Move the d tile iterators of a footprint map into parameters swk_t<k>."""
    fp = fp.reset_tuple_id(isl.dim_type.in_)
    for k in range(d):
        fp = fp.set_dim_name(isl.dim_type.in_, k, f"swk_t{k}")
    n = fp.dim(isl.dim_type.param)
    return fp.move_dims(isl.dim_type.param, n, isl.dim_type.in_, 0, d).range()


def _copy_sched(dom, d, slot, total):
    """CI<d>[t...] -> [1, t0, ..., 1, t_{d-1}, slot, 0, ...]."""
    ts = [f"t{k}" for k in range(d)]
    vals = []
    for t in ts:
        vals += ["1", t]
    vals += [str(slot)] + ["0"] * (total - 2 * d - 1)
    m = isl.Map(f"{{ {dom.get_tuple_name()}[{', '.join(ts)}] -> [{', '.join(vals)}] }}")
    return isl.UnionMap(m.align_params(dom.get_space()).intersect_domain(dom))
