"""ONNX model builders shared by the test directories (models are made in memory, never committed)."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def make(nodes, inputs, outputs, inits=(), opset=13, name="t"):
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
                          initializer=[numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def rand(*shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def as_array(v):
    """A node test's data value (TensorProto or array-like) as a numpy array."""
    return np.asarray(numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v)


def bind_params(model, inputs, params):
    """A copy of `model` whose inputs at positions `params[op_type]` of its nodes are
    initializers with their values from `inputs` (graph order): the weights, shapes and scales
    an ahead-of-time compiler needs constant. Returns (model, {name: array} of the inputs
    left, in graph order)."""
    m = onnx.ModelProto.FromString(model.SerializeToString())
    bound = {n.input[k] for n in m.graph.node for k in params.get(n.op_type, ()) if k < len(n.input) and n.input[k]}
    keep, feed = [], {}
    for vi, v in zip(list(m.graph.input), inputs):
        if vi.name in bound:
            m.graph.initializer.append(numpy_helper.from_array(as_array(v), vi.name))
        else:
            keep.append(vi)
            feed[vi.name] = as_array(v)
    del m.graph.input[:]
    m.graph.input.extend(keep)
    return m, feed
