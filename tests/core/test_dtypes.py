"""Typed graphs: int64 ids and masks, booleans and typed outputs, on every emulated target.

The attention-mask arithmetic is written node for node as PyTorch's exporter (torch 2.x,
transformers BertModel, opset 17) emits it: Cast(int64 -> bool), Flatten, a Gather of
constant indices, Reshape, And, Expand, Where(bool, 0, -inf), then Softmax and
Where(IsNaN(p), 0, p) behind it; and the older form Unsqueeze, Unsqueeze, Cast(float),
Sub(1 - m), Mul(m, finfo.min). One program per target holds every case."""

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from core_models import build_and_run, rand
from swbuild.driver import check
from swbuild.support.errors import UnsupportedError
from swbuild.frontends.onnx import import_model
from swbuild.driver.lowering import lower

S, H, V = 16, 8, 50


def _c(name, value, dtype=None):
    a = np.array(value, dtype=dtype)
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(a, name))


def mask_nodes():
    """attention_mask [1, S] int64 -> '/m/Expand_output_0' bool [1, 1, S, S] (the 2.x exporter)."""
    n = helper.make_node
    return [
        n("Cast", ["attention_mask"], ["m_cast"], to=TP.BOOL),
        _c("c0", np.array([], np.int64)), n("ConstantOfShape", ["c0"], ["cos"], value=helper.make_tensor("v", TP.BOOL, [1], [True])),
        _c("c1", np.arange(S, dtype=np.int64).reshape(1, 1, S, 1)), _c("c2", np.array(0, np.int64)),
        n("GreaterOrEqual", ["c1", "c2"], ["ge"]), n("Cast", ["ge"], ["ge_b"], to=TP.BOOL),
        n("And", ["cos", "ge_b"], ["and0"]),
        n("Shape", ["m_cast"], ["shp"]), _c("c3", np.array([1], np.int64)), n("Gather", ["shp", "c3"], ["g0"], axis=0),
        n("Flatten", ["m_cast"], ["flat"], axis=2), _c("c4", np.zeros((1, 1, 1, 1), np.int64)),
        n("Mul", ["c4", "g0"], ["mul0"]), _c("c5", np.arange(S, dtype=np.int64).reshape(1, 1, 1, S)),
        n("Add", ["c5", "mul0"], ["add0"]), n("Gather", ["flat", "add0"], ["g1"], axis=0),
        n("Shape", ["add0"], ["shp1"]), _c("c6", np.array([-1], np.int64)), n("Reshape", ["g1", "c6"], ["r0"]),
        n("Concat", ["shp1"], ["cat"], axis=0), n("Reshape", ["r0", "cat"], ["r1"]),
        n("Cast", ["r1"], ["r1b"], to=TP.BOOL), n("And", ["and0", "r1b"], ["and1"]),
        _c("c7", np.array([1, -1, S, S], np.int64)), _c("c8", np.array([4], np.int64)),
        n("ConstantOfShape", ["c8"], ["ones"], value=helper.make_tensor("v", TP.INT64, [1], [1])),
        _c("c9", np.array(-1, np.int64)), n("Mul", ["ones", "c9"], ["neg"]), n("Equal", ["c7", "neg"], ["eq"]),
        n("Where", ["eq", "ones", "c7"], ["shape4"]), n("Expand", ["and1", "shape4"], ["mask4"]),
    ]


