"""simd.plan over a table of tilings (batch.py's vector plans): every row's register block,
its cycles and its alignment, the exact twin of the scalar planner (the same operations on
the same operands), each row's plan shared by the rows that get the same one."""
from __future__ import annotations

import numpy as np

from . import simd
from .columns import prod as _prod, sorted_distinct as _sorted_distinct


def plan_table(s, T, n):
    """simd.plan per row as (pid, plans): row i's plan is plans[pid[i]], none where pid is -1.
    Every row's candidate register blocks are costed at once, a row x block table of
    simd.step_cycles' array arithmetic (_block_cycles); along the innermost axis, then along
    simd.alt_axis (simd.plan's choice: for rows without a plan, or fewer cycles on whole tiles)."""
    k, hw = s.k, s.hw
    lanes = int(hw.get("simd_lanes", 1))
    pid, specs = np.full(n, -1, np.int64), []
    if not s.simd_ok or not simd.eligible(k, lanes):
        return pid, specs
    seen = {}                    # (v, r, R, U, dep_r, aligned) -> index into specs
    cost = np.full(n, np.inf)    # each row's plan's rounded cycles
    _along(k, hw, lanes, k.axes[-1].name, T, n, pid, cost, specs, seen)
    alt = simd.alt_axis(k)
    if alt is not None:
        _along(k, hw, lanes, alt, T, n, pid, cost, specs, seen)
    return pid, specs


