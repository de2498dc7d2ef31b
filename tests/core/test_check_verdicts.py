"""`swbuild check` verdicts that cannot pass vacuously (issue 37): how many elements were really
compared, the error relative to the output's magnitude, `vacuous` when nothing was; inputs of the
declared dtype; NaN placement judged by the ONNX spec when onnxruntime departs from it."""
import json

import numpy as np
import onnx
from onnx import TensorProto, helper

from core_models import build_runner, make, rand
from swbuild.driver import check


def _last_json(p):
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_compare_counts_what_it_compared_and_the_error_against_the_peak():
    ref = [np.array([1e-6, -2.0, 4.0, np.nan], np.float32), np.array([0, 0, 0], np.int64)]
    got = [np.array([0.0, -2.002, 4.0, np.nan], np.float32), np.array([0, 0, 0], np.int64)]
    ok, a, r, per = check.compare(got, ref, 1e-3, 1e-4)
    assert ok
    assert per[0]["compared"] == 2 and per[0]["elements"] == 4        # 1e-6 is below atol, NaN is not finite
    assert per[0]["peak"] == 4.0
    assert abs(per[0]["err_vs_peak"] - 0.002 / 4.0) < 1e-6
    assert abs(r - 0.001) < 1e-6
    assert per[1]["compared"] == 3                                     # integers compare exactly, zero included
    # NaN where the reference has a number: counted, and no NaN leaks into the errors
    ok, a, r, per = check.compare([np.array([np.nan, 1.0], np.float32)], [np.array([0.5, 1.0], np.float32)], 1e-3, 1e-4)
    assert not ok and per[0]["special_mismatches"] == 1 and a == 0.0 and per[0]["max_abs_err"] == 0.0


