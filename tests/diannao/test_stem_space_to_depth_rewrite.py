"""benchmarks/stem_space_to_depth.py's rewrite of a 7x7 stride-2 stem as SpaceToDepth(2) + a
4x4 stride-1 convolution (issue 36) computes the same thing: bitwise for an int8 QDQ stem
(integer sums), within float rounding for a float one; checked with onnxruntime on images of
16 and 22 pixels (8 and 11 blocks)."""
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper as nh

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from stem_space_to_depth import reciprocal_exceptions, space_to_depth_stem  # noqa: E402


def _stem(path, hw, quantized, seed):
    rng = np.random.default_rng(seed)
    conv = dict(kernel_shape=[7, 7], strides=[2, 2], pads=[3, 3, 3, 3])
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, hw, hw])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, hw // 2, hw // 2])
    b = nh.from_array(rng.standard_normal(8).astype(np.float32), "b")
    if not quantized:
        w = nh.from_array(rng.standard_normal((8, 3, 7, 7)).astype(np.float32), "w")
        nodes = [helper.make_node("Conv", ["input", "w", "b"], ["y"], **conv)]
        inits = [w, b]
    else:
        f = lambda a, n: nh.from_array(np.asarray(a), n)     # noqa: E731
        inits = [f(rng.integers(-127, 128, (8, 3, 7, 7), dtype=np.int8), "wq"), f(np.float32(0.01), "ws"),
                 f(np.int8(0), "wz"), f(np.float32(0.037), "xs"), f(np.int8(-2), "xz"), f(np.float32(0.2), "ys"),
                 f(np.int8(3), "yz"), b]
        nodes = [helper.make_node("QuantizeLinear", ["input", "xs", "xz"], ["xq"]),
                 helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
                 helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"]),
                 helper.make_node("Conv", ["xd", "w", "b"], ["c"], **conv),
                 helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["cq"]),
                 helper.make_node("DequantizeLinear", ["cq", "ys", "yz"], ["y"])]
    m = helper.make_model(helper.make_graph(nodes, "stem", [x], [y], inits), opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(m, path)


def _run(path, x):
    return ort.InferenceSession(str(path)).run(None, {"input": x})[0]


@pytest.mark.parametrize("quantized", [False, True])
@pytest.mark.parametrize("hw", [16, 22])
def test_rewrite_is_exact(tmp_path, quantized, hw):
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    _stem(a, hw, quantized, seed=hw)
    space_to_depth_stem(a, b)
    m = onnx.load(b)
    assert [n.op_type for n in m.graph.node].count("SpaceToDepth") == 1
    x = np.random.default_rng(1).standard_normal((1, 3, hw, hw)).astype(np.float32) * 3
    ya, yb = _run(a, x), _run(b, x)
    assert ya.shape == yb.shape == (1, 8, hw // 2, hw // 2)
    if quantized:
        assert np.array_equal(ya, yb)
    else:
        np.testing.assert_allclose(yb, ya, rtol=1e-5, atol=1e-4)


def test_reciprocal_exceptions_counts_disagreements(tmp_path):
    """A power-of-two scale's reciprocal is exact (no exception at any neighbour 0); the counts
    at fl(1/s) agree with a brute-force comparison around every half-integer."""
    a = tmp_path / "a.onnx"
    _stem(a, 16, True, seed=0)
    m = onnx.load(a)
    xs = next(i for i in m.graph.initializer if i.name == "xs")
    xs.CopyFrom(nh.from_array(np.float32(0.03125), "xs"))
    onnx.save(m, a)
    assert reciprocal_exceptions(a, candidates=0)["fl(1/s)+0ulp"] == 0
    xs.CopyFrom(nh.from_array(np.float32(0.037), "xs"))
    onnx.save(m, a)
    got = reciprocal_exceptions(a, candidates=0)["fl(1/s)+0ulp"]
    s = np.float32(0.037)
    r = np.float32(1) / s
    want = 0
    for k in range(-126, 129):
        c = np.float32((k + 0.5) * float(s)).view(np.int32)
        x = (c + np.arange(-200, 201, dtype=np.int32)).view(np.float32) if c > 0 else \
            -((np.float32(-(k + 0.5) * float(s)).view(np.int32) + np.arange(-200, 201, dtype=np.int32)).view(np.float32))
        want += int(np.count_nonzero(np.clip(np.rint(x * r), -126, 129) != np.clip(np.rint(x / s), -126, 129)))
    assert got == want
