"""Tile sizes for a kernel band, so each CPE's buffers fit its LDM budget.

Rectangular tiling of the whole (permutable) band: the mapped members' tile loops are
distributed cyclically over the CPEs, the other members' tile loops run inside. A member
may stay untiled (size None). Footprints are rectangular over-approximations computed by
interval arithmetic on the access subscripts (exact hulls come later, from isl, in
copies.py): a tiled member's iterator spans its tile, any other iterator its whole range.
Like Deeploy's tiler, a kernel that cannot fit reports how much memory it would need.

The search enumerates mapping candidates and a few tile sizes per member and keeps the
cheapest under a cost model fed by the target description (DMA bandwidth fit, clock).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import islpy as isl

from ...support.errors import LdmError, UnsupportedError

INF = math.inf
UNKNOWN_EXTENT = 512           # assumed loop extent for cost estimates of symbolic sizes
# Mapped tile sizes tried when the extent is symbolic: small enough that moderate sizes
# still spread over many CPEs, large enough for DMA blocks of a few hundred bytes.
SYMBOLIC_P_SIZES = (2, 4, 8, 16)
TRIANGLE_PENALTY = 64 / 36     # 8x8 mesh over a triangle: about 36 of 64 CPEs get tiles
ALIGN = 64                     # bytes each LDM buffer is rounded up to


@dataclass
class Group:
    """References to one array that share one LDM buffer."""
    array: str
    refs: list                 # dependences.Ref
    rw: bool                   # written in the kernel (copied out)
    esize: int
    level: int = 0             # copy after this many tile loops
    extents: list = field(default_factory=list)   # buffer elements per dimension
    index: int = 0

    @property
    def elems(self):
        return math.prod(self.extents)


@dataclass
class Tiling:
    members: tuple             # mapped band members (1 or 2)
    grid: tuple                # (64,) or (8, 8)
    sizes: list                # per band member: int tile size, or None (untiled)
    order: list                # tiled members, outermost tile loop first
    cost: float
    ldm_bytes: int


# ------------------------------------------------------------------ footprint model

class Footprints:
    """Interval model of every group's footprint as a function of the tile sizes."""

    def __init__(self, kernel, model, groups):
        self.k, self.model, self.groups = kernel, model, groups
        self.iter_box = {}          # stmt -> per iterator (lo, hi) ints or (None, extent|None)
        for s in kernel.stmts:
            self.iter_box[s] = _iter_ranges(kernel, s)
        self.extent = [_member_extent(kernel, m) for m in range(kernel.n_band)]
        self._shape = {}

    def direct(self, stmt, pos):
        """The member whose value is iterator `pos` plus a constant, if any: (m, const)."""
        for m, a in enumerate(self.k.affs[stmt]):
            if a is not None and a[0] == {pos: 1}:
                return m, a[1]
        return None

    def shape(self, g, tiled):
        """Per array dimension (coeffs over tiled members, constant) or None (unbounded),
        for the set `tiled` of tiled members at or above the group's level."""
        key = (g.index, tiled)
        if key not in self._shape:
            self._shape[key] = self._compute_shape(g, tiled)
        return self._shape[key]

    def _compute_shape(self, g, tiled):
        dims = None
        for ref in g.refs:
            st = self.model.stmts[ref.stmt]
            access = st.refs[ref.k]
            row = []
            for f in access.index:
                base, lo, hi, coef = {}, f.get("", 0), f.get("", 0), {}
                ok = True
                for name, c in f.items():
                    if name == "":
                        continue
                    if name not in st.iters:            # a parameter: fixed in the kernel
                        base[("p", name)] = base.get(("p", name), 0) + c
                        continue
                    pos = st.iters.index(name)
                    d = self.direct(ref.stmt, pos)
                    if d is not None and d[0] in tiled:
                        # iterator = member - c0, member within [origin, origin + size)
                        m, c0 = d
                        base[("m", m)] = base.get(("m", m), 0) + c
                        lo, hi = lo - c * c0, hi - c * c0
                        coef[m] = coef.get(m, 0) + abs(c)
                        continue
                    rlo, rext = self.iter_box[ref.stmt][pos]
                    if rext is None:
                        ok = False
                        break
                    if rlo is None:                    # known extent, symbolic position
                        base[("i", ref.stmt, pos)] = c
                        rlo = 0
                    a, b = c * rlo, c * (rlo + rext - 1)
                    lo, hi = lo + min(a, b), hi + max(a, b)
                if not ok:
                    row.append(None)
                    continue
                row.append((frozenset((k, v) for k, v in base.items() if v), lo, hi, coef))
            if dims is None:
                dims = row
                continue
            merged = []
            for a, b in zip(dims, row):
                if a is None or b is None or a[0] != b[0] or a[3] != b[3]:
                    merged.append(None)
                else:
                    merged.append((a[0], min(a[1], b[1]), max(a[2], b[2]), a[3]))
            dims = merged
        return [None if d is None else (d[3], d[2] - d[1] + 1) for d in dims]

    def depends(self, g):
        """Band members whose tiles change the group's footprint."""
        out = set()
        for ref in g.refs:
            st = self.model.stmts[ref.stmt]
            for f in st.refs[ref.k].index:
                for name in f:
                    if name in st.iters:
                        d = self.direct(ref.stmt, st.iters.index(name))
                        if d is not None:
                            out.add(d[0])
        return out

    def extents(self, g, tiled, sizes, cap):
        ext = []
        for q, d in enumerate(self.shape(g, tiled)):
            if d is None:
                return None
            coef, b = d
            e = b + sum(c * (min(sizes[m], self.extent[m] or INF) - 1) for m, c in coef.items())
            if cap[q] is not None:
                e = min(e, cap[q])
            ext.append(int(e))
        return ext