def test_outputs_all_below_atol_are_vacuous_not_a_pass(tmp_path, swbuild_cli):
    m = make([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", [4, 8])], [("y", [4, 8])],
             [("w", rand(8, 8, scale=1e-9))])
    onnx.save(m, tmp_path / "tiny.onnx")
    p = swbuild_cli("check", tmp_path / "tiny.onnx", "--target", "sunway-emu", "-o", tmp_path / "b", cwd=tmp_path)
    doc = _last_json(p)
    assert p.returncode == 1, p.stderr
    assert doc["status"] == "vacuous" and doc["compared"] == 0 and doc["elements"] == 32
    assert "feed inputs that exercise the model" in doc["reason"] and "atol=0.0001" in doc["reason"]
    assert "VACUOUS" in p.stderr
    # the threshold stays the user's: below the outputs' magnitude every element is compared
    p = swbuild_cli("check", tmp_path / "tiny.onnx", "--target", "sunway-emu", "-o", tmp_path / "b",
                    "--set", "atol=1e-12", "--set", "rtol=1e-4", cwd=tmp_path)
    doc = _last_json(p)
    assert p.returncode == 0, p.stderr
    assert doc["status"] == "pass" and doc["compared"] == 32 and doc["atol"] == 1e-12
    assert 0 < doc["outputs"][0]["peak"] < 1e-7 and doc["max_err_vs_peak"] < 1e-4


def test_bool_input_gets_generated_inputs_of_its_dtype(tmp_path, swbuild_cli):
    f = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node("Where", ["c", "x", "z"], ["y"])], "booly",
                          [f("c", TensorProto.BOOL, [4, 8]), f("x", TensorProto.FLOAT, [4, 8]),
                           f("z", TensorProto.FLOAT, [4, 8])], [f("y", TensorProto.FLOAT, [4, 8])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), tmp_path / "booly.onnx")
    p = swbuild_cli("check", tmp_path / "booly.onnx", "--target", "sunway-emu", "-o", tmp_path / "b", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert _last_json(p)["compared"] == 32
    ins = check.seeded_inputs([{"name": "c", "shape": [64], "dtype": "bool"},
                               {"name": "i", "shape": [3], "dtype": "uint8"},
                               {"name": "d", "shape": [2], "dtype": "float64"}], 0, {"i": 7})
    assert ins["c"].dtype == bool and 0 < ins["c"].sum() < 64
    assert ins["i"].dtype == np.uint8 and ins["i"].max() < 7 and ins["d"].dtype == np.float64


def _nan_model():
    return make([helper.make_node("Atanh", ["x"], ["a"]), helper.make_node("Sqrt", ["a"], ["b"]),
                 helper.make_node("ReduceMin", ["b"], ["y"], axes=[1], keepdims=0)], [("x", [4, 16])], [("y", [4])])


def _nan_inputs():
    # rows 0 and 2 in (0, 1): finite; rows 1 and 3 hold values whose atanh/sqrt is NaN
    x = np.random.default_rng(7).uniform(0.05, 0.95, (4, 16)).astype(np.float32)
    x[1, 3], x[3, 9], x[3, 12] = 1.5, -0.5, 2.0
    return {"x": x}


def test_nan_placement_judged_by_the_spec_when_onnxruntime_departs(tmp_path, swbuild_cli):
    m = _nan_model()
    ins = _nan_inputs()
    ort = check.onnxruntime_reference(m, ins)[0]
    spec = check.spec_reference(m, ins)[0]
    assert np.isnan(spec[[1, 3]]).all() and not np.isnan(ort).all()     # what this test is about
    onnx.save(m, tmp_path / "nanred.onnx")
    np.savez(tmp_path / "in.npz", **ins)
    p = swbuild_cli("check", tmp_path / "nanred.onnx", "--target", "sunway-emu", "-o", tmp_path / "b",
                    "--inputs", tmp_path / "in.npz", cwd=tmp_path)
    doc = _last_json(p)
    assert p.returncode == 0, p.stderr
    assert doc["status"] == "pass" and doc["reference_disagrees_with_spec"] is True
    assert doc["spec_check"]["swbuild_agrees"] and not doc["spec_check"]["reference_agrees"]
    assert doc["compared"] == 2                                          # the finite rows, against the spec
    assert "disagrees with the ONNX spec" in doc["note"] and "disagrees with the ONNX spec" in p.stderr


def test_nan_difference_from_the_spec_too_is_a_fail_that_says_so(tmp_path):
    m = _nan_model()
    ins = _nan_inputs()
    plan, exe = build_runner(m, "sunway-emu", tmp_path, "nanred")
    ort = check.onnxruntime_reference(m, ins)
    # a spec that agrees with onnxruntime: swbuild's NaN now differs from both
    doc = check.check_build(plan, exe, ort, ins, 1e-3, 1e-4, spec=lambda i: check.onnxruntime_reference(m, i))
    assert doc["status"] == "fail" and doc["max_abs_err"] == 0.0
    assert "NaN/inf in one and not the other: {'y': " in doc["reason"]
    assert "differs from the ONNX spec evaluator" in doc["reason"]
    assert doc["spec_check"]["swbuild_agrees"] is False and "reference_disagrees_with_spec" not in doc
    # without a spec there is no excuse either
    doc = check.check_build(plan, exe, ort, ins, 1e-3, 1e-4)
    assert doc["status"] == "fail" and "NaN/inf in one and not the other" in doc["reason"]


def test_a_quantized_output_beyond_one_step_passes_only_within_onnxruntimes_own_spread():
    # step 0.1: swbuild off by two steps at one element; onnxruntime's unoptimised session off
    # from its default by two steps elsewhere (a tie rounded the other way, grown through layers)
    step = 0.1
    ref = [np.array([1.0, 2.0, 3.0, 4.0], np.float32)]
    got = [np.array([1.2, 2.0, 3.0, 4.0], np.float32)]
    plan = {"outputs": [{"name": "y"}]}
    ok, _, _, per = check.compare(got, ref, 0, 0, [step])
    assert not ok
    wide = lambda x: [np.array([1.0, 2.0, 3.2, 4.0], np.float32)]
    doc = {}
    out = check._spread_opinion(doc, plan, got, ref, per, [step], wide, {}, 0, 0)
    assert out is not None and out[0]["pass"] and abs(out[0]["reference_spread"] - 0.2) < 1e-6
    assert doc["reference_spread"]["outputs"]["y"]["within"] and "onnxruntime's default and unoptimised" in doc["note"]
    # the sessions agree to one step: two steps off is a failure, with the numbers kept
    narrow = lambda x: [np.array([1.0, 2.0, 3.1, 4.0], np.float32)]
    doc = {}
    assert check._spread_opinion(doc, plan, got, ref, per, [step], narrow, {}, 0, 0) is None
    assert doc["reference_spread"]["outputs"]["y"]["within"] is False and "note" not in doc
    # an output with no quantization step gets no such opinion
    assert check._spread_opinion({}, plan, got, ref, per, [None], wide, {}, 0, 0) is None
