"""A tiny ONNX model (Conv+Relu on 1x3x8x8) for recipe tests."""
import hashlib

import onnx
from onnx import TensorProto, helper, numpy_helper
import numpy as np


def tiny_model():
    """Conv(3→4, 3x3, pad 1) + Relu on 1x3x8x8: small enough for any test."""
    w = numpy_helper.from_array(np.arange(4 * 3 * 3 * 3, dtype=np.float32).reshape(4, 3, 3, 3) / 100, "w")
    nodes = [helper.make_node("Conv", ["data", "w"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c"], ["out"])]
    g = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 8, 8])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def write_tiny(path, external=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    m = tiny_model()
    if external:
        onnx.save_model(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=external, size_threshold=0)
    else:
        onnx.save_model(m, str(path))
    return hashlib.sha256(path.read_bytes()).hexdigest()


