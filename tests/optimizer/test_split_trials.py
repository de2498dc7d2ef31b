"""Split trials (schedule/split.py) skip the pairs that must move too many bytes or compute too
long: the bound is below every tiling's modelled time, and skipping changes no decision."""
import random

import pytest

from opt_models import conv_model, program, sunway

from swbuild.backends.sunway.cost.predict import compulsory_bytes
from swbuild.backends.sunway.schedule import ldm, split

# long reductions with small outputs (split candidates), one strided, one 3x3
CASES = [dict(c=512, hw=7, co=64, k=1, pads=(0, 0, 0, 0)), dict(c=256, hw=14, co=128, k=1, stride=2, pads=(0, 0, 0, 0)),
         dict(c=128, hw=7, co=32, k=3), dict(c=1024, hw=4, co=256, k=1, pads=(0, 0, 0, 0))]


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_the_bound_is_below_every_tiling_of_the_pair(case, target):
    tc = sunway(target)
    p = program(conv_model(**CASES[case]))
    hw = tc.hardware
    for S in split.SPLITS:
        pair = split._split_kernel(p.kernels[0], S, p.graph)
        if pair is None:
            continue
        # per kernel: its compulsory bytes at the fastest DMA, or its multiply-adds at the SIMD peak
        peak = hw["simd_lanes"] * hw["clock_hz"] * hw["cpes"]
        floors = [max(compulsory_bytes(kk) / ldm.model.max_dma_bandwidth(hw), kk.points * kk.reduce_points / peak)
                  for kk in pair]
        assert floors[0] > pair[0].points * 4 / ldm.model.max_dma_bandwidth(hw)     # more than the partials
        searches = [ldm.Search(kk, hw, tc.ldm_budget, {}, p.graph) for kk in pair]
        assert sum(floors) == pytest.approx(split._moved_at_least(searches, hw), rel=1e-12)
        for kk, floor in zip(pair, floors):
            s = ldm.Search(kk, hw, tc.ldm_budget, {}, p.graph)
            floor = max(floor, float(ldm._table(s).lb.min()))     # the table's least bound: below too
            rnd = random.Random(S)
            cands = {a.name: ldm.candidates(a.extent) for a in s.axes}
            tilings = [ldm._search_tiles(s)] + [{a.name: rnd.choice(cands[a.name]) for a in s.axes} for _ in range(300)]
            seen = 0
            for t in tilings:
                r = s.evaluate(t)
                if r is not None:
                    seen += 1
                    assert r[0] >= floor, (kk.name, t)
            assert seen > 10
            assert all(r is None or r[0] >= floor for r in s.cache.values())


def test_skipping_trials_changes_no_decision(monkeypatch):
    """Every case decided with the bound and without it (all trials searched): the same
    parts, and fewer searches with it."""
    tc = sunway()
    decided = {}
    for bound in (True, False):
        monkeypatch.setattr(ldm, "_MEMO", {})
        monkeypatch.setattr(split, "_DECISIONS", {})
        monkeypatch.setattr(split.cache, "load", lambda key: None)
        monkeypatch.setattr(split.cache, "store", lambda key, value: None)
        if not bound:
            monkeypatch.setattr(split, "_moved_at_least", lambda searches, hw: 0.0)
            monkeypatch.setattr(split, "floor_seconds", lambda s: 0.0)
        searched = []
        real = ldm._search_tiles
        monkeypatch.setattr(ldm, "_search_tiles", lambda s: searched.append(s.k.name) or real(s))
        parts = []
        for case in CASES + [dict(c=256, hw=28, co=64, k=1, pads=(0, 0, 0, 0))]:
            p = program(conv_model(**case))
            s = ldm.Search(p.kernels[0], tc.hardware, tc.ldm_budget, {}, p.graph, tc.sha256)
            parts.append(split._trials(s, {}))
        decided[bound] = (parts, len(searched))
        monkeypatch.undo()
    assert decided[True][0] == decided[False][0]
    assert any(d is not None for d in decided[True][0])           # some case does split
    assert decided[True][1] < decided[False][1]
