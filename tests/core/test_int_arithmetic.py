"""int32/int64 arithmetic at run time (issue 36): Sunway kernels compute in C's integer types
(exact, as onnxruntime: Div truncates, Mod takes the divisor's sign, values far beyond
float32's 2^24); an op with no exact
integer C is refused naming the node; DianNao refuses (tests/core/test_dtypes.py)."""

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from core_models import build_and_run
from swbuild.config import toolchain
from swbuild.driver import check
from swbuild.driver.compiler import build_program
from swbuild.support.errors import UnsupportedError

I = TP.INT64


def int_model():
    n = helper.make_node
    nodes = [n("Add", ["a", "b"], ["s"]), n("Mul", ["s", "k"], ["m"]), n("Sub", ["m", "b"], ["d"]),
             n("Div", ["d", "k3"], ["q"]), n("Less", ["q", "a"], ["lt"]), n("Where", ["lt", "q", "a"], ["w"]),
             n("ReduceSum", ["w", "ax"], ["rs"], keepdims=1), n("ReduceMax", ["w"], ["rm"], axes=[1], keepdims=1),
             n("Gather", ["w", "gi"], ["gw"], axis=1), n("Equal", ["a", "b"], ["eq"]), n("Max", ["a", "b"], ["mx"]),
             n("Cast", ["c"], ["c64"], to=I), n("Add", ["c64", "a"], ["ca"]),
             n("Cast", ["x"], ["xi"], to=TP.INT32), n("Mul", ["xi", "two32"], ["xi2"]), n("Abs", ["xi2"], ["xa"]),
             n("Cast", ["q"], ["qf"], to=TP.DOUBLE), n("Mod", ["a", "k3"], ["md"]), n("Mod", ["b", "c64"], ["mc"]),
             n("Mod", ["b", "k3"], ["mf"], fmod=1)]
    inits = [numpy_helper.from_array(np.array(v, dt), k) for k, v, dt in [
        ("k", 3, np.int64), ("k3", -7, np.int64), ("ax", [1], np.int64), ("two32", 2, np.int32), ("gi", [0, 5, -2], np.int64)]]
    outs = [("w", I, [2, 6]), ("rs", I, [2, 1]), ("rm", I, [2, 1]), ("gw", I, [2, 3]), ("eq", TP.BOOL, [2, 6]),
            ("mx", I, [2, 6]), ("ca", I, [2, 6]), ("xa", TP.INT32, [2, 6]), ("qf", TP.DOUBLE, [2, 6]),
            ("md", I, [2, 6]), ("mc", I, [2, 6]), ("mf", I, [2, 6])]     # Mod: the divisor's sign, as Python's %
    g = helper.make_graph(nodes, "ints", [helper.make_tensor_value_info(x, I, [2, 6]) for x in "ab"]
                          + [helper.make_tensor_value_info("c", TP.INT32, [2, 6]),
                             helper.make_tensor_value_info("x", TP.FLOAT, [2, 6])],
                          [helper.make_tensor_value_info(*o) for o in outs], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu"])
def test_int64_arithmetic_is_exact_on_sunway(tmp_path, target):
    m = int_model()
    rng = np.random.default_rng(0)
    ins = {"a": rng.integers(-2 ** 40, 2 ** 40, (2, 6)), "b": rng.integers(-2 ** 40, 2 ** 40, (2, 6)),
           "c": rng.integers(-2 ** 30, 2 ** 30, (2, 6)).astype(np.int32),
           "x": rng.uniform(-1e6, 1e6, (2, 6)).astype(np.float32)}
    ins["b"][0, :2] = ins["a"][0, :2]       # some Equal
    plan, got = build_and_run(m, target, tmp_path, ins, "ints")
    ref = check.onnxruntime_reference(m, ins)
    for spec, g, r in zip(plan["outputs"], got, ref):
        assert g.dtype == r.dtype, spec["name"]
        np.testing.assert_array_equal(g, r, err_msg=spec["name"])
    # float32 arithmetic would have lost these (|values| ~ 2^40 > 2^24)
    assert np.abs(ref[0]).max() > 2 ** 30


def test_int_op_without_exact_c_is_refused_naming_the_node():
    n = helper.make_node
    g = helper.make_graph([n("Pow", ["a", "b"], ["c"], name="ipow")], "g",
                          [helper.make_tensor_value_info(x, I, [4]) for x in "ab"],
                          [helper.make_tensor_value_info("c", I, [4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with pytest.raises(UnsupportedError, match=r"node 'ipow' \(Pow\): pow of integers has no exact arithmetic in C for dtype int64"):
        build_program(m, toolchain.load("sunway-emu"), name="p")


def test_ops_report_names_the_integer_path_per_node(tmp_path, capsys):
    import json

    import onnx

    from swbuild import cli
    onnx.save(int_model(), tmp_path / "i.onnx")
    assert cli.main(["ops", str(tmp_path / "i.onnx"), "--target", "sunway-emu", "--json"]) == 0
    rows = {r["node"]: r for r in json.loads(capsys.readouterr().out)["nodes"]}
    assert rows["Add_0"]["dtype_path"] == "int64 in C's long long (Sunway, exact; refused on DianNao)"
    assert rows["Add_0"]["status"] in ("supported", "fused")
    assert cli.main(["ops", str(tmp_path / "i.onnx"), "--target", "diannao-emu", "--json"]) != 0
    rows = {r["node"]: r for r in json.loads(capsys.readouterr().out)["nodes"]}
    assert rows["Div_3"]["status"] == "unsupported" and "dtype int64 at run time" in rows["Div_3"]["detail"]
