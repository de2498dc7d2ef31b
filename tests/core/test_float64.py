"""float64 models (issue 36): double kernels on both Sunway targets (SW26010's native
precision), refused by node on DianNao; onnxruntime has no double Conv, so the reference is
onnx's spec evaluator (check.onnxruntime_reference falls back to it)."""

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from core_models import build_and_run
from swbuild.config import toolchain
from swbuild.driver import check
from swbuild.driver.compiler import build_program
from swbuild.support.errors import UnsupportedError


def f64_model():
    rng = np.random.default_rng(0)
    n = helper.make_node
    nodes = [n("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"), n("Relu", ["c"], ["r"]),
             n("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             n("Flatten", ["p"], ["f"]), n("MatMul", ["f", "fw"], ["m"]), n("Add", ["m", "fb"], ["a"]),
             n("Softmax", ["a"], ["s"]), n("Exp", ["a"], ["e"]), n("ReduceSum", ["e"], ["rs"], keepdims=1)]
    inits = [numpy_helper.from_array(v, k) for k, v in [
        ("w", rng.standard_normal((4, 3, 3, 3))), ("b", rng.standard_normal(4)),
        ("fw", rng.standard_normal((64, 10)) * 0.1), ("fb", rng.standard_normal(10))]]
    g = helper.make_graph(nodes, "d", [helper.make_tensor_value_info("x", TP.DOUBLE, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("s", TP.DOUBLE, [1, 10]),
                           helper.make_tensor_value_info("rs", TP.DOUBLE, [1, 1])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu"])
def test_float64_model_computes_in_double_on_sunway(tmp_path, target):
    m = f64_model()
    ins = {"x": np.random.default_rng(1).standard_normal((1, 3, 8, 8))}
    plan, got = build_and_run(m, target, tmp_path, ins, "d64")
    ref = check.onnxruntime_reference(m, ins)       # the spec evaluator: no double Conv in onnxruntime
    for g, r in zip(got, ref):
        assert g.dtype == np.float64
        # float32 arithmetic would be ~1e-7 off: this holds only in double
        np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-12)
    slave = (tmp_path / "d64_slave.c").read_text() if (tmp_path / "d64_slave.c").exists() else \
        next(tmp_path.rglob("d64_slave.c")).read_text()
    assert "double *acc = (double *)ldm_malloc(" in slave and "expf(" not in slave


def test_float64_is_refused_on_diannao_naming_the_node():
    with pytest.raises(UnsupportedError, match=r"node 'conv' \(Conv\): dtype float64 at run time is not supported "
                                               r"on diannao-emu"):
        build_program(f64_model(), toolchain.load("diannao-emu"), name="d64")


@pytest.mark.parametrize("target", ["sunway-emu"])
def test_a_double_kernel_reads_a_float32_mask(tmp_path, target):
    """Where(bool, double, double): the bool is a float32 0/1 buffer (optimizer/dtypes.py) in a
    double kernel; each box has its own element size in LDM and DMA."""
    n = helper.make_node
    g = helper.make_graph([n("Greater", ["a", "b"], ["c"]), n("Where", ["c", "a", "b"], ["y"], name="pick"),
                           n("Mul", ["y", "a"], ["z"])], "g",
                          [helper.make_tensor_value_info(x, TP.DOUBLE, [3, 50]) for x in "ab"],
                          [helper.make_tensor_value_info("z", TP.DOUBLE, [3, 50])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    rng = np.random.default_rng(2)
    ins = {x: rng.standard_normal((3, 50)) * 1e10 for x in "ab"}
    _, got = build_and_run(m, target, tmp_path, ins, "mask")
    np.testing.assert_array_equal(got[0], np.maximum(ins["a"], ins["b"]) * ins["a"])


def test_ops_report_names_the_double_path(tmp_path, capsys):
    from swbuild import cli
    onnx.save(f64_model(), tmp_path / "d.onnx")
    assert cli.main(["ops", str(tmp_path / "d.onnx"), "--target", "sunway-emu", "--json"]) == 0
    rows = {r["node"]: r for r in json.loads(capsys.readouterr().out)["nodes"]}
    assert rows["conv"]["dtype_path"] == "float64 computed in double (Sunway, exact; refused on DianNao)"
