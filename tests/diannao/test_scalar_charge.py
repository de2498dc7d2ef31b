"""Scalar device code is charged (scalar_ops.py, bangemu's __bangemu_scalar): the plain C
loops of a scalar-class kernel cost `scalar_cycles_per_op` cycles per operation on the
compute queue, so the kernel's cycles include them; they used to cost nothing."""
import numpy as np
from onnx import helper

from dn_build import build_model, run_check
from onnx_builders import make
from swbuild.driver import check


def test_softmax_row_reductions_are_charged_per_scalar_operation(tc, tmp_path):
    # over axis 0 of [n, rows]: the reduced axis is strided, so the reductions stay scalar
    # (a contiguous one runs on the vector unit, schedule/rowreduce.py)
    rows, n = 3, 200
    m = make([helper.make_node("Softmax", ["x"], ["y"], axis=0)], [("x", [n, rows])], [("y", [n, rows])])
    plan, exe = build_model(tc, m, "sm", tmp_path, grouping="off")   # a launch per kernel
    x = np.random.default_rng(0).standard_normal((n, rows)).astype(np.float32)
    doc, stats = run_check(plan, exe, check.onnxruntime_reference(m, {"x": x}), {"x": x})
    assert doc["status"] == "pass" and stats["violations"] == 0
    assert doc["emulator"]["copy_mismatches"] == []      # a scalar kernel copies nothing, predicts nothing
    device = next(tmp_path.glob("*_device.mlu")).read_text()
    assert "SWB_SCALAR" in device
    cpo, launch = int(tc.hardware["scalar_cycles_per_op"]), int(tc.hardware["launch_cycles"])
    # per row, one row per task: the index split (a remainder and a division for each of
    # the two axes), the init, per element the loads, the arithmetic and the combine, the store
    row_max = 2 * 2 + 1 + n * (1 + 1) + 1                 # load x, max
    row_sum = 2 * 2 + 1 + n * (2 + 2 + 1) + 1             # load x and the max, sub, exp, add
    scalar = {k["name"] for k in plan["kernels"] if k["class"] == "scalar"}    # the two reductions
    red = sorted((k for k in stats["kernels"] if k["name"] in scalar),
                 key=lambda k: k["instructions"]["scalar_ops"])
    assert [k["instructions"]["scalar_ops"] for k in red] == [rows * row_max, rows * row_sum]
    for k in red:
        ops = k["instructions"]["scalar_ops"]
        assert k["instruction_cycles"]["scalar_ops"] == ops * cpo
        # the busiest task runs one row: the kernel's cycles are the launch plus at least that row
        assert k["cycles"] >= launch + ops // rows * cpo
