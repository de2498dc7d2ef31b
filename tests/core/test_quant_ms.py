"""onnxruntime's QOperator format (issue 36): the com.microsoft ops (frontends/contrib.py,
ops/quant_ms.py) bit-exact against onnxruntime on every emulated target, with seeded random
scales and zero points, every pair of 8-bit inputs (ties and saturation in reach), a pair
only a fused multiply-add rounds right (patched); a small CNN quantized by quantize_static in
QOperator format through `check`; other com.microsoft ops refused naming op and domain."""
import io
import json
from contextlib import redirect_stdout

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from core_models import build_runner
from quant_models import ort_quantized, qoperator_ops_model, wide_qlinear_conv_model
from swbuild import cli
from swbuild.config import toolchain
from swbuild.driver import check
from swbuild.driver.compiler import build_program
from swbuild.frontends import contrib
from swbuild.ops import LOWERINGS
from swbuild.optimizer.exact_ints import MS_QUANT_OPS
from swbuild.support.errors import UnsupportedError

TARGETS = ["sunway-emu", "sunway-pro-emu", "diannao-emu"]


def test_the_domain_ops_imported_are_the_ones_lowered():
    ops = {f"{contrib.DOMAIN}.{op}" for op in contrib.DOMAIN_OPS}
    assert ops == set(MS_QUANT_OPS) == {op for op in LOWERINGS if op.startswith(contrib.DOMAIN + ".")}
    assert {"QLinearAdd", "QLinearMul", "QLinearGlobalAveragePool", "QGemm", "QLinearSigmoid",
            "QLinearLeakyRelu"} <= set(contrib.DOMAIN_OPS)


@pytest.mark.parametrize("target", TARGETS)
def test_qoperator_ops_are_bit_exact_against_onnxruntime(target, tmp_path):
    m, feed = qoperator_ops_model()
    ref = check.onnxruntime_reference(m, feed)
    plan, exe = build_runner(m, target, tmp_path, "qops")
    assert sum(r.dtype.kind in "iu" for r in ref) >= 40
    doc = check.check_build(plan, exe, ref, feed, 0, 0, workdir=tmp_path)
    assert doc["status"] == "pass", (doc.get("reason"), [o["name"] for o in doc.get("outputs", []) if not o["pass"]])
    got, _, _, _, _ = check.run_runner(exe, plan, feed, tmp_path)
    for o, g, r in zip(m.graph.output, got, ref):      # integers: every byte; QGemm's float: every bit
        np.testing.assert_array_equal(g, r, err_msg=o.name)


def _ops_rows(path, target="sunway-emu"):
    f = io.StringIO()
    with redirect_stdout(f):
        assert cli.main(["ops", str(path), "--target", target, "--json"]) == 0
    return {r["node"]: r for r in json.loads(f.getvalue())["nodes"]}


def test_ops_report_gives_each_domain_nodes_dtype_path_and_the_patches(tmp_path):
    m, _ = qoperator_ops_model()
    onnx.save(m, tmp_path / "q.onnx")
    rows = _ops_rows(tmp_path / "q.onnx")
    add = rows["QLinearAdd_fma_full_uint8"]
    assert add["op"] == "QLinearAdd" and add["status"] in ("supported", "fused")
    assert add["dtype_path"].startswith("uint8 + uint8 -> uint8 held as exact float32")
    # the scales were chosen so that one pair at least needs the fused multiply-add's rounding
    patched = int(add["dtype_path"].split("pairs, ")[1].split(" patched")[0])
    assert patched >= 1
    # [2, 5, 6, 7] channels last: 5 x 6 values per output
    assert rows["gap1_int8"]["dtype_path"].startswith("int8 -> int8 held as exact float32: exact sum of 30")
    assert "9 values summed in onnxruntime's order" in rows["avgpool0_uint8"]["dtype_path"]
    assert rows["avgpool2_uint8"]["dtype_path"].startswith("uint8 -> uint8 held as exact float32: exact sum of 42")
    assert rows["qgemm_f32"]["dtype_path"].startswith("int8 x int8 -> int32 sum -> float32")
    assert "uint8 -> uint8" in rows["QLinearSigmoid_uint8"]["dtype_path"]


@pytest.mark.parametrize("target", TARGETS)
def test_onnxruntime_quantize_static_qoperator_model(target, tmp_path):
    """small_cnn through quantize_static in QOperator format (QLinearConv, MaxPool on uint8,
    QLinearAdd, QLinearGlobalAveragePool, QGemm, Dequantize): the uint8 logits bit for bit,
    so the dequantized float output too, against onnxruntime's default session."""
    m = ort_quantized(tmp_path, "QOperator")
    assert {(n.domain, n.op_type) for n in m.graph.node} >= {
        ("com.microsoft", "QLinearAdd"), ("com.microsoft", "QLinearGlobalAveragePool"), ("com.microsoft", "QGemm"),
        ("", "MaxPool")}
    m.graph.output.append(helper.make_tensor_value_info("y_quantized", TP.UINT8, [1, 10]))
    x = np.random.default_rng(9).standard_normal((1, 3, 16, 16)).astype(np.float32)
    plan, exe = build_runner(m, target, tmp_path, "qop")
    doc = check.check_build(plan, exe, lambda ins: check.onnxruntime_reference(m, ins), {"x": x}, 0, 0,
                            workdir=tmp_path)
    assert doc["status"] == "pass", doc.get("reason")
    assert [o["dtype"] for o in plan["outputs"]] == ["float32", "uint8"]


