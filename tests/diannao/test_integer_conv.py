"""Integer convolutions on the MLU (schedule/integer.py, issue 36): a QDQ model's QLinearConv
and QLinearMatMul kernels run as __bang_conv on fixed-point inputs (int8 x int8 for int8
activations and for uint8 ones, which optimizer/uint8_as_int8.py holds as int8; int16 x int8
for a uint8 that stays uint8) converted in NRAM from the staged tile, with int8 weights in
the image and WRAM, the zero point taken out in the epilogue. Bit-exact against onnxruntime's
default session (which fuses the same chains), no BANG rule violated, and the
emulator charges the toolchain's fixed-point rates."""
import sys
from pathlib import Path

import numpy as np
import pytest

from dn_build import build_model, run_check
from swbuild.backends.diannao.report import build_report
from swbuild.driver import check

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from quant_models import ort_quantized, small_cnn  # noqa: E402


def _instr(plan, kind):
    out = {}
    for k in plan["kernels"]:
        for s in k.get("kernels", [k]):
            if s.get("op") == kind:
                out[s["name"]] = (s.get("class"), s.get("static_instructions", {}), s.get("schedule", {}))
    return out


@pytest.mark.parametrize("acts,conversion", [("QInt8", "__bang_float2int8_rn"), ("QUInt8", "__bang_float2int8_rn")])
def test_qdq_model_convolves_in_fixed_point_bit_exact(tc, tmp_path, acts, conversion):
    m = ort_quantized(tmp_path, activations=acts)
    plan, exe = build_model(tc, m, "q", tmp_path / "b")
    convs = {**_instr(plan, "QLinearConv"), **_instr(plan, "QLinearMatMul")}
    assert len(convs) == 3
    for name, (cls, ins, sched) in convs.items():
        # an int8 input stored as bytes (schedule/narrow.py) is copied into the tile as it is
        converted = ins.get(conversion) or sched.get("narrow_in")
        assert cls in ("conv", "gemm") and ins.get("__bang_conv") and converted, (name, cls, ins, sched)
    x = np.random.default_rng(5).standard_normal((1, 3, 16, 16)).astype(np.float32)
    ref = check.onnxruntime_reference(m, {"x": x})
    doc, stats = run_check(plan, exe, ref, {"x": x}, 0, 0)
    assert doc["status"] == "pass", doc.get("reason")
    assert stats["violations"] == 0
    got, _, _, _, _ = check.run_runner(exe, plan, {"x": x}, tmp_path)
    np.testing.assert_array_equal(got[0], ref[0])
    device = next((tmp_path / "b").glob("*_device.mlu")).read_text()
    assert "(int8_t *)" in device and f"{conversion}(" in device


def _conv64(seed=0):
    """Conv 64 -> 64 channels, 3x3, then Relu: channels need no padding in float or int8."""
    from onnx import TensorProto as TP
    from onnx import helper, numpy_helper
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array((rng.standard_normal((64, 64, 3, 3)) * 0.05).astype(np.float32), "w")
    b = numpy_helper.from_array((rng.standard_normal(64) * 0.1).astype(np.float32), "b")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
                           helper.make_node("Relu", ["c"], ["y"], name="relu")], "conv64",
                          [helper.make_tensor_value_info("x", TP.FLOAT, [1, 64, 16, 16])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, 64, 16, 16])], initializer=[w, b])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_fixed_point_convolution_is_charged_the_int8_rate(tc, tmp_path):
    """The same convolution in float and in int8: the emulator's __bang_conv cycles fall by
    about the ratio of the toolchain's rates (8), less the fixed start-up of each call; the
    report's physical bound times each kernel's flops at its own rate (the int8 convolution's
    at 4096 MACs a cycle), so no model is modelled faster than its bound."""
    x = np.random.default_rng(6).standard_normal((1, 64, 16, 16)).astype(np.float32)
    cyc = {}
    hw = tc.hardware
    for name, m in (("f", _conv64()), ("q", ort_quantized(tmp_path, model=_conv64(), activations="QInt8"))):
        plan, exe = build_model(tc, m, name, tmp_path / name)
        ref = check.onnxruntime_reference(m, {"x": x})
        doc, stats = run_check(plan, exe, ref, {"x": x}, 1e-3, 1e-4)
        assert doc["status"] == "pass", doc.get("reason")
        rep = build_report(plan, stats, tc)
        subs = [s for k in plan["kernels"] for s in k.get("kernels", [k])]
        fx = [s["schedule"].get("fixed_point", 0) for s in subs if s["class"] == "conv"]
        assert fx == ([1] if name == "q" else [0])
        peak = {0: hw["conv_float_macs_per_cycle"], 1: hw["conv_int8_macs_per_cycle"]}
        compute = sum(s["flops"] / (2 * peak[s["schedule"].get("fixed_point", 0)] * hw["cores"] * hw["clock_hz"])
                      for s in subs)
        memory = rep["model_compulsory_bytes"] / hw["mem_bandwidth_bytes_per_s"]
        assert rep["physical_bound_seconds"] == pytest.approx(max(compute, memory), rel=1e-12)
        assert rep["bound_ratio"] >= 1.0
        cyc[name] = sum(k.get("instruction_cycles", {}).get("__bang_conv", 0) for k in stats["kernels"])
        calls = sum(k["instructions"].get("__bang_conv", 0) for k in stats["kernels"])
        cyc[name + "_startup"] = calls * tc.hardware["conv_startup_cycles"]
    assert hw["conv_int8_macs_per_cycle"] == 8 * hw["conv_float_macs_per_cycle"]
    work = {k: cyc[k] - cyc[k + "_startup"] for k in ("f", "q")}
    assert 7 <= work["f"] / work["q"] <= 8.5, cyc