def _iter_ranges(kernel, stmt):
    sets = []
    kernel.domain.foreach_set(lambda s: sets.append(s) if s.get_tuple_name() == stmt else None)
    s = sets[0]
    out = []
    for p in range(s.dim(isl.dim_type.set)):
        lo, hi = s.dim_min(p), s.dim_max(p)
        lo_c = _cst(lo)
        # an upper bound is enough: symbolic sizes bounded by the arrays' constant extents
        # (the in-bounds assumption) need no tiling for the LDM
        ext = _bound(hi.sub(lo), max)
        out.append((lo_c, None if ext is None else ext + 1))
    return out


def _bound(pa, which):
    """The constant value of pa, else its max (min) over all parameter values, if finite."""
    c = _cst(pa)
    if c is not None:
        return c
    try:
        v = pa.max_val() if which is max else pa.min_val()
    except isl.Error:
        return None
    if v.is_infty() or v.is_neginfty() or v.is_nan() or not v.is_int():
        return None
    return v.to_python()


def _cst(pa):
    """The value of a PwAff that is one constant everywhere it is defined, else None."""
    pieces = pa.get_pieces()
    vals = {aff.get_constant_val().to_python() if aff.is_cst() else None for _, aff in pieces}
    return vals.pop() if len(vals) == 1 else None


def _member_extent(kernel, m):
    vals = []
    for mp in _maps(kernel.local):
        r = mp.range()
        lo, hi = _bound(r.dim_min(m), min), _bound(r.dim_max(m), max)
        if lo is None or hi is None:
            return None
        vals += [lo, hi]
    return max(vals) - min(vals) + 1 if vals else 1


def _maps(umap):
    out = []
    umap.foreach_map(out.append)
    return out


# ----------------------------------------------------------------------- the search

def _p_candidates(extent, share):
    """Tile sizes worth trying for a mapped member: an even split over the CPEs, then
    finer splits (better balance for triangular domains, smaller footprints)."""
    if extent is None:
        return list(SYMBOLIC_P_SIZES)
    return sorted({max(1, math.ceil(extent / (share * d))) for d in (1, 2, 4, 8)})


