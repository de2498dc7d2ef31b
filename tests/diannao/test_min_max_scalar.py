"""Min and Max of a tensor and a run-time scalar (a graph input's one element): the relu forms
(min(x, s) = s - relu(s - x), max(x, s) = relu(x - s) + s) are exact for a finite s only, and
s = +inf gave NaN (inf - inf; found by the fuzzer, seed 103 of benchmarks/fuzz.py with 48
cases). Constant bounds keep the vector form."""
import numpy as np
from onnx import helper

from dn_build import build_model, run_check
from onnx_builders import make
from swbuild.driver import check


def test_min_and_max_with_an_infinite_run_time_scalar_match_onnxruntime(tc, tmp_path):
    nodes = [helper.make_node("Min", ["x", "s"], ["lo"]), helper.make_node("Max", ["x", "s"], ["hi"]),
             helper.make_node("Min", ["x", "t"], ["lo2"]), helper.make_node("Max", ["x", "t"], ["hi2"]),
             helper.make_node("Clip", ["x", "a", "b"], ["clip"])]
    m = make(nodes, [("x", [4, 8]), ("s", [1, 1]), ("t", [1, 1])],
             [("lo", [4, 8]), ("hi", [4, 8]), ("lo2", [4, 8]), ("hi2", [4, 8]), ("clip", [4, 8])],
             [("a", np.array(-0.5, np.float32)), ("b", np.array(0.75, np.float32))])
    plan, exe = build_model(tc, m, "mm", tmp_path)
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    x[0, :3] = [np.inf, -np.inf, 0.0]
    inputs = {"x": x, "s": np.array([[np.inf]], np.float32), "t": np.array([[-np.inf]], np.float32)}
    doc, stats = run_check(plan, exe, check.onnxruntime_reference(m, inputs), inputs, rtol=1e-6, atol=1e-6)
    assert doc["status"] == "pass", [(o["name"], o["max_abs_err"]) for o in doc["outputs"]]
    assert stats["violations"] == 0
    device = next(tmp_path.glob("*_device.mlu")).read_text()
    assert "__bang_active_relu" in device            # the constant bounds of Clip: vector instructions
