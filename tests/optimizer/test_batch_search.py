"""The batched tile search (schedule/batch.py, enumerate_tiles.py) is the scalar search's
exact twin: the same bits for every tiling, and the same cache, memo and result."""
import copy
import itertools
import math
import random

import numpy as np
import pytest

from opt_models import conv_model, program, sunway
from swbuild.backends.sunway.cost import model
from swbuild.backends.sunway.schedule import batch, enumerate_tiles as et, ldm

CASES = [dict(c=32, hw=28, co=64), dict(c=16, hw=15, co=24, stride=2), dict(c=64, hw=7, co=128, k=1, pads=(0, 0, 0, 0)),
         dict(c=8, hw=9, co=8, k=5, pads=(2, 1, 2, 1), relu=False), dict(c=16, hw=12, co=16, group=16),
         dict(c=24, hw=10, co=40, k=1, stride=2, pads=(0, 0, 0, 0))]


def _search(case, target, options=None):
    tc = sunway(target)
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


def _enumerate_one_at_a_time(s, cands):
    """The enumeration as it was written before batching: one tiling at a time."""
    k = s.k
    sp = [a.name for a in k.axes]
    main = sorted(k.reduce_axes, key=lambda a: -a.extent)[0].name if k.reduce_axes else None
    best, evals = None, 0
    ext = {a.name: a.extent for a in k.axes}
    rate = max(1, int(s.hw.get("simd_lanes", 1))) * float(model.hwget(s.hw, "fma_per_cycle_simd")) * model.clock(s.hw)
    limit = et.ENUMERATE_LIMIT[1] if k.flops() >= et.ENUMERATE_BIG else et.ENUMERATE_LIMIT[0]
    combos = [c for c in itertools.product(*[cands[n] for n in sp]) if math.prod(c) * 4 <= s.budget * 0.9]
    combos.sort(key=lambda c: (-math.prod(c), c))
    for combo in combos:
        if best is not None and s.red_points > 1:
            ntiles = math.prod(-(-ext[n] // t) for n, t in zip(sp, combo))
            if math.ceil(ntiles / s.cores) * math.prod(combo) * s.red_points / rate >= best[1]:
                continue
        base = dict(zip(sp, combo), **{a.name: a.extent for a in k.reduce_axes})
        fits, cm = {}, cands[main]
        for db in (False, True):
            lo, hi = 0, len(cm) - 1
            if s.ldm(dict(base, **{main: cm[0]}), db) > s.budget:
                continue
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if s.ldm(dict(base, **{main: cm[mid]}), db) <= s.budget else (lo, mid - 1)
            fits[db] = lo
        idx = sorted({j for i in fits.values() for j in (i, max(i - 1, 0))})
        for tiles in [dict(base, **{main: cm[i]}) for i in idx]:
            c = s.cost(tiles)
            evals += 1
            if best is None or c < best[1]:
                best = (tiles, c)
        if evals > limit:
            break
    return best


@pytest.mark.parametrize("case", [0, 2])
def test_batched_enumeration_replays_the_scalar_one(case):
    s = _search(CASES[case], "sunway-emu")
    cands = {a.name: ldm.candidates(a.extent) for a in s.axes}
    seed = _rows(s, 6, 3)                   # the search has evaluated a few tilings before
    a, b = _fresh(s), _fresh(s)
    for t in seed:
        a.evaluate(t)
        b.evaluate(t)
    want, got = _enumerate_one_at_a_time(a, cands), et.enumerate_tiles(b, cands)
    assert want == got
    assert list(a.cache) == list(b.cache) and len(a.cache) > 50
    assert [a.cache[k] is None for k in a.cache] == [b.cache[k] is None for k in b.cache]
    for k in a.cache:
        if a.cache[k] is not None:
            x, y = a.cache[k], b.cache[k]
            assert (x[0], x[1], str(x[2]), x[3], x[4]) == (y[0], y[1], str(y[2]), y[3], y[4])
    assert sorted(a._vp) == sorted(b._vp)
    assert all(str(a._vp[k][0]) == str(b._vp[k][0]) and a._vp[k][1:] == b._vp[k][1:] for k in a._vp)
    assert np.isfinite(got[1])