def _halve(size, extent):
    e = extent or UNKNOWN_EXTENT
    if size is None:
        p = 1 << max(0, (e - 1).bit_length() - 1)      # largest power of two below e
        return p if p < e else max(1, p // 2)
    return size // 2 if size > 1 else None


def choose(kernel, model, groups, tc, arrays, kname, unsafe=None):
    """The cheapest Tiling that fits tc.ldm_budget; raises LdmError when none does.

    For each mapping candidate and a few mapped tile sizes, the other members start
    untiled and are halved greedily (the halving that frees most LDM first) until the
    buffers fit; the cost model then compares the fitting configurations."""
    fp = Footprints(kernel, model, groups)
    budget = tc.ldm_budget
    hw = tc.hardware
    peak = float(hw.get("dma_fit_peak_bytes_per_s", 20.6e9))
    half = float(hw.get("dma_fit_half_bytes", 640))
    t_inst = 2.0 / float(hw.get("clock_hz", 1.45e9))     # ~2 cycles per statement instance
    caps = {g.index: _caps(arrays[g.array]) for g in groups}
    dep = {g.index: fp.depends(g) for g in groups}
    best, smallest = None, INF
    ext = [e or UNKNOWN_EXTENT for e in fp.extent]
    work = math.prod(ext)

    def fit(members, p_sizes, others):
        sizes = [None] * kernel.n_band
        for m, t in zip(members, p_sizes):
            sizes[m] = t
        while True:
            order = list(members) + [m for m in others if sizes[m] is not None]
            res = _evaluate(fp, groups, dep, caps, sizes, order)
            if res is not None and res[0] <= budget:
                return sizes, order, res
            options = []
            for m in others:
                s2 = list(sizes)
                s2[m] = _halve(sizes[m], fp.extent[m])
                if s2[m] is None and sizes[m] is not None:
                    continue
                o2 = list(members) + [q for q in others if s2[q] is not None]
                r2 = _evaluate(fp, groups, dep, caps, s2, o2)
                options.append((INF if r2 is None else r2[0], m, s2))
            if not options:
                nonlocal smallest
                smallest = min(smallest, INF if res is None else res[0])
                return None
            options.sort(key=lambda o: (o[0], o[1]))
            sizes = options[0][2]

    def consider(members, grid, p_sizes):
        nonlocal best
        got = fit(members, p_sizes, [m for m in range(kernel.n_band) if m not in members])
        if got is None:
            return
        sizes, order, (ldm, levels, exts) = got
        n_tiles = [math.ceil(ext[m] / sizes[m]) for m in order]
        np_ = len(members)
        per_cpe = math.prod(math.ceil(n_tiles[i] / grid[i]) for i in range(np_))
        dma = 0.0
        for g in groups:
            lv = levels[g.index]
            if lv >= np_:
                copies = math.prod(n_tiles[np_:lv])
            else:   # copied once for several of this CPE's tiles
                copies = 1.0 / math.prod(math.ceil(n_tiles[i] / grid[i]) for i in range(lv, np_))
            b = math.prod(exts[g.index]) * g.esize
            dma += copies * (1 + g.rw) * (b + half) / (peak / 64)
        pts = math.prod(sizes[m] for m in members)
        compute = pts * work / math.prod(ext[m] for m in members) * t_inst
        cost = per_cpe * (compute + dma)
        if len(members) == 2 and not _rectangular(kernel, members):
            cost *= TRIANGLE_PENALTY
        if best is None or cost < best[0]:
            best = (cost, members, grid, sizes, order, ldm, levels, exts)

    rejected, safe = [], []
    for members, grid in kernel.candidates:
        if unsafe is not None:
            bad = unsafe(fp, members)
            if bad:         # copy-out boxes could overwrite another CPE's results
                rejected.append(bad)
                continue
        safe.append((members, grid))
        p_opts = [_p_candidates(fp.extent[m], g) for m, g in zip(members, grid)]
        for p_sizes in itertools.product(*p_opts):
            consider(members, grid, p_sizes)
    # Large extents: even the finest split over the CPEs may not fit; smaller mapped tiles
    # (each CPE then takes several, cyclically) always fit when a one-element tile does.
    for members, grid in safe if best is None else ():
        sizes = [min(_p_candidates(fp.extent[m], g)) for m, g in zip(members, grid)]
        while best is None and max(sizes) > 1:
            sizes = [max(1, s // 2) for s in sizes]
            consider(members, grid, sizes)
    if best is None and len(rejected) == len(kernel.candidates):
        raise UnsupportedError(
            f"kernel {kname}: every CPE mapping would write back boxes of "
            f"{', '.join(sorted(set(sum(rejected, []))))} that may overlap other CPEs' writes "
            "(interleaved write sets)")
    if best is None:
        raise _ldm_error(kname, smallest, budget)
    cost, members, grid, sizes, order, ldm, levels, exts = best
    for g in groups:
        g.level, g.extents = levels[g.index], exts[g.index]
    return Tiling(members, grid, sizes, order, cost, ldm)


def _rectangular(kernel, members):
    """Whether the mapped members span a rectangle (else many 2-D tiles are empty)."""
    key = ("rect", members)
    if key not in kernel.memo:
        ok = True
        for mp in _maps(kernel.local):
            r = mp.range()
            n = r.dim(isl.dim_type.set)
            keep = sorted(members)
            p = r
            for q in reversed(range(n)):
                if q not in keep:
                    p = p.project_out(isl.dim_type.set, q, 1)
            box = None
            for q in range(p.dim(isl.dim_type.set)):
                f = p
                for z in reversed(range(p.dim(isl.dim_type.set))):
                    if z != q:
                        f = f.project_out(isl.dim_type.set, z, 1)
                box = f if box is None else box.flat_product(f)
            if not box.is_equal(p):
                ok = False
                break
        kernel.memo[key] = ok
    return kernel.memo[key]


def _ldm_error(kname, smallest, budget):
    if smallest == INF:
        e = LdmError(kname, 0, budget)
        e.args = (f"kernel {kname}: a footprint is unbounded for every tiling (symbolic loop "
                  f"extents outside the tiled band); budget is {budget} bytes per core",)
        return e
    return LdmError(kname, int(smallest), budget)


def _caps(array):
    return [d for d in array.const_dims]


def _evaluate(fp, groups, dep, caps, sizes, order):
    total, levels, exts = 0, {}, {}
    pos = {m: i for i, m in enumerate(order)}
    for g in groups:
        d = [pos[m] for m in dep[g.index] if m in pos]
        lv = max(d) + 1 if d else 0
        tiled = frozenset(order[:lv])
        e = fp.extents(g, tiled, sizes, caps[g.index])
        if e is None:
            return None
        levels[g.index], exts[g.index] = lv, e
        total += -(-math.prod(e) * g.esize // ALIGN) * ALIGN
    return total, levels, exts


# ----------------------------------------------------------------- tiled schedule

def theta(kernel, tiling):
    """Θ: stmt -> [1, t0, 1, t1, ..., 1, local dims].

    t_k is the k-th tile loop; for mapped members it counts this CPE's tiles (cyclic
    distribution: tile 8*t0 + swk_row on the 8x8 mesh, 64*t0 + swk_id in 1-D), written as
    plain inequalities so isl's AST generator sees no existential variables. The slots of
    value 1 leave room for copy statements after every tile loop (0 = copy-in, 2 = out)."""
    n = kernel.n_local
    xs = [f"x{i}" for i in range(n)]
    ts = [f"t{i}" for i in range(len(tiling.order))]
    out = []
    for t in ts:
        out += ["1", t]
    out += ["1"] + xs
    if tiling.grid == (64,):
        params, coord = ["swk_id"], ["swk_id"]
    else:
        params = coord = ["swk_row", "swk_col"]
    cons = []
    for k, (t, m) in enumerate(zip(ts, tiling.order)):
        size = tiling.sizes[m]
        if k < len(tiling.members):
            g = tiling.grid[k]
            tile = f"({g}*{t} + {coord[k]})"
        else:
            tile = t
        cons.append(f"{size}*{tile} <= x{m} <= {size}*{tile} + {size - 1}")
    tm = isl.Map(f"[{', '.join(params)}] -> {{ [{', '.join(xs)}] -> [{', '.join(out)}] : "
                 + " and ".join(cons) + " }")
    local = kernel.local
    tm = tm.align_params(local.get_space())
    local = local.align_params(tm.get_space())
    return local.apply_range(isl.UnionMap(tm)), params