def _along(k, hw, lanes, v, T, n, pid, cost, specs, seen):
    """simd._plan_along for every row: pid and cost take its plan along v where the row has no
    plan yet, or (v not innermost) where it costs less and v and r divide into whole tiles."""
    inner = v == k.axes[-1].name
    ext_v = next(a.extent for a in k.axes if a.name == v)
    fs, kinds, affs = simd.classify(k, v, lanes)
    deps = [set(x for a in affs[i] for x in a if x) for i in range(len(fs))]
    cand = [a.name for a in k.axes if a.name != v
            and any(kd in ("vec", "gather", "bcast") and a.name not in deps[i] for i, kd in enumerate(kinds))]
    regs = int(simd.hwget(hw, "vector_registers"))
    red = _prod([np.minimum(T[a.name], a.extent) for a in k.reduce_axes], n)
    if inner:
        aligned = (T[v] % lanes == 0) & (ext_v % lanes == 0)
    else:
        aligned = np.zeros(n, bool)
    live = T[v] >= lanes
    if not live.any():
        return
    code = np.zeros(n, np.int64)
    for i, a in enumerate(cand):
        code |= (T[a] >= 2).astype(np.int64) << i
    for key in _sorted_distinct(code[live]):
        rows = np.nonzero(live & (code == key))[0]
        rs = [None] + [a for i, a in enumerate(cand) if key >> i & 1]
        bt = _blocks(k, hw, lanes, v, rs, fs, kinds, deps, regs)
        blocks = bt["blocks"]
        Tr = {a.name: T[a.name][rows] for a in k.axes}
        # simd.plan tries a row's first six blocks that fit its tiles, in ranked order
        fit = np.stack([(U * lanes <= Tr[v]) & ((R <= Tr[r]) if r else True) for r, R, U, _ in blocks], axis=1)
        tried = fit & (np.cumsum(fit, axis=1) <= 6)
        al = aligned[rows]
        per = _block_cycles(k, hw, lanes, len(fs), bt, Tr, red[rows], al, v)
        # simd.plan's key (round(cycles, 3), R * U, rs.index(r)), the first of equals winning
        rounded = np.full(per.shape, np.inf)
        rounded[tried] = round3(per[tried])
        low = rounded.min(axis=1)
        pick = np.where(rounded == low[:, None], bt["rank"][None, :], len(blocks)).argmin(axis=1)
        ok = tried.any(axis=1) & np.array(bt["wins"], bool)[pick]
        if not inner:               # simd.plan: no plan yet, or fewer cycles on whole tiles
            ext = {a.name: a.extent for a in k.axes}
            whole = (ext[v] % Tr[v] == 0)
            for j in np.unique(pick).tolist():
                r = blocks[j][0]
                if r:
                    sel = pick == j
                    whole = np.where(sel, whole & (ext[r] % Tr[r] == 0), whole)
            ok &= (pid[rows] < 0) | ((low < cost[rows]) & whole)
        if not ok.any():
            continue
        uniq, inv = np.unique(pick[ok] * 2 + al[ok], return_inverse=True)     # (block, aligned)
        ids = []
        for x in uniq.tolist():
            r, R, U, d = blocks[x // 2]
            spec = (v, r, R, U, tuple(d), bool(x % 2))
            if spec not in seen:
                seen[spec] = len(specs)
                specs.append(simd.VectorPlan(v, lanes, f"floatv{lanes}", r, R, U, fs, kinds, d, bool(x % 2),
                                             not inner))
            ids.append(seen[spec])
        pid[rows[ok]] = np.array(ids, np.int64)[inv.reshape(-1)]
        cost[rows[ok]] = low[ok]


def round3(x):
    """Python's round(v, 3) of every element (simd.plan's key): numpy's, except where x * 1000
    lies so close to a half that the two may differ (then Python's)."""
    y = x * 1000.0
    out = np.rint(y) / 1000.0
    near = np.abs(y - np.floor(y) - 0.5) <= 1e-12 * np.maximum(np.abs(y), 1.0)
    if near.any():
        out[near] = [round(v, 3) for v in x[near].tolist()]
    return out


_BLOCKS = {}


def _blocks(k, hw, lanes, v, rs, fs, kinds, deps, regs):
    """The register blocks simd.plan ranks for these blocking axes, with what costing them
    needs (per kernel, like simd._ranked_shapes): blocks (r, R, U, dep_r), R and U columns,
    the micro-kernel cycles of the full and tail blocks, each block's rank in simd.plan's
    tie-break (R * U, rs.index(r), ranked order), and whether it beats the scalar loop.
    Memoised by what they depend on (repeated layers and split kernels share them)."""
    key = (id(hw), lanes, v, tuple(rs), tuple(kinds), tuple(frozenset(d) for d in deps), len(fs), regs,
           simd._scalar_iter(k, hw))
    hit = _BLOCKS.get(key)
    if hit is not None and hit[1] is hw:
        return hit[2]
    ranked = simd._ranked_shapes(k, hw, lanes, v, rs, fs, kinds, deps, regs)
    blocks = [(r, R, U, [r in deps[i] if r else False for i in range(len(fs))]) for _, r, R, U in ranked]

    def inner(r, R, U, d):
        return simd._mk_inner(simd.VectorPlan(v, lanes, f"floatv{lanes}", r, R, U, fs, kinds, d), R, U, hw)
    order = sorted(range(len(blocks)), key=lambda j: (blocks[j][1] * blocks[j][2], rs.index(blocks[j][0]), j))
    rank = np.empty(len(blocks), np.int64)
    rank[order] = np.arange(len(blocks))
    scalar = simd._scalar_iter(k, hw)
    bt = {"blocks": blocks, "rank": rank,
          "R": np.array([b[1] for b in blocks])[None, :], "U": np.array([b[2] for b in blocks])[None, :],
          "RU": np.array([inner(r, R, U, d) for r, R, U, d in blocks])[None, :],
          "R1": np.array([inner(r, R, 1, d) for r, R, U, d in blocks])[None, :],
          "1U": np.array([inner(r, 1, U, d) for r, R, U, d in blocks])[None, :],
          "11": np.array([inner(r, 1, 1, d) for r, R, U, d in blocks])[None, :],
          "wins": [inner(r, R, U, d) / (R * U * lanes) < scalar for r, R, U, d in blocks]}
    _BLOCKS[key] = (k, hw, bt)
    return bt


def _block_cycles(k, hw, L, nf, bt, Tr, red, al, v):
    """simd.step_cycles (its array arithmetic, operation for operation) of every row with
    every register block of `bt` (_blocks) along vector axis v: a rows x blocks table. `al`:
    each row's accumulator alignment (a strided accumulator, v not innermost, costs L)."""
    sp = [a.name for a in k.axes]
    R, U = bt["R"], bt["U"]
    if v != sp[-1]:
        ua = np.full((len(red), 1), float(L))
    else:
        ua = np.where(al, 1.0, float(simd.hwget(hw, "simd_unaligned_load_cost")))[:, None]
    red = red[:, None]

    def mk(key, rr, uu, tail=False):
        ovh = rr * (1 + L * 2) + 4 + nf if tail else 2 * rr * uu * ua + 4 + nf
        return red * bt[key] + ovh
    all_but_v = np.ones(len(red), np.int64)
    for name in sp:
        if name != v:
            all_but_v = all_but_v * Tr[name]
    nr = np.stack([Tr[r] if r else np.ones(len(red), np.int64) for r, _, _, _ in bt["blocks"]], axis=1)
    outer = all_but_v[:, None] // nr
    fb, lr = nr // R, nr % R
    nv = Tr[v][:, None]
    bu = nv // (U * L)
    lv = (nv % (U * L)) // L
    ls = nv % L
    sc = red * simd._scalar_iter(k, hw) + 2
    vec_tail = (ls > 0) & (nv >= L)
    scal_tail = (ls > 0) & (nv < L)
    one = np.ones_like(R)
    rows_full = (bu * mk("RU", R, U) + lv * mk("R1", R, one) + np.where(vec_tail, mk("R1", R, one, True), 0)
                 + np.where(scal_tail, ls * R * sc, 0))
    rows_part = (bu * mk("1U", one, U) + lv * mk("11", one, one) + np.where(vec_tail, mk("11", one, one, True), 0)
                 + np.where(scal_tail, ls * sc, 0))
    return outer * (fb * rows_full + lr * rows_part)
