"""SIMD and register blocking of a kernel's inner loops, and the cycle model of those loops.

A reduction `acc[...] += f1 * f2 * ...` whose factors are loads (and constants) is computed
with the target's vector type (floatv4 on SW26010, floatv8 on SW26010-Pro, `simd_lanes` of
the toolchain) along the innermost output axis `v`, where the accumulator tile is contiguous.
Each factor load is, along `v`:

* `vec`    — unit stride in its LDM box (v only in the box's last dim, coefficient 1):
             one (unaligned) vector load per vector;
* `bcast`  — independent of v: one scalar broadcast to all lanes;
* `gather` — any other stride (e.g. the input of a stride-2 convolution): lanes scalar loads.

Register blocking: R rows along a second output axis `r` (chosen so that some factor does
not depend on it, e.g. the output channel of a convolution, whose input vectors are then
reused R times) times U vectors along v stay in registers for the whole reduction of a
step; R and U minimise the modelled cycles per multiply-add within the vector registers.

Pads are materialised in LDM (see dma.py), so the vector loops need no guards. Tails: rows
past a multiple of R run the micro-kernel with R=1, vectors past a multiple of U with U=1;
the last n % lanes elements run one more vector micro-kernel on the last `lanes` elements
from zero and add only its last lanes to the accumulator (a masked store). The accumulator
is loaded with aligned vector loads when every tile's row is a multiple of the lanes.

`step_cycles` is the cost model of exactly those loops (the perf model and the tile search
use it); it accepts numpy arrays of extents so the predictor can evaluate every tile at once.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ....ir.loopnest import Bin, Const, Load, affine, iter_loads, substitute_acc
from ..cost.model import hwget, issue, op_cycles


@dataclass
class VectorPlan:
    v: str                 # vector axis (innermost output axis)
    lanes: int
    vtype: str             # floatv4 / floatv8
    r: str | None          # register-blocking axis
    R: int
    U: int
    factors: list          # Load / Const factors of the body product
    kinds: list            # per factor: "const" | "vec" | "bcast" | "gather"
    dep_r: list            # per factor: depends on r
    acc_aligned: bool = False   # every accumulator vector is aligned (aligned loads/stores)
    acc_strided: bool = False   # v is not the innermost axis: accumulator lanes gathered/scattered

    def __str__(self):
        k = ", ".join(f"{f.buf if isinstance(f, Load) else 'const'}:{kd}{'/r' if d else ''}"
                      for f, kd, d in zip(self.factors, self.kinds, self.dep_r))
        acc = ", strided acc" if self.acc_strided else ""
        return f"simd {self.vtype} along {self.v}, registers {self.R}x{self.U} along {self.r or '-'}x{self.v} ({k}{acc})"


def factors(body):
    """The factors of a product tree of loads and float constants, else None."""
    if isinstance(body, Load):
        return [body]
    if isinstance(body, Const) and body.dtype != "int":
        return [body]
    if isinstance(body, Bin) and body.op == "*":
        a, b = factors(body.a), factors(body.b)
        if a is None or b is None:
            return None
        return a + b
    return None


def _load_vars(ld):
    out = []
    for e in ld.index:
        aff = affine(e)
        if aff is None:
            return None
        out.append(aff)
    return out


_CLASSIFY = {}


def classify(kernel, v, lanes):
    """Per factor: (kind, affs) along axis v (memoised per kernel)."""
    key = (id(kernel), v)
    hit = _CLASSIFY.get(key)
    if hit is not None and hit[0] is kernel and hit[1] is kernel.body:
        return hit[2]
    r = _classify(kernel, v, lanes)
    _CLASSIFY[key] = (kernel, kernel.body, r)
    return r


def _classify(kernel, v, lanes):
    fs = factors(kernel.body)
    kinds, affs_all = [], []
    for f in fs:
        if isinstance(f, Const):
            kinds.append("const")
            affs_all.append([])
            continue
        affs = _load_vars(f)
        affs_all.append(affs)
        dims = [d for d, a in enumerate(affs) if a.get(v, 0)]
        if not dims:
            kinds.append("bcast")
        elif dims == [len(affs) - 1] and affs[-1][v] == 1:
            kinds.append("vec")
        else:
            kinds.append("gather")
    return fs, kinds, affs_all


def eligible(kernel, lanes):
    if kernel.combine != "sum" or not kernel.axes or lanes <= 1:
        return False
    fs = factors(kernel.body)
    if fs is None or not any(isinstance(f, Load) for f in fs):
        return False
    return all(_load_vars(f) is not None for f in fs if isinstance(f, Load))


def alt_axis(kernel):
    """The second vector axis tried: the longest output axis but the innermost (the output
    channels of a convolution), None when there is none. A 7x7 layer's innermost axis is
    shorter than SW26010-Pro's 8 lanes, its channels are hundreds long."""
    rest = kernel.axes[:-1]
    if not rest:
        return None
    return max(rest, key=lambda a: a.extent).name     # the first of equals


