"""Refusals say one thing, once (issue 37): no stray `scons: *** [...] Error 2` line before the
JSON, suggestions that are related operators, a QDQ model refused naming its op (exit 3)."""
import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_builders import make
from swbuild.driver.lowering import nearest_ops


def test_nearest_supported_ops_are_related_ones():
    assert nearest_ops("QLinearConv") == ["Conv"]            # not IsNaN, which merely shares letters
    assert nearest_ops("QLinearMatMul") == ["MatMul"]        # not also its part Mul
    assert nearest_ops("GatherND") == ["Gather"]
    assert nearest_ops("Det") == []                          # not Identity
    assert nearest_ops("Celu") == ["Selu", "Relu", "Gelu"]   # near spellings stay


def test_refusal_prints_no_scons_error_line(tmp_path, swbuild_cli):
    m = make([helper.make_node("Det", ["x"], ["y"])], [("x", [4, 4])], [("y", [])])
    onnx.save(m, tmp_path / "det.onnx")
    p = swbuild_cli("check", tmp_path / "det.onnx", "--target", "sunway-emu", "-o", tmp_path / "b", cwd=tmp_path)
    assert p.returncode == 3, p.stderr
    assert "scons: ***" not in p.stderr and "scons: ***" not in p.stdout
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    assert doc["status"] == "unsupported" and "operator Det is not supported" in doc["reason"]


def test_qdq_model_is_refused_naming_the_op(tmp_path, swbuild_cli):
    f = helper.make_tensor_value_info
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(a, n) for n, a in [
        ("s", np.array(0.05, np.float32)), ("z", np.array(0, np.int8)),
        ("wq", rng.integers(-100, 100, (8, 3, 3, 3)).astype(np.int8)), ("ws", np.full(8, 0.01, np.float32)),
        ("wz", np.zeros(8, np.int8))]]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=0, name="dq_w"),
             helper.make_node("Conv", ["xd", "wd"], ["y"])]
    g = helper.make_graph(nodes, "qdq", [f("x", TensorProto.FLOAT, [1, 3, 8, 8])], [f("y", TensorProto.FLOAT, [1, 8, 6, 6])],
                          inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), tmp_path / "qdq.onnx")
    p = swbuild_cli("check", tmp_path / "qdq.onnx", "--target", "sunway-emu", "-o", tmp_path / "b", cwd=tmp_path)
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    assert p.returncode == 3, p.stderr
    assert doc["status"] == "unsupported"
    assert "operator DequantizeLinear is not supported" in doc["reason"] or \
        "operator QuantizeLinear is not supported" in doc["reason"]
