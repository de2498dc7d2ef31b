"""Refusals say one thing, once (issue 37): no stray `scons: *** [...] Error 2` line before the
JSON, suggestions that are related operators, an op that constant folding cannot evaluate
refused naming it (exit 3); the QDQ model that was refused that way now runs (issue 36)."""
import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_builders import make
from swbuild.driver.lowering import nearest_ops


def test_nearest_supported_ops_are_related_ones():
    assert nearest_ops("QLinearAdd") == ["Add"]                    # onnxruntime's com.microsoft op: its float twin
    assert nearest_ops("QLinearAveragePool") == ["AveragePool"]    # not also its part Pool
    assert nearest_ops("QGemm") == ["Gemm"]
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


def test_qdq_model_at_opset_17_compiles_and_matches(tmp_path, swbuild_cli):
    """The QDQ model that was refused with a folding error now runs: QuantizeLinear and
    DequantizeLinear are lowered, the constant weights' DequantizeLinear folded (issue 36)."""
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
    assert p.returncode == 0 and doc["status"] == "pass", p.stdout + p.stderr
    assert doc["compared"] > 0


def test_an_op_folding_cannot_evaluate_is_refused_naming_it(tmp_path, swbuild_cli):
    """A constant input to an op onnx's reference evaluator lacks (GlobalLpPool): folding leaves
    the node to lowering, which refuses it by name (exit 3), not with a folding error."""
    f = helper.make_tensor_value_info
    c = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4), "c")
    nodes = [helper.make_node("GlobalLpPool", ["c"], ["p"], name="lp"), helper.make_node("Add", ["x", "p"], ["y"])]
    g = helper.make_graph(nodes, "lp", [f("x", TensorProto.FLOAT, [1, 1, 1, 1])], [f("y", TensorProto.FLOAT, [1, 1, 1, 1])],
                          [c])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), tmp_path / "lp.onnx")
    p = swbuild_cli("check", tmp_path / "lp.onnx", "--target", "sunway-emu", "-o", tmp_path / "b", cwd=tmp_path)
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    assert p.returncode == 3, p.stdout + p.stderr
    assert doc["status"] == "unsupported" and "operator GlobalLpPool is not supported" in doc["reason"]
    assert "constant folding" not in doc["reason"]