def plan(kernel, tiles, hw, enabled=True):
    """The best VectorPlan for these tiles, or None when scalar code is better or illegal:
    along the innermost axis (contiguous accumulator), or along alt_axis (accumulator lanes
    gathered and scattered once per step) where the innermost axis has no plan, or where the
    alternative models strictly fewer cycles and its axes v and r divide into whole tiles.
    The tile search costs a full tile: a plan blocking registers along a 14-row axis wins on
    tiles that do not divide 14 and loses on the partial ones (SW26010's 14x14 layers
    modelled 2.4x slower when that was allowed)."""
    lanes = int(hw.get("simd_lanes", 1))
    if not enabled or not eligible(kernel, lanes):
        return None
    best = _plan_along(kernel, tiles, hw, lanes, kernel.axes[-1].name)
    alt = alt_axis(kernel)
    if alt is not None:
        other = _plan_along(kernel, tiles, hw, lanes, alt)
        if other is not None and (best is None or (other[0] < best[0] and whole_tiles(kernel, tiles, other[1]))):
            best = other
    return best[1] if best is not None else None


def whole_tiles(kernel, tiles, p):
    """The tiles divide the plan's vector and blocking axes: every tile is the one costed."""
    ext = {a.name: a.extent for a in kernel.axes}
    return all(ext[x] % tiles[x] == 0 for x in (p.v, p.r) if x)


def _plan_along(kernel, tiles, hw, lanes, v):
    """(rounded cycles of a full tile, VectorPlan) along axis v, or None."""
    if tiles[v] < lanes:
        return None
    inner = v == kernel.axes[-1].name
    ext_v = next(a.extent for a in kernel.axes if a.name == v)
    fs, kinds, affs = classify(kernel, v, lanes)
    deps = [set(x for a in affs[i] for x in a if x) for i in range(len(fs))]
    rs = [None]
    for a in kernel.axes:
        if a.name == v or tiles[a.name] < 2:
            continue
        if any(k in ("vec", "gather", "bcast") and a.name not in deps[i] for i, k in enumerate(kinds)):
            rs.append(a.name)
    regs = int(hwget(hw, "vector_registers"))
    ext = {a.name: min(tiles[a.name], a.extent) for a in kernel.axes}
    red = math.prod(min(tiles[a.name], a.extent) for a in kernel.reduce_axes)
    aligned = inner and tiles[v] % lanes == 0 and ext_v % lanes == 0
    ranked = _ranked_shapes(kernel, hw, lanes, v, rs, fs, kinds, deps, regs)
    best, n = None, 0
    for _, r, R, U in ranked:
        if (r and R > tiles[r]) or U * lanes > tiles[v]:
            continue
        p = VectorPlan(v, lanes, f"floatv{lanes}", r, R, U, fs, kinds,
                       [r in deps[i] if r else False for i in range(len(fs))], aligned, not inner)
        per = step_cycles(kernel, p, hw, ext, red)      # one full tile, tails included
        key = (round(per, 3), R * U, rs.index(r))
        if best is None or key < best[0]:
            best = (key, p)
        n += 1
        if n >= 6:
            break
    if best is None:
        return None
    p = best[1]
    # only worth it when a vector multiply-add beats the scalar loop
    if _mk_inner(p, p.R, p.U, hw) / (p.R * p.U * lanes) >= _scalar_iter(kernel, hw):
        return None
    return best[0][0], p


