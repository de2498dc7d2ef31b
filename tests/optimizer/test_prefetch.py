"""Cross-layer weight prefetch in grouped launches (backends/sunway/prefetch.py): the
previous kernel of a launch issues the next one's first fetch of its constant boxes.

Under the emulator the prefetched build still matches onnxruntime with every launch's DMA
predicted exactly, no race or conflict and LDM within budget; the plan's arithmetic moves
the prefetched first fetch from the target into its previous kernel and adds one parameter
fetch per CPE; the choice never makes two consecutive kernels targets."""
import copy
import itertools
import random

import onnx
import pytest

from opt_models import checked_plan
from swbuild.backends.sunway.cost.predict import predict_program
from swbuild.backends.sunway.prefetch import _heaviest_independent, adjust_entries, candidates, prefetched_halves
from swbuild.compiler import build_program
from swbuild.toolchain import load
from test_grouping_emulated import grouped_model


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    # wide enough that a previous kernel computes long enough to hide the next one's weights
    p = tmp_path_factory.mktemp("prefetch") / "prefetch.onnx"
    onnx.save(grouped_model(c=32, hw=32, gain=0.4), p)
    return p


def _targets(plan):
    out = []
    for ln in plan["kernels"]:
        ks = ln.get("kernels") or []
        out += [(a, b) for a, b in zip(ks, ks[1:]) if b.get("prefetched")]
    return out


def test_prefetched_launch_matches_and_predicts_exactly(model_file, tmp_path):
    plan = checked_plan(model_file, tmp_path, "sunway-emu")       # grouping is on by default
    pairs = _targets(plan)
    assert pairs, "the model was chosen so that some launch prefetches"
    slave = next(tmp_path.glob("*_slave.c")).read_text()
    for prev, nxt in pairs:
        assert prev["prefetches_for"] == nxt["name"] and nxt["prefetch_saved_seconds"] > 0
        assert f"static void {nxt['name']}_prefetch(void *arg, void *state)" in slave
        assert f"{prev['name']}_in(" in slave and f"{nxt['name']}_in(" in slave
        # the kernel alone still exists (a launch of its own calls it with no prefetch state)
        assert f"void {nxt['name']}(void *arg)\n{{\n    {nxt['name']}_in(arg, 0, 0);" in slave


def test_plan_moves_the_first_fetch_into_the_previous_kernel(model_file):
    tc = load("sunway-emu")
    p = build_program(str(model_file), tc, "prefetch")
    raw = predict_program(p, tc)
    adj = adjust_entries(p, copy.deepcopy(raw), tc)
    by_raw, by_adj = {e["name"]: e for e in raw}, {e["name"]: e for e in adj}
    kernels = {k.name: k for k in p.kernels}
    seen = 0
    for ln in p.target_state.launches:
        flags = [bool(kernels[n].schedule.prefetched) for n in ln.kernels]
        assert not any(a and b for a, b in zip(flags, flags[1:])), "no chains: a target's previous kernel is none"
        for prev, nxt in zip(ln.kernels, ln.kernels[1:]):
            k = kernels[nxt]
            if not k.schedule.prefetched:
                assert "prefetched" not in by_adj[nxt]
                continue
            seen += 1
            ok = {b.name for b in candidates(p, k)}
            assert set(k.schedule.prefetched) <= ok and kernels[prev].schedule.hook
            r0, r1, a0, a1 = by_raw[prev], by_raw[nxt], by_adj[prev], by_adj[nxt]
            assert a1["modeled_seconds"] < r1["modeled_seconds"] and a0["modeled_seconds"] >= r0["modeled_seconds"]
            saved = r0["modeled_seconds"] + r1["modeled_seconds"] - a0["modeled_seconds"] - a1["modeled_seconds"]
            assert saved > 0 and a1["prefetch_saved_seconds"] == pytest.approx(saved)
            para = 8 * len(k.buffers)
            assert a1["dma"]["get"] == {"ops": r1["dma"]["get"]["ops"] + tc.cores,
                                        "bytes": r1["dma"]["get"]["bytes"] + tc.cores * para}
            assert a1["dma"]["put"] == r1["dma"]["put"]
            held = sum(n for _, n in prefetched_halves(k))
            assert a0["ldm_bytes"] == r0["ldm_bytes"] + held <= a0["ldm_budget"]
    assert seen


def test_grouping_off_prefetches_nothing(model_file, tmp_path):
    plan = checked_plan(model_file, tmp_path, "sunway-emu", "--grouping", "off")
    assert not any(k.get("prefetched") or k.get("prefetches_for") for k in plan["kernels"])
    slave = next(tmp_path.glob("*_slave.c")).read_text()
    assert "struct sw_next" not in slave and "_prefetch(" not in slave


def test_heaviest_independent_set_is_the_best_non_adjacent_choice():
    rng = random.Random(3)
    for n in range(0, 9):
        for _ in range(30):
            gains = [(0.0, ())] + [(rng.choice([0.0, rng.random()]), ("x",)) for _ in range(n)]
            got = _heaviest_independent(gains)
            assert all(b - a > 1 for a, b in zip(got, got[1:])) and all(gains[i][0] > 0 for i in got)
            best = max((sum(gains[i][0] for i in c) for r in range(n + 2)
                        for c in itertools.combinations(range(n + 1), r)
                        if all(b - a > 1 for a, b in zip(c, c[1:]))), default=0.0)
            assert sum(gains[i][0] for i in got) == pytest.approx(best)