def attention(mask_float):
    """Embeddings of int64 ids and token types, one attention head whose scores add the mask."""
    n = helper.make_node
    return [
        n("Gather", ["wemb", "input_ids"], ["e0"]), n("Gather", ["temb", "token_type_ids"], ["e1"]),
        n("Add", ["e0", "e1"], ["emb"]),
        n("MatMul", ["emb", "wq"], ["q"]), n("MatMul", ["emb", "wk"], ["k"]), n("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        n("MatMul", ["q", "kt"], ["s0"]), n("Unsqueeze", ["s0", "ax1"], ["s1"]), n("Add", ["s1", mask_float], ["s2"]),
        n("Softmax", ["s2"], ["p0"], axis=-1), n("IsNaN", ["p0"], ["nan"]), _c("zero", np.array([0.0], np.float32)),
        n("Where", ["nan", "zero", "p0"], ["p"]), n("Squeeze", ["p", "ax1"], ["p2"]), n("MatMul", ["p2", "emb"], ["out"]),
    ]


def bert_masks_model():
    n = helper.make_node
    nodes = mask_nodes() + [_c("w0", np.array([0.0], np.float32)), _c("winf", np.array([-np.inf], np.float32)),
                            n("Where", ["mask4", "w0", "winf"], ["madd"])]
    nodes += attention("madd")
    # the older exporter: Unsqueeze x2, Cast(float), Sub(1 - m), Mul(m, finfo.min)
    nodes += [n("Unsqueeze", ["attention_mask", "ax1"], ["u1"]), n("Unsqueeze", ["u1", "ax2"], ["u2"]),
              n("Cast", ["u2"], ["uf"], to=TP.FLOAT), _c("one", np.array(1.0, np.float32)), n("Sub", ["one", "uf"], ["inv"]),
              _c("fmin", np.array(np.finfo(np.float32).min, np.float32)), n("Mul", ["inv", "fmin"], ["old_mask"]),
              # typed outputs: the bool mask itself, an int64 copy of the ids, int32 from float
              n("Identity", ["input_ids"], ["ids_out"]), n("Cast", ["out", ], ["out_i32"], to=TP.INT32),
              n("Not", ["mask4"], ["not_mask"]), n("Xor", ["mask4", "not_mask"], ["xor_all"]),
              n("Or", ["not_mask", "mask4"], ["or_all"])]
    inputs = [helper.make_tensor_value_info(x, TP.INT64, [1, S]) for x in ("input_ids", "attention_mask", "token_type_ids")]
    outputs = [helper.make_tensor_value_info("out", TP.FLOAT, [1, S, H]),
               helper.make_tensor_value_info("old_mask", TP.FLOAT, [1, 1, 1, S]),
               helper.make_tensor_value_info("mask4", TP.BOOL, [1, 1, S, S]),
               helper.make_tensor_value_info("ids_out", TP.INT64, [1, S]),
               helper.make_tensor_value_info("out_i32", TP.INT32, [1, S, H]),
               helper.make_tensor_value_info("xor_all", TP.BOOL, [1, 1, S, S]),
               helper.make_tensor_value_info("or_all", TP.BOOL, [1, 1, S, S])]
    inits = [numpy_helper.from_array(a, k) for k, a in [
        ("wemb", rand(V, H, seed=1)), ("temb", rand(2, H, seed=2)), ("wq", rand(H, H, seed=3, scale=0.5)),
        ("wk", rand(H, H, seed=4, scale=0.5)), ("ax1", np.array([1], np.int64)), ("ax2", np.array([2], np.int64))]]
    g = helper.make_graph(nodes, "bert_masks", inputs, outputs, initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _inputs():
    rng = np.random.default_rng(5)
    mask = np.ones((1, S), np.int64)
    mask[0, 11:] = 0                        # padding at the end, as a tokenizer writes it
    return {"input_ids": rng.integers(0, V, (1, S)).astype(np.int64), "attention_mask": mask,
            "token_type_ids": (np.arange(S) >= 8).astype(np.int64).reshape(1, S)}


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu", "diannao-emu"])
def test_exporter_mask_arithmetic_and_typed_outputs_match_onnxruntime(tmp_path, target):
    m = bert_masks_model()
    ins = _inputs()
    plan, got = build_and_run(m, target, tmp_path, ins, "bm")
    assert [s["dtype"] for s in plan["inputs"]] == ["int64"] * 3
    assert [s["dtype"] for s in plan["outputs"]] == ["float32", "float32", "bool", "int64", "int32", "bool", "bool"]
    ref = check.onnxruntime_reference(m, ins)
    for spec, g, r in zip(plan["outputs"], got, ref):
        assert g.dtype == r.dtype, spec["name"]
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5, err_msg=spec["name"])
        else:
            np.testing.assert_array_equal(g, r, err_msg=spec["name"])
    assert got[2][0, 0, 0, :11].all() and not got[2][0, 0, 0, 11:].any()


def test_shape_arithmetic_folds_and_only_the_mask_runs():
    g = import_model(bert_masks_model())
    ops = sorted({n.op for n in g.nodes})
    assert "Shape" not in ops and "ConstantOfShape" not in ops and "Concat" not in ops
    p = lower(g, "bm")
    assert sum(k.kind == "convert" for k in p.kernels) >= 2     # ids/mask in, typed outputs out


def test_integer_arithmetic_at_run_time_is_refused_on_diannao_with_the_dtype():
    """Sunway computes int64 in C's integer types (tests/core/test_int_arithmetic.py); the MLU
    has no 64-bit integer arithmetic: refused naming node and dtype."""
    from swbuild.config import toolchain
    from swbuild.driver.compiler import build_program
    n = helper.make_node
    g = helper.make_graph([n("Add", ["a", "b"], ["c"], name="iadd")], "g",
                          [helper.make_tensor_value_info(x, TP.INT64, [4]) for x in "ab"],
                          [helper.make_tensor_value_info("c", TP.INT64, [4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with pytest.raises(UnsupportedError, match=r"node 'iadd' \(Add\): dtype int64 at run time is not supported on "
                                               r"diannao-emu"):
        build_program(m, toolchain.load("diannao-emu"), name="m")
