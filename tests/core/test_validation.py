"""Invalid and hostile input: refused before code generation with one line naming node, op,
tensor and cause; never a Python traceback from the command line."""
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from core_models import make, rand
from swbuild.support.errors import ModelError
from swbuild.frontends.onnx import import_model
from swbuild.driver.lowering import lower


def _refused(m, pattern, **kw):
    with pytest.raises(ModelError, match=pattern) as e:
        lower(import_model(m, **kw), "m")
    assert "\n" not in str(e.value)


def test_reshape_that_changes_the_element_count_is_refused():
    m = make([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")], [("x", [2, 16])], [("y", [7, 7])],
             [("s", np.array([7, 7], np.int64))])
    _refused(m, r"node 'rs' \(Reshape\): tensor 'y': reshapes 32 elements \[2, 16\] into 49 \[7, 7\]")


def test_constant_gather_index_outside_its_axis_is_refused():
    m = make([helper.make_node("Gather", ["x", "i"], ["y"], axis=1, name="g")], [("x", [2, 4])], [("y", [2, 2])],
             [("i", np.array([1, -5], np.int64))])
    _refused(m, r"node 'g' \(Gather\): tensor 'i': constant index -5 is outside axis 1 of size 4 \(valid: -4..3\)")


def test_input_without_shape_is_refused_unless_given():
    m = make([helper.make_node("Relu", ["x"], ["y"])], [("x", [2])], [("y", [2])])
    m.graph.input[0].type.tensor_type.ClearField("shape")
    _refused(m, r"graph input 'x' has no shape; give it .* --input x=")
    assert import_model(m, input_shapes={"x": (3, 2)}).tensors["y"].shape == (3, 2)


def test_conv_whose_channels_disagree_with_its_weights_is_refused():
    m = make([helper.make_node("Conv", ["x", "w"], ["y"], name="c")], [("x", [1, 3, 5, 5])], [("y", [1, 4, 3, 3])],
             [("w", rand(4, 2, 3, 3))])
    _refused(m, r"node 'c' \(Conv\): tensor 'w': weights \[4, 2, 3, 3\] expect 2 input channels \(group=1\); "
                r"input 'x' has 3")
    m = make([helper.make_node("Conv", ["x", "w", "b"], ["y"], name="c")], [("x", [1, 2, 5, 5])], [("y", [1, 4, 3, 3])],
             [("w", rand(4, 2, 3, 3)), ("b", rand(3))])
    _refused(m, r"node 'c' \(Conv\): tensor 'b': bias shape \[3\] is not \[4\]")


def test_batchnorm_statistics_must_match_the_channels():
    m = make([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn")],
             [("x", [1, 3, 2, 2])], [("y", [1, 3, 2, 2])],
             [("s", rand(3)), ("b", rand(3)), ("m", rand(2)), ("v", np.ones(3, np.float32))])
    _refused(m, r"node 'bn' \(BatchNormalization\): tensor 'm': has 2 values for 3 channels")


def test_string_where_a_float_attribute_belongs_is_refused():
    m = make([helper.make_node("LeakyRelu", ["x"], ["y"], alpha="abc", name="lr")], [("x", [2])], [("y", [2])])
    _refused(m, r"node 'lr' \(LeakyRelu\): .*alpha.*FLOAT")


def test_output_listed_twice_is_refused_and_pass_through_output_is_copied():
    m = make([helper.make_node("Relu", ["x"], ["y"])], [("x", [2])], [("y", [2]), ("y", [2])])
    _refused(m, r"graph output 'y' is listed twice")
    m = make([helper.make_node("Relu", ["x"], ["y"])], [("x", [2])], [("y", [2]), ("x", [2])])
    p = lower(import_model(m), "m")
    assert len(p.outputs) == 2 and p.outputs[1] != "x"
    assert [k.op for k in p.kernels] == ["Relu", "Copy"]


def test_huge_declared_shape_is_refused_before_anything_allocates():
    m = make([helper.make_node("Relu", ["x"], ["y"])], [("x", [100000, 100000, 1000])], [("y", [100000, 100000, 1000])])
    _refused(m, r"graph input 'x' has shape \[100000, 100000, 1000\]: 10000000000000 elements")
    m = make([helper.make_node("Expand", ["x", "s"], ["y"], name="ex")], [("x", [1])], [("y", [1 << 20, 1 << 12])],
             [("s", np.array([1 << 20, 1 << 12], np.int64))])
    _refused(m, r"node 'ex' \(Expand\): output 'y' has shape \[1048576, 4096\]")


def test_initializer_whose_data_is_shorter_than_its_dims_is_refused():
    m = make([helper.make_node("Add", ["x", "c"], ["y"])], [("x", [4])], [("y", [4])], [("c", rand(4))])
    m.graph.initializer[0].raw_data = m.graph.initializer[0].raw_data[:8]
    _refused(m, r"initializer 'c' has 8 bytes of data; its dims \[4\] need 16")


def _last_json(text):
    return json.loads(text.strip().splitlines()[-1])


def test_cli_gives_one_line_for_every_hostile_input(swbuild_cli, tmp_path):
    """Each case: exit 2, one stderr line naming the file or field and the cause, no traceback."""
    bad_attr = make([helper.make_node("LeakyRelu", ["x"], ["y"], alpha="abc")], [("x", [2])], [("y", [2])])
    onnx.save(bad_attr, tmp_path / "attr.onnx")
    good = make([helper.make_node("Relu", ["x"], ["y"])], [("x", [2, 3])], [("y", [2, 3])])
    onnx.save(good, tmp_path / "good.onnx")
    (tmp_path / "latin1.yaml").write_bytes(b"model: caf\xe9\nsource: {zoo: vgg16}\n")
    (tmp_path / "escape.yaml").write_text("model: ../../escaped\nsource: {zoo: vgg16}\n")
    (tmp_path / "abs.yaml").write_text("model: /tmp/escaped\nsource: {zoo: vgg16}\n")
    np.savez(tmp_path / "wrong.npz", x=np.zeros((3, 2), np.float32))
    out = tmp_path / "o"
    cases = [
        (["compile", tmp_path / "attr.onnx"], r"node 'LeakyRelu_0' \(LeakyRelu\)"),
        (["compile", "--recipe", tmp_path / "latin1.yaml"], r"latin1.yaml:1: not UTF-8 text \(byte 0xe9"),
        (["compile", "--recipe", tmp_path / "escape.yaml"], r"escape.yaml:1: model: '../../escaped' is not a plain"),
        (["compile", "--recipe", tmp_path / "abs.yaml"], r"abs.yaml:1: model: '/tmp/escaped' is not a plain"),
        (["compile", tmp_path / "good.onnx", "--name", "../x"], r"--name: '../x' is not a plain model name"),
        (["check", tmp_path / "good.onnx", "--inputs", tmp_path / "wrong.npz"],
         r"wrong.npz: input 'x' has shape \[3, 2\]; the model needs \[2, 3\]"),
    ]
    for args, pattern in cases:
        r = swbuild_cli(*args, "--target", "sunway-emu", "-o", out, cwd=tmp_path)
        assert r.returncode == 2, (args, r.stderr)
        assert "Traceback" not in r.stderr, r.stderr
        errs = [ln for ln in r.stderr.splitlines() if ln.startswith("swbuild: error")]
        assert len(errs) == 1, r.stderr
        import re
        assert re.search(pattern, errs[0]), (pattern, errs[0])
    assert not (tmp_path.parent / "escaped").exists() and not (tmp_path / "build").exists()


def test_dtype_of_npz_that_cannot_cast_is_refused(tmp_path):
    from swbuild.driver.check import load_npz
    from swbuild.support.errors import SwbuildError
    np.savez(tmp_path / "s.npz", x=np.array([["a", "b"]]))
    with pytest.raises(SwbuildError, match=r"s.npz: input 'x' has dtype <U1; the model needs float32"):
        load_npz(tmp_path / "s.npz", [{"name": "x", "shape": [1, 2], "dtype": "float32"}], "input")


def test_recipe_timeout_option_is_typed(tmp_path):
    from swbuild.support.errors import RecipeError
    from swbuild.config.recipe import load_recipe
    p = tmp_path / "t.yaml"
    p.write_text("model: t\nsource: {zoo: vgg16}\ncheck: {timeout: 30}\n")
    assert load_recipe(p).check["timeout"] == 30
    p.write_text("model: t\nsource: {zoo: vgg16}\ncheck: {timeout: 0}\n")
    with pytest.raises(RecipeError, match=r"t.yaml:3: check.timeout: 0 is too small"):
        load_recipe(p)


def test_typed_graph_input_of_unknown_elem_type_is_refused():
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.UNDEFINED, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    _refused(m, r"graph input 'x' has no element type")
