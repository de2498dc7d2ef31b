"""Min and Max of a tensor and a run-time scalar (a graph input's one element) stay element-wise:
the relu forms they once took gave NaN for s = +inf (inf - inf; found by the fuzzer, seed 103 of
benchmarks/fuzz.py with 48 cases). Constant bounds are one clamp instruction each
(__bang_maxeq/mineq_scalar), exact for every number: the relu forms rounded x - s, and
Clip(x, -1e8, 1e8) gave zeros."""
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
    assert "__bang_maxeq_scalar" in device and "__bang_mineq_scalar" in device   # Clip's constant bounds


def test_constant_bounds_are_exact_clamps(tc, tmp_path):
    """Bounds far from the values (relu(x + 1e8) - 1e8 is 0 for |x| < 4) and near them: every
    output equal to onnxruntime's, bit for bit; Clip's bounds are one vector pass each (relu for
    the 0 of ReLU6), Max/Min read their initializer at run time (element-wise, exact)."""
    nodes = [helper.make_node("Clip", ["x", "a", "b"], ["wide"]), helper.make_node("Clip", ["x", "c", "d"], ["six"]),
             helper.make_node("Max", ["x", "a"], ["hi"]), helper.make_node("Min", ["x", "d"], ["lo"])]
    m = make(nodes, [("x", [4, 64])], [(n, [4, 64]) for n in ("wide", "six", "hi", "lo")],
             [("a", np.array(-1e8, np.float32)), ("b", np.array(1e8, np.float32)),
              ("c", np.array(0.0, np.float32)), ("d", np.array(6.0, np.float32))])
    plan, exe = build_model(tc, m, "cb", tmp_path)
    x = (np.random.default_rng(1).standard_normal((4, 64)) * 4).astype(np.float32)
    x[0, :4] = [1e-7, -1e-7, 5.9999995, -0.0]
    inputs = {"x": x}
    doc, stats = run_check(plan, exe, check.onnxruntime_reference(m, inputs), inputs, rtol=0, atol=0)
    assert doc["status"] == "pass", [(o["name"], o["max_abs_err"]) for o in doc["outputs"]]
    assert stats["violations"] == 0
    device = next(tmp_path.glob("*_device.mlu")).read_text()
    assert device.count("__bang_maxeq_scalar(") == 1 and device.count("__bang_mineq_scalar(") == 2
