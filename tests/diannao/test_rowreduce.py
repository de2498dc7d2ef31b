"""Row reductions on the vector unit (schedule/rowreduce.py): softmax's max and sum over a
contiguous axis, a row per __bang_max / __bang_sum with the padding lanes at the combine's
identity; each row's result goes out at once."""
import numpy as np
from onnx import helper

from dn_build import build_model, run_check
from onnx_builders import make
from swbuild.driver import check


def _run(tc, m, x, tmp_path):
    plan, exe = build_model(tc, m, "rr", tmp_path, grouping="off")     # a launch per kernel
    doc, stats = run_check(plan, exe, check.onnxruntime_reference(m, {"x": x}), {"x": x})
    assert doc["status"] == "pass", doc.get("reason")
    assert stats["violations"] == 0 and not doc["emulator"]["copy_mismatches"]
    assert doc["emulator"]["write_conflicts"] == 0
    cls = {k["name"]: k["class"] for k in plan["kernels"]}
    return plan, {k["name"]: (cls[k["name"]], k) for k in stats["kernels"]}


def test_softmax_max_and_sum_run_on_the_vector_unit(tc, tmp_path):
    rows, n = 3, 200                      # 200 lanes pad to 224: the padding holds -inf / 0
    m = make([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [("x", [rows, n])], [("y", [rows, n])])
    x = (np.random.default_rng(0).standard_normal((rows, n)) * 4).astype(np.float32)
    x[1, 7] = 30.0                        # a dominant element: the max must be exact
    plan, ks = _run(tc, m, x, tmp_path)
    red = {name: k for name, (c, k) in ks.items() if c == "rowreduce"}
    assert len(red) == 2
    ins = [k["instructions"] for k in red.values()]
    assert sorted((i.get("__bang_max", 0), i.get("__bang_sum", 0)) for i in ins) == [(0, rows), (rows, 0)]
    # scalar code left: the sum's per-row read of the row max (one operation a row), nothing else
    assert sorted(i.get("scalar_ops", 0) for i in ins) == [0, rows]


def test_reduce_max_and_sum_keepdims(tc, tmp_path):
    m = make([helper.make_node("ReduceMax", ["x"], ["a"], axes=[2], keepdims=1),
              helper.make_node("ReduceSum", ["x", "ax"], ["b"], keepdims=0)],
             [("x", [2, 5, 37])], [("a", [2, 5, 1]), ("b", [2, 5])], [("ax", np.array([2], dtype=np.int64))])
    x = np.random.default_rng(1).standard_normal((2, 5, 37)).astype(np.float32)
    plan, ks = _run(tc, m, x, tmp_path)
    assert sorted(c for c, _ in ks.values()) == ["rowreduce", "rowreduce"]
    assert all(k["instructions"].get("scalar_ops", 0) == 0 for _, k in ks.values())


def test_attention_scores_softmax(tc, tmp_path):
    """Softmax over the last axis of [1, 4, 16, 16] scores between two MatMuls: 4 rows a task,
    each reading its row max (a scalar per row) inside its own tile."""
    from onnx_builders import rand
    m = make([helper.make_node("MatMul", ["x", "k"], ["s"]), helper.make_node("Softmax", ["s"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "v"], ["y"])],
             [("x", [1, 4, 16, 8])], [("y", [1, 4, 16, 8])], [("k", rand(1, 4, 8, 16, seed=1)), ("v", rand(1, 4, 16, 8, seed=2))])
    x = rand(1, 4, 16, 8, seed=3, scale=2.0)
    plan, ks = _run(tc, m, x, tmp_path)
    red = [k for c, k in ks.values() if c == "rowreduce"]
    assert sorted(k["instructions"].get("__bang_max", 0) + k["instructions"].get("__bang_sum", 0) for k in red) == [64, 64]
