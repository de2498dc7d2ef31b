"""QDQ recognition (optimizer/qdq_fuse.py, issue 36): Dequantize -> Conv/MatMul/Gemm (-> Relu)
-> Quantize chains become QLinearConv / QLinearMatMul with the int8 weights of the model, and
compute what onnxruntime's default session (which fuses the same chains) computes, bit for
bit; what does not fuse stays float and says why. Numbers come from the reference
interpreter over the lowered program (no C here: the emulated targets run these models in
tests/core/test_quant.py and tests/diannao/test_integer_conv.py)."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from quant_models import ort_as_written, ort_quantized
from swbuild.driver import check
from swbuild.driver.lowering import lower, prepare
from swbuild.frontends.onnx import import_model
from swbuild.ir.interp import run_program


def qdq_relu_conv(y_zp, w_scale=0.01, seed=0, two_consumers=False, big=0, w127=False):
    """Quantize -> Dequantize -> Conv(Dequantize(int8 W), Dequantize(int32 bias)) -> Relu ->
    Quantize(uint8, zero point y_zp) -> Dequantize: the layer quantize_static writes. big = the
    input channels of a layer whose input is uint8 from 0 (w127: all its weights are 127)."""
    rng = np.random.default_rng(seed)
    n = helper.make_node
    ci = big or 3
    w = (np.full((8, ci, 3, 3), 127) if w127 else rng.integers(-127, 128, (8, ci, 3, 3))).astype(np.int8)
    xs, ws = np.float32(0.02), (rng.random(8) * w_scale + 0.002).astype(np.float32)
    bias = rng.integers(-2000, 2000, 8).astype(np.int32)
    inits = [("w", w), ("w_scale", ws), ("w_zp", np.zeros(8, np.int8)), ("b", bias), ("b_scale", (xs * ws).astype(np.float32)),
             ("b_zp", np.zeros(8, np.int32)), ("x_scale", xs), ("x_zp", np.uint8(0 if big else 128)),
             ("y_scale", np.float32(0.05)), ("y_zp", np.uint8(y_zp))]
    nodes = [n("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"], name="in_q"),
             n("DequantizeLinear", ["xq", "x_scale", "x_zp"], ["xf"], name="in_dq"),
             n("DequantizeLinear", ["w", "w_scale", "w_zp"], ["wf"], axis=0, name="w_dq"),
             n("DequantizeLinear", ["b", "b_scale", "b_zp"], ["bf"], axis=0, name="b_dq"),
             n("Conv", ["xf", "wf", "bf"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             n("Relu", ["c"], ["r"], name="relu"),
             n("QuantizeLinear", ["r", "y_scale", "y_zp"], ["rq"], name="out_q"),
             n("DequantizeLinear", ["rq", "y_scale", "y_zp"], ["y"], name="out_dq")]
    outs = [helper.make_tensor_value_info("y", TP.FLOAT, [1, 8, 6, 6]),
            helper.make_tensor_value_info("rq", TP.UINT8, [1, 8, 6, 6])]
    if two_consumers:
        nodes.append(n("Identity", ["c"], ["c2"], name="also"))
        outs.append(helper.make_tensor_value_info("c2", TP.FLOAT, [1, 8, 6, 6]))
    g = helper.make_graph(nodes, "qdq_relu_conv", [helper.make_tensor_value_info("x", TP.FLOAT, [1, ci, 6, 6])], outs,
                          initializer=[numpy_helper.from_array(np.asarray(a), k) for k, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _prepared(m):
    g, _ = prepare(import_model(m), "m")
    return g


def _run(m, feed):
    return run_program(lower(import_model(m), "m"), feed)


def test_quantize_static_chains_become_integer_kernels_with_the_models_int8_weights(tmp_path):
    m = ort_quantized(tmp_path)
    g = _prepared(m)
    ops = [n.op for n in g.nodes]
    assert ops.count("QLinearConv") == 2 and ops.count("QLinearMatMul") == 1, ops
    assert not {"Conv", "Gemm", "MatMul"} & set(ops) and g.qdq_notes == {}
    conv = next(n for n in g.nodes if n.op == "QLinearConv")
    w = g.tensors[conv.inputs[3]]
    assert g.exact_ints[w.name] == "int8" and w.data is not None and w.shape == (8, 3, 3, 3)   # held as exact float32
    assert np.array_equal(w.data, np.round(w.data)) and np.abs(w.data).max() <= 128
    fc = next(n for n in g.nodes if n.op == "QLinearMatMul")
    assert g.tensors[fc.inputs[3]].shape == (8, 10) and g.exact_ints[fc.inputs[3]] == "int8"    # Gemm's W, transposed
    assert g.tensors[fc.inputs[8]].dtype == "int32"                                              # and its int32 bias


def test_fused_model_computes_what_onnxruntimes_default_session_computes(tmp_path):
    """onnxruntime's QDQ transformer fuses the same chains (QLinearConv, QGemm): same bytes."""
    m = ort_quantized(tmp_path)
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((1, 3, 16, 16)).astype(np.float32)
        got = _run(m, {"x": x})[0]
        np.testing.assert_array_equal(got, check.onnxruntime_reference(m, {"x": x})[0])


