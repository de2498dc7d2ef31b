"""`swbuild check`'s float64 second opinion (driver/float64_check.py, issue 37): a check that
fails against onnxruntime on finite values passes only when swbuild's error against a float64
evaluation is within ROUNDING_FACTOR of onnxruntime's own; a wrong result, even one element a
few float32 roundings off, still fails, saying both numbers."""
import json
import time

import numpy as np
import onnx
from onnx import helper

from core_models import build_runner, make, rand
from swbuild.driver import check, float64_check


def _last_json(p):
    return json.loads(p.stdout.strip().splitlines()[-1])


def mlp(b2=None):
    """x[4, 512] -> MatMul -> Tanh -> MatMul + bias: long float32 sums whose order differs
    between swbuild and onnxruntime. `b2` replaces the last bias (a bug-like difference)."""
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Tanh", ["h"], ["t"]),
             helper.make_node("MatMul", ["t", "w2"], ["m"]), helper.make_node("Add", ["m", "b2"], ["y"])]
    inits = [("w1", rand(512, 256, seed=1, scale=0.05)), ("w2", rand(256, 32, seed=2, scale=0.1)),
             ("b2", rand(32, seed=3) if b2 is None else b2)]
    return make(nodes, [("x", [4, 512])], [("y", [4, 32])], inits)


def test_float32_rounding_passes_with_the_numbers(tmp_path, swbuild_cli):
    """Tolerances far below float32's (rtol 1e-7, atol 1e-9) make the comparison with onnxruntime
    fail on rounding; against float64 swbuild and onnxruntime are both at float32 roundoff."""
    onnx.save(mlp(), tmp_path / "mlp.onnx")
    p = swbuild_cli("check", tmp_path / "mlp.onnx", "--target", "sunway-emu", "-o", tmp_path / "b",
                    "--set", "rtol=1e-7", "--set", "atol=1e-9", cwd=tmp_path)
    doc = _last_json(p)
    assert p.returncode == 0 and doc["status"] == "pass", doc.get("reason")
    assert not doc["outputs"][0]["pass"] and doc["max_abs_err"] > 0       # onnxruntime's comparison failed
    second = doc["float64_check"]
    assert second["rounding"] and second["factor"] == float64_check.ROUNDING_FACTOR
    (o,) = second["outputs"]
    assert o["within_factor"] and o["swbuild"]["rms_rel_err"] < 1e-6 and o["onnxruntime"]["rms_rel_err"] < 1e-6
    assert "float32 rounding alone" in doc["note"] and "onnxruntime's own" in doc["note"]
    assert "float32 rounding alone" in p.stderr


def _check_against(tmp_path, built, reference_model, rtol, atol):
    """Check `built`'s runner as if onnxruntime had run `reference_model`: swbuild computing
    `built` is then a wrong kernel for `reference_model`."""
    plan, exe = build_runner(built, "sunway-emu", tmp_path, "m")
    ins = check.seeded_inputs(plan["inputs"], 0)
    return check.check_build(plan, exe, lambda x: check.onnxruntime_reference(reference_model, x), ins, rtol, atol,
                             workdir=tmp_path, wide=lambda x, s=None: check.float64_outputs(reference_model, x, s))


def test_one_column_a_few_roundings_off_still_fails(tmp_path):
    """The last bias off by 2e-5 in one of 32 columns (4e-6 of the output's peak of 5; onnxruntime's
    own largest rounding error is 1.5e-6) under tolerances that rounding alone already fails:
    not rounding, both numbers said. (2e-6 would be within onnxruntime's own rounding: it passes.)"""
    b2 = rand(32, seed=3)
    wrong = b2.copy()
    wrong[5] += np.float32(2e-5)
    doc = _check_against(tmp_path, mlp(wrong), mlp(b2), 1e-7, 1e-9)
    assert doc["status"] == "fail"
    assert not doc["float64_check"]["rounding"]
    assert "not float32 rounding" in doc["reason"] and "onnxruntime's own" in doc["reason"]
    (o,) = doc["float64_check"]["outputs"]
    s, r = o["swbuild"], o["onnxruntime"]
    assert s["err_vs_peak"] > float64_check.ROUNDING_FACTOR * r["err_vs_peak"]
    assert f"{s['err_vs_peak']:.3g}" in doc["reason"] and f"{r['err_vs_peak']:.3g}" in doc["reason"]


def test_average_pool_count_include_pad_flipped_fails(tmp_path):
    """The bug the second opinion was measured against: AveragePool's count_include_pad flipped."""
    def pool(cip):
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                 helper.make_node("AveragePool", ["c"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                  count_include_pad=cip)]
        return make(nodes, [("x", [1, 3, 8, 8])], [("y", [1, 4, 8, 8])], [("w", rand(4, 3, 3, 3, seed=4))])
    doc = _check_against(tmp_path, pool(0), pool(1), 1e-3, 1e-4)
    assert doc["status"] == "fail" and doc["float64_check"]["evaluator"] == "onnx.reference"   # no double Conv in onnxruntime
    (o,) = doc["float64_check"]["outputs"]
    assert o["swbuild"]["rms_rel_err"] > 1e3 * o["onnxruntime"]["rms_rel_err"]
    assert "not float32 rounding" in doc["reason"]


def test_skipped_when_out_of_time_or_no_evaluator_says_why():
    got, ref = [np.ones(4, np.float32)], [np.ones(4, np.float32)]
    asked = []

    def ort_only(_, seconds):
        asked.append(seconds)
        raise float64_check.Unavailable("onnxruntime has no float64 kernel for some node")
    d = float64_check.judge(["y"], got, ref, ort_only, {}, 1e-3, 1e-4, seconds=7.0)
    assert asked == [7.0]       # the time the numpy reference may take is the evaluator's to enforce
    assert not d["rounding"] and "no float64 kernel for some node" in d["skipped"]

    def lacking(_, seconds):
        raise float64_check.Unavailable("onnx.reference: no float64 kernel for Foo")
    d = float64_check.judge(["y"], got, ref, lacking, {}, 1e-3, 1e-4)
    assert not d["rounding"] and "no float64 kernel for Foo" in d["skipped"]


def test_reference_evaluator_is_stopped_after_its_seconds():
    """onnxruntime has no float64 Conv, so onnx's reference evaluator runs, in a child process that
    is stopped when its time is up (a flops count does not predict its speed); the reason says so."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])]
    model = make(nodes, [("x", [1, 32, 96, 96])], [("y", [1, 32, 96, 96])], [("w", rand(32, 32, 3, 3, seed=5))])
    ins = {"x": rand(1, 32, 96, 96, seed=6)}
    t0 = time.perf_counter()
    try:     # 0.05 s: less than a child Python needs to import numpy and onnx, on any machine
        check.float64_outputs(model, ins, seconds=0.05)
        raise AssertionError("the reference evaluator ran past its time")
    except float64_check.Unavailable as e:
        assert "did not finish within 0.05 s" in str(e) and "no float64 kernel" in str(e)
    assert time.perf_counter() - t0 < 30
    small = make(nodes, [("x", [1, 2, 5, 5])], [("y", [1, 2, 5, 5])], [("w", rand(2, 2, 3, 3, seed=5))])
    x = {"x": rand(1, 2, 5, 5, seed=6)}
    (y,), evaluator = check.float64_outputs(small, x, seconds=120)
    assert evaluator == "onnx.reference" and y.dtype == np.float64
    (y32,) = check.onnxruntime_reference(small, x)
    assert np.allclose(y, y32, rtol=1e-5, atol=1e-6)
