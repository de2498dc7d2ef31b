"""A broadcast of a constant over the innermost axis whose tile ends in a partitioned tail:
the padded vector instruction and the tail's scalar loop must not both run on a lane (the
statements are in place, x = x + c, so a lane done twice is wrong)."""
from onnx import helper

from dn_build import build_model, run_check
from onnx_builders import make, rand
from swbuild.driver import check

OPS = ["Add", "Sub", "Mul", "Sum", "Mean"]


def test_broadcast_of_a_constant_over_a_tail_tile_matches_onnxruntime(tc, tmp_path):
    nodes = [helper.make_node(op, ["x", "c"], [f"y_{op}"]) for op in OPS]
    m = make(nodes, [("x", [8, 5, 7, 4])], [(f"y_{op}", [8, 5, 7, 4]) for op in OPS], [("c", rand(4, seed=3))])
    plan, exe = build_model(tc, m, "bc", tmp_path)
    inputs = check.seeded_inputs(plan["inputs"], 1)
    doc, stats = run_check(plan, exe, check.onnxruntime_reference(m, inputs), inputs, rtol=1e-6, atol=1e-6)
    assert doc["status"] == "pass", [(o["name"], o["max_abs_err"]) for o in doc["outputs"]]
    assert stats["violations"] == 0
    assert doc["max_abs_err"] == 0.0
