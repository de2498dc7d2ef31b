"""The onnx package's node tests of the quantization ops, and small QDQ graphs built with
onnx.helper, for tests/core/test_quant.py."""
import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from core_models import node_tests
from swbuild.config import toolchain
from swbuild.driver.compiler import build_program
from swbuild.support.errors import UnsupportedError

QUANT_OPS = ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "ConvInteger", "MatMulInteger",
             "QLinearConv", "QLinearMatMul")
# inputs bound as constants: weights, zero points and scales of the integer products (their
# exactness is proven at compile time); Quantize/Dequantize keep run-time scales and zero points
PARAMS = {"ConvInteger": {1, 2, 3}, "MatMulInteger": {1, 2, 3}, "QLinearConv": {1, 2, 3, 4, 5, 6, 7, 8},
          "QLinearMatMul": {1, 2, 3, 4, 5, 6, 7}}


def node_cases(expanded=False):
    """(name, model, feed, expected outputs) of every node test made of the quantization ops
    alone, or (expanded) of DynamicQuantizeLinear's `_expanded` forms (its function body:
    reductions, Round, a Cast to uint8 inside the program)."""
    if expanded:
        return node_tests(lambda c: c.name.startswith("test_dynamicquantizelinear") and c.name.endswith("_expanded"),
                          PARAMS)
    return node_tests(lambda c: {n.op_type for n in c.model.graph.node} <= set(QUANT_OPS), PARAMS)


def triage(cases, target):
    """Split the cases into (compiled, refused): refused is [(name, reason)] of the ones the
    compiler rejects with UnsupportedError."""
    tc = toolchain.load(target)
    ok, refused = [], []
    for case in cases:
        try:
            build_program(case[1], tc, name="q")
            ok.append(case)
        except UnsupportedError as e:
            refused.append((case[0], e.reason))
    return ok, refused


def qdq_conv_model(seed=0, opset=13):
    """Dequantize(int8 constant weights, per channel) -> Conv -> Relu -> Quantize(uint8) ->
    Dequantize, as PyTorch's and onnxruntime's QDQ exporters write a layer; the input is
    quantized too (QuantizeLinear -> DequantizeLinear on the run-time image)."""
    rng = np.random.default_rng(seed)
    n = helper.make_node
    w = rng.integers(-127, 128, (8, 3, 3, 3)).astype(np.int8)
    inits = [("w", w), ("w_scale", (rng.random(8) * 0.01 + 0.002).astype(np.float32)),
             ("w_zp", np.zeros(8, np.int8)), ("b", rng.standard_normal(8).astype(np.float32)),
             ("x_scale", np.float32(0.02)), ("x_zp", np.int8(0)),
             ("y_scale", np.float32(0.05)), ("y_zp", np.uint8(10))]
    nodes = [n("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"], name="/in/QuantizeLinear"),
             n("DequantizeLinear", ["xq", "x_scale", "x_zp"], ["xf"], name="/in/DequantizeLinear"),
             n("DequantizeLinear", ["w", "w_scale", "w_zp"], ["wf"], axis=0, name="/conv1/DequantizeLinear_1"),
             n("Conv", ["xf", "wf", "b"], ["c"], pads=[1, 1, 1, 1], name="/conv1/Conv"),
             n("Relu", ["c"], ["r"], name="/relu/Relu"),
             n("QuantizeLinear", ["r", "y_scale", "y_zp"], ["rq"], name="/relu/QuantizeLinear"),
             n("DequantizeLinear", ["rq", "y_scale", "y_zp"], ["y"], name="/relu/DequantizeLinear")]
    g = helper.make_graph(nodes, "qdq_conv", [helper.make_tensor_value_info("x", TP.FLOAT, [1, 3, 10, 10])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, 8, 10, 10]),
                           helper.make_tensor_value_info("rq", TP.UINT8, [1, 8, 10, 10])],
                          initializer=[numpy_helper.from_array(np.asarray(a), k) for k, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def ort_as_written(model, feed):
    """onnxruntime's outputs with its graph optimizations off: the graph as written (its QDQ
    fusion would turn Dequantize -> Conv -> Quantize into a QLinearConv, one step away at times)."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feed)


def small_cnn(seed=0):
    """Conv-Relu-MaxPool-Conv-Relu-Add(residual)-GlobalAveragePool-Flatten-Gemm in float32."""
    rng = np.random.default_rng(seed)
    n = helper.make_node
    inits = []

    def w(name, *shape):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name))
        return name
    nodes = [n("Conv", ["x", w("w1", 8, 3, 3, 3), w("b1", 8)], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             n("Relu", ["c1"], ["r1"], name="relu1"),
             n("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
             n("Conv", ["p1", w("w2", 8, 8, 3, 3), w("b2", 8)], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             n("Relu", ["c2"], ["r2"], name="relu2"),
             n("Add", ["r2", "p1"], ["a"], name="add"),
             n("GlobalAveragePool", ["a"], ["g"], name="gap"),
             n("Flatten", ["g"], ["f"], name="flat"),
             n("Gemm", ["f", w("fw", 10, 8), w("fb", 10)], ["y"], transB=1, name="fc")]
    g = helper.make_graph(nodes, "small_cnn", [helper.make_tensor_value_info("x", TP.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, 10])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def ort_quantized(tmp_path, fmt="QDQ", seed=0, model=None, images=8, activations="QUInt8"):
    """small_cnn() (or `model`) quantized by onnxruntime.quantization.quantize_static (uint8
    activations unless `activations` says QInt8, int8 per-channel weights, seeded calibration
    images); returns the ModelProto."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    rng = np.random.default_rng(seed)
    src, dst = tmp_path / "f32.onnx", tmp_path / f"{fmt}.onnx"
    model = small_cnn(seed) if model is None else model
    onnx.save(model, src)
    x = model.graph.input[0]
    shape = [d.dim_value for d in x.type.tensor_type.shape.dim]

    class Images(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{x.name: rng.standard_normal(shape).astype(np.float32)} for _ in range(images)])

        def get_next(self):
            return next(self.it, None)
    quantize_static(str(src), str(dst), Images(), quant_format=getattr(QuantFormat, fmt),
                    activation_type=getattr(QuantType, activations), weight_type=QuantType.QInt8, per_channel=True)
    return onnx.load(dst)