_RANKED = {}


def _ranked_shapes(kernel, hw, lanes, v, rs, fs, kinds, deps, regs):
    """(cycles per lane-FMA of the full block, r, R, U), best first; per kernel, vector axis
    and blocking axes."""
    key = (id(kernel), id(hw), v, tuple(rs))
    hit = _RANKED.get(key)
    if hit is not None and hit[0] is kernel:
        return hit[1]
    out = []
    for r in rs:
        for R in ((1, 2, 3, 4, 5, 6, 7, 8) if r else (1,)):
            for U in (1, 2, 4):
                if R * U + U + R + 1 > regs - 2:
                    continue
                p = VectorPlan(v, lanes, f"floatv{lanes}", r, R, U, fs, kinds,
                               [r in deps[i] if r else False for i in range(len(fs))])
                out.append((round(_mk_inner(p, R, U, hw) / (R * U * lanes), 6), r, R, U))
    out.sort(key=lambda x: (x[0], x[2] * x[3], rs.index(x[1])))
    _RANKED[key] = (kernel, out)
    return out


_INNER = {}


def _mk_inner(p, R, U, hw):
    """Cycles of one reduction iteration of an R x U micro-kernel."""
    memo = _INNER
    key = (tuple(p.kinds), tuple(p.dep_r), len(p.factors), p.lanes, R, U, id(hw))
    if key in memo:
        return memo[key]
    nf = len(p.factors)
    fp = R * U * (max(nf - 1, 1))
    ua = float(hwget(hw, "simd_unaligned_load_cost"))
    mem = 0.0
    for kind, dr in zip(p.kinds, p.dep_r):
        rows = R if dr else 1
        if kind == "bcast":
            mem += rows
        elif kind == "vec":
            mem += rows * U * ua
        elif kind == "gather":
            mem += rows * U * p.lanes
    memo[key] = out = float(issue(hw, fp, mem, simd=True))
    return out


def _mk_overhead(p, R, U, hw, tail=False):
    # a strided accumulator vector is lanes scalar loads (stores): one per lane
    ua = float(p.lanes) if p.acc_strided else 1.0 if p.acc_aligned else float(hwget(hw, "simd_unaligned_load_cost"))
    if tail:    # zero start, one store to a scratch vector, scalar adds of the kept lanes
        return R * (1 + p.lanes * 2) + 4 + len(p.factors)
    return 2 * R * U * ua + 4 + len(p.factors)


_SCALAR = {}


def _scalar_iter(kernel, hw):
    key = (id(kernel), id(hw))
    hit = _SCALAR.get(key)
    if hit is not None and hit[0] is kernel and hit[1] is hw:
        return hit[2]
    nloads = len(list(iter_loads(kernel.body)))
    v = float(issue(hw, op_cycles(kernel.body, hw) + 1, nloads))
    _SCALAR[key] = (kernel, hw, v)
    return v


def scalar_step_cycles(kernel, hw, points, red_points):
    """The scalar reduction: per output point a register accumulator over the step's
    reduction (acc loaded and stored once per point)."""
    return points * (red_points * _scalar_iter(kernel, hw) + 2 + float(hwget(hw, "loop_overhead_cycles")))


