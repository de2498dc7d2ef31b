"""Small ONNX models and helpers for the optimizer tests (never written to the repository)."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from swbuild import toolchain
from swbuild.frontends.onnx import import_model
from swbuild.lowering import lower
from swbuild.optimizer.fuse import fuse_epilogues


def make(nodes, inputs, outputs, inits=(), opset=13, name="t"):
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
                          initializer=[numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def rand(*shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def conv_model(n=1, c=8, hw=16, co=16, k=3, stride=1, pads=(1, 1, 1, 1), group=1, relu=True):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=[stride, stride], pads=list(pads), group=group)]
    out = "y"
    if relu:
        nodes.append(helper.make_node("Relu", ["y"], ["z"]))
        out = "z"
    oh = (hw + pads[0] + pads[2] - k) // stride + 1
    return make(nodes, [("x", [n, c, hw, hw])], [(out, [n, co, oh, oh])],
                [("w", rand(co, c // group, k, k, seed=1, scale=0.3)), ("b", rand(co, seed=2))])


def program(model, name="t", fuse=True):
    p = lower(import_model(model), name)
    return fuse_epilogues(p) if fuse else p


def sunway(name="sunway-emu"):
    return toolchain.load(name)
