"""The tile search's cost model over a table of tilings at once (numpy), for the enumeration
of ldm.py.

A table is one int64 column per axis, one row per tiling. Every function here is the exact
twin of a scalar method of `ldm.Search` (`box_static`, `ldm`, `_spatial`, `_evaluate`; the
twin of `simd.plan` is batch_plans.py): the same integer arithmetic, and the same
floating-point operations in the same order on the same operands (DMA bandwidths come from
the scalar model, once per distinct chunk size; `round` is Python's), so a tiling gets the
same bits whichever path evaluated it and the search's choices cannot depend on it
(tests/optimizer/test_batch_search.py).
Only tilings with at most one tiled reduce axis are supported (the enumeration's): the
order of the reduce loops is then trivial.
"""
from __future__ import annotations

import math

import numpy as np

from ..cost import model
from . import simd
from .batch_plans import plan_table
from .columns import cdiv as _cdiv, prod as _prod, sorted_distinct as _sorted_distinct
from .kernel_schedule import LDM_ALIGN


SMALL = 12          # evaluate_many costs fewer new tilings one at a time


def _align(n):
    return _cdiv(n, LDM_ALIGN) * LDM_ALIGN


def _aff_range(aff, T, ext, first):
    """dma._aff_range over the table: (lo, hi) of the first (or last) tile of each axis."""
    from .dma import aff_lohi
    ranges = {}
    for v in aff:
        if v is None:
            continue
        t, e = T[v], ext[v]
        s, n = np.zeros_like(t), np.minimum(t, e)
        if not first:
            last = (e - 1) // t * t
            short = e - last >= n
            s = np.where(short, last, s)
            n = np.where(short, e - last, n)
        ranges[v] = (s, n)
    return aff_lohi(aff, ranges)


def merge_dims(b, T, ext, n):
    """dma.BoxPlan.merge_dim per row: trailing dims every footprint covers whole."""
    nd = len(b.shape)
    m = np.full(n, nd, np.int64)
    alive = np.ones(n, bool)
    for d in range(nd - 1, -1, -1):
        if not b.spans_tensor(d):
            break
        for v in b.dim_vars(d):
            alive &= T[v] >= ext[v]
        m -= alive
    return m


def spans(b, T, ext, n):
    """dma.BoxPlan.span per row."""
    span = []
    for d, affs in enumerate(b.index):
        best = np.zeros(n, np.int64)
        for first in (True, False):
            lo = hi = None
            for aff in affs:
                a, c = _aff_range(aff, T, ext, first)
                lo = a if lo is None else np.minimum(lo, a)
                hi = c if hi is None else np.maximum(hi, c)
            best = np.maximum(best, hi - lo + 1)
        if d not in b.pad_dims:
            best = np.minimum(best, b.shape[d])
        span.append(best * np.ones(n, np.int64))
    return span


def stage_cap(b, T, ext, n):
    """The elements of the intermediate box b's stage computes (buffer stitching), per row."""
    return _prod(spans(b.stage.box, T, ext, n), n)


