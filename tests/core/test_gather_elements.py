"""GatherElements with run-time indices (RoBERTa's position ids index a buffer) and constant
ones, against onnxruntime; negative indices wrap as the spec says."""
import json
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

SHAPE, AXIS = (3, 5, 4), 1


def _model(const_indices):
    rng = np.random.default_rng(7)
    idx = rng.integers(-SHAPE[AXIS], SHAPE[AXIS], size=(3, 6, 4)).astype(np.int64)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))]
    inits = []
    if const_indices:
        inits.append(numpy_helper.from_array(idx, "i"))
    else:
        inputs.append(helper.make_tensor_value_info("i", TensorProto.INT64, list(idx.shape)))
    g = helper.make_graph([helper.make_node("GatherElements", ["x", "i"], ["y"], name="ge", axis=AXIS)], "g", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(idx.shape))], initializer=inits)
    feed = {"x": rng.standard_normal(SHAPE).astype(np.float32)} | ({} if const_indices else {"i": idx})
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), feed


@pytest.mark.parametrize("target,const_indices", [("sunway-emu", False), ("sunway-emu", True), ("diannao-emu", True)])
def test_gather_elements_matches_onnxruntime(tmp_path, target, const_indices):
    m, feed = _model(const_indices)
    (tmp_path / "m.onnx").write_bytes(m.SerializeToString())
    np.savez(tmp_path / "in.npz", **feed)
    p = subprocess.run([sys.executable, "-m", "swbuild.cli", "check", str(tmp_path / "m.onnx"), "-t", target,
                        "-o", str(tmp_path / "b"), "-Q", "--inputs", str(tmp_path / "in.npz")], capture_output=True, text=True)
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    assert doc["status"] == "pass" and doc["max_abs_err"] == 0.0, doc
    assert doc["compared"] == 3 * 6 * 4


@pytest.mark.parametrize("target", ["sunway-emu", "diannao-emu"])
def test_int64_rows_gathered_at_run_time(tmp_path, target):
    """An int64 table read through run-time indices moves 8-byte elements (RoBERTa's token-type
    ids: a GatherElements of an int64 buffer, then a Gather by its result). The Sunway gather
    kernel moved 4 bytes an element, half of each id: wrong rows downstream, no error."""
    rng = np.random.default_rng(3)
    table = (rng.integers(-2**40, 2**40, size=(6, 5)) * 3 + 1).astype(np.int64)
    g = helper.make_graph(
        [helper.make_node("Gather", ["t", "i"], ["y"], name="g", axis=0)], "g",
        [helper.make_tensor_value_info("i", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [4, 5])], initializer=[numpy_helper.from_array(table, "t")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    (tmp_path / "m.onnx").write_bytes(m.SerializeToString())
    np.savez(tmp_path / "in.npz", i=np.array([5, 0, -1, 2], np.int64))
    p = subprocess.run([sys.executable, "-m", "swbuild.cli", "check", str(tmp_path / "m.onnx"), "-t", target,
                        "-o", str(tmp_path / "b"), "-Q", "--inputs", str(tmp_path / "in.npz")], capture_output=True, text=True)
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    if target == "diannao-emu" and doc["status"] == "unsupported":
        assert "int64" in doc["reason"], doc        # refused by dtype, never a wrong row
        return
    assert doc["status"] == "pass" and doc["max_abs_err"] == 0.0, doc
