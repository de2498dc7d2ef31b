"""Small ONNX models the CLI tests share (made in the test's temp dir, never committed)."""
import numpy as np
import onnx
from onnx import helper

from onnx_builders import make, rand


def conv_softmax_pad(path):
    """Conv → Relu → Softmax → Pad: a convolution (tensorized on DianNao), a reduction (scalar
    there) and a data movement kernel."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Softmax", ["r"], ["s"], name="softmax", axis=1),
             helper.make_node("Pad", ["s", "p"], ["y"], name="pad", mode="constant")]
    m = make(nodes, [("x", [1, 4, 8, 8])], [("y", [1, 8, 10, 10])],
             [("w", rand(8, 4, 3, 3)), ("p", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))])
    onnx.save(m, path)
    return path