def test_relu_at_the_dtypes_low_end_fuses_as_onnxruntime_does():
    m = qdq_relu_conv(0)
    g = _prepared(m)
    assert [n.op for n in g.nodes] == ["QuantizeLinear", "QLinearConv", "DequantizeLinear", "Cast"] and not g.qdq_notes
    x = np.random.default_rng(1).standard_normal((1, 3, 6, 6)).astype(np.float32) * 2
    y, rq = _run(m, {"x": x})
    ref = check.onnxruntime_reference(m, {"x": x})
    np.testing.assert_array_equal(rq, ref[1])
    np.testing.assert_array_equal(y, ref[0])


def test_relu_above_the_low_end_clamps_at_the_zero_point_within_one_step_of_the_float_graph():
    """onnxruntime leaves this chain in float (its Relu is not the saturation); the integer
    kernel clamps at the zero point: the graph's float meaning within a quantization step."""
    m = qdq_relu_conv(10)
    g = _prepared(m)
    assert "QLinearConv" in [n.op for n in g.nodes] and "Relu" in g.qdq_notes["conv"]
    x = np.random.default_rng(2).standard_normal((1, 3, 6, 6)).astype(np.float32) * 2
    y, rq = _run(m, {"x": x})
    ref = ort_as_written(m, {"x": x})
    assert rq.min() == 10 and (ref[1] == 10).sum() > 20          # Relu's zeros, as the graph's
    assert np.abs(rq.astype(int) - ref[1].astype(int)).max() <= 1
    assert (rq == ref[1]).mean() > 0.9


def test_chains_that_do_not_fuse_stay_float_and_say_why():
    g = _prepared(qdq_relu_conv(0, two_consumers=True))
    assert "Conv" in [n.op for n in g.nodes] and "QLinearConv" not in [n.op for n in g.nodes]
    assert "consumers" in g.qdq_notes["conv"]
    # 1024 * 9 weights of 127 against uint8 inputs: even the 16 h + l split's high sum reaches
    # 16 * 127 * 9216 > 2^24
    g = _prepared(qdq_relu_conv(0, big=1024, w127=True))
    assert "Conv" in [n.op for n in g.nodes] and "2^24" in g.qdq_notes["conv"] and "16 h + l" in g.qdq_notes["conv"]


def test_a_conv_whose_sum_passes_2_24_fuses_as_two_exact_sums_bit_exact_with_onnxruntime():
    """PyTorch's int8 ResNet-18 (deep 3x3x512 layers) and the 3x3x256 layer below may reach 255 * (its positive weights' sum) > 2^24; left in float32 its
    rounding moved an output by a step against onnxruntime's int32 QLinearConv. Fused,
    ops/quant_wide.py's split sums give the same bytes."""
    m = qdq_relu_conv(0, big=256)
    g = _prepared(m)
    assert "QLinearConv" in [n.op for n in g.nodes] and "conv" not in g.qdq_notes
    # the bound is over the dtype's range; inputs up to 25 keep the outputs off saturation
    x = np.random.default_rng(3).random((1, 256, 6, 6)).astype(np.float32) * 0.5
    y, rq = _run(m, {"x": x})
    ref = check.onnxruntime_reference(m, {"x": x})
    assert len(np.unique(rq)) > 20 and (rq == 255).mean() < 0.1       # neither all zero nor saturated
    np.testing.assert_array_equal(rq, ref[1])
    np.testing.assert_array_equal(y, ref[0])


@pytest.mark.parametrize("scale_off", [False, True])
def test_a_bias_whose_scale_is_not_x_scale_times_w_scale_is_not_fused(scale_off):
    m = qdq_relu_conv(0)
    if scale_off:
        t = next(t for t in m.graph.initializer if t.name == "b_scale")
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * np.float32(2), "b_scale"))
    g = _prepared(m)
    assert ("QLinearConv" in [n.op for n in g.nodes]) != scale_off
    if scale_off:
        assert "x_scale * w_scale" in g.qdq_notes["conv"]