def test_wide_per_channel_qlinear_conv_sums_convolve_in_int8_bit_exact(tc, tmp_path):
    """A per-channel QLinearConv whose int32 sums pass 2^24 (ops/quant_wide.py: x - zero point =
    16 h + l, two sums): each digit sum runs as an int8 __bang_conv (h in [-1, 15], l in [0, 15],
    each sum proven below 2^24 from its digit's range), the digits stored as int8 bytes, and the
    output equals onnxruntime's bytes (the sums past 2^24 are computed: the model's own check)."""
    from quant_models import wide_qlinear_conv_model
    m, feed = wide_qlinear_conv_model()
    plan, exe = build_model(tc, m, "wide", tmp_path / "b")
    sums = {**_instr(plan, "QLinearConv.high_sum"), **_instr(plan, "QLinearConv.low_sum")}
    assert len(sums) == 2
    for name, (cls, ins, sched) in sums.items():
        assert cls == "conv" and ins.get("__bang_conv") and sched.get("narrow_in"), (name, cls, ins, sched)
    # the digits' floor and the requantization after the two sums on the vector unit (integer.py)
    parts = [s for k in plan["kernels"] for s in k.get("kernels", [k]) if str(s.get("op", "")).startswith("QLinearConv.")]
    assert len(parts) == 4 and all(not s["scalar_statements"] for s in parts), parts
    ref = check.onnxruntime_reference(m, feed)
    doc, stats = run_check(plan, exe, ref, feed, 0, 0)
    assert doc["status"] == "pass", doc.get("reason")
    assert stats["violations"] == 0 and doc["emulator"]["copy_mismatches"] == [] and doc["emulator"]["write_conflicts"] == 0
    got, _, _, _, _ = check.run_runner(exe, plan, feed, tmp_path)
    np.testing.assert_array_equal(got[0], ref[0])
    device = next((tmp_path / "b").glob("*_device.mlu")).read_text()
    assert "(int8_t *)wide_wram" in device


def test_wide_qlinear_conv_over_channel_halves_reads_each_weight_once_bit_exact(tc, tmp_path):
    """The wide convolution whose sums over each half of the input channels stay below 2^24
    (ops/quant_split.py): two __bang_conv sums of 64 channels each (the weights crossing GDRAM
    once, not once per digit), the requantization after them on the vector unit."""
    from quant_models import wide_qlinear_conv_model
    m, feed = wide_qlinear_conv_model(peak=100)
    plan, exe = build_model(tc, m, "half", tmp_path / "b")
    sums = _instr(plan, "QLinearConv.half_sum")
    assert len(sums) == 2
    for name, (cls, ins, sched) in sums.items():
        assert cls == "conv" and ins.get("__bang_conv") and sched["Cib"] == 64, (name, sched)
    parts = [s for k in plan["kernels"] for s in k.get("kernels", [k]) if str(s.get("op", "")).startswith("QLinearConv.")]
    assert len(parts) == 4 and all(not s["scalar_statements"] for s in parts), parts
    ref = check.onnxruntime_reference(m, feed)
    doc, stats = run_check(plan, exe, ref, feed, 0, 0)
    assert doc["status"] == "pass", doc.get("reason")
    assert stats["violations"] == 0 and doc["emulator"]["copy_mismatches"] == [] and doc["emulator"]["write_conflicts"] == 0


def test_digit_floor_is_the_floor_on_every_integer_it_may_see():
    """schedule/integer.digit_floor: ((d * 0.0625 - 0.46875) + M) - M in float32 step by step
    equals floor(d / 16) for every integer |d| <= 2^17 (a 16-bit input minus its zero point)."""
    from swbuild.backends.diannao.schedule.integer import MAGIC
    d = np.arange(-(1 << 17), (1 << 17) + 1, dtype=np.float32)
    f = np.float32
    y = ((d * f(0.0625)).astype(np.float32) - f(0.46875)).astype(np.float32)
    got = ((y + f(MAGIC)).astype(np.float32) - f(MAGIC)).astype(np.float32)
    np.testing.assert_array_equal(got, np.floor(d.astype(np.float64) / 16))
