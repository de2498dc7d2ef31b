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


def _shape_chain(stages):
    """Swin-T-like window partitions: each stage reads its input's shape, divides a dimension
    (Div lies outside onnx's data propagation, so each stage needs its own round of folding
    and shape inference) and Reshapes with the result."""
    from onnx import numpy_helper
    nodes, x = [], "x"
    inits = [numpy_helper.from_array(np.array([1], np.int64), "i1"),
             numpy_helper.from_array(np.array([2], np.int64), "two"),
             numpy_helper.from_array(np.array([-1], np.int64), "m1")]
    for s in range(stages):
        p = f"s{s}_"
        nodes += [helper.make_node("Shape", [x], [p + "shape"]),
                  helper.make_node("Gather", [p + "shape", "i1"], [p + "d"], axis=0),
                  helper.make_node("Div", [p + "d", "two"], [p + "q"]),
                  helper.make_node("Concat", ["m1", p + "q"], [p + "new"], axis=0),
                  helper.make_node("Reshape", [x, p + "new"], [p + "y"]),
                  helper.make_node("Relu", [p + "y"], [p + "r"])]
        x = p + "r"
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 1 << 12])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), x


def test_shape_chains_fold_to_a_fixpoint():
    """12 stages need 12+ rounds of fold + infer (the old loop stopped at 8 and blamed
    run-time data); every stage halves the last dimension and doubles the first."""
    m, out = _shape_chain(12)
    g = import_model(m)
    assert g.tensors[out].shape == (3 << 12, 1)
    assert [n.op for n in g.nodes] == ["Reshape", "Relu"] * 12
    assert g.tensors["s11_new"].data.tolist() == [-1, 1]


def test_data_dependent_shape_names_the_run_time_value():
    """A Reshape whose target is computed from a graph input at run time: the message names
    that tensor and the node computing it, not a round limit."""
    nodes = [helper.make_node("Cast", ["s"], ["si"], to=TensorProto.INT64, name="to_int"),
             helper.make_node("Reshape", ["x", "si"], ["y"], name="reshape_by_data")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
                                       helper.make_tensor_value_info("s", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    with pytest.raises(UnsupportedError, match=r"node 'reshape_by_data' \(Reshape\): cannot determine a static shape "
                                               r"for output 'y': it depends on the value of 'si' \(computed at run "
                                               r"time by node 'to_int' \(Cast\)\)"):
        import_model(m)
    nz = helper.make_graph([helper.make_node("NonZero", ["x"], ["idx"], name="nz")], "g",
                           [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])],
                           [helper.make_tensor_value_info("idx", TensorProto.INT64, None)])
    with pytest.raises(UnsupportedError, match=r"node 'nz' \(NonZero\): .* value of 'x' \(graph input\)"):
        import_model(helper.make_model(nz, opset_imports=[helper.make_opsetid("", 13)], ir_version=8))


@pytest.mark.parametrize("target", ["sunway-emu", "diannao-emu"])
def test_shape_chain_runs(target, tmp_path):
    """The 12-stage chain compiles and matches onnxruntime (the reshapes are free aliases)."""
    from rnn_models import check_on
    m, _ = _shape_chain(12)
    doc, _ = check_on(m, {"x": rand(3, 1 << 12)}, target, tmp_path)
    assert doc["status"] == "pass", doc.get("reason")