def int8_residual_block(seed=0):
    """int8 activations, per-channel int8 weights, as quantize_static writes a residual block:
    Quantize(x) feeds conv_a and the Add (two consumers), the Add's Quantize only conv_b."""
    rng = np.random.default_rng(seed)
    n = helper.make_node
    xs, a_s, s_s, ys = 0.0312347, 0.0517731, 0.0623917, 0.0419523     # calibrated-like: no exact ties in the Add
    inits = [("x_s", np.float32(xs)), ("x_z", np.int8(-3)), ("a_s", np.float32(a_s)), ("a_z", np.int8(-128)),
             ("s_s", np.float32(s_s)), ("s_z", np.int8(-20)), ("y_s", np.float32(ys)), ("y_z", np.int8(5))]
    nodes = [n("QuantizeLinear", ["x", "x_s", "x_z"], ["xq"], name="x_q"),
             n("DequantizeLinear", ["xq", "x_s", "x_z"], ["xf"], name="x_dq")]
    for conv, src, xs, out, (ys, yz) in (("conv_a", "xf", xs, "a", ("a_s", "a_z")),
                                         ("conv_b", "sf", s_s, "y", ("y_s", "y_z"))):
        ws = (rng.random(8) * 0.01 + 0.002).astype(np.float32)
        inits += [(f"{conv}_w", rng.integers(-127, 128, (8, 8, 3, 3)).astype(np.int8)), (f"{conv}_ws", ws),
                  (f"{conv}_wz", np.zeros(8, np.int8)), (f"{conv}_b", rng.integers(-3000, 3000, 8).astype(np.int32)),
                  (f"{conv}_bs", (np.float32(xs) * ws).astype(np.float32)), (f"{conv}_bz", np.zeros(8, np.int32))]
        nodes += [n("DequantizeLinear", [f"{conv}_w", f"{conv}_ws", f"{conv}_wz"], [f"{conv}_wf"], axis=0),
                  n("DequantizeLinear", [f"{conv}_b", f"{conv}_bs", f"{conv}_bz"], [f"{conv}_bf"], axis=0),
                  n("Conv", [src, f"{conv}_wf", f"{conv}_bf"], [f"{conv}_out"], pads=[1, 1, 1, 1], name=conv),
                  n("QuantizeLinear", [f"{conv}_out", ys, yz], [f"{out}q"]),
                  n("DequantizeLinear", [f"{out}q", ys, yz], [f"{out}f"])]
        if conv == "conv_a":
            nodes += [n("Add", ["af", "xf"], ["s"], name="add"), n("QuantizeLinear", ["s", "s_s", "s_z"], ["sq"]),
                      n("DequantizeLinear", ["sq", "s_s", "s_z"], ["sf"])]
    g = helper.make_graph(nodes, "int8_residual_block", [helper.make_tensor_value_info("x", TP.FLOAT, [1, 8, 6, 6])],
                          [helper.make_tensor_value_info("yf", TP.FLOAT, [1, 8, 6, 6])],
                          initializer=[numpy_helper.from_array(np.asarray(a), k) for k, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _onnxruntime_float_products(m, tmp_path):
    """The Conv nodes onnxruntime's session leaves in float (its optimized graph, as saved)."""
    import onnx
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED    # ALL adds layouts only
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return {n.name for n in onnx.load(so.optimized_model_filepath).graph.node if n.op_type == "Conv"}


def test_int8_chains_onnxruntime_keeps_in_float_are_named_and_stay_within_a_step(tmp_path):
    """onnxruntime's x86 session turns an int8 Quantize -> Dequantize pair into uint8 only when
    the Quantize has one consumer, and fuses no int8 Conv: conv_a (whose input also feeds the
    Add) runs in float there, conv_b becomes a QLinearConv. We fuse both, exactly, and say where
    onnxruntime does not; its float sum rounds near ties its own way, hence a step at most."""
    m = int8_residual_block()
    assert _onnxruntime_float_products(m, tmp_path) == {"conv_a"}
    g = _prepared(m)
    assert [n.op for n in g.nodes].count("QLinearConv") == 2
    assert set(g.qdq_notes) == {"conv_a"} and "int8" in g.qdq_notes["conv_a"] \
        and "QDQS8ToU8Transformer" in g.qdq_notes["conv_a"]
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((1, 8, 6, 6)).astype(np.float32)
        got, ref = _run(m, {"x": x})[0], check.onnxruntime_reference(m, {"x": x})[0]
        assert np.abs(got - ref).max() <= np.float32(0.0419523) * 1.001
        assert (got == ref).mean() > 0.95


def test_the_quantize_consumer_rule_is_onnxruntimes(tmp_path):
    """Give the Add its own Quantize of x: conv_a's Quantize has one consumer and onnxruntime
    fuses conv_a too, and we note nothing; unless the two Quantizes are twins, which
    onnxruntime's common subexpression elimination merges back into one."""
    for twin, want in ((False, set()), (True, {"conv_a"})):
        m = int8_residual_block()
        if not twin:
            m.graph.initializer.append(numpy_helper.from_array(np.float32(0.0297113), "x2_s"))
        nodes = list(m.graph.node)
        nodes.insert(2, helper.make_node("QuantizeLinear", ["x", "x_s" if twin else "x2_s", "x_z"], ["xq2"]))
        nodes.insert(3, helper.make_node("DequantizeLinear", ["xq2", "x_s" if twin else "x2_s", "x_z"], ["xf2"]))
        next(n for n in nodes if n.name == "add").input[1] = "xf2"
        del m.graph.node[:]
        m.graph.node.extend(nodes)
        assert _onnxruntime_float_products(m, tmp_path) == want
        assert set(_prepared(m).qdq_notes) == want
