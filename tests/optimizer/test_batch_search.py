"""The batched tile search (schedule/batch.py, enumerate_tiles.py) is the scalar search's
exact twin: the same bits for every tiling, and the same cache, memo and result."""
import copy
import random

import pytest

from opt_models import conv_model, program, sunway
from stitch_models import pool_branch, stitched_consumer
from swbuild.backends.sunway.schedule import batch, enumerate_tiles as et, ldm

CASES = [dict(c=32, hw=28, co=64), dict(c=16, hw=15, co=24, stride=2), dict(c=64, hw=7, co=128, k=1, pads=(0, 0, 0, 0)),
         dict(c=8, hw=9, co=8, k=5, pads=(2, 1, 2, 1), relu=False), dict(c=16, hw=12, co=16, group=16),
         dict(c=24, hw=10, co=40, k=1, stride=2, pads=(0, 0, 0, 0)), dict(stitched=dict(c=32, hw=14, co=48))]


def _search(case, target, options=None):
    tc = sunway(target)
    if "stitched" in case:      # a consumer with a stage (buffer stitching): its box computes in LDM
        k, g = stitched_consumer(pool_branch(**case["stitched"]))
        return ldm.Search(k, tc.hardware, tc.ldm_budget, options or {}, g)
    p = program(conv_model(**case))
    return ldm.Search(p.kernels[0], tc.hardware, tc.ldm_budget, options or {}, p.graph)


def _fresh(s):
    s2 = copy.copy(s)
    s2.cache, s2._vp, s2._bs, s2._ldm, s2._secs = {}, {}, {}, {}, {}
    return s2


def _rows(s, n, seed, multi=False):
    rnd = random.Random(seed)
    cands = {a.name: ldm.candidates(a.extent) for a in s.axes}
    rows = []
    for _ in range(n):
        t = {a.name: rnd.choice(cands[a.name]) for a in s.axes}
        tiled = [a.name for a in s.k.reduce_axes if t[a.name] < a.extent]
        for r in ([] if multi else tiled[1:]):
            t[r] = s.ext[r]
        rows.append(t)
    return rows


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_every_tiling_costs_the_same_bits(case, target):
    s = _search(CASES[case], target, {"traffic_weight": 1e-10} if case == 1 else None)
    rows = _rows(s, 150, case)
    T, n = batch._table(rows, s.axes)
    st = batch.statics(s, T, n)
    assert n >= batch.FEW
    few, m = batch._table(rows[:batch.FEW - 1], s.axes)     # a few rows: from the scalar memo
    for b, cols in batch.statics(_fresh(s), few, m).items():
        assert [c.tolist() for c in cols] == [c[:m].tolist() for c in st[b]]
    sp = batch.spatial(s, T, n)
    got = batch.evaluate(s, T, n, st, sp)
    for i, t in enumerate(rows):
        ref = _fresh(s)
        for b in s.boxes:
            if b.context != "out":
                assert ref._box_static(b, t) == tuple(int(x[i]) for x in st[id(b)])
        for db in (False, True):
            assert ref.ldm(t, db) == int(batch.ldm(s, T, n, st, db)[i])
        want_sp = ref._spatial(t)
        assert want_sp[0] == sp[i][0] and want_sp[1:] == sp[i][1:]      # every field of the plan
        ref._vp[tuple(t[a.name] for a in s.k.axes)] = sp[i]
        want = ref._evaluate(t)
        if want is None:
            assert got[i] is None
            continue
        assert got[i][2] is sp[i][0]
        assert (want[0], want[1], want[3], type(want[3]), want[4]) == \
            (got[i][0], got[i][1], got[i][3], type(got[i][3]), got[i][4])
    assert any(r is not None for r in got) and any(r is not None and r[1] for r in got)
    if target == "sunway-pro-emu" and case == 0:    # 2-D sharing (rows and columns) costed both ways too
        assert any(r is not None and r[4] is not None and len(r[4]) == 3 for r in got)


