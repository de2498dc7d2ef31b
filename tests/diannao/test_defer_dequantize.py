"""A residual block's second integer convolution hands its requantized int8 result to the Add
instead of its dequantized float32 (backends/diannao/defer_dequantize.py, issue 36): the Add
dequantizes what it loads, the tensor crosses GDRAM as bytes, and the output stays bit-exact
against onnxruntime."""
import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto as TP
from onnx import helper

from dn_build import build_bit_exact
from dn_models import weight_maker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from quant_models import ort_quantized  # noqa: E402

C, H = 64, 16


def _block(seed=0):
    """x -> Conv-Relu-Conv, + x, Relu: a ResNet basic block, 64 channels."""
    rng = np.random.default_rng(seed)
    inits = []
    w = weight_maker(rng, inits)
    n = helper.make_node
    nodes = [n("Relu", ["x"], ["r0"], name="relu0"),
             n("Conv", ["r0", w("w1", C, C, 3, 3), w("b1", C, s=0.1)], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             n("Relu", ["c1"], ["r1"], name="relu1"),
             n("Conv", ["r1", w("w2", C, C, 3, 3), w("b2", C, s=0.1)], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             n("Add", ["c2", "r0"], ["a"], name="add"),
             n("Relu", ["a"], ["r2"], name="relu2"),
             n("Conv", ["r2", w("w3", C, C, 3, 3), w("b3", C, s=0.1)], ["y"], pads=[1, 1, 1, 1], name="conv3")]
    g = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TP.FLOAT, [1, C, H, H])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, C, H, H])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_residual_add_reads_the_convolution_s_int8_bytes_bit_exact(tc, tmp_path):
    m = ort_quantized(tmp_path, model=_block(), activations="QInt8")
    x = np.random.default_rng(7).standard_normal((1, C, H, H)).astype(np.float32)
    plan, _ = build_bit_exact(tc, m, "r", x, tmp_path)
    convs = [s for k in plan["kernels"] for s in k.get("kernels", [k]) if s.get("op") == "QLinearConv"]
    # conv2 (the second) now stores its requantized result as bytes, not float32
    assert [c["schedule"].get("narrow_out") for c in convs] == [True, True, False]
    stored = convs[1].get("copy_bytes") or {}      # to GDRAM, or to SRAM when its reader shares the launch
    assert stored.get("NRAM2GDRAM", 0) + stored.get("NRAM2SRAM", 0) == C * H * H
    assert "c2_DequantizeLinear_Output" in plan["int8_storage"]
    assert any("DequantizeLinear moved into the readers of c2_DequantizeLinear_Output" in n for n in plan["notes"])
    # the Add reads and writes bytes: its QuantizeLinear runs on the vector unit (a product by a
    # reciprocal proven on every int8 pair, schedule/quantize.py) and its clamp is left to the
    # byte conversion, so each tile has no scalar code and compares nothing
    adds = [s for k in plan["kernels"] for s in k.get("kernels", [k]) if s.get("class") == "elementwise"
            and s["schedule"].get("narrow_out") and s["schedule"].get("narrow_in")]
    assert adds
    device = next((tmp_path / "b").glob("*_device.mlu")).read_text()
    for s in adds:
        body = device.split(f"void {s['name']}(")[1].split("\n}\n")[0]
        assert "nearbyintf(" not in body and "SWB_SCALAR(" not in body and body.count("__bang_float2int8_rn(") > 0
        assert "__bang_maxeq_scalar(" not in body and "__bang_mineq_scalar(" not in body


