"""Small uint8 QDQ graphs (PyTorch's x86 qconfig and onnxruntime's QUInt8 activations are
uint8) for tests/core/test_uint8_as_int8.py and tests/diannao/test_uint8_int8_path.py."""
import numpy as np
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

C, H = 16, 8
ZERO_POINTS = (0, 128, 255)     # of the three convolutions' uint8 inputs, in order


def uint8_conv_chain(seed=0):
    """x -> Quantize(uint8, z 0) -> [Cast(uint8) -> Dequantize -> Conv -> Quantize(uint8)] x 3 -> Dequantize -> y:
    the convolutions read uint8 activations with zero points 0, 128 and 255 (the last output's
    zero point 0 again); weights int8 per channel (zero point 0), except the second's: uint8
    with zero point 128 (symmetric, as onnxruntime's QUInt8 weights can be); int32 biases of
    scale x_scale * w_scale, as the QDQ exporters write them. Returns the ModelProto."""
    rng = np.random.default_rng(seed)
    n = helper.make_node
    inits, nodes = [], []

    def const(name, v):
        inits.append(numpy_helper.from_array(np.asarray(v), name))
        return name

    zs = list(ZERO_POINTS) + [0]
    scales = [np.float32(0.02), np.float32(0.05), np.float32(0.04), np.float32(0.03)]
    nodes.append(n("QuantizeLinear", ["x", const("s0", scales[0]), const("z0", np.uint8(zs[0]))], ["q0"], name="quant_in"))
    prev = "q0"
    for k in range(3):
        s_in, z_in = f"s{k}", f"z{k}"
        if k == 1:
            w = rng.integers(0, 256, (C, C, 3, 3)).astype(np.uint8)
            wz = const("wz1", np.uint8(128))
            ws = const("ws1", np.float32(0.002))
            w_scale = np.float32(0.002)
        else:
            w = rng.integers(-127, 128, (C, C if k else C, 3, 3)).astype(np.int8)
            w_scale = (rng.random(C) * 0.002 + 0.001).astype(np.float32)
            ws, wz = const(f"ws{k}", w_scale), const(f"wz{k}", np.zeros(C, np.int8))
        b_scale = (scales[k] * w_scale).astype(np.float32)
        bias = rng.integers(-2000, 2000, C).astype(np.int32)
        bz = np.zeros(np.shape(b_scale), np.int32)
        nodes += [n("Cast", [prev], [prev + "c"], to=TP.UINT8, name=f"conv{k}/cast"),    # as PyTorch's export writes
                  n("DequantizeLinear", [prev + "c", s_in, z_in], [f"d{k}"], name=f"conv{k}/dq_x"),
                  n("DequantizeLinear", [const(f"w{k}", w), ws, wz], [f"wf{k}"], axis=0, name=f"conv{k}/dq_w"),
                  n("DequantizeLinear", [const(f"b{k}", bias), const(f"bs{k}", b_scale), const(f"bz{k}", bz)],
                    [f"bf{k}"], axis=0, name=f"conv{k}/dq_b"),
                  n("Conv", [f"d{k}", f"wf{k}", f"bf{k}"], [f"c{k}"], pads=[1, 1, 1, 1], name=f"conv{k}/Conv"),
                  n("QuantizeLinear", [f"c{k}", const(f"s{k + 1}", scales[k + 1]), const(f"z{k + 1}", np.uint8(zs[k + 1]))],
                    [f"q{k + 1}"], name=f"conv{k}/quant")]
        prev = f"q{k + 1}"
    nodes.append(n("DequantizeLinear", [prev, "s3", "z3"], ["y"], name="dq_out"))
    g = helper.make_graph(nodes, "uint8_chain", [helper.make_tensor_value_info("x", TP.FLOAT, [1, C, H, H])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, C, H, H])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def chain_input(seed=3):
    """An input whose quantization (scale 0.02, zero point 0) spans [0, 255] and saturates."""
    return (np.random.default_rng(seed).standard_normal((1, C, H, H)) * 3.0).astype(np.float32)
