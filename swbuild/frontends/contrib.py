"""The `com.microsoft` operators swbuild imports: onnxruntime's QOperator quantization format.

onnx knows no schema of this domain, so its shape inference skips these nodes; each one's
output shape and dtype come from here instead: the float operator it quantizes (QLinearAdd
is an Add of the dequantized inputs, QGemm a Gemm, ...) inferred by onnx on float32 inputs of
the same shapes, and the dtype the op's schema gives (onnxruntime's docs/ContribOperators.md).
A node of the domain outside DOMAIN_OPS is refused at import, naming the op and the domain.
In the graph the op is `com.microsoft.<op_type>` (ops/quant_ms.py lowers it).
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, shape_inference

from ..support.errors import UnsupportedError

DOMAIN = "com.microsoft"

# op_type -> (float op whose shape it has, indices of its data inputs, index of the input whose
# dtype the output takes (None: float32 unless y_zero_point given, QGemm), attributes kept)
DOMAIN_OPS = {
    "QLinearAdd": ("Add", (0, 3), 0, ()),
    "QLinearMul": ("Mul", (0, 3), 0, ()),
    "QLinearGlobalAveragePool": ("GlobalAveragePool", (0,), 0, ()),
    "QLinearAveragePool": ("AveragePool", (0,), 0, ("auto_pad", "ceil_mode", "count_include_pad", "kernel_shape",
                                                      "pads", "strides")),
    "QGemm": ("Gemm", (0, 3), None, ("transA", "transB")),
    "QLinearConcat": ("Concat", None, 2, ("axis",)),
    "QLinearSigmoid": ("Sigmoid", (0,), 0, ()),
    "QLinearLeakyRelu": ("LeakyRelu", (0,), 0, ()),
}


def graph_op(domain, op_type, name):
    """The op name a node of `domain` gets in the graph, or a refusal naming op and domain."""
    if domain in ("", "ai.onnx"):
        return op_type
    if domain == DOMAIN and op_type in DOMAIN_OPS:
        return f"{DOMAIN}.{op_type}"
    supported = f"; of {DOMAIN}, swbuild takes {', '.join(sorted(DOMAIN_OPS))}" if domain == DOMAIN else ""
    raise UnsupportedError(f"node '{name}': operator {domain}::{op_type} is not supported{supported}")


def is_domain_op(op):
    return op.startswith(DOMAIN + ".")


def data_inputs(node):
    """The tensors of a domain node that carry data (not scales or zero points)."""
    op = node.op[len(DOMAIN) + 1:]
    idx = DOMAIN_OPS[op][1]
    if idx is None:         # QLinearConcat: y_scale, y_zero_point, then (x, scale, zero point) triples
        idx = range(2, len(node.inputs), 3)
    return [node.inputs[k] for k in idx if k < len(node.inputs) and node.inputs[k]]


def infer(node, tensors):
    """(shape, dtype) of a domain node's output, or None while an input's shape is unknown."""
    op = node.op[len(DOMAIN) + 1:]
    float_op, _, dtype_from, keep = DOMAIN_OPS[op]
    ins = data_inputs(node)
    shapes = []
    for i in ins:
        t = tensors.get(i)
        if t is None or not all(isinstance(d, int) for d in t.shape):
            return None
        shapes.append(list(t.shape))
    attrs = {k: v for k, v in node.attrs.items() if k in keep}
    if op == "QLinearGlobalAveragePool" and node.attrs.get("channels_last"):
        s = shapes[0]
        return (s[0],) + (1,) * (len(s) - 2) + (s[-1],), tensors[ins[0]].dtype
    if op == "QGemm" and len(node.inputs) > 6 and node.inputs[6]:
        ins, shapes = ins + [node.inputs[6]], shapes + [list(tensors[node.inputs[6]].shape)]
    names = [f"i{k}" for k in range(len(ins))]
    g = helper.make_graph([helper.make_node(float_op, names, ["y"], **attrs)], "contrib",
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in zip(names, shapes)],
                          [helper.make_tensor_value_info("y", 0, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    try:
        out = shape_inference.infer_shapes(m, strict_mode=True).graph.output[0]
    except Exception as e:
        raise UnsupportedError(f"node '{node.name}' ({node.op}): its shape as a {float_op}: "
                               f"{str(e).splitlines()[0] if str(e) else e}") from None
    shape = tuple(int(d.dim_value) for d in out.type.tensor_type.shape.dim)
    if dtype_from is not None:
        return shape, tensors[node.inputs[dtype_from]].dtype
    yzp = node.inputs[8] if len(node.inputs) > 8 and node.inputs[8] else None     # QGemm: quantized or float out
    return shape, (tensors[yzp].dtype if yzp and yzp in tensors else np.dtype("float32").name)
