"""LRN on the vector unit (schedule/lrn.py): [C][T] tiles, the channel window as row-shifted
__bang_add, the power through __bang_active_log / __bang_active_exp; channels-last tensors
transposed on chip. Outputs match the ONNX node tests and onnxruntime, no scalar code is
left in the kernel, and the plan's GDRAM bytes equal the emulator's."""
import warnings

import numpy as np
import pytest
from onnx import helper

from dn_build import build_model, run_check
from onnx_builders import as_array, make, rand
from swbuild.backends.diannao.schedule.builder import Unschedulable
from swbuild.backends.diannao.schedule.lrn import lrn_form
from swbuild.backends.launches import kernel_entries
from swbuild.driver import check
from swbuild.ir.loopnest import Acc, Axis, Bin, Const, Kernel, Load, Var
from swbuild.ops.nn import lin


def _lrn_kernel(plan):
    return next(k for k in kernel_entries(plan["kernels"]) if k["op"] == "LRN")


def _lrn_stats(stats, plan):
    """The emulator's statistics of the launch that runs the LRN kernel."""
    k = _lrn_kernel(plan)
    launch = next(p for p in plan["kernels"] if p["name"] == k["name"] or k["name"] in
                  [s["name"] for s in p.get("kernels", ())])
    return next(s for s in stats["kernels"] if s["name"] == launch["name"])


def _check_build(tc, model, feed, tmp_path, expected=None):
    plan, exe = build_model(tc, model, "lrn", tmp_path)
    ref = check.onnxruntime_reference(model, feed)
    doc, stats = run_check(plan, exe, ref, feed)
    assert doc["status"] == "pass", doc.get("reason")
    assert stats["violations"] == 0 and not doc["emulator"]["copy_mismatches"]
    assert doc["emulator"]["write_conflicts"] == 0
    if expected is not None:       # the node test's own expected output
        got = check.run_runner(exe, plan, feed, tmp_path)[0]
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-6)
    k = _lrn_kernel(plan)
    assert k["class"] == "lrn"
    ks = _lrn_stats(stats, plan)
    assert ks["instructions"].get("scalar_ops", 0) == 0          # no scalar code left
    assert ks["instructions"]["__bang_active_log"] > 0 and ks["instructions"]["__bang_active_exp"] > 0
    return plan, stats, ks


@pytest.fixture(scope="module")
def node_cases():
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {c.name: c for c in collect_testcases(None) if c.name in ("test_lrn", "test_lrn_default")}


@pytest.mark.parametrize("name", ["test_lrn", "test_lrn_default"])
def test_onnx_node_tests_run_on_the_vector_unit(tc, tmp_path, node_cases, name):
    """NCHW graph input and output (C = 5, not a multiple of anything): rows copied strided."""
    case = node_cases[name]
    ins, outs = case.data_sets[0]
    feed = {case.model.graph.input[0].name: as_array(ins[0])}
    plan, stats, ks = _check_build(tc, case.model, feed, tmp_path, [as_array(o) for o in outs])
    assert "__bang_transpose" not in ks["instructions"]        # channels-first: no transpose
    # the input read once and the output written once, predicted as counted (copy_mismatches above)
    n = feed[case.model.graph.input[0].name].nbytes
    assert ks["memcpy_bytes"]["GDRAM2NRAM"] == n and ks["memcpy_bytes"]["NRAM2GDRAM"] == n


def test_channels_last_between_convolutions(tc, tmp_path):
    """Conv -> LRN -> Conv: the LRN's tensors are NHWC; C = 24 pads to 32 on chip (strided
    copies, padding channels never reach the window sums)."""
    C, H = 24, 9
    m = make([helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
              helper.make_node("LRN", ["a"], ["l"], size=5, alpha=1e-2, beta=0.75, bias=1.5),
              helper.make_node("Conv", ["l", "w2"], ["y"])],
             [("x", [1, 16, H, H])], [("y", [1, 64, H, H])],
             [("w1", rand(C, 16, 3, 3, seed=1, scale=0.5)), ("w2", rand(64, C, 1, 1, seed=2, scale=0.2))])
    plan, stats, ks = _check_build(tc, m, {"x": rand(1, 16, H, H, seed=3, scale=2.0)}, tmp_path)
    assert ks["instructions"]["__bang_transpose"] > 0
    # four shifted adds per tile for size 5, over C * T lanes
    assert ks["instructions"]["__bang_add"] == 4 * ks["instructions"]["__bang_active_log"]


def _kernel(bias=1.0, alpha=1e-4, beta=0.75, size=5):
    ax = [Axis(n, e) for n, e in (("i0", 1), ("i1", 8), ("i2", 4), ("i3", 4))]
    j = Axis("j", size)
    win = Load("x", (Var("i0"), lin([(Var("i1"), 1), (Var("j"), 1)], -((size - 1) // 2)), Var("i2"), Var("i3")), pad=0.0)
    epi = Bin("/", Load("x", tuple(a.var for a in ax)),
              Bin("pow", Bin("+", Const(bias), Bin("*", Const(alpha / size), Acc())), Const(beta)))
    return Kernel("k", "LRN", "n", "y", tuple(ax), Bin("*", win, win), {}, reduce_axes=(j,), combine="sum",
                  epilogue=epi)


def test_lrn_form_reads_the_parameters_and_refuses_a_base_that_may_not_be_positive():
    x, size, lo, ka, bias, beta = lrn_form(_kernel(bias=2.0, alpha=1e-3, beta=0.5, size=3))
    assert (size, lo, bias, beta) == (3, 1, 2.0, 0.5) and ka == pytest.approx(1e-3 / 3)
    for bad in (dict(bias=0.0), dict(bias=-1.0), dict(alpha=-1e-4)):
        with pytest.raises(Unschedulable, match="positive"):
            lrn_form(_kernel(**bad))


def test_batches_and_window_sizes(tc, tmp_path):
    """Batch 2 between convolutions (NHWC, a tile loop per image), size 1 (no window rows to
    pad) and size 3 on a batch-3 NCHW input, each against onnxruntime."""
    m = make([helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
              helper.make_node("LRN", ["a"], ["l"], size=3, alpha=1e-2, beta=0.6, bias=1.2),
              helper.make_node("Conv", ["l", "w2"], ["y1"]),
              helper.make_node("LRN", ["z"], ["y2"], size=1, alpha=1e-1, beta=0.9, bias=0.5),
              helper.make_node("LRN", ["v"], ["y3"], size=3, alpha=3e-2, beta=0.75, bias=1.0)],
             [("x", [2, 16, 7, 7]), ("z", [1, 6, 10, 1]), ("v", [3, 4, 5, 2])],
             [("y1", [2, 64, 7, 7]), ("y2", [1, 6, 10, 1]), ("y3", [3, 4, 5, 2])],
             [("w1", rand(48, 16, 3, 3, seed=1, scale=0.5)), ("w2", rand(64, 48, 1, 1, seed=2, scale=0.2))])
    feed = {"x": rand(2, 16, 7, 7, seed=4), "z": rand(1, 6, 10, 1, seed=5, scale=3.0), "v": rand(3, 4, 5, 2, seed=6)}
    plan, exe = build_model(tc, m, "lrnb", tmp_path)
    doc, stats = run_check(plan, exe, check.onnxruntime_reference(m, feed), feed)
    assert doc["status"] == "pass", doc.get("reason")
    assert stats["violations"] == 0 and not doc["emulator"]["copy_mismatches"] and doc["emulator"]["write_conflicts"] == 0
    assert [k["class"] for k in kernel_entries(plan["kernels"]) if k["op"] == "LRN"] == ["lrn"] * 3