def test_evaluate_many_leaves_cache_and_memo_as_calls_in_order():
    s = _search(CASES[0], "sunway-emu")
    rows = _rows(s, 80, 7, multi=True)
    rows += rows[:5]                                  # repeats are cache hits
    a, b = _fresh(s), _fresh(s)
    want = [a.evaluate(t) for t in rows]
    got = batch.evaluate_many(b, rows)
    assert len(rows) - 5 >= batch.SMALL
    assert list(a.cache) == list(b.cache)
    assert sorted(a._vp) == sorted(b._vp)
    for k in a._vp:
        assert str(a._vp[k][0]) == str(b._vp[k][0]) and a._vp[k][1:] == b._vp[k][1:]
    for w, g in zip(want, got):
        assert (w is None) == (g is None)
        if w is not None:
            assert (w[0], w[1], str(w[2]), w[3], w[4]) == (g[0], g[1], str(g[2]), g[3], g[4])


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu"])
@pytest.mark.parametrize("case", [0, 2, 3, 4])
def test_the_table_finds_what_costing_every_row_one_at_a_time_finds(case, target):
    """The table's best row and the rows it records near it are those of evaluating every
    row with the scalar model: its lower bounds prune only rows that cannot win, and what it
    records is bit for bit what Search.evaluate returns for those tiles."""
    s = _search(CASES[case], target)
    cands = {a.name: ldm.candidates(a.extent) for a in s.axes}
    T, n, where, variants = et.rows(s, cands)
    grid, full = et.statics(s, cands, where, variants, n), batch.statics(s, T, n)     # per box grid: the same
    assert grid.keys() == full.keys()
    assert all([c.tolist() for c in grid[b][:4]] == [c.tolist() for c in full[b]] for b in grid)
    assert all(grid[b][4].tolist() == batch.dma_seconds(s.hw, full[b][2], full[b][3]).tolist() for b in grid)
    ref = _fresh(s)
    names = [a.name for a in s.axes]
    keys = [tuple(int(T[a][i]) for a in names) for i in range(n)]
    costs = [ref.cost(dict(zip(names, key))) for key in keys]
    best = min(range(n), key=lambda i: (costs[i], i))
    b = _fresh(s)
    table = et.enumerate_tiles(b, cands)
    tiles, cost = table.best()
    assert (tuple(tiles[a] for a in names), cost) == (keys[best], costs[best])
    assert table.costed.sum() < table.n             # the bounds pruned some rows
    bound = cost * 1.3
    table.record_within(bound)
    near = [key for key, c in zip(keys, costs) if c <= bound]
    assert set(near) <= set(b.cache) and len(near) > 1
    for key in b.cache:
        x, y = ref.evaluate(dict(zip(names, key))), b.cache[key]
        assert (x[0], x[1], str(x[2]), x[3], type(x[3]), x[4]) == (y[0], y[1], str(y[2]), y[3], type(y[3]), y[4])
        assert ref._vp[key][1:] == b._vp[key][1:]


def test_every_reduce_axis_takes_its_turn_as_the_tiled_one():
    """A 7x7 stem with 3 input channels: the table tiles ci as well as the window."""
    s = _search(dict(c=3, hw=32, co=16, k=7, pads=(3, 3, 3, 3)), "sunway-emu")
    cands = {a.name: ldm.candidates(a.extent) for a in s.axes}
    T, n, _, _ = et.rows(s, cands)
    tiled = {a.name for a in s.k.reduce_axes if (T[a.name] < a.extent).any()}
    assert tiled == {a.name for a in s.k.reduce_axes}
    multi = sum((T[a.name] < a.extent).astype(int) for a in s.k.reduce_axes)
    assert multi.max() == 1


@pytest.mark.parametrize("seed", range(6))
def test_the_partial_sort_is_the_stable_sorts_prefix(seed):
    """Table.first(m) is np.argsort(lb, kind="stable")[:m] for any m, asked in any order:
    ties (many: bounds repeat), infinite and NaN bounds included."""
    import numpy as np
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    lb = rng.integers(0, max(2, n // 7), n).astype(float) * 1e-6
    lb[rng.random(n) < 0.05] = np.inf
    if seed % 2:
        lb[rng.random(n) < 0.02] = np.nan
    table = et.Table(None, {}, n, {}, lb)
    full = np.argsort(lb, kind="stable")
    for m in [0, 1, 16, 17, 48, 300, 5, n // 2, n - 1, n, n + 5]:
        assert table.first(m).tolist() == full[:max(0, min(m, n))].tolist(), m


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu"])
@pytest.mark.parametrize("weight", [0.0, 1e-9])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_the_lower_bounds_are_the_zero_compute_objective(case, weight, target):
    """enumerate_tiles' bounds (objective only, the put once per spatial shape) equal, bit for
    bit, the full evaluation's objective with zero compute cycles and each row's own put."""
    import numpy as np
    s = _search(CASES[case], target, {"traffic_weight": weight})
    cands = {a.name: ldm.candidates(a.extent) for a in s.axes}
    table = et.enumerate_tiles(s, cands)
    oby, ochunk = batch.out_static(s, table.T, table.n)
    none = np.zeros(table.n)
    fix = {"base": none, "full": none, "zero": none, "oby": oby, "put": batch.dma_seconds(s.hw, oby, ochunk)}
    full = batch.evaluate_table(s, table.T, table.n, table.st, fix)
    assert full["fits"].all()
    assert table.lb.tobytes() == full["obj"].tobytes()