def step_cycles(kernel, vp, hw, ext, red_points):
    """Cycles of one step's reduction. ext: {spatial axis: extent (int or array)}."""
    sp = [a.name for a in kernel.axes]
    points = 1
    for n in sp:
        points = points * ext[n]
    if vp is None:
        return scalar_step_cycles(kernel, hw, points, red_points)
    L, R, U = vp.lanes, vp.R, vp.U
    outer = 1
    for n in sp:
        if n not in (vp.v, vp.r):
            outer = outer * ext[n]
    nr = ext[vp.r] if vp.r else 1
    fb, lr = nr // R, nr % R
    nv = ext[vp.v]
    bu = nv // (U * L)
    lv = (nv % (U * L)) // L
    ls = nv % L
    sc = red_points * _scalar_iter(kernel, hw) + 2

    def mk(r, u, tail=False):
        return red_points * _mk_inner(vp, r, u, hw) + _mk_overhead(vp, r, u, hw, tail)

    if not isinstance(nv, np.ndarray) and not isinstance(red_points, np.ndarray):
        vt, st = ls > 0 and nv >= L, ls > 0 and nv < L

        def rows(r):    # terms with a zero count are left out: adding 0.0 changes no bit
            acc = bu * mk(r, U) if bu else 0.0
            if lv:
                acc = acc + lv * mk(r, 1)
            if vt:
                acc = acc + mk(r, 1, True)
            if st:
                acc = acc + ls * r * sc
            return acc
        full = fb * rows(R) if fb else 0.0
        return outer * (full + lr * rows(1) if lr else full)
    vec_tail = (ls > 0) & (nv >= L)
    scal_tail = (ls > 0) & (nv < L)
    rows_full = bu * mk(R, U) + lv * mk(R, 1) + np.where(vec_tail, mk(R, 1, True), 0) + np.where(scal_tail, ls * R * sc, 0)
    rows_part = bu * mk(1, U) + lv * mk(1, 1) + np.where(vec_tail, mk(1, 1, True), 0) + np.where(scal_tail, ls * sc, 0)
    out = outer * (fb * rows_full + lr * rows_part)
    return float(out) if np.ndim(out) == 0 else out


def epilogue_cycles(kernel, hw, points):
    """The epilogue pass over a tile (element-wise kernels: their whole computation)."""
    e = kernel.epilogue if kernel.combine else substitute_acc(kernel.epilogue, kernel.body)
    nloads = len(list(iter_loads(e))) + (1 if kernel.combine else 0)
    return points * issue(hw, op_cycles(e, hw), nloads + 1)


def init_cycles(kernel, hw, points):
    return points * 1.0 if kernel.combine else 0.0


def expand_cycles(hw, elems):
    """Materialising pads of a box in LDM: every element moved or filled once."""
    return elems * 2.0 / float(hwget(hw, "ldm_loads_per_cycle"))


def fetch_cycles(hw, b, cap, stage_cap=0):
    """LDM work per fetch of box b, when it lands: its pads materialised (expand_cycles) and
    its stage computed over `stage_cap` elements (buffer stitching: each element reads its
    window and combines it, point_cycles); None when there is neither.
    Scalars or numpy arrays, the same operations in the same order (batch.py's twin)."""
    ex = expand_cycles(hw, cap) if b.pad_dims else None
    if b.stage is not None:
        st = stage_cycles(hw, stage_cap, b.stage.stage.producer)
        ex = st if ex is None else ex + st
    return ex


def stage_cycles(hw, elems, producer):
    """Computing `elems` elements of a stage's intermediate in LDM: each costs what one output
    point of the producer kernel costs in its own scalar loops (init, reduction, epilogue)."""
    return elems * point_cycles(producer, hw)


def point_cycles(kernel, hw):
    """The scalar cycles of one output point of `kernel`, all of its reduction included."""
    c = epilogue_cycles(kernel, hw, 1)
    if kernel.combine:
        c = init_cycles(kernel, hw, 1) + scalar_step_cycles(kernel, hw, 1, kernel.reduce_points) + c
    return c


__all__ = ["VectorPlan", "plan", "alt_axis", "step_cycles", "epilogue_cycles", "expand_cycles", "fetch_cycles", "stage_cycles", "factors"]
