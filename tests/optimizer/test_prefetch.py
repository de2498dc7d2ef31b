"""Cross-layer prefetch in grouped launches (backends/sunway/passes/prefetch.py): the previous
kernel of a launch issues the next one's first fetch of the boxes it does not write.

Under the emulator the prefetched build still matches onnxruntime with every launch's DMA
predicted exactly, no race or conflict and LDM within budget; the plan's arithmetic moves
the prefetched first fetch from the target into its previous kernel and adds one parameter
fetch per CPE; the choice never makes two consecutive kernels targets."""
import copy
import itertools
import random

import onnx
import pytest

from onnx import helper

from opt_models import checked_plan, make, rand
from swbuild.backends.sunway.cost.predict import predict_program
from swbuild.backends.sunway.passes.prefetch import (_heaviest_independent, adjust_entries, candidates,
                                                     prefetched_halves)
from swbuild.driver.compiler import build_program
from swbuild.optimizer.stages import storage
from swbuild.config.toolchain import load
from test_grouping_emulated import grouped_model


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    # wide enough that a previous kernel computes long enough to hide the next one's weights
    p = tmp_path_factory.mktemp("prefetch") / "prefetch.onnx"
    onnx.save(grouped_model(c=32, hw=32, gain=0.4), p)
    return p


def branches(c, hw, gain=0.3):
    """Three branches read one activation (the later ones read it from two kernels back, by row
    broadcast) and a Concat written in place feeds the last convolution."""
    def conv(x, y, w, k=1):
        return helper.make_node("Conv", [x, w], [y], pads=[k // 2] * 4)
    nodes = [conv("x", "a0", "w0", 3), helper.make_node("Relu", ["a0"], ["a"]), conv("a", "p", "w1"),
             conv("a", "q", "w2", 3), conv("a", "r", "w3", 3), helper.make_node("Concat", ["p", "q", "r"], ["cat"], axis=1),
             conv("cat", "y", "w4")]
    inits = [("w0", rand(c, 3, 3, 3, seed=1, scale=gain)), ("w1", rand(c, c, 1, 1, seed=2, scale=gain)),
             ("w2", rand(c, c, 3, 3, seed=3, scale=gain * 0.3)), ("w3", rand(c, c, 3, 3, seed=4, scale=gain * 0.3)),
             ("w4", rand(c, 3 * c, 1, 1, seed=5, scale=gain * 0.3))]
    return make(nodes, [("x", [1, 3, hw, hw])], [("y", [1, c, hw, hw])], inits)


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
            ok = {b.name for b in candidates(p, kernels[prev], k)}
            assert set(k.schedule.prefetched) <= ok and kernels[prev].schedule.hook
            r0, r1, a0, a1 = by_raw[prev], by_raw[nxt], by_adj[prev], by_adj[nxt]
            assert a1["modeled_seconds"] < r1["modeled_seconds"] and a0["modeled_seconds"] >= r0["modeled_seconds"]
            saved = r0["modeled_seconds"] + r1["modeled_seconds"] - a0["modeled_seconds"] - a1["modeled_seconds"]
            assert saved > 0 and a1["prefetch_saved_seconds"] == pytest.approx(saved)
            para = 8 * len(k.buffers)
            assert a1["dma"]["get"] == {"ops": r1["dma"]["get"]["ops"] + tc.cores,
                                        "bytes": r1["dma"]["get"]["bytes"] + tc.cores * para}
            assert a1["dma"]["put"] == r1["dma"]["put"]
            written = storage(p, kernels[prev].buffers[kernels[prev].out].tensor)
            assert all(storage(p, k.buffers[b.buf].tensor) != written
                       for b in k.schedule.boxes if b.name in k.schedule.prefetched)
            held = sum(n for _, n in prefetched_halves(k))
            assert a0["ldm_bytes"] == r0["ldm_bytes"] + held <= a0["ldm_budget"]
    assert seen


def test_broadcast_box_of_an_older_activation_is_prefetched(tmp_path):
    """The third branch's input comes from two kernels back by row broadcast: the branch
    before it issues that broadcast (its column-0 CPEs), and the result still matches."""
    f = tmp_path / "branches.onnx"
    onnx.save(branches(32, 28), f)
    plan = checked_plan(f, tmp_path / "out", "sunway-emu")
    shared = [set(nxt["prefetched"]) & set(nxt["broadcast"]) for _, nxt in _targets(plan)]
    assert any(shared), "the model was chosen so that a broadcast box is prefetched"


def test_prefetch_under_crts_matches(tmp_path):
    """SW26010-Pro (CRTS: its DMA calls, reply words and waits) with a prefetching launch."""
    f = tmp_path / "branches.onnx"
    onnx.save(branches(128, 56, gain=0.1), f)
    plan = checked_plan(f, tmp_path / "out", "sunway-pro-emu")
    assert _targets(plan), "the model was chosen so that a launch prefetches on the Pro"
    assert "CRTS_dma_iget" in next((tmp_path / "out").glob("*_slave.c")).read_text()


def test_a_concat_the_previous_kernel_writes_into_is_not_prefetched(tmp_path):
    """The last convolution reads the Concat whose third part the kernel before it writes in
    place: that read cannot be issued before the part is written."""
    f = tmp_path / "branches.onnx"
    onnx.save(branches(64, 28), f)
    tc = load("sunway-emu")
    p = build_program(str(f), tc, "branches")
    last = p.kernels[-1]
    assert "cat" in {b.tensor for b in last.buffers.values()} and storage(p, "r") == storage(p, "cat")
    prev = p.kernels[-2]
    assert storage(p, prev.buffers[prev.out].tensor) == storage(p, "cat")
    reads_cat = [b.name for b in last.schedule.boxes if last.buffers[b.buf].tensor == "cat"]
    assert reads_cat and not set(reads_cat) & set(last.schedule.prefetched)
    assert not set(reads_cat) & {b.name for b in candidates(p, prev, last)}


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
