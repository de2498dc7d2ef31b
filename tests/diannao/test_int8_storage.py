"""int8 activations held as bytes in GDRAM on the MLU (schedule/narrow.py, issue 36): between
two integer convolutions the requantized tensor is converted in NRAM and stored one byte per
element, and the next convolution copies those bytes straight into the tile __bang_conv reads
(no float staging, no conversion pass); an element-wise reader widens the bytes in NRAM.
Bit-exact against onnxruntime, the predicted copy bytes equal the emulator's, no BANG rule
violated; a tensor some kernel cannot read or write as bytes stays float32."""
import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto as TP
from onnx import helper

from dn_build import build_bit_exact, build_model, run_check
from dn_models import weight_maker
from swbuild.driver import check

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from quant_models import ort_quantized  # noqa: E402

C, H = 64, 16


def _chain(seed=0, tap=False):
    """Conv-Relu-Conv-Relu, 64 channels (no channel padding in int8); `tap`: the first Relu's
    output is a graph output too (so it must stay float32 in GDRAM)."""
    rng = np.random.default_rng(seed)
    inits = []
    w = weight_maker(rng, inits)
    n = helper.make_node
    nodes = [n("Conv", ["x", w("w1", C, C, 3, 3), w("b1", C, s=0.1)], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             n("Relu", ["c1"], ["r1"], name="relu1"),
             n("Conv", ["r1", w("w2", C, C, 3, 3), w("b2", C, s=0.1)], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             n("Relu", ["c2"], ["y"], name="relu2")]
    outs = [helper.make_tensor_value_info("y", TP.FLOAT, [1, C, H, H])]
    if tap:
        outs.append(helper.make_tensor_value_info("r1", TP.FLOAT, [1, C, H, H]))
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TP.FLOAT, [1, C, H, H])], outs,
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _stores(plan):
    """NRAM2GDRAM bytes per integer convolution kernel, in program order."""
    return [(s.get("copy_bytes") or {}).get("NRAM2GDRAM") for k in plan["kernels"]
            for s in k.get("kernels", [k]) if s.get("op") == "QLinearConv"]


def test_int8_between_integer_convolutions_is_stored_as_bytes(tc, tmp_path):
    m = ort_quantized(tmp_path, model=_chain(), activations="QInt8")
    x = np.random.default_rng(3).standard_normal((1, C, H, H)).astype(np.float32)
    plan, _ = build_bit_exact(tc, m, "q", x, tmp_path)
    device = next((tmp_path / "b").glob("*_device.mlu")).read_text()
    first, second = device.split("_qlinearconv(")[1:3]
    # the first stores bytes (converted in NRAM), the second copies them straight into its tile
    assert "__bang_float2int8_rn(" in first and "NRAM2GDRAM" in first and "((int8_t *)g" in first
    assert "__bang_float2int8_rn(" not in second.split("__bang_conv(")[0]
    assert "((int8_t *)g0" in second.split("__bang_conv(")[0]
    # the intermediate crosses GDRAM as one byte per element: a quarter of its float32 size;
    # it and the quantized input (written by an element-wise kernel) take that in the arena
    assert _stores(plan)[0] == C * H * H
    assert sorted(plan["int8_storage"]) == ["r1_QuantizeLinear_Output", "x_QuantizeLinear_Output"]
    assert plan["arena_bytes"] == 2 * C * H * H


def test_int8_read_by_an_elementwise_kernel_is_widened_in_nram(tc, tmp_path):
    """r1 is a graph output too: its int8 tensor is read by conv2 and by the DequantizeLinear
    that makes the output, an element-wise kernel that copies the bytes and widens them in
    NRAM (__bang_int82float). r1 is exact; onnxruntime does not fuse conv2 here, so y may
    differ from it by one quantization step."""
    m = ort_quantized(tmp_path, model=_chain(tap=True), activations="QInt8")
    plan, exe = build_model(tc, m, "t", tmp_path / "b")
    x = np.random.default_rng(4).standard_normal((1, C, H, H)).astype(np.float32)
    ref = check.onnxruntime_reference(m, {"x": x})
    _, stats = run_check(plan, exe, ref, {"x": x})
    assert stats["violations"] == 0
    got = check.run_runner(exe, plan, {"x": x}, tmp_path)[0]
    np.testing.assert_array_equal(got[1], ref[1])
    step = np.diff(np.unique(ref[0])).min()
    assert np.abs(got[0] - ref[0]).max() <= step * 1.001
    device = next((tmp_path / "b").glob("*_device.mlu")).read_text()
    assert "__bang_int82float(" in device and "((int8_t *)g" in device


def test_a_tensor_some_kernel_cannot_read_as_bytes_goes_back_to_float():
    """narrow.unfulfilled: a kernel that did not schedule a byte tensor as such (the scalar
    class, a conv that read it as an epilogue operand) sends it back to float32."""
    from types import SimpleNamespace as NS

    from swbuild.backends.diannao.schedule.narrow import unfulfilled
    from swbuild.ir.loopnest import Bin, Buffer, Load, Var
    i = Var("i")
    conv = NS(buffers={"b0": Buffer("b0", "t", (4,), "float32"), "b1": Buffer("b1", "w", (4,), "float32"),
                       "o": Buffer("o", "u", (4,), "float32")}, out="o", op="QLinearConv",
              body=Bin("*", Load("b0", (i,)), Load("b1", (i,))))
    good = NS(kernel=conv, cls="conv", info={"narrow_in": True, "narrow_out": True})
    assert unfulfilled([good], frozenset({"t", "u"})) == set()
    assert unfulfilled([NS(kernel=conv, cls="conv", info={"narrow_in": False, "narrow_out": True})],
                       frozenset({"t", "u"})) == {"t"}
    assert unfulfilled([NS(kernel=conv, cls="scalar", info={})], frozenset({"t", "u"})) == {"t", "u"}
    ew = NS(buffers={"a": Buffer("a", "u", (4,), "float32"), "o": Buffer("o", "v", (4,), "float32")}, out="o", op="Add")
    assert unfulfilled([NS(kernel=ew, cls="elementwise", info={"narrow_bufs": {"a"}, "narrow_out": False})],
                       frozenset({"u", "v"})) == {"v"}
