"""passes/flat_pixels.py: a kernel whose every access reads two spatial axes as a row-major
pair (a 1x1 stride-1 convolution, its bias and residual) gets one pixel axis over views of the
same tensors, where it then models faster; other kernels are left as they are."""
import numpy as np
import onnx
from onnx import helper

from opt_models import checked_plan, conv_model, make, program, rand
from swbuild.backends.launches import kernel_entries
from swbuild.backends.sunway.passes.flat_pixels import candidate, merged


def residual_1x1(c=64, hw=14):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"]), helper.make_node("Add", ["y", "x"], ["s"]),
             helper.make_node("Relu", ["s"], ["z"])]
    return make(nodes, [("x", [1, c, hw, hw])], [("z", [1, c, hw, hw])],
                [("w", rand(c, c, 1, 1, seed=1, scale=0.3)), ("b", rand(c, seed=2))])


def test_only_row_major_pairs_merge():
    k = program(residual_1x1()).kernels[0]
    assert candidate(k) == ("o0", "o1")
    km = merged(k, "o0", "o1")
    assert [(a.name, a.extent) for a in km.axes] == [("n", 1), ("co", 64), ("o0", 196)]
    assert {n: b.shape for n, b in km.buffers.items() if len(b.shape) == 3} == {
        n: (1, 64, 196) for n, b in k.buffers.items() if len(b.shape) == 4 and b.shape[1] == 64 and b.shape[2] == 14}
    # a window, a stride or pads read rows apart: not one run
    assert candidate(program(conv_model(c=16, hw=14, co=16)).kernels[0]) is None
    assert candidate(program(conv_model(c=16, hw=14, co=16, k=1, stride=2, pads=(0, 0, 0, 0))).kernels[0]) is None
    assert candidate(program(conv_model(c=16, hw=14, co=16, k=1, pads=(1, 1, 1, 1))).kernels[0]) is None
    # every other pixel of a plane of the output's width: the pair is read with a stride
    nodes = [helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    strided = make(nodes, [("x", [1, 4, 16, 8])], [("y", [1, 4, 8, 8])],
                   [("st", np.array([0], np.int64)), ("en", np.array([16], np.int64)), ("ax", np.array([2], np.int64)),
                    ("sp", np.array([2], np.int64))])
    k = program(strided).kernels[0]
    assert len(k.axes) == 4 and candidate(k) is None


def test_merged_kernel_is_exact_on_both_targets(tmp_path):
    f = tmp_path / "r.onnx"
    onnx.save(residual_1x1(), f)
    for target in ("sunway-emu", "sunway-pro-emu"):
        plan = checked_plan(f, tmp_path / target, target)
        (k,) = [x for x in kernel_entries(plan["kernels"]) if x["op"] == "Conv"]
        assert "o1" not in k["tiles"] and k["tiles"]["o0"] <= 196
