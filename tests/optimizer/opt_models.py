"""Small ONNX models and helpers for the optimizer tests (never written to the repository)."""
from onnx import helper

from onnx_builders import make, rand  # noqa: F401  (re-exported to the tests here)

from swbuild import toolchain
from swbuild.frontends.onnx import import_model
from swbuild.lowering import lower
from swbuild.optimizer.fuse import fuse_epilogues


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
