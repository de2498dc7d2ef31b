"""The onnx package's node tests of the quantization ops, and small QDQ graphs built with
onnx.helper, for tests/core/test_quant.py."""
import warnings

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from swbuild.config import toolchain
from swbuild.driver.compiler import build_program
from swbuild.support.errors import UnsupportedError

QUANT_OPS = ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "ConvInteger", "MatMulInteger",
             "QLinearConv", "QLinearMatMul")
# inputs bound as constants: weights, zero points and scales of the integer products (their
# exactness is proven at compile time); Quantize/Dequantize keep run-time scales and zero points
PARAMS = {"ConvInteger": {1, 2, 3}, "MatMulInteger": {1, 2, 3}, "QLinearConv": {1, 2, 3, 4, 5, 6, 7, 8},
          "QLinearMatMul": {1, 2, 3, 4, 5, 6, 7}}


def _array(v):
    return np.asarray(numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v)


def node_cases(expanded=False):
    """(name, model, feed, expected outputs) of every node test made of the quantization ops
    alone, or (expanded) of DynamicQuantizeLinear's `_expanded` forms (its function body:
    reductions, Round, a Cast to uint8 inside the program)."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [c for c in collect_testcases(None) if c.kind == "node" and c.data_sets
                 and ({n.op_type for n in c.model.graph.node} <= set(QUANT_OPS) if not expanded
                      else c.name.startswith("test_dynamicquantizelinear") and c.name.endswith("_expanded"))]
    out = []
    for c in sorted(cases, key=lambda c: c.name):
        m = onnx.ModelProto.FromString(c.model.SerializeToString())
        ins, outs = c.data_sets[0]
        bound = {n.input[k] for n in m.graph.node for k in PARAMS.get(n.op_type, ()) if k < len(n.input) and n.input[k]}
        keep, feed = [], {}
        for vi, v in zip(list(m.graph.input), ins):
            if vi.name in bound:
                m.graph.initializer.append(v if isinstance(v, onnx.TensorProto) else numpy_helper.from_array(_array(v), vi.name))
                m.graph.initializer[-1].name = vi.name
            else:
                keep.append(vi)
                feed[vi.name] = _array(v)
        del m.graph.input[:]
        m.graph.input.extend(keep)
        out.append((c.name, m, feed, [_array(o) for o in outs]))
    return out


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
