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
        g = helper.make_graph(self.nodes, self.name,
                              [helper.make_tensor_value_info(x_name, TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)],
                              initializer=self.inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION,
                                 producer_name="swbuild.zoo")
