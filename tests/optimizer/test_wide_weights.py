"""passes/wide_weights.py: a weight box re-laid out in blocks of several reduce tiles, fetched
once every few reduce steps, where the kernel then models faster; the predictor, the printer
and the emulator agree on every transfer, and the outputs are onnxruntime's."""
import numpy as np
import onnx
from onnx import helper

from opt_models import checked_plan, make, program, rand, schedule, scheduling_passes, sunway
from swbuild.backends.launches import kernel_entries
from swbuild.backends.sunway.cost.predict import simulate
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
