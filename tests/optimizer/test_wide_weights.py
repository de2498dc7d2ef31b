"""passes/wide_weights.py: a weight box re-laid out in blocks of several reduce tiles, fetched
once every few reduce steps, where the kernel then models faster; the predictor, the printer
and the emulator agree on every transfer, and the outputs are onnxruntime's."""
import numpy as np
import onnx
from onnx import helper

from opt_models import checked_plan, make, program, rand, schedule, scheduling_passes, sunway
from swbuild import api
from swbuild.backends.launches import kernel_entries
from swbuild.backends.sunway.cost.predict import simulate
from swbuild.backends.sunway.passes import wide_weights as ww
from swbuild.backends.sunway.passes.wide_weights import unblocked, wide_weights
from swbuild.backends.sunway.schedule.passes import SunwayState
from swbuild.backends.sunway.schedule.dma import blocked_array


def narrow_schedule(p, tc):
    """The Sunway scheduling passes without wide_weights (blocks of one reduce tile)."""
    p.target_state = SunwayState()
    for run in scheduling_passes():
        if run is not wide_weights:
            p = run(p, tc, {})
    return p


def residual_1x1(c=64, co=128, hw=28):
    """A ResNet expansion: 1x1 convolution + residual + Relu."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"]), helper.make_node("Add", ["y", "r"], ["s"]),
             helper.make_node("Relu", ["s"], ["z"])]
    return make(nodes, [("x", [1, c, hw, hw]), ("r", [1, co, hw, hw])], [("z", [1, co, hw, hw])],
                [("w", rand(co, c, 1, 1, seed=1, scale=0.3)), ("b", rand(co, seed=2))])


def test_unblocked_inverts_blocked_array_with_padding():
    a = np.arange(5 * 7 * 3, dtype=np.float32).reshape(5, 7, 3)
    for blocks in ((2, 4, 3), (5, 7, 1), (1, 3, 2)):
        b, _ = blocked_array(a, a.shape, blocks)
        assert np.array_equal(unblocked(b, a.shape, blocks), a)


def test_wide_box_is_fewer_longer_fetches_of_the_same_weights():
    tc = sunway("sunway-emu")
    model = residual_1x1(c=64, co=256, hw=28)
    narrow = narrow_schedule(program(model), tc).kernels[0]
    p = schedule(program(model), tc, {})
    k = p.kernels[0]
    (b,) = [x for x in k.schedule.boxes if x.wide]
    (b0,) = [x for x in narrow.schedule.boxes if x.buf == b.buf]
    d = b.wide[0]
    assert b.blocked[d] > b0.blocked[d] and b.blocked[d] % b0.blocked[d] == 0
    assert k.schedule.tiles == narrow.schedule.tiles and k.schedule.ldm_bytes <= k.schedule.ldm_budget
    # the re-laid-out constant holds the original weights in the wider blocks
    w = np.asarray(onnx.numpy_helper.to_array(model.graph.initializer[0]))
    assert np.array_equal(p.graph.tensors[b.block_tensor].data, blocked_array(w, b.shape, b.blocked)[0])
    r, r0 = simulate(k, tc.cores, 0, tc.hardware), simulate(narrow, tc.cores, 0, tc.hardware)
    assert r["get_ops"].sum() < r0["get_ops"].sum() and r["get_bytes"].sum() <= r0["get_bytes"].sum()
    assert r["cpe_seconds"].max() < r0["cpe_seconds"].max()


def test_wide_boxes_are_exact_under_the_emulator(tmp_path):
    model = residual_1x1(c=64, co=128, hw=14)
    f = tmp_path / "r.onnx"
    onnx.save(model, f)
    for target in ("sunway-emu", "sunway-pro-emu"):
        tc = sunway(target)
        narrow = narrow_schedule(program(model), tc).kernels[0]
        wide = schedule(program(model), tc, {}).kernels[0]
        assert any(b.wide for b in wide.schedule.boxes), target
        plan = checked_plan(f, tmp_path / target, target)
        (k,) = [x for x in kernel_entries(plan["kernels"]) if x["op"] == "Conv"]
        # the build took the wide box: fewer fetches than the tile-sized blocks would make
        assert k["dma"]["get"]["ops"] < int(simulate(narrow, tc.cores, 0)["get_ops"].sum()) + tc.cores, target


def _schedules(model, tc, monkeypatch, budget=None):
    """(kernel without the re-search, kernel with it, the program with it)."""
    monkeypatch.setattr(ww, "RESERVES", ())
    k0 = schedule(program(model), tc, {}, budget=budget).kernels[0]
    monkeypatch.undo()
    p = schedule(program(model), tc, {}, budget=budget)
    return k0, p.kernels[0], p


def _per_fetch(k, b):
    d = b.wide[0]
    return b.blocked[d] // k.schedule.tiles[next(iter(b.dim_vars(d)))]


def test_retile_leaves_ldm_for_a_wider_block(monkeypatch):
    """Stage 2's expansion of light ResNet-50 (128 -> 512 channels at 28x28): its tiles fill
    the LDM, so its weight block cannot grow; searched again with part of the budget left
    free, it fetches more reduce tiles at a time and models faster."""
    tc = sunway("sunway-emu")
    model = residual_1x1(c=128, co=512, hw=28)
    k0, k, p = _schedules(model, tc, monkeypatch)
    assert k.schedule.tiles != k0.schedule.tiles
    assert k.schedule.ldm_bytes <= k.schedule.ldm_budget == k0.schedule.ldm_budget
    (b,) = [x for x in k.schedule.boxes if x.wide]
    (b0,) = [x for x in k0.schedule.boxes if x.buf == b.buf]
    assert b.blocked[b.wide[0]] > (b0.blocked[b0.wide[0]] if b0.wide else 0)
    assert _per_fetch(k, b) > (_per_fetch(k0, b0) if b0.wide else 1)
    # the constant holds the original weights in the new blocks; no temporary copy is left
    w = np.asarray(onnx.numpy_helper.to_array(model.graph.initializer[0]))
    assert np.array_equal(p.graph.tensors[b.block_tensor].data, blocked_array(w, b.shape, b.blocked)[0])
    assert not any(n.startswith("%swwide:") for n in p.graph.tensors)
    assert {x.tensor for x in k.buffers.values()} <= set(p.graph.tensors)
    r, r0 = simulate(k, tc.cores, 0, tc.hardware), simulate(k0, tc.cores, 0, tc.hardware)
    assert r["cpe_seconds"].max() < r0["cpe_seconds"].max()


def test_retile_keeps_the_kernel_when_it_is_not_faster(monkeypatch):
    """Where the wide block already fits (a 14x14 expansion), the re-search changes nothing."""
    tc = sunway("sunway-emu")
    k0, k, _ = _schedules(residual_1x1(c=128, co=512, hw=14), tc, monkeypatch)
    assert k.schedule.tiles == k0.schedule.tiles and k.schedule.ldm_bytes == k0.schedule.ldm_bytes
    assert [x.blocked for x in k.schedule.boxes] == [x.blocked for x in k0.schedule.boxes]


def test_retiled_kernel_is_exact_under_the_emulator(tmp_path, monkeypatch):
    """The stage-2 expansion as built, re-searched: onnxruntime's outputs, every DMA as
    predicted, and fewer, longer weight fetches than the build without the re-search (the
    Pro's 256 KB rarely fill: light ResNet-50 re-searches nothing there)."""
    model = residual_1x1(c=128, co=512, hw=28)
    f = tmp_path / "r.onnx"
    onnx.save(model, f)
    monkeypatch.setattr(ww, "RESERVES", ())
    before = api.compile(f, target="sunway-emu", out=tmp_path / "narrow", quiet=True).plan
    monkeypatch.undo()
    plan = checked_plan(f, tmp_path / "retiled", "sunway-emu")
    (e0,) = [x for x in kernel_entries(before["kernels"]) if x["op"] == "Conv"]
    (e,) = [x for x in kernel_entries(plan["kernels"]) if x["op"] == "Conv"]
    assert e["tiles"] != e0["tiles"]
    assert e["dma"]["get"]["ops"] < e0["dma"]["get"]["ops"] and e["modeled_seconds"] < e0["modeled_seconds"]
