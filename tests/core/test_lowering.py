"""Each op's loop nest, evaluated by the numpy interpreter, against onnxruntime (no C)."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

from core_models import make, rand
from swbuild.frontends.onnx import import_model
from swbuild.ir.interp import run_program
from swbuild.driver.lowering import lower
from swbuild.optimizer.fuse import fuse_epilogues


def _check(model, feeds, rtol=1e-4, atol=1e-5, fuse=True):
    prog = lower(import_model(model), "t")
    if fuse:
        prog = fuse_epilogues(prog)
    got = run_program(prog, feeds)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=rtol, atol=atol)
    return prog


CONV_CASES = [
    dict(pads=[1, 1, 1, 1]),
    dict(strides=[2, 2], pads=[0, 1, 1, 0]),
    dict(dilations=[2, 2], pads=[2, 2, 2, 2]),
    dict(group=2),
    dict(group=4, pads=[1, 1, 1, 1]),        # depthwise: 4 in, 4 out
    dict(auto_pad="SAME_UPPER", strides=[2, 2]),
    dict(auto_pad="SAME_LOWER"),
]


@pytest.mark.parametrize("attrs", CONV_CASES, ids=[str(c) for c in CONV_CASES])
def test_conv(attrs):
    g = attrs.get("group", 1)
    w = rand(4, 4 // g, 3, 3, seed=1)
    m = make([helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs), helper.make_node("Relu", ["y"], ["z"])],
             [("x", [1, 4, 9, 9])], [("z", None)], [("w", w), ("b", rand(4, seed=2))])
    prog = _check(m, {"x": rand(1, 4, 9, 9)})
    assert len(prog.kernels) == 1 and prog.kernels[0].fused == ("Relu",)


POOL_CASES = [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1)),
    ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
    ("GlobalAveragePool", {}), ("GlobalMaxPool", {}),
]


@pytest.mark.parametrize("op,attrs", POOL_CASES, ids=[f"{o}-{a}" for o, a in POOL_CASES])
def test_pool(op, attrs):
    m = make([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", [1, 3, 9, 9])], [("y", None)])
    _check(m, {"x": rand(1, 3, 9, 9)})


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_gemm(ta, tb):
    a = rand(*((7, 5) if ta else (5, 7)), seed=1)
    b = rand(*((9, 7) if tb else (7, 9)), seed=2)
    m = make([helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=ta, transB=tb, alpha=0.5, beta=2.0)],
             [("a", list(a.shape))], [("y", None)], [("b", b), ("c", rand(9, seed=3))])
    _check(m, {"a": a})


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis,opset", [(-1, 13), (1, 13), (1, 11), (0, 13)])
def test_softmax(op, axis, opset):
    m = make([helper.make_node(op, ["x"], ["y"], axis=axis)], [("x", [2, 3, 5])], [("y", None)], opset=opset)
    _check(m, {"x": rand(2, 3, 5, scale=10)})


def test_lrn_and_broadcast_elementwise():
    nodes = [helper.make_node("LRN", ["x"], ["l"], size=5, alpha=1e-2, beta=0.75, bias=2.0),
             helper.make_node("Add", ["l", "c"], ["a"]), helper.make_node("Mul", ["a", "d"], ["m"]),
             helper.make_node("Sigmoid", ["m"], ["s"]), helper.make_node("Sum", ["s", "x", "m"], ["y"])]
    m = make(nodes, [("x", [1, 6, 4, 4])], [("y", None)], [("c", rand(6, 1, 1, seed=4)), ("d", rand(4, seed=5))])
    _check(m, {"x": rand(1, 6, 4, 4)})


def test_batchnorm_and_concat_and_transpose():
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "mu", "var"], ["bn"], epsilon=1e-3),
             helper.make_node("Transpose", ["bn"], ["t"], perm=[0, 2, 3, 1]),
             helper.make_node("Concat", ["t", "t"], ["y"], axis=3)]
    inits = [("s", rand(3, seed=1)), ("b", rand(3, seed=2)), ("mu", rand(3, seed=3)),
             ("var", np.abs(rand(3, seed=4)) + 0.5)]
    m = make(nodes, [("x", [2, 3, 4, 5])], [("y", None)], inits)
    _check(m, {"x": rand(2, 3, 4, 5)})


def test_matmul_batched_broadcast():
    m = make([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", [2, 3, 4, 5])], [("y", None)],
             [("b", rand(3, 5, 6, seed=1))])
    _check(m, {"a": rand(2, 3, 4, 5)})


CONVT_CASES = [
    dict(strides=[2, 2]),
    dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]),
    dict(strides=[3, 2], pads=[0, 1, 2, 0], dilations=[1, 2]),
    dict(group=2, strides=[1, 1], pads=[1, 1, 1, 1]),
    dict(strides=[2, 2], output_shape=[10, 8]),
    dict(strides=[2, 2], auto_pad="SAME_UPPER"),
]


@pytest.mark.parametrize("attrs", CONVT_CASES, ids=[str(c) for c in CONVT_CASES])
def test_conv_transpose(attrs):
    g = attrs.get("group", 1)
    m = make([helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], **attrs)],
             [("x", [1, 4, 4, 5])], [("y", None)], [("w", rand(4, 6 // g, 3, 3, seed=1)), ("b", rand(6, seed=2))])
    _check(m, {"x": rand(1, 4, 4, 5)})


def test_fused_add_waits_for_its_other_operand():
    """resnet's downsample block: Add(Conv(x), Conv(x)) fuses into the kernel that runs last."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "w2"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    m = make(nodes, [("x", [1, 3, 6, 6])], [("y", None)], [("w1", rand(4, 3, 3, 3, seed=1)), ("w2", rand(4, 3, 1, 1, seed=2))])
    prog = _check(m, {"x": rand(1, 3, 6, 6)})
    assert [k.op for k in prog.kernels] == ["Conv", "Conv"] and prog.kernels[1].fused == ("Add", "Relu")


def test_batchnorm_folds_into_conv_and_dead_nodes_go():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "mu", "var"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["y"]),
             helper.make_node("Sigmoid", ["x"], ["unused"])]
    inits = [("w", rand(4, 3, 3, 3, seed=1)), ("s", rand(4, seed=2)), ("b", rand(4, seed=3)),
             ("mu", rand(4, seed=4)), ("var", np.abs(rand(4, seed=5)) + 0.5)]
    m = make(nodes, [("x", [1, 3, 6, 6])], [("y", None)], inits)
    prog = _check(m, {"x": rand(1, 3, 6, 6)})
    assert [(k.op, k.fused) for k in prog.kernels] == [("Conv", ("Relu",))]


def test_first_concat_part_is_not_fused_as_an_elementwise_kernel():
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Concat", ["r", "x"], ["y"], axis=1)]
    m = make(nodes, [("x", [2, 3])], [("y", None)])
    _check(m, {"x": rand(2, 3)})
