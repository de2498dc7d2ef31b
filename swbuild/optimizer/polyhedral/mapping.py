"""Which parts of the schedule run on the CPEs, and over which band members.

Walks the isl schedule tree from the root. The outermost band with a coincident (parallel)
member becomes one CPE kernel (one spawn per execution of that band); whatever lies above
it (sequential bands, sequences) stays on the MPE as host loops around the launch, and
statements under no parallel band run serially on the MPE. The candidate CPE mappings of a
kernel are 1-D over one coincident member (64 CPEs) and 2-D over two (8x8 mesh); any
member order is legal inside a permutable band, which is what makes the interchange for a
2-D mapping safe. tiling.py picks among the candidates with its cost model.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl

NT = isl.schedule_node_type


@dataclass
class Kernel:
    index: int
    stmts: list                # statement names, sorted
    prefix_len: int            # flattened schedule dims above the kernel (host loops)
    domain: isl.UnionSet       # instances, with params swk_o<k> = host prefix values
    local: isl.UnionMap        # stmt -> [band members..., flattened subtree]
    n_band: int
    coincident: list
    permutable: bool
    affs: dict                 # stmt -> per member: ({iterator pos: coeff}, const) or None
    launch: isl.Set            # K<index>[prefix] points executed by the host
    candidates: list = field(default_factory=list)   # [(members tuple, grid tuple)]
    n_local: int = 0
    memo: dict = field(default_factory=dict)          # per-kernel caches of the passes


@dataclass
class HostPlan:
    schedule: isl.UnionMap     # host statements + K<i> launch statements, flat
    kernels: list
    serial: list               # statement names left on the MPE
    depth: int


def _splits(sched):
    """Split bands whose first member is sequential and that are not permutable, so the
    sequential member becomes a host loop and the rest can still be a kernel."""
    def visit(node):
        if node.get_type() == NT.band:
            n = node.band_n_member()
            coinc = [node.band_member_get_coincident(i) for i in range(n)]
            if any(coinc) and not coinc[0] and not node.band_get_permutable() and n > 1:
                return node.band_split(1), True
            if any(coinc) and (coinc[0] or node.band_get_permutable()):
                return node, False           # a kernel: do not look inside
        for i in range(node.n_children()):
            child, changed = visit(node.child(i))
            if changed:
                return child, True
        return node, False
    changed = True
    while changed:
        node, changed = visit(sched.get_root())
        if changed:
            sched = node.get_schedule()
    return sched


def map_kernels(sched, force=None):
    """HostPlan for an isl schedule; force = '1d' | '2d' | None (automatic)."""
    sched = _splits(sched)
    root = sched.get_root()
    found = []

    def visit(node, depth):
        t = node.get_type()
        if t == NT.band:
            n = node.band_n_member()
            coinc = [node.band_member_get_coincident(i) for i in range(n)]
            if any(coinc) and (coinc[0] or node.band_get_permutable()):
                found.append((node, depth))
                return
            return visit(node.child(0), depth + n)
        if t in (NT.sequence, NT.set):
            for i in range(node.n_children()):
                visit(node.child(i), depth + 1)
            return
        for i in range(node.n_children()):
            visit(node.child(i), depth)

    visit(root, 0)
    flat = root.get_subtree_schedule_union_map()
    depth = _out_dim(flat)
    host = flat
    kernels = []
    for node, plen in found:
        if flat.intersect_domain(node.get_domain()).is_empty():
            continue            # statements that never run (an always-false condition)
        kernels.append(_kernel(len(kernels), node, plen, flat, depth, force))
        host = host.subtract_domain(node.get_domain()).union(_launch_sched(kernels[-1], depth))
    serial = sorted({m.get_tuple_name(isl.dim_type.in_) for m in _maps(host)} - {f"K{k.index}" for k in kernels})
    return HostPlan(host, kernels, serial, depth)


def _maps(umap):
    out = []
    umap.foreach_map(out.append)
    return out


def _out_dim(umap):
    ms = _maps(umap)
    return ms[0].dim(isl.dim_type.out) if ms else 0


def _kernel(idx, node, plen, flat, depth, force):
    dom = node.get_domain()
    g = flat.intersect_domain(dom)
    prefix = isl.UnionMap.empty(g.get_space())
    for m in _maps(g):
        prefix = prefix.union(isl.UnionMap(m.project_out(isl.dim_type.out, plen, depth - plen)))
    launch = None
    for m in _maps(prefix):
        r = m.range()
        launch = r if launch is None else launch.union(r)
    launch = launch.coalesce().set_tuple_name(f"K{idx}") if plen else \
        isl.Set.universe(isl.Space.set_alloc(dom.get_ctx(), 0, 0)).set_tuple_name(f"K{idx}") \
        .align_params(dom.params().get_space())
    # instances of one launch: the prefix equals the parameters swk_o<k>
    if plen:
        names = [f"swk_o{k}" for k in range(plen)]
        xs = [f"x{k}" for k in range(plen)]
        eq = isl.Set(f"[{', '.join(names)}] -> {{ [{', '.join(xs)}] : "
                     + " and ".join(f"{x} = {n}" for x, n in zip(xs, names)) + " }")
        kdom = None
        for m in _maps(prefix):
            d = m.intersect_range(eq.align_params(m.get_space())).domain()
            kdom = isl.UnionSet(d) if kdom is None else kdom.union(isl.UnionSet(d))
    else:
        kdom = dom
    local = node.get_subtree_schedule_union_map().intersect_domain(kdom)
    n = node.band_n_member()
    coinc = [node.band_member_get_coincident(i) for i in range(n)]
    affs = _member_affs(node, kdom)
    k = Kernel(idx, sorted(affs), plen, kdom, local, n, coinc,
               node.band_get_permutable(), affs, launch, n_local=_out_dim(local))
    ones = [m for m in range(n) if coinc[m]]
    if not node.band_get_permutable():
        ones = ones[:1] if coinc[0] else []
    cands = []
    if force != "2d":
        cands += [((m,), (64,)) for m in ones]
    if force != "1d" and node.band_get_permutable():
        cands += [((a, b), (8, 8)) for i, a in enumerate(ones) for b in ones[i + 1:]]
    k.candidates = cands or [((m,), (64,)) for m in ones]
    return k


def _launch_sched(k, depth):
    """K<i>[prefix] -> [prefix, 0, ...]: the launch sits where the band was."""
    sp = k.launch.get_space()
    m = isl.Map.identity(sp.map_from_set()).intersect_domain(k.launch)
    m = m.reset_tuple_id(isl.dim_type.out)
    m = m.insert_dims(isl.dim_type.out, k.prefix_len, depth - k.prefix_len)
    for p in range(k.prefix_len, depth):
        m = m.fix_val(isl.dim_type.out, p, isl.Val.zero(m.get_ctx()))
    return isl.UnionMap(m)


def _member_affs(node, kdom):
    """Per statement, each band member as ({iterator position: coeff}, const), or None
    when it is not a single affine piece (tiling then treats it conservatively)."""
    mupa = node.band_get_partial_schedule()
    out = {}
    sets = []
    kdom.foreach_set(sets.append)
    for s in sets:
        name = s.get_tuple_name()
        row = []
        for m in range(node.band_n_member()):
            pa = mupa.get_union_pw_aff(m).extract_pw_aff(
                s.get_space().from_domain().add_dims(isl.dim_type.out, 1))
            pieces = pa.get_pieces()
            if len(pieces) != 1:
                row.append(None)
                continue
            aff = pieces[0][1]
            coeffs = {}
            for p in range(aff.dim(isl.dim_type.in_)):
                c = aff.get_coefficient_val(isl.dim_type.in_, p).to_python()
                if c:
                    coeffs[p] = c
            den = aff.get_denominator_val().to_python()
            row.append((coeffs, aff.get_constant_val().to_python()) if den == 1 else None)
        out[name] = row
    return out
