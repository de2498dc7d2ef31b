"""A QDQ residual block as PyTorch's x86 qconfig exports it (tests/diannao/test_residual_relu_quantize.py):
the shortcut's own DequantizeLinear, then Add -> Relu -> QuantizeLinear."""
import numpy as np
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

C, H = 16, 8


def residual_relu_block(out_type=TP.UINT8, out_zero=0, seed=0):
    """x -> Quantize(uint8, z 3) -> q0; q0 -> Cast -> Dequantize -> Conv (int8 per-channel weights)
    -> Quantize(uint8, z 61) -> Cast -> Dequantize -> c; q0 -> Cast -> Dequantize -> r (a
    DequantizeLinear of its own, read by the Add alone); Relu(c + r) -> Quantize(out_type,
    out_zero) -> qo; qo -> Dequantize -> Conv -> Quantize(uint8, z 61) -> Dequantize -> y.
    Returns the ModelProto."""
    rng = np.random.default_rng(seed)
    n = helper.make_node
    inits = []

    def const(name, v):
        inits.append(numpy_helper.from_array(np.asarray(v), name))
        return name
    out_np = {TP.UINT8: np.uint8, TP.INT8: np.int8}[out_type]
    w = rng.integers(-127, 128, (C, C, 3, 3)).astype(np.int8)
    w_scale = (rng.random(C) * 0.002 + 0.001).astype(np.float32)
    bias = rng.integers(-2000, 2000, C).astype(np.int32)
    s0, s1, so = np.float32(0.0213), np.float32(0.0517), np.float32(0.0526704341173172)
    nodes = [n("QuantizeLinear", ["x", const("s0", s0), const("z0", np.uint8(3))], ["q0"], name="quant_in"),
             n("Cast", ["q0"], ["q0c"], to=TP.UINT8, name="conv/cast"),
             n("DequantizeLinear", ["q0c", "s0", "z0"], ["d0"], name="conv/dq_x"),
             n("DequantizeLinear", [const("w", w), const("ws", w_scale), const("wz", np.zeros(C, np.int8))], ["wf"],
               axis=0, name="conv/dq_w"),
             n("DequantizeLinear", [const("b", bias), const("bs", (s0 * w_scale).astype(np.float32)),
                                    const("bz", np.zeros(C, np.int32))], ["bf"], axis=0, name="conv/dq_b"),
             n("Conv", ["d0", "wf", "bf"], ["c"], pads=[1, 1, 1, 1], name="conv/Conv"),
             n("QuantizeLinear", ["c", const("s1", s1), const("z1", np.uint8(61))], ["q1"], name="conv/quant"),
             n("Cast", ["q1"], ["q1c"], to=TP.UINT8, name="add/cast"),
             n("DequantizeLinear", ["q1c", "s1", "z1"], ["d1"], name="add/dq"),
             n("Cast", ["q0"], ["q0s"], to=TP.UINT8, name="add/cast_1"),
             n("DequantizeLinear", ["q0s", "s0", "z0"], ["r"], name="add/dq_1"),
             n("Add", ["d1", "r"], ["a"], name="add/Add"),
             n("Relu", ["a"], ["ar"], name="add/Relu"),
             n("QuantizeLinear", ["ar", const("so", so), const("zo", out_np(out_zero))], ["qo"], name="add/quant"),
             # the next block's convolution reads the result as int8 bytes, as in ResNet
             n("DequantizeLinear", ["qo", "so", "zo"], ["do"], name="conv2/dq_x"),
             n("DequantizeLinear", [const("w2", w[::-1].copy()), "ws", "wz"], ["wf2"], axis=0, name="conv2/dq_w"),
             n("Conv", ["do", "wf2"], ["c2"], pads=[1, 1, 1, 1], name="conv2/Conv"),
             n("QuantizeLinear", ["c2", "s1", "z1"], ["q2"], name="conv2/quant"),
             n("DequantizeLinear", ["q2", "s1", "z1"], ["y"], name="dq_out")]
    g = helper.make_graph(nodes, "residual_relu", [helper.make_tensor_value_info("x", TP.FLOAT, [1, C, H, H])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, C, H, H])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def block_input(seed=3):
    """An input whose quantization (scale 0.0213, zero point 3) spans uint8 and saturates."""
    return (np.random.default_rng(seed).standard_normal((1, C, H, H)) * 2.0).astype(np.float32)