def _one_node(domain, op, opset_domain=None):
    n = helper.make_node(op, ["x", "s", "z", "s", "z"], ["y"], domain=domain, name="odd")
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", TP.UINT8, [4])],
                          [helper.make_tensor_value_info("y", TP.UINT8, [4])],
                          initializer=[numpy_helper.from_array(np.float32(0.1), "s"),
                                       numpy_helper.from_array(np.uint8(3), "z")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(opset_domain or domain, 1)],
                             ir_version=8)


def test_other_domain_ops_are_refused_naming_op_and_domain():
    tc = toolchain.load("sunway-emu")
    with pytest.raises(UnsupportedError, match=r"node 'odd': operator com\.microsoft::QLinearSoftmax is not supported; "
                                               r"of com\.microsoft, swbuild takes .*QLinearAdd"):
        build_program(_one_node("com.microsoft", "QLinearSoftmax"), tc, name="soft")
    with pytest.raises(UnsupportedError, match=r"operator domain 'ai\.onnx\.ml' is not supported"):
        build_program(_one_node("ai.onnx.ml", "Scaler"), tc, name="ml")


@pytest.mark.parametrize("target", TARGETS)
def test_qlinear_conv_sums_past_2_24_split_in_two_and_stay_bit_exact(target, tmp_path):
    """1152 products of up to 252 x 128 per output: int32 sums past 2^24, which onnxruntime
    rounds once to float32 before its multiplier; ops/quant_wide.py's two exact sums joined by
    one float32 addition give that rounding: onnxruntime's bytes."""
    m, feed = wide_qlinear_conv_model()
    x = feed["x"].astype(np.int64) - 3
    w = numpy_helper.to_array(next(t for t in m.graph.initializer if t.name == "w")).astype(np.int64)
    assert (x[0, :, 1:4, 1:4] * w[0]).sum() >= 1 << 24          # a sum past 2^24 is computed
    onnx.save(m, tmp_path / "wide.onnx")
    path = _ops_rows(tmp_path / "wide.onnx", target)["/layer4/conv2/Conv_quant"]["dtype_path"]
    assert "the sum may pass 2^24, so x - zero point = 16 h + l" in path
    plan, exe = build_runner(m, target, tmp_path, "wide")
    doc = check.check_build(plan, exe, lambda ins: check.onnxruntime_reference(m, ins), feed, 0, 0, workdir=tmp_path)
    assert doc["status"] == "pass", doc.get("reason")


@pytest.mark.parametrize("target", TARGETS)
def test_qlinear_conv_sums_past_2_24_over_two_channel_halves_stay_bit_exact(target, tmp_path):
    """The same convolution with +-100 where it had 127 / -128: the whole sum still passes 2^24,
    each half of the input channels' does not (ops/quant_split.py), so two exact half sums
    joined by one float32 addition: onnxruntime's bytes, each weight read once."""
    m, feed = wide_qlinear_conv_model(peak=100)
    x = feed["x"].astype(np.int64) - 3
    w = numpy_helper.to_array(next(t for t in m.graph.initializer if t.name == "w")).astype(np.int64)
    assert (x[0, :, 1:4, 1:4] * w[0]).sum() >= 1 << 24          # a sum past 2^24 is computed
    onnx.save(m, tmp_path / "half.onnx")
    path = _ops_rows(tmp_path / "half.onnx", target)["/layer4/conv2/Conv_quant"]["dtype_path"]
    assert "two float32 sums over input channels [0, 64) and [64, 128) proven exact" in path
    plan, exe = build_runner(m, target, tmp_path, "half")
    assert sorted(s["op"] for k in plan["kernels"] for s in k.get("kernels", [k]) if "_sum" in str(s.get("op"))) \
        == ["QLinearConv.half_sum"] * 2
    doc = check.check_build(plan, exe, lambda ins: check.onnxruntime_reference(m, ins), feed, 0, 0, workdir=tmp_path)
    assert doc["status"] == "pass", doc.get("reason")


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_resnet18_quantized_by_onnxruntime_in_qoperator_format_is_bit_exact(target, tmp_path):
    """The zoo's ResNet-18 through quantize_static in QOperator format: QLinearConv (its deep
    layers' sums past 2^24 split in two), MaxPool on uint8, QLinearAdd, QLinearGlobalAveragePool,
    QGemm: the logits, dequantized from uint8, equal onnxruntime's default session's."""
    from swbuild.zoo.registry import MODELS
    import swbuild.zoo.resnet  # noqa: F401  (registers resnet18)
    build, shape = MODELS["resnet18"]
    am = build(1, 0)
    m = ort_quantized(tmp_path, "QOperator", model=am.to_proto() if hasattr(am, "to_proto") else am, images=4)
    assert {n.op_type for n in m.graph.node if n.domain == "com.microsoft"} == {"QLinearAdd", "QLinearGlobalAveragePool",
                                                                                  "QGemm"}
    name = m.graph.input[0].name
    x = np.random.default_rng(1).standard_normal((1,) + tuple(shape)).astype(np.float32)
    plan, exe = build_runner(m, target, tmp_path, "r18qop")
    doc = check.check_build(plan, exe, lambda ins: check.onnxruntime_reference(m, ins), {name: x}, 0, 0,
                            workdir=tmp_path)
    assert doc["status"] == "pass", doc.get("reason")
