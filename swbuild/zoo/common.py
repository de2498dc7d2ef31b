"""Small helpers to write zoo architectures as ONNX graphs."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from .array_model import ArrayModel

IR_VERSION = 8      # readable by every onnxruntime we support
OPSET = 13


class GraphBuilder:
    """Nodes as protos, initializers as numpy arrays (`inits`: name -> array, in order): the
    model reaches the compiler without its weights being serialised (frontends/onnx.ArrayModel)."""

    def __init__(self, name, seed):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], {}
        self._n = 0

    def array(self, name, arr):
        """Add an initializer (kept as the array itself, no copy)."""
        self.inits[name] = arr
        return name

    def normal(self, shape, scale):
        """Seeded N(0, scale^2) float32, generated and scaled in place (one array at a time:
        vgg16's fc6 is 400 MB)."""
        w = self.rng.standard_normal(shape, dtype=np.float32)
        w *= np.float32(scale)
        return w

    def weight(self, name, shape, fan_in):
        return self.array(name, self.normal(shape, np.sqrt(2.0 / fan_in)))

    def bias(self, name, n):
        return self.array(name, self.normal(n, 0.01))

    def node(self, op, inputs, name, **attrs):
        out = f"{name}_out" if not name.endswith(":0") else name
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def finish(self, x_name, x_shape, out, out_shape):
        return finish_io(self, [(x_name, TensorProto.FLOAT, x_shape)], [(out, TensorProto.FLOAT, out_shape)])


# --- helpers shared by the swTVM model set (resnet, mobilenet, shufflenet, dcgan, yolov3, bert) ---

def const(gb, name, value, dtype=np.int64):
    """A constant initializer (shapes, axes, scales, scalars) named like an exporter would."""
    return gb.array(name, np.asarray(value, dtype=dtype))


def he(gb, name, shape, fan_in, gain=1.0):
    """He-normal weight, std = gain * sqrt(2 / fan_in)."""
    if gain == 1.0:
        return gb.weight(name, shape, fan_in)
    return gb.array(name, gb.normal(shape, gain * np.sqrt(2.0 / fan_in)))


def batchnorm(gb, x, name, c, gamma=1.0, epsilon=1e-5):
    """BatchNormalization (inference) with non-trivial seeded statistics so that folding it into
    the producer is really exercised: scale ~U(0.5,1.5)*gamma, bias ~N(0,0.1), mean ~N(0,0.1),
    var ~U(0.5,1.5)."""
    rng = gb.rng
    scale = (rng.uniform(0.5, 1.5, c) * gamma).astype(np.float32)
    bias = (rng.standard_normal(c) * 0.1).astype(np.float32)
    mean = (rng.standard_normal(c) * 0.1).astype(np.float32)
    var = rng.uniform(0.5, 1.5, c).astype(np.float32)
    ins = []
    for what, arr in (("weight", scale), ("bias", bias), ("running_mean", mean), ("running_var", var)):
        ins.append(gb.array(f"{name}/{what}", arr))
    return gb.node("BatchNormalization", [x] + ins, name, epsilon=epsilon, momentum=0.9)


def conv(gb, x, name, cin, cout, k, stride=1, pad=None, group=1, bias=False, gain=1.0):
    """Conv with He-initialised weight [cout, cin/group, k, k] (times `gain`), 'same'-style pads."""
    pad = k // 2 if pad is None else pad
    fan_in = cin // group * k * k
    w = he(gb, f"{name}/weight", (cout, cin // group, k, k), fan_in, gain)
    ins = [x, w] + ([gb.bias(f"{name}/bias", cout)] if bias else [])
    attrs = dict(kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
    if group != 1:
        attrs["group"] = group
    return gb.node("Conv", ins, name, **attrs)


def node_n(gb, op, inputs, name, n_out, **attrs):
    """A node with several outputs: `{name}_out{i}`."""
    outs = [f"{name}_out{i}" for i in range(n_out)]
    gb.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
    return outs


def finish_io(gb, inputs, outputs, opset=OPSET):
    """Model with several inputs/outputs: lists of (name, elem_type, shape). An ArrayModel:
    `.to_proto()` is the ModelProto (initializers in the order they were added)."""
    vi = helper.make_tensor_value_info
    g = helper.make_graph(gb.nodes, gb.name, [vi(n, t, s) for n, t, s in inputs],
                          [vi(n, t, s) for n, t, s in outputs])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION,
                              producer_name="swbuild.zoo")
    arrays, gb.inits = gb.inits, {}
    return ArrayModel(model, arrays)


def param_count(m, skip=("running_mean", "running_var")):
    """Learnable parameters of a ModelProto, as the papers count them: float initializers with
    more than one element, BN running statistics excluded."""
    n = 0
    for t in m.graph.initializer:
        if t.data_type != TensorProto.FLOAT or t.name.rsplit("/", 1)[-1] in skip:
            continue
        size = int(np.prod(t.dims)) if len(t.dims) else 1
        if size > 1:
            n += size
    return n