def ort_dynamic_mlp(tmp_path, seed=0):
    """Conv(pads) -> Relu -> Flatten -> MatMul -> Add -> Relu -> MatMul -> Add quantized by
    onnxruntime's quantize_dynamic: DynamicQuantizeLinear -> ConvInteger / MatMulInteger (a
    run-time zero point, int8 weights) -> Cast(float) -> Mul(scales) -> Add."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    rng = np.random.default_rng(seed)
    n = helper.make_node
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.2).astype(np.float32), k) for k, s in
             (("cw", (4, 3, 3, 3)), ("cb", (4,)), ("w1", (64, 128)), ("b1", (128,)), ("w2", (128, 32)), ("b2", (32,)))]
    nodes = [n("Conv", ["x", "cw", "cb"], ["c"], pads=[1, 1, 1, 1]), n("Relu", ["c"], ["cr"]), n("Flatten", ["cr"], ["f"]),
             n("MatMul", ["f", "w1"], ["h0"]), n("Add", ["h0", "b1"], ["h1"]), n("Relu", ["h1"], ["h2"]),
             n("MatMul", ["h2", "w2"], ["o0"]), n("Add", ["o0", "b2"], ["y"])]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TP.FLOAT, [1, 3, 4, 4])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, 32])], initializer=inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), tmp_path / "mlp.onnx")
    quantize_dynamic(str(tmp_path / "mlp.onnx"), str(tmp_path / "mlp_dyn.onnx"), weight_type=QuantType.QInt8,
                     op_types_to_quantize=["Conv", "MatMul"])
    return onnx.load(tmp_path / "mlp_dyn.onnx")


# ---- com.microsoft QOperator ops (tests/core/test_quant_ms.py) ------------------------------

MS = "com.microsoft"


def _scale(rng):
    return np.float32(rng.random() * 0.09 + 0.01)


def fma_scales(dt, rng):
    """Scales (zero points 0) for which a * A/C + b * B/C rounded twice in float32 gives another
    integer than onnxruntime's fused multiply-add for some pair of `dt` values: QLinearAdd must
    patch that pair. Found by trying seeded random scales."""
    f32 = np.float32
    ii = np.iinfo(dt)
    v = np.arange(ii.min, ii.max + 1).astype(f32)
    a, b = np.meshgrid(v, v, indexing="ij")
    for _ in range(500):
        sa, sb, sc = _scale(rng), _scale(rng), _scale(rng)
        rac, rbc = f32(sa / sc), f32(sb / sc)
        inner = (b.astype(np.float64) * rbc).astype(f32)        # exact fma with F = 0: a float32 rounding
        fused = np.rint((a.astype(np.float64) * rac + inner).astype(f32))
        twice = np.rint((a * rac).astype(f32) + inner)
        if np.any(np.clip(fused, ii.min, ii.max) != np.clip(twice, ii.min, ii.max)):
            return sa, sb, sc
    raise AssertionError("no scales found")


def qoperator_ops_model(seed=0):
    """One graph of onnxruntime's QOperator ops with seeded random scales and zero points, and
    its feed: QLinearAdd / QLinearMul over every pair of 8-bit values (uint8 and int8; same
    shapes, and one operand one value per span on either side), scales whose ratios put
    exact ties (a half) and saturation in reach; QLinearGlobalAveragePool (NCHW, NHWC, int8);
    QLinearAveragePool (clipped and counted pads, a window over the whole image);
    QGemm (uint8 and float outputs, transA/transB, bias shapes, int8); QLinearLeakyRelu,
    QLinearSigmoid and QLinearConcat (one input copied, one requantized) over every input value."""
    rng = np.random.default_rng(seed)
    n = helper.make_node
    nodes, inits, ins, outs, feed = [], [], [], [], {}

    def const(name, v, dtype):
        inits.append(numpy_helper.from_array(np.asarray(v, dtype), name))
        return name

    def inp(name, v):
        feed[name] = v
        ins.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)))
        return name

    def out(name, dtype, shape):
        outs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape))
        return name

    def zp(dt, k):
        ii = np.iinfo(dt)
        return int(rng.integers(ii.min, ii.max + 1)) if k else (0 if dt == "int8" else 128)

    for dt in ("uint8", "int8"):
        ii = np.iinfo(dt)
        v = np.arange(ii.min, ii.max + 1).astype(dt)
        a, b = inp(f"a_{dt}", np.repeat(v, 256).reshape(256, 256)), inp(f"b_{dt}", np.tile(v, 256).reshape(256, 256))
        col = inp(f"col_{dt}", v.reshape(256, 1).copy())
        cases = [("rand", _scale(rng), _scale(rng), _scale(rng)), ("fma",) + fma_scales(dt, rng),
                 ("tie", np.float32(0.5), np.float32(0.25), np.float32(1.0)),      # ratios 0.5 and 0.25: halves
                 ("sat", np.float32(0.5), np.float32(0.7), np.float32(0.1))]       # beyond the range: saturates
        for k, (tag, sa, sb, sc) in enumerate(cases):
            p = [const(f"{tag}{dt}_{w}", s, np.float32) if w[0] == "s" else const(f"{tag}{dt}_{w}", 0 if tag == "fma"
                                                                                  else zp(dt, k != 2), dt)
                 for w, s in (("sa", sa), ("za", 0), ("sb", sb), ("zb", 0), ("sc", sc), ("zc", 0))]
            for op in ("QLinearAdd", "QLinearMul"):
                for form, x, y, shape in (("full", a, b, [256, 256]), ("colB", a, col, [256, 256]),
                                          ("colA", col, b, [256, 256])):
                    if op == "QLinearMul" and tag in ("sat", "fma") and form != "full" or tag == "fma" and form != "full":
                        continue
                    o = out(f"{op}_{tag}_{form}_{dt}", dt, shape)
                    nodes.append(n(op, [x, p[0], p[1], y, p[2], p[3], p[4], p[5]], [o], domain=MS, name=o))
        # global average pool: NCHW and NHWC
        x = inp(f"gx_{dt}", rng.integers(ii.min, ii.max + 1, (2, 5, 6, 7)).astype(dt))
        for last, shape in ((0, [2, 5, 1, 1]), (1, [2, 1, 1, 7])):
            p = [const(f"g{last}{dt}_{w}", v, t) for w, v, t in (("sx", _scale(rng), np.float32), ("zx", zp(dt, 1), dt),
                                                                   ("sy", _scale(rng) / 2, np.float32), ("zy", zp(dt, 1), dt))]
            o = out(f"gap{last}_{dt}", dt, shape)
            nodes.append(n("QLinearGlobalAveragePool", [x] + p, [o], domain=MS, channels_last=last, name=o))
        # average pool: windows clipped by pads (counts vary), pads counted, one window over the image
        for k, (attrs, shape) in enumerate((
                (dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), [2, 5, 3, 4]),
                (dict(kernel_shape=[2, 3], pads=[0, 1, 1, 0], count_include_pad=1), [2, 5, 6, 6]),
                (dict(kernel_shape=[6, 7]), [2, 5, 1, 1]))):
            p = [const(f"ap{k}{dt}_{w}", v, t) for w, v, t in (("sx", _scale(rng), np.float32), ("zx", zp(dt, 1), dt),
                                                                 ("sy", _scale(rng), np.float32), ("zy", zp(dt, 1), dt))]
            o = out(f"avgpool{k}_{dt}", dt, shape)
            nodes.append(n("QLinearAveragePool", [x] + p, [o], domain=MS, name=o, **attrs))
        # unary tables over every input value
        x = inp(f"ux_{dt}", v.reshape(1, 256).copy())
        for op, attrs in (("QLinearLeakyRelu", {"alpha": 0.1}), ("QLinearSigmoid", {})):
            p = [const(f"{op}{dt}_{w}", val, t) for w, val, t in
                 (("sx", np.float32(0.05), np.float32), ("zx", zp(dt, 1), dt),
                  ("sy", np.float32(1 / 256 if op == "QLinearSigmoid" else 0.03), np.float32), ("zy", zp(dt, 0), dt))]
            o = out(f"{op}_{dt}", dt, [1, 256])
            nodes.append(n(op, [x] + p, [o], domain=MS, name=o, **attrs))
        # concat: one input copied (the output's scale and zero point), one requantized (saturating)
        sy, zy = const(f"cy{dt}", np.float32(0.04), np.float32), const(f"czy{dt}", zp(dt, 1), dt)
        sx, zx = const(f"cx{dt}", np.float32(0.07), np.float32), const(f"czx{dt}", zp(dt, 1), dt)
        o = out(f"QLinearConcat_{dt}", dt, [2, 256])
        nodes.append(n("QLinearConcat", [sy, zy, x, sy, zy, x, sx, zx], [o], domain=MS, axis=0, name=o))
    # QGemm: uint8 x int8 per-column -> uint8, transB, bias (N,); int8 x int8 transA, bias (M, 1) -> float
    A = inp("ga", rng.integers(0, 256, (4, 40)).astype(np.uint8))
    B = const("gb", rng.integers(-127, 128, (6, 40)), np.int8)
    p = [const("q1_sa", _scale(rng), np.float32), const("q1_za", 7, np.uint8), B,
         const("q1_sb", (rng.random(6) * 0.01 + 0.001).astype(np.float32), np.float32), const("q1_zb", np.zeros(6), np.int8),
         const("q1_c", rng.integers(-3000, 3000, (6,)), np.int32), const("q1_sy", np.float32(0.02), np.float32),
         const("q1_zy", 100, np.uint8)]
    o = out("qgemm_u8", "uint8", [4, 6])
    nodes.append(n("QGemm", [A] + p, [o], domain=MS, transB=1, alpha=0.75, name=o))
    A2 = inp("ga2", rng.integers(-128, 128, (40, 3)).astype(np.int8))
    p = [const("q2_sa", _scale(rng), np.float32), const("q2_za", -5, np.int8), const("q2_b", rng.integers(-127, 128, (40, 5)), np.int8),
         const("q2_sb", np.float32(0.004), np.float32), const("q2_zb", 3, np.int8),
         const("q2_c", rng.integers(-3000, 3000, (3, 1)), np.int32)]
    o = out("qgemm_f32", "float32", [3, 5])
    nodes.append(n("QGemm", [A2] + p, [o], domain=MS, transA=1, name=o))
    g = helper.make_graph(nodes, "qoperator_ops", ins, outs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(MS, 1)], ir_version=8)
    return m, feed


def wide_qlinear_conv_model(seed=0, peak=None):
    """A QLinearConv of 1152 products per output (128 channels x 3 x 3) whose int32 sums pass
    2^24: channel 0's weights are all 127 and channel 1's all -128 on an input near 255, the
    rest random; a bias; per-channel weight scales; and its feed. `peak`: channels 0 and 1 all
    peak and -peak instead (100: the sums over each half of the input channels stay below 2^24,
    ops/quant_split.py)."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-128, 128, (6, 128, 3, 3)).astype(np.int8)
    w[0], w[1] = (127, -128) if peak is None else (peak, -peak)
    inits = [("xs", np.float32(0.02)), ("xz", np.uint8(3)), ("w", w),
             ("ws", np.full(6, 0.01, np.float32) * np.float32(1.0 + rng.random(6))), ("wz", np.zeros(6, np.int8)),
             ("ys", np.float32(800.0)), ("yz", np.uint8(128)), ("b", rng.integers(-20000, 20000, 6).astype(np.int32))]
    n = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], pads=[1, 1, 1, 1],
                         name="/layer4/conv2/Conv_quant")
    g = helper.make_graph([n], "wide", [helper.make_tensor_value_info("x", TP.UINT8, [1, 128, 5, 5])],
                          [helper.make_tensor_value_info("y", TP.UINT8, [1, 6, 5, 5])],
                          initializer=[numpy_helper.from_array(np.asarray(a), k) for k, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    x = np.where(rng.random((1, 128, 5, 5)) < 0.9, 255, rng.integers(0, 256, (1, 128, 5, 5))).astype(np.uint8)
    return m, {"x": x}