def box_static(s, b, T, n):
    """Search.box_static per row: (LDM elements per half, DMA calls, bytes, chunk bytes)."""
    ext = s.ext
    shape = b.shape
    m = merge_dims(b, T, ext, n)
    span = spans(b, T, ext, n)
    cap = _prod(span, n)
    e = [np.minimum(sp, sz) for sp, sz in zip(span, shape)]
    calls, by, chunk = np.ones(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    for mv in range(len(shape) + 1):
        at = m == mv
        if not at.any():
            continue
        if mv == 0:
            tot = math.prod(shape) * s.EB[id(b)]
            by[at], chunk[at] = tot, tot
            continue
        c = mv - 1
        run = e[c][at] * (math.prod(shape[mv:]) * s.EB[id(b)])
        if c == 0:
            by[at], chunk[at] = run, run
            continue
        k = _prod([x[at] for x in e[:c - 1]], int(at.sum()))
        calls[at] = k
        by[at] = k * e[c - 1][at] * run
        contiguous = (e[c][at] == shape[c]) | (e[c - 1][at] == 1)
        chunk[at] = np.where(contiguous, e[c - 1][at] * run, run)
    if s.can_block[id(b)]:
        blk = (m > 1)
        if blk.any():
            nb = _prod([T[next(iter(b.dim_vars(d)))] if b.dim_vars(d) else np.ones(n, np.int64)
                        for d in range(len(shape))], n)
            cap = np.where(blk, nb, cap)
            calls = np.where(blk, 1, calls)
            by = np.where(blk, nb * s.EB[id(b)], by)
            chunk = np.where(blk, nb * s.EB[id(b)], chunk)
    return cap, calls, by, chunk


FEW = 48            # statics of fewer rows come from the scalar memo (Search.box_static)


def statics(s, T, n):
    """box_static of every box but the output's, by id: over the table, or for a few rows
    (the expansion's neighbours, which share most boxes' tiles) from Search.box_static's
    memo; both give the same integers."""
    if n >= FEW or n == 0:
        return {id(b): box_static(s, b, T, n) for b in s.boxes if b.context != "out"}
    cols = {a: c.tolist() for a, c in T.items()}
    rows = [{a: cols[a][i] for a in cols} for i in range(n)]
    out = {}
    for b in s.boxes:
        if b.context != "out":
            got = [s.box_static(b, t) for t in rows]
            out[id(b)] = tuple(np.array(x, np.int64) for x in zip(*got))
    return out


def ldm(s, T, n, st, db):
    """Search.ldm per row."""
    tot = _align(_prod([T[a.name] for a in s.k.axes], n) * s.E)
    for b in s.boxes:
        if b.context == "out":
            continue
        cap = st[id(b)][0]
        two = np.zeros(n, bool)
        if db:
            for v in s._bvars[id(b)]:
                two |= T[v] < s.ext[v]
        tot = tot + _align(cap * s.EB[id(b)]) * np.where(two, 2, 1)
        if b.stage is not None:
            tot = tot + _align(stage_cap(b, T, s.ext, n) * s.EB[id(b)])
    return tot


_BW = {}


def dma_seconds(hw, nbytes, chunk):
    """model.dma_seconds_per_cpe per row, bandwidths from the scalar model (exact)."""
    c = np.where(chunk > 0, chunk, 1)
    uniq, inv = np.unique(c, return_inverse=True)
    memo = _BW.get(id(hw))
    if memo is None or memo[0] is not hw:
        memo = _BW[id(hw)] = (hw, {})
    bws = memo[1]
    bw = []
    for x in uniq.tolist():
        v = bws.get(x)
        if v is None:
            v = bws[x] = model._bw_scalar(hw, x)
        bw.append(v)
    per = np.array(bw)[inv.reshape(-1)] / float(hw["cpes"])
    return np.where(nbytes > 0, nbytes.astype(float) / per, 0.0)


# -- the spatial part of a tile (Search._spatial; vector plans: batch_plans.py) --------------

def spatial(s, T, n):
    """Search._spatial per row: a list of (vp, base cycles, full step, zero step, out bytes,
    put seconds), the vector plan from each row's own tiles."""
    f = spatial_table(s, T, n)
    vps = [f["plans"][p] if p >= 0 else None for p in f["pid"].tolist()]
    return [(vps[i], b, fu, z, o, p) for i, (b, fu, z, o, p) in
            enumerate(zip(*(f[c].tolist() for c in ("base", "full", "zero", "oby", "put"))))]


def spatial_table(s, T, n):
    """Search._spatial per row as columns: pid and plans (plan_table), base, full, zero, oby
    and put."""
    k, hw = s.k, s.hw
    pid, specs = plan_table(s, T, n)
    pts = _prod([T[a.name] for a in k.axes], n)
    per_point = simd.epilogue_cycles(k, hw, 1)      # points * per_point, as the scalar model
    base = (pts * 1.0 if k.combine else np.zeros(n)) + pts * per_point
    oby, ochunk = out_static(s, T, n)
    put = dma_seconds(hw, oby, ochunk)
    full = np.zeros(n)
    zero = np.zeros(n)
    if k.combine is not None:
        for p in _sorted_distinct(pid):
            idx = np.nonzero(pid == p)[0]
            pext = {a.name: T[a.name][idx] for a in k.axes}
            full[idx] = _step(k, specs[p] if p >= 0 else None, hw, pext, s.red_points, len(idx))
            zero[idx] = _step(k, specs[p] if p >= 0 else None, hw, pext, 0, len(idx))
    return {"pid": pid, "plans": specs, "base": base, "full": full, "zero": zero, "oby": oby, "put": put}


def _step(k, p, hw, pext, red, n):
    if p is None:
        pts = _prod(pext.values(), n)
        return simd.scalar_step_cycles(k, hw, pts, red) * np.ones(n)
    return np.atleast_1d(simd.step_cycles(k, p, hw, pext, red)) * np.ones(n)


def out_static(s, T, n):
    """Search._out_static per row: (bytes, chunk bytes) of the output tile's put."""
    ob = s.boxes[-1]
    shape = ob.shape
    m = merge_dims(ob, T, s.ext, n)
    ext = [T[a.name] for a in s.k.axes]
    by, chunk = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for mv in range(len(shape) + 1):
        at = m == mv
        if not at.any():
            continue
        if mv == 0:
            by[at] = chunk[at] = math.prod(shape) * s.E
            continue
        c = mv - 1
        run = ext[c][at] * (math.prod(shape[mv:]) * s.E)
        chunk[at] = run
        if c == 0:
            by[at] = run
        else:
            by[at] = _prod([x[at] for x in ext[:c - 1]], int(at.sum())) * ext[c - 1][at] * run
    return by, chunk


# -- the modelled time of a tile (Search._evaluate) -----------------------------------------

def evaluate(s, T, n, st, sp):
    """Search._evaluate per row: a list of result tuples (seconds, double-buffered, vector
    plan, traffic, lane) or None where the tiles do not fit. `st`: statics(), `sp`: the
    spatial tuple of each row (as Search._vp holds it)."""
    cols = list(zip(*sp))
    fix = {"base": np.array(cols[1], float), "full": np.array(cols[2], float), "zero": np.array(cols[3], float),
           "oby": np.array(cols[4], float), "put": np.array(cols[5], float)}
    e = evaluate_table(s, T, n, st, fix)
    return [result(e, i, sp[i][0]) for i in range(n)]


def result(e, i, vp):
    """Row i of evaluate_table as Search.evaluate's tuple, with its vector plan `vp`."""
    if not e["fits"][i]:
        return None
    tr = float(e["traffic"][i])
    return (float(e["secs"][i]), bool(e["db"][i]), vp, tr if e["as_float"][i] else int(tr), e["lanes"][int(e["lane"][i])])


def evaluate_table(s, T, n, st, fix, fits=None, objective_only=False):
    """Search._evaluate per row as columns: secs, db, traffic, lane (an index into lanes),
    fits, objective; as_float (traffic is a float: a lane shares). `fix`: spatial_table's
    base, full, zero, oby and put columns; `st`: statics (with each box's DMA seconds as a
    fifth column, when the caller has them); `fits`: whether each row fits, when known.
    `objective_only`: the objective column alone (the table's lower bounds), without the
    traffic when its price is 0."""
    k, hw = s.k, s.hw
    fits = ldm(s, T, n, st, False) <= s.budget if fits is None else fits
    fits_db = (ldm(s, T, n, st, True) <= s.budget) if s.db_ok else None
    red = {a.name: (T[a.name] < a.extent, _cdiv(a.extent, T[a.name])) for a in k.reduce_axes}
    if sum((t.astype(np.int64) for t, _ in red.values()), np.zeros(n, np.int64)).max(initial=0) > 1:
        raise ValueError("batch.evaluate: more than one tiled reduce axis")
    fix = {c: np.asarray(fix[c], float) for c in ("base", "full", "zero", "oby", "put")}
    split = {a.name: T[a.name] < a.extent for a in k.axes}
    counts = {a.name: _cdiv(a.extent, T[a.name]) for a in k.axes}      # tiles along each axis
    fix["ntiles"] = _prod(list(counts.values()), n)
    fix["waves"] = _cdiv(fix["ntiles"], s.cores)
    nsteps = np.ones(n, np.int64)
    for tiled, cnt in red.values():
        nsteps = np.where(tiled, cnt, nsteps)
    fix["nsteps"] = nsteps
    boxes = []          # per box: (vars, secs, bytes, place (0 per step, 1 per tile, 2 once), count, expand)
    for b in s.boxes:
        if b.context == "out":
            continue
        cap, calls, by, chunk = st[id(b)][:4]
        secs = st[id(b)][4] if len(st[id(b)]) > 4 else dma_seconds(hw, by, chunk)     # (a 5th column: given)
        vs = s._vset[id(b)]
        in1 = np.zeros(n, bool)
        cnt = np.ones(n, np.int64)
        if b.context == "body" and k.combine is not None:
            for name, (tiled, c) in red.items():
                if name in vs:
                    in1 |= tiled
                    cnt = np.where(tiled, c, cnt)
        in2 = np.zeros(n, bool)
        for name in vs:
            if name in split:
                in2 |= split[name]
        in2 &= ~in1
        ex = simd.fetch_cycles(hw, b, cap, stage_cap(b, T, s.ext, n) if b.stage is not None else 0)
        boxes.append((vs, secs, by.astype(float), in1, in2, ~(in1 | in2), cnt, ex))
    lanes = [None]          # as Search.lanes, before the tile count's divisibility (below)
    lanes += [(a.name, w) for a in k.axes
              if any(b.context != "out" and a.name not in s._vset[id(b)] for b in s.boxes) for w in s.widths]
    if s.cols_ok:
        lanes += [(a.name, 8, 8) for a in k.axes]
    best, lane_ix, terms = None, np.zeros(n, np.int64), {}
    traffic = not objective_only or bool(s.traffic_weight)
    for li, lane in enumerate(lanes):       # the first of equal objectives wins, as in _evaluate
        if best is None:
            best = _lane(s, n, fix, boxes, lane, fits_db, terms, traffic)
            continue
        forms = None
        if len(lane) == 3:
            divides, forms = mesh_forms(s, counts, lane[0], n)
        else:
            divides = counts[lane[0]] % lane[1] == 0
        if not divides.any():               # a lane of no row here
            continue
        r = _lane(s, n, fix, boxes, lane, fits_db, terms, traffic, forms)
        better = divides & (r[4] < best[4])
        if objective_only:
            best = best[:4] + (np.where(better, r[4], best[4]),)
            continue
        best = tuple(np.where(better, x, y) for x, y in zip(r, best))
        lane_ix = np.where(better, li, lane_ix)
    if objective_only:
        return {"obj": best[4]}
    secs, db, traffic, as_float, obj = best
    return {"secs": secs, "db": db, "traffic": traffic, "as_float": as_float, "lane": lane_ix, "lanes": lanes,
            "fits": fits, "obj": obj}


def mesh_forms(s, counts, axis, n):
    """Search.mesh_forms per row: (rows where the 2-D lane exists, per input box (in order) the
    CPEs sharing it per row: 8 along a row or a column, 64, or 1)."""
    names = [a.name for a in s.k.axes]
    gc = [counts[x] // 8 if x == axis else counts[x] for x in names]
    ok = (counts[axis] % 8 == 0) & (_prod(gc, n) % 8 == 0)
    same, stride = {}, np.ones(n, np.int64)
    for x, c in reversed(list(zip(names, gc))):
        same[x] = (c == 1) | (stride % 8 == 0)
        stride = stride * c
    widths, col_any = [], np.zeros(n, bool)
    for b in s.boxes:
        if b.context == "out":
            continue
        v = s._vset[id(b)]
        col = np.ones(n, bool)
        for x in v:
            if x in same:
                col &= same[x]
        widths.append(np.where(col, 64, 8) if axis not in v else np.where(col, 8, 1))
        col_any |= col
    return ok & col_any, widths


def _terms(memo, i, width, waves, secs, byf, in1, in2, in3, cnt, ex, traffic=True, rma=None):
    """Box i's terms in _lane's sums, fetched by each CPE (width 1) or broadcast to `width`;
    its bytes only with `traffic`; `rma`: model.rma_share (a broadcast's RMA cycles)."""
    t = memo.get((i, width))
    if t is not None:
        return t
    t = {}
    if width > 1:
        if rma:
            rc = model.rma_cycles(rma, byf)
            t["rma"] = np.where(in1, cnt * rc, np.where(in2, rc, 0.0))
            t["rma_once"] = np.where(in3, rc, 0.0)
        byf = byf / width
        t["dma"] = np.where(in1, _cdiv(waves * cnt, width) * secs, np.where(in2, _cdiv(waves, width) * secs, secs))
        t["syncs"] = np.where(in1, cnt, np.where(in2, 1, 0))
        t["syncs_once"] = np.where(in3, 1, 0)
    else:
        t["dma"] = np.where(in1, cnt * secs, np.where(in2, secs, 0.0))
        t["once"] = np.where(in3, secs, 0.0)
    if traffic:
        t["bytes"] = np.where(in1, cnt * byf, np.where(in2, byf, 0.0))
        t["bytes_once"] = np.where(in3, byf, 0.0)
    if ex is not None:
        t["expand"] = np.where(in1, cnt * ex, np.where(in2, ex, 0.0))
    memo[(i, width)] = t
    return t


def _lane(s, n, fix, boxes, lane, fits_db, terms=None, traffic=True, forms=None):
    """Search._evaluate_lane per row: (seconds, double-buffered, traffic, traffic is a float,
    objective). Sums in the scalar model's order (box by box). `terms`: a dict kept across the
    lanes of one table, so each box's terms are computed once per way it is fetched. Without
    `traffic` (its price is 0) the traffic is None and the objective the seconds (serial + 0.0
    x traffic is serial, bit for bit: both are finite and not negative). `forms`: a 2-D lane's
    mesh_forms widths (each box's terms chosen per row)."""
    k, hw = s.k, s.hw
    axis, width = (lane or (None, 1))[:2]
    terms = {} if terms is None else terms
    zero = np.zeros(n)
    dma_tile, dma_once, first = zero, zero, zero
    bytes_tile, bytes_once, expand, syncs_tile, syncs_once = zero, zero, zero, zero, zero
    as_float = False
    waves = fix["waves"]
    dma_shared = zero
    rma_tile, rma_once = zero, zero
    for i, (vs, secs, byf, in1, in2, in3, cnt, ex) in enumerate(boxes):
        first = first + secs
        if forms is not None:   # 2-D: each row takes the terms of its own width (the others add 0.0)
            as_float = True
            for w in _sorted_distinct(forms[i]):
                t = _terms(terms, i, w, waves, secs, byf, in1, in2, in3, cnt, ex, traffic, s.rma)
                m = forms[i] == w
                if w > 1:
                    dma_shared = dma_shared + np.where(m, t["dma"], 0.0)
                    syncs_tile = syncs_tile + np.where(m, t["syncs"], 0)
                    syncs_once = syncs_once + np.where(m, t["syncs_once"], 0)
                    if s.rma:
                        rma_tile = rma_tile + np.where(m, t["rma"], 0.0)
                        rma_once = rma_once + np.where(m, t["rma_once"], 0.0)
                else:
                    dma_tile = dma_tile + np.where(m, t["dma"], 0.0)
                    dma_once = dma_once + np.where(m, t["once"], 0.0)
                if traffic:
                    bytes_tile = bytes_tile + np.where(m, t["bytes"], 0.0)
                    bytes_once = bytes_once + np.where(m, t["bytes_once"], 0.0)
                if ex is not None:
                    expand = expand + np.where(m, t["expand"], 0.0)
            continue
        shared = lane is not None and axis not in vs
        t = _terms(terms, i, width if shared else 1, waves, secs, byf, in1, in2, in3, cnt, ex, traffic, s.rma)
        if shared:      # the busiest CPE issues ceil(fetches / width) of the broadcasts
            as_float = True
            dma_shared = dma_shared + t["dma"]
        else:
            dma_tile = dma_tile + t["dma"]
            dma_once = dma_once + t["once"]
        if traffic:
            bytes_tile = bytes_tile + t["bytes"]
            bytes_once = bytes_once + t["bytes_once"]
        if ex is not None:
            expand = expand + t["expand"]
        if shared:
            syncs_tile = syncs_tile + t["syncs"]
            syncs_once = syncs_once + t["syncs_once"]
            if s.rma:
                rma_tile = rma_tile + t["rma"]
                rma_once = rma_once + t["rma_once"]
    dma_tile = dma_tile + fix["put"]
    cyc = fix["base"] + expand
    if k.combine is not None:
        cyc = cyc + fix["full"]
        cyc = cyc + (fix["nsteps"] - 1) * fix["zero"]
    clock = model.clock(hw)
    comp_tile = cyc / clock
    D, C = waves * dma_tile + dma_once + dma_shared, waves * comp_tile
    sync = (waves * syncs_tile + syncs_once) * model.sync_cycles(hw, width if forms is None else s.cores) / clock
    rma = (waves * rma_tile + rma_once) / clock
    serial = D + (C + 2 * sync + rma)
    if traffic:
        bytes_tile = bytes_tile + fix["oby"]
        traffic = fix["ntiles"] * bytes_tile + np.minimum(fix["ntiles"], s.cores) * bytes_once
    else:
        traffic = None
    db = np.zeros(n, bool)
    if fits_db is not None:
        over = model.cpe_seconds(hw, D, C + sync + rma, np.minimum(D, first + fix["put"]), True)
        db = fits_db & (over < serial)
        serial = np.where(db, over, serial)
    obj = serial + s.traffic_weight * traffic if traffic is not None else serial
    return serial, db, traffic, np.full(n, as_float), obj


def evaluate_many(s, tilings):
    """[s.evaluate(t) for t in tilings], with the tilings not in the search's cache costed at
    once; the cache and the spatial memo end up exactly as after those calls in order (the
    first evaluation of a spatial tile shape sets its vector plan)."""
    keys = [tuple(t[a.name] for a in s.axes) for t in tilings]
    todo, seen = [], set()
    for key, t in zip(keys, tilings):
        if key not in s.cache and key not in seen:
            seen.add(key)
            todo.append(t)
    if len(todo) < SMALL:                   # numpy's per-call overhead would not pay
        return [s.evaluate(t, key) for key, t in zip(keys, tilings)]
    if todo:
        T, n = _table(todo, s.axes)
        st = statics(s, T, n)
        fit = (ldm(s, T, n, st, False) <= s.budget).tolist()
        first = {}
        for i, t in enumerate(todo):
            v = tuple(t[a.name] for a in s.axes)
            if fit[i] and v not in s._vp:
                first[v] = i
        if first:
            Tf, nf = _table([todo[i] for i in first.values()], s.axes)
            for v, sp in zip(first, spatial(s, Tf, nf)):
                s._vp[v] = sp
        multi = np.zeros(n, np.int64)
        for a in s.k.reduce_axes:
            multi += T[a.name] < a.extent
        one = (multi <= 1).tolist()
        rows = [i for i in range(n) if one[i]]
        res = [None] * n
        if rows:
            sel = np.array(rows)
            Ts = {a: c[sel] for a, c in T.items()}
            sts = {b: tuple(x[sel] for x in v) for b, v in st.items()}
            dummy = (None, 0.0, 0.0, 0.0, 0, 0.0)
            sps = [s._vp.get(tuple(todo[i][a.name] for a in s.axes), dummy) for i in rows]
            for i, r in zip(rows, evaluate(s, Ts, len(rows), sts, sps)):
                res[i] = r
        for i, t in enumerate(todo):
            if not one[i]:
                res[i] = s._evaluate(t)       # several tiled reduce loops: their order, scalar
            s.cache[tuple(t[a.name] for a in s.axes)] = res[i]
    return [s.cache[key] for key in keys]


def _table(rows, axes):
    """Tilings (dicts) as a table: axis -> int64 column; and the row count."""
    return {a.name: np.array([r[a.name] for r in rows], np.int64) for a in axes}, len(rows)
