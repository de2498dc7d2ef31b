"""Small ONNX models for the DianNao tests (the paper's Table 2 and a few CNN pieces)."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17

# Table 2 of the tensor-instruction paper: element-wise shapes, and 3x3 convolutions on
# HWC inputs (spatial size, input channels, output channels).
EW_SHAPES = [(256, 56, 56, 15), (256, 56, 56, 8), (256, 56, 56), (128, 56, 56), (64, 56, 56), (32, 56, 56),
             (256, 28, 28), (128, 28, 28), (255, 55, 55, 14), (255, 55, 55, 7), (255, 55, 55), (127, 55, 55),
             (63, 55, 55), (31, 55, 55), (255, 27, 27), (127, 27, 27)]
EW_OPS = ("Add", "Sub", "Mul", "Relu")
CONV_CASES = [(h, ci, co) for h in (56, 55) for ci in (256, 128, 64) for co in (128, 64, 32)]


def _model(nodes, ins, outs, inits=(), name="m"):
    g = helper.make_graph(nodes, name, ins, outs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])



def weight_maker(rng, inits, scale=0.05):
    """w(name, *shape, s=scale): a seeded normal initializer appended to `inits`; returns its name."""
    def w(name, *shape, s=scale):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * s).astype(np.float32), name))
        return name
    return w

def vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def table2_elementwise(shapes=EW_SHAPES, ops=EW_OPS):
    """One model: inputs x<i>, y<i> per shape; outputs <op><i> per shape and op (Relu reads x)."""
    ins, outs, nodes = [], [], []
    for i, s in enumerate(shapes):
        ins += [vi(f"x{i}", s), vi(f"y{i}", s)]
        for op in ops:
            nodes.append(helper.make_node(op, [f"x{i}"] if op == "Relu" else [f"x{i}", f"y{i}"], [f"{op.lower()}{i}"],
                                          name=f"{op.lower()}{i}"))
            outs.append(vi(f"{op.lower()}{i}", s))
    return _model(nodes, ins, outs, name="table2_ew")


def table2_conv(cases=CONV_CASES, seed=0):
    """One model: per case an NHWC input, Transpose to NCHW, 3x3 Conv (pad 1, bias),
    Transpose back to NHWC (the backend's layout pass removes both transposes)."""
    rng = np.random.default_rng(seed)
    ins, outs, nodes, inits = [], [], [], []
    for j, (h, ci, co) in enumerate(cases):
        ins.append(vi(f"x{j}", (1, h, h, ci)))
        nodes.append(helper.make_node("Transpose", [f"x{j}"], [f"xc{j}"], perm=[0, 3, 1, 2], name=f"to_nchw{j}"))
        inits.append(numpy_helper.from_array((rng.standard_normal((co, ci, 3, 3)) / np.sqrt(9 * ci)).astype(np.float32), f"w{j}"))
        inits.append(numpy_helper.from_array(rng.standard_normal(co).astype(np.float32), f"b{j}"))
        nodes.append(helper.make_node("Conv", [f"xc{j}", f"w{j}", f"b{j}"], [f"yc{j}"], kernel_shape=[3, 3],
                                      pads=[1, 1, 1, 1], name=f"conv{j}"))
        nodes.append(helper.make_node("Transpose", [f"yc{j}"], [f"y{j}"], perm=[0, 2, 3, 1], name=f"to_nhwc{j}"))
        outs.append(vi(f"y{j}", (1, h, h, co)))
    return _model(nodes, ins, outs, inits, name="table2_conv")


def mini_cnn(seed=0):
    """An NCHW network touching every schedule: 11x11 stride-4 conv on 3 channels, LRN,
    max pooling with and without padding, grouped conv, BN + residual Sum + Relu,
    average pooling, Gemm with bias, Softmax, Concat, Sigmoid/Clip epilogues."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def w(name, shape, scale=None):
        fan = int(np.prod(shape[1:])) or 1
        a = rng.standard_normal(shape) * (scale if scale is not None else np.sqrt(2.0 / fan))
        inits.append(numpy_helper.from_array(a.astype(np.float32), name))
        return name

    def n(op, ins, out, **kw):
        nodes.append(helper.make_node(op, ins, [out], name=out, **kw))
        return out

    x = "data"
    c1 = n("Conv", [x, w("w1", (48, 3, 11, 11)), w("b1", (48,), 0.1)], "c1", kernel_shape=[11, 11], strides=[4, 4], pads=[2, 2, 2, 2])
    r1 = n("Relu", [c1], "r1")
    l1 = n("LRN", [r1], "l1", size=5, alpha=1e-4, beta=0.75, bias=1.0)
    p1 = n("MaxPool", [l1], "p1", kernel_shape=[3, 3], strides=[2, 2])
    c2 = n("Conv", [p1, w("w2", (64, 24, 5, 5)), w("b2", (64,), 0.1)], "c2", kernel_shape=[5, 5], pads=[2, 2, 2, 2], group=2)
    r2 = n("Relu", [c2], "r2")
    p2 = n("MaxPool", [r2], "p2", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    # residual block: conv-bn-relu-conv-bn + shortcut, relu
    def bn(xn, c, name):
        return n("BatchNormalization", [xn, w(name + "_s", (c,), 0.2), w(name + "_b", (c,), 0.1),
                                        w(name + "_m", (c,), 0.1), name + "_v"], name)
    inits.append(numpy_helper.from_array((rng.random(96) + 0.5).astype(np.float32), "bn3_v"))
    inits.append(numpy_helper.from_array((rng.random(96) + 0.5).astype(np.float32), "bn4_v"))
    c3 = n("Conv", [p2, w("w3", (96, 64, 3, 3))], "c3", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    r3 = n("Relu", [bn(c3, 96, "bn3")], "r3")
    c4 = n("Conv", [r3, w("w4", (96, 96, 3, 3))], "c4", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    sc = n("Conv", [p2, w("ws", (96, 64, 1, 1))], "sc", kernel_shape=[1, 1])
    s4 = n("Sum", [bn(c4, 96, "bn4"), sc], "s4")
    r4 = n("Relu", [s4], "r4")
    cat = n("Concat", [r4, n("Sigmoid", [r4], "sg")], "cat", axis=1)
    cl = n("Clip", [cat, "lo", "hi"], "cl")
    inits += [numpy_helper.from_array(np.float32(0.0), "lo"), numpy_helper.from_array(np.float32(4.0), "hi")]
    ap = n("AveragePool", [cl], "ap", kernel_shape=[3, 3], strides=[3, 3])
    fl = n("Flatten", [ap], "fl", axis=1)
    fc = n("Gemm", [fl, w("wf", (10, 192 * 4), 0.05), w("bf", (10,), 0.1)], "fc", transB=1)
    n("Softmax", [fc], "prob", axis=1)
    return _model(nodes, [vi("data", (1, 3, 115, 115))], [vi("prob", (1, 10)), vi("r2", (1, 64, 13, 13))], inits, name="mini_cnn")


def conv_relu_pairs(cases, seed, name):
    """Independent 3x3 Conv (pads 1) + Relu pairs, one per (input channels, output channels,
    spatial size) case: x{i} -> y{i}, random weights scaled to keep activations of order 1."""
    rng = np.random.default_rng(seed)
    nodes, ins, outs, inits = [], [], [], []
    for i, (ci, co, h) in enumerate(cases):
        w = (rng.standard_normal((co, ci, 3, 3)) / np.sqrt(9 * ci)).astype(np.float32)
        b = rng.standard_normal(co).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        ins.append(vi(f"x{i}", (1, ci, h, h)))
        outs.append(vi(f"y{i}", (1, co, h, h)))
        nodes += [helper.make_node("Conv", [f"x{i}", f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"y{i}"])]
    g = helper.make_graph(nodes, name, ins, outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])


def pointwise_chain(ci, co, h, seed, name="pointwise"):
    """x -> Conv 1x1 (ci -> co) -> Relu -> Conv 1x1 (co -> co) -> y: one group whose
    intermediate no other kernel reads, random weights scaled to keep activations of order 1."""
    rng = np.random.default_rng(seed)
    w0 = (rng.standard_normal((co, ci, 1, 1)) / np.sqrt(ci)).astype(np.float32)
    w1 = (rng.standard_normal((co, co, 1, 1)) / np.sqrt(co)).astype(np.float32)
    b0, b1 = rng.standard_normal(co).astype(np.float32), rng.standard_normal(co).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in ((w0, "w0"), (b0, "b0"), (w1, "w1"), (b1, "b1"))]
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"]), helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1", "b1"], ["y"])]
    return _model(nodes, [vi("x", (1, ci, h, h))], [vi("y", (1, co, h, h))], inits, name)


def save(model, path):
    onnx.save(model, str(path))
    return path


def concat_branches(seed=0, c=32, h=14, name="concat_branches"):
    """An Inception module feeding a DenseNet step: x -> {Conv 1x1 + Relu = a, Conv 3x3 = b,
    MaxPool 3x3 s1 = p} -> Concat = cat -> Conv 1x1 + Relu = e -> Concat(cat, e) = d -> Conv 1x1 = y;
    z = Relu(a + e) reads a slice and the inner Concat's producer directly."""
    rng = np.random.default_rng(seed)
    inits = []
    w = weight_maker(rng, inits, 0.1)
    n = helper.make_node
    nodes = [n("Conv", ["x", w("wa", 2 * c, c, 1, 1), w("ba", 2 * c)], ["a0"]), n("Relu", ["a0"], ["a"]),
             n("Conv", ["x", w("wb", c, c, 3, 3), w("bb", c)], ["b"], pads=[1, 1, 1, 1]),
             n("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Concat", ["a", "b", "p"], ["cat"], axis=1),
             n("Conv", ["cat", w("we", 2 * c, 4 * c, 1, 1), w("be", 2 * c)], ["e0"]), n("Relu", ["e0"], ["e"]),
             n("Concat", ["cat", "e"], ["d"], axis=1),
             n("Conv", ["d", w("wy", 2 * c, 6 * c, 1, 1), w("by", 2 * c)], ["y"]),
             n("Add", ["a", "e"], ["z0"]), n("Relu", ["z0"], ["z"])]
    return _model(nodes, [vi("x", (1, c, h, h))], [vi("y", (1, 2 * c, h, h)), vi("z", (1, 2 * c, h, h))], inits, name)
