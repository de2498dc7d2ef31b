import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from core_models import make, rand
from swbuild.support.errors import ModelError, UnsupportedError
from swbuild.frontends.onnx import import_model, load_model
from swbuild.driver.lowering import lower


def test_corrupt_and_truncated_files_give_one_clear_error(tmp_path):
    m = make([helper.make_node("Relu", ["x"], ["y"])], [("x", [2, 3])], [("y", [2, 3])])
    data = m.SerializeToString()
    bad = tmp_path / "trunc.onnx"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match="trunc.onnx"):
        load_model(bad)
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\xff\xfe not a protobuf at all" * 10)
    with pytest.raises(ModelError, match="junk.onnx"):
        load_model(junk)
    with pytest.raises(ModelError, match="no such ONNX file"):
        load_model(tmp_path / "missing.onnx")


def test_dynamic_dimension_without_shape_names_input_and_dim():
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(ModelError, match=r"input 'x' has dynamic dimension 0 \('N'\)"):
        import_model(m)
    gr = import_model(m, input_shapes={"x": (4, 3)})
    assert gr.tensors["y"].shape == (4, 3)


def test_constant_subgraphs_fold_and_splats_stay_lazy():
    shape = np.array([4096, 4096], dtype=np.int64)
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["w"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
             helper.make_node("Shape", ["x"], ["xs"]),
             helper.make_node("Reshape", ["x", "xs"], ["x2"]),
             helper.make_node("MatMul", ["x2", "w"], ["y"])]
    m = make(nodes, [("x", [2, 4096])], [("y", [2, 4096])], [("s", shape)])
    g = import_model(m)
    assert [n.op for n in g.nodes] == ["Reshape", "MatMul"]
    w = g.tensors["w"].data
    assert w.shape == (4096, 4096) and w.strides == (0, 0)   # 64 MB never materialised


def test_unsupported_op_names_op_node_and_nearest():
    m = make([helper.make_node("Celu", ["x"], ["y"], name="my_celu")], [("x", [2, 3])], [("y", [2, 3])])
    with pytest.raises(UnsupportedError, match=r"node 'my_celu': operator Celu is not supported; nearest supported: "
                                               r"Selu, Relu, Gelu \(`swbuild ops --target T` lists all \d+\)") as e:
        lower(import_model(m), "m")
    assert "Conv" not in str(e.value)     # the nearest names, not the whole list


def test_external_data_is_loaded(tmp_path):
    w = rand(64, 64)
    m = make([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", [1, 64])], [("y", [1, 64])], [("w", w)])
    onnx.save(m, tmp_path / "ext.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
              location="ext.data", size_threshold=0)
    assert (tmp_path / "ext.data").exists()
    g = import_model(load_model(tmp_path / "ext.onnx"))
    np.testing.assert_array_equal(g.tensors["w"].data, w)
