"""Small helpers to write zoo architectures as ONNX graphs."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 8      # readable by every onnxruntime we support
OPSET = 13


class GraphBuilder:
    def __init__(self, name, seed):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self._n = 0

    def weight(self, name, shape, fan_in):
        w = (self.rng.standard_normal(shape, dtype=np.float32) * np.float32(np.sqrt(2.0 / fan_in)))
        self.inits.append(numpy_helper.from_array(w, name))
        return name

    def bias(self, name, n):
        b = (self.rng.standard_normal(n, dtype=np.float32) * np.float32(0.01))
        self.inits.append(numpy_helper.from_array(b, name))
        return name

    def node(self, op, inputs, name, **attrs):
        out = f"{name}_out" if not name.endswith(":0") else name
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def finish(self, x_name, x_shape, out, out_shape):
        return finish_io(self, [(x_name, TensorProto.FLOAT, x_shape)], [(out, TensorProto.FLOAT, out_shape)])


# --- helpers shared by the swTVM model set (resnet, mobilenet, shufflenet, dcgan, yolov3, bert) ---

def const(gb, name, value, dtype=np.int64):
    """A constant initializer (shapes, axes, scales, scalars) named like an exporter would."""
    gb.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
    return name


def he(gb, name, shape, fan_in, gain=1.0):
    """He-normal weight, std = gain * sqrt(2 / fan_in)."""
    if gain == 1.0:
        return gb.weight(name, shape, fan_in)
    w = gb.rng.standard_normal(shape, dtype=np.float32) * np.float32(gain * np.sqrt(2.0 / fan_in))
    gb.inits.append(numpy_helper.from_array(w, name))
    return name


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
        gb.inits.append(numpy_helper.from_array(arr, f"{name}/{what}"))
        ins.append(f"{name}/{what}")
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
    """Model with several inputs/outputs: lists of (name, elem_type, shape)."""
    vi = helper.make_tensor_value_info
    g = helper.make_graph(gb.nodes, gb.name, [vi(n, t, s) for n, t, s in inputs],
                          [vi(n, t, s) for n, t, s in outputs])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION,
                              producer_name="swbuild.zoo")
    # weights go straight into the model's graph: make_graph and make_model each copy their
    # argument, so passing them in would hold vgg16's 550 MB three times at once
    model.graph.initializer.extend(gb.inits)
    gb.inits.clear()
    return model


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
