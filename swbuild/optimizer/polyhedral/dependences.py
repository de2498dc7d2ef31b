"""Polyhedral model in isl objects, dependences, and the isl scheduler.

Dependences are memory-based (flow, anti, output) because the generated code neither
renames nor expands arrays: every reuse of a memory cell orders its accesses. The isl
scheduler then looks for a legal schedule with outer parallel (coincident) bands, the
PPCG recipe: validity = coincidence = all dependences, proximity = all dependences.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl

from ...support.errors import UnsupportedError

CTX = isl.DEFAULT_CONTEXT
# Outer band members are made coincident where possible: they become the CPE dimensions.
CTX.set_schedule_outer_coincidence(1)


@dataclass
class Ref:
    stmt: str
    k: int                     # index into Stmt.refs
    array: str
    write: bool
    read: bool
    access: isl.Map            # statement instance -> array element (restricted to the domain)


@dataclass
class Model:
    region: object
    domain: isl.UnionSet
    domains: dict              # stmt name -> isl.Set
    orig: isl.UnionMap         # 2d+1 source schedule
    refs: list                 # [Ref]
    reads: isl.UnionMap
    writes: isl.UnionMap
    stmts: dict = field(default_factory=dict)   # name -> frontend Stmt
    context: isl.Set = None    # parameter values assumed (accesses in bounds), or None
    expanded: dict = field(default_factory=dict)   # expanded scalar array -> [max index PwAff per dim]
    valid: isl.Set = None      # all parameter values with accesses in bounds (context may be smaller)


def build_model(region):
    domains, refs = {}, []
    dom = None
    sched = None
    depth = max(len(s.sched) for s in region.stmts)
    reads = writes = None
    for s in region.stmts:
        d = isl.Set(s.domain)
        domains[s.name] = d
        dom = isl.UnionSet(d) if dom is None else dom.union(isl.UnionSet(d))
        dims = [_sched_dim(x) for x in s.sched] + ["0"] * (depth - len(s.sched))
        its = ", ".join("i_" + i for i in s.iters)
        m = isl.Map(f"{region.isl_params} -> {{ {s.name}[{its}] -> [{', '.join(dims)}] }}").intersect_domain(d)
        sched = isl.UnionMap(m) if sched is None else sched.union(isl.UnionMap(m))
        for k, a in enumerate(s.refs):
            idx = ", ".join(_lin(f, s.iters) for f in a.index)
            acc = isl.Map(f"{region.isl_params} -> {{ {s.name}[{its}] -> a_{a.array}[{idx}] }}").intersect_domain(d)
            refs.append(Ref(s.name, k, a.array, a.write, a.read, acc))
            u = isl.UnionMap(acc)
            if a.read:
                reads = u if reads is None else reads.union(u)
            if a.write:
                writes = u if writes is None else writes.union(u)
    empty = isl.UnionMap.empty(dom.get_space())
    model = Model(region, dom, domains, sched, refs, reads or empty, writes or empty,
                  {s.name: s for s in region.stmts})
    _expanded_scalars(model)
    return _assume_in_bounds(model)


def _expanded_scalars(model):
    """Check the frontend's scalar expansion and size the expanded arrays.

    An expanded scalar (frontend scalars.py) keeps the program's meaning if every read of
    a cell follows a write of that cell, i.e. no value crosses iterations of the loops it
    was expanded over; a one-element array is instead filled from the scalar before the
    region and copied back after it. Extents: the largest iterator value, plus one."""
    r = model.region
    for name, pv in sorted(r.privates.items()):
        refs = [x for x in model.refs if x.array == name]
        where = model.stmts[refs[0].stmt].line
        if pv.iters:
            sink = _union([x.access for x in refs if x.read])
            src = _union([x.access for x in refs if x.write])
            if sink is not None:
                flow = isl.UnionAccessInfo.from_sink(sink).set_must_source(src) \
                    .set_schedule_map(model.orig).compute_flow()
                if not flow.get_may_no_source().is_empty():
                    raise UnsupportedError(
                        f"{r.path}:{where}: scalar '{pv.scalar}': a value it holds is read in a later "
                        f"iteration of the loop over '{pv.iters[-1]}' (or comes from before the region): "
                        "a recurrence through a scalar is outside the model (use a one-element array)")
        exts = []
        box = None
        for x in refs:
            box = x.access.range() if box is None else box.union(x.access.range())
        for q in range(len(pv.iters)):
            n = box.dim(isl.dim_type.set)
            dim = box.project_out(isl.dim_type.set, q + 1, n - q - 1).project_out(isl.dim_type.set, 0, q)
            if dim.is_empty():           # no statement instance uses the scalar
                exts.append(isl.PwAff.val_on_domain(isl.Set.universe(dim.params().get_space()), isl.Val(0)))
                continue
            lo = _val(dim.dim_min(0), min)
            if lo is None or lo < 0:
                raise UnsupportedError(f"{r.path}:{where}: scalar '{pv.scalar}': the loop over "
                                       f"'{pv.iters[q]}' may take negative values; the scalar cannot be "
                                       "expanded over it")
            hi = dim.dim_max(0)
            cst = _val(hi, max)
            # total (0 where no statement runs), for the host's allocation
            hi = hi.union_max(isl.PwAff.val_on_domain(isl.Set.universe(hi.domain().get_space()), isl.Val(0)))
            exts.append(hi)
            model.region.arrays[name].const_dims[q] = cst + 1 if hi.is_cst() and cst is not None else None
        model.expanded[name] = exts


def _union(maps):
    out = None
    for m in maps:
        out = isl.UnionMap(m) if out is None else out.union(isl.UnionMap(m))
    return out


def _assume_in_bounds(model):
    """Restrict the parameters to values for which every access stays inside its array's
    declared (constant) extents, as PPCG does; the knowledge bounds copy boxes and
    simplifies the generated bounds. An access outside its array for every parameter value
    is an error naming it; otherwise model.context is the condition the host code checks at
    run time before it launches the kernels (never a silently empty region)."""
    bad = None
    for ref in model.refs:
        dims = model.region.arrays[ref.array].const_dims
        rng = ref.access.range()
        for q, e in enumerate(dims):
            if e is None:
                continue
            n = rng.dim(isl.dim_type.set)
            sel = rng.project_out(isl.dim_type.set, q + 1, n - q - 1).project_out(isl.dim_type.set, 0, q)
            out = sel.subtract(isl.Set(f"{{ [x] : 0 <= x < {e} }}").align_params(sel.get_space())).params()
            if out.is_empty():
                continue
            if out.complement().is_empty():
                raise _out_of_bounds(model, ref, q, e, sel)
            bad = out if bad is None else bad.union(out.align_params(bad.get_space()))
    if bad is None or bad.is_empty():
        return model
    ctx = bad.complement().coalesce()
    if ctx.is_empty():
        r = model.region
        raise UnsupportedError(f"{r.path}:{r.start_line}: #pragma scop: every value of the parameters "
                               f"{', '.join(r.params)} makes some array access leave its array's extents")
    model.valid = ctx
    # Disjunctions such as `ni <= 0 or nk <= 200` (an access is harmless when its loop is
    # empty) make isl's AST generation split every loop nest: plan for the convex part
    # where every parameter is positive, and let the host run the original region for the
    # other valid values.
    pos = isl.Set(f"{model.region.isl_params} -> {{ : {' and '.join(f'p_{p} > 0' for p in model.region.params)} }}")
    simple = ctx.intersect(pos.align_params(ctx.get_space())).coalesce()
    if model.region.params and not simple.is_empty() and simple.n_basic_set() == 1 and ctx.n_basic_set() > 1:
        ctx = simple
    model.context = ctx
    model.domain = model.domain.intersect_params(ctx)
    model.domains = {k: v.intersect_params(ctx.align_params(v.get_space())) for k, v in model.domains.items()}
    model.orig = model.orig.intersect_params(ctx)
    model.reads = model.reads.intersect_params(ctx)
    model.writes = model.writes.intersect_params(ctx)
    for ref in model.refs:
        ref.access = ref.access.intersect_params(ctx.align_params(ref.access.get_space()))
    return model


def _out_of_bounds(model, ref, q, extent, sel):
    st = model.stmts[ref.stmt]
    acc = st.refs[ref.k]
    subs = "".join(f"[{_c_lin(f)}]" for f in acc.index)
    lo, hi = _val(sel.dim_min(0), min), _val(sel.dim_max(0), max)
    span = f"{lo}..{hi}" if lo is not None and hi is not None else "values"
    return UnsupportedError(f"{model.region.path}:{st.line}: array reference '{ref.array}{subs}': "
                            f"subscript {q} takes {span} but '{ref.array}' has extent {extent} in that dimension "
                            "(out of bounds; the region would compute garbage or crash)")


def _val(pa, which):
    try:
        v = pa.max_val() if which is max else pa.min_val()
        return v.to_python() if v.is_int() else None
    except isl.Error:
        return None


def _c_lin(f):
    parts = [(f"{k}" if v == 1 else f"{v}*{k}") for k, v in f.items() if k != "" and v]
    c = f.get("", 0)
    if c or not parts:
        parts.append(str(c))
    return " + ".join(parts).replace("+ -", "- ")


def _sched_dim(x):
    if isinstance(x, int):
        return str(x)
    _, name, sign = x
    return ("-" if sign < 0 else "") + "i_" + name


def _lin(f, iters):
    parts = [f"{v}*{'i_' if k in iters else 'p_'}{k}" for k, v in f.items() if k != ""]
    return " + ".join(parts + [str(f.get("", 0))])


@dataclass
class Deps:
    flow: isl.UnionMap
    anti: isl.UnionMap
    output: isl.UnionMap

    @property
    def all(self):
        return self.flow.union(self.anti).union(self.output)


def dependences(model, schedule=None):
    """Memory-based flow (write→read), anti (read→write) and output (write→write)."""
    sched = model.orig if schedule is None else schedule
    before = sched.lex_lt_union_map(sched)
    w, r = model.writes, model.reads
    return Deps(flow=w.apply_range(r.reverse()).intersect(before),
                anti=r.apply_range(w.reverse()).intersect(before),
                output=w.apply_range(w.reverse()).intersect(before))


def ref_flow(a, b, model):
    """True if some write through Ref a reaches (in source order) a read through Ref b."""
    before = model.orig.lex_lt_union_map(model.orig)
    m = isl.UnionMap(a.access).apply_range(isl.UnionMap(b.access).reverse())
    return not m.intersect(before).is_empty()


def schedule(model, deps):
    """isl's Pluto-style scheduler, run on each top-level loop nest of the region on its
    own, the nests then kept in source order.

    Fusing separate nests (2mm's two products) would put bands under a common outer loop
    whose inner bands need tiles of their own to fit the LDM; keeping the programmer's
    nests apart leaves one permutable band per kernel, tiled as a whole. Dependences
    between nests are satisfied by their order."""
    d = deps.all
    nests = {}
    for s in model.region.stmts:
        nests.setdefault(s.sched[0], []).append(s.name)
    out = None
    for pos in sorted(nests):
        dom = None
        for name in nests[pos]:
            u = isl.UnionSet(model.domains[name])
            dom = u if dom is None else dom.union(u)
        dn = d.intersect_domain(dom).intersect_range(dom)
        full = dom
        if model.context is not None:
            # the parameter constraints as the scheduler's context, not in every relation:
            # same schedules, doitgen's found 8 times faster
            dom, dn = dom.gist_params(model.context), dn.gist_params(model.context)
        sc = isl.ScheduleConstraints.on_domain(dom).set_validity(dn).set_coincidence(dn).set_proximity(dn)
        if model.context is not None:
            sc = sc.set_context(model.context)
        s = sc.compute_schedule().intersect_domain(full)
        out = s if out is None else out.sequence(s)
    return out