def test_which_epilogues_are_a_dequantized_int8_requantization():
    from swbuild.backends.diannao.defer_dequantize import _dequantize
    from swbuild.ir.loopnest import Acc, Bin, Const, Select, Un

    def q(z, lo, hi):
        v = Bin("+", Un("round", Bin("*", Acc(), Const(0.5))), Const(z)) if z else Un("round", Bin("*", Acc(), Const(0.5)))
        return Select(Bin(">=", v, Const(lo)), Select(Bin("<=", v, Const(hi)), v, Const(hi)), Const(lo))
    assert _dequantize(Bin("*", Bin("-", q(7.0, -128, 127), Const(7.0)), Const(0.25))) == (q(7.0, -128, 127), 7.0, 0.25)
    assert _dequantize(Bin("*", q(0.0, -128, 127), Const(0.25))) == (q(0.0, -128, 127), 0.0, 0.25)   # zero point 0
    assert _dequantize(Bin("*", Bin("-", q(7.0, 0, 255), Const(7.0)), Const(0.25))) is None          # uint8: no bytes
    assert _dequantize(Bin("*", Bin("-", q(7.0, -128, 127), Const(7.5)), Const(0.25))) is None      # not a zero point
    assert _dequantize(Bin("*", Acc(), Const(0.25))) is None


def _pool_and_downsample(seed=0):
    """Conv-Relu-MaxPool, then a block whose shortcut is a strided 1x1 Conv (ResNet's
    downsample): the Add is fused into that convolution's epilogue, reading conv2's result."""
    rng = np.random.default_rng(seed)
    inits = []
    w = weight_maker(rng, inits)
    n = helper.make_node
    nodes = [n("Conv", ["x", w("w0", C, C, 3, 3), w("b0", C, s=0.1)], ["c0"], pads=[1, 1, 1, 1], name="conv0"),
             n("Relu", ["c0"], ["r0"], name="relu0"),
             n("MaxPool", ["r0"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], name="pool"),
             n("Conv", ["p", w("w1", C, C, 3, 3), w("b1", C, s=0.1)], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2],
               name="conv1"),
             n("Relu", ["c1"], ["r1"], name="relu1"),
             n("Conv", ["r1", w("w2", C, C, 3, 3), w("b2", C, s=0.1)], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             n("Conv", ["p", w("wd", C, C, 1, 1), w("bd", C, s=0.1)], ["d"], strides=[2, 2], name="down"),
             n("Add", ["c2", "d"], ["a"], name="add"),
             n("Relu", ["a"], ["y"], name="relu2")]
    g = helper.make_graph(nodes, "pool_down", [helper.make_tensor_value_info("x", TP.FLOAT, [1, C, H, H])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, C, H // 4, H // 4])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_max_pool_and_a_fused_shortcut_read_the_requantized_integers_bit_exact(tc, tmp_path):
    """The MaxPool takes the maximum of conv0's integers and dequantizes after (reading them as
    bytes, widened in NRAM, its pads -128); the shortcut convolution's epilogue dequantizes
    conv2's integers: both QuantizeLinears then run on the vector unit (a reciprocal proven on
    their few values), no scalar code."""
    m = ort_quantized(tmp_path, model=_pool_and_downsample(), activations="QInt8")
    x = np.random.default_rng(8).standard_normal((1, C, H, H)).astype(np.float32)
    plan, _ = build_bit_exact(tc, m, "pd", x, tmp_path)
    moved = [n for n in plan["notes"] if "DequantizeLinear moved into the readers" in n]
    assert len(moved) >= 2, plan["notes"]
    assert not [n for n in plan["notes"] if "division kept" in n and "maxpool" in n]
    device = next((tmp_path / "b").glob("*_device.mlu")).read_text()
    for node in ("pool", "down"):
        code = device.split(f"(node {node}): ")[1].split("\n/* ")[0]
        assert "SWB_SCALAR(" not in code, node
        # the pool's requantization has its input's scale and zero point: proven the identity on
        # every int8 value (quantize.identity_on_domain), it is dropped; the shortcut's is a product
        assert ("__bang_mul_scalar(" in code) == (node == "down"), node
    pool = next(s for k in plan["kernels"] for s in k.get("kernels", [k]) if s.get("op") == "MaxPool")
    assert pool["schedule"].get("narrow_in") and "r0_DequantizeLinear_Output" in plan["int8_storage"]
    code = device.split("(node pool): ")[1].split("\n/* ")[0]
    assert "__bang_int82float(" in code and "(int8_t)(-128.0f)" in code
