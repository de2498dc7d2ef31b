"""uint8 activations held as int8 with their zero point - 128 (optimizer/uint8_as_int8.py):
the same real values bit for bit, so the integer kernels and the MLU's int8 path take them.
Zero points 0, 128 and 255 against onnxruntime (tests/diannao/test_uint8_int8_path.py runs
the same graph on diannao-emu)."""
import numpy as np
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from core_models import build_runner
from uint8_models import ZERO_POINTS, chain_input, uint8_conv_chain
from swbuild.driver import check
from swbuild.driver.lowering import prepare
from swbuild.frontends.onnx import import_model


def _prepared(m):
    g, _ = prepare(import_model(m), "u")
    return g


def _zero_point(g, name):
    return int(np.asarray(g.tensors[name].data).reshape(-1)[0])


def test_uint8_activations_become_int8_with_the_zero_point_minus_128():
    g = _prepared(uint8_conv_chain())
    convs = [n for n in g.nodes if n.op == "QLinearConv"]
    assert len(convs) == 3
    # each convolution reads int8 with zero point z - 128 and writes int8 with the next one's
    assert [_zero_point(g, n.inputs[2]) for n in convs] == [z - 128 for z in ZERO_POINTS]
    assert [_zero_point(g, n.inputs[7]) for n in convs] == [z - 128 for z in ZERO_POINTS[1:]] + [-128]
    assert all(g.exact_ints[n.inputs[0]] == "int8" and g.rebiased[n.inputs[0]] == "uint8" for n in convs)
    # PyTorch's Cast from uint8 to uint8 is dropped: the convolution reads the QuantizeLinear's output
    assert [n.inputs[0] for n in convs] == ["q0", "q1", "q2"] and not any(n.op == "Cast" for n in g.nodes)
    # the weights are constants: the centred weights (w - w_zero_point) are what the kernel reads
    assert g.exact_ints[convs[1].inputs[3]] == "uint8" and _zero_point(g, convs[1].inputs[5]) == 128
    q, dq = g.nodes[0], g.nodes[-1]
    assert (q.op, dq.op) == ("QuantizeLinear", "DequantizeLinear")
    assert _zero_point(g, q.inputs[2]) == _zero_point(g, dq.inputs[2]) == -128


def test_uint8_that_something_else_reads_or_the_caller_sees_stays_uint8():
    """A graph output, a Cast, a MatMulInteger: the whole connected set stays uint8 (still
    exact, the uint8 path); the other sets are still rewritten. A MaxPool and a Reshape join
    the set of their input (they move or pick values: max(v) - 128 = max(v - 128))."""
    m = uint8_conv_chain()
    n = helper.make_node
    m.graph.node.extend([n("Cast", ["q2"], ["q2f"], to=TP.FLOAT, name="cast_q2"),
                         n("MaxPool", ["q1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool_q1"),
                         n("Flatten", ["p1"], ["f1"], name="flat_p1"),
                         n("DequantizeLinear", ["f1", "s1", "z1"], ["y1"], name="dq_f1")])
    m.graph.output.extend([helper.make_tensor_value_info("q2f", TP.FLOAT, [1, 16, 8, 8]),
                           helper.make_tensor_value_info("y1", TP.FLOAT, [1, 256]),
                           helper.make_tensor_value_info("q3", TP.UINT8, [1, 16, 8, 8])])
    g = _prepared(m)
    assert {t: g.exact_ints[t] for t in ("q0", "q1", "q2", "p1", "f1")} == {
        "q0": "int8", "q1": "int8", "q2": "uint8", "p1": "int8", "f1": "int8"}
    assert g.tensors["q3"].dtype == "uint8"
    assert set(g.rebiased) == {"q0", "q1", "p1", "f1"}       # q0c, q1c: identity Casts, dropped
    casts = {n.name for n in g.nodes if n.op == "Cast"}
    assert {"conv2/cast", "cast_q2"} <= casts and not {"conv0/cast", "conv1/cast"} & casts
    dq = next(x for x in g.nodes if x.name == "dq_f1")
    assert _zero_point(g, dq.inputs[2]) == 0       # z1 = 128 as int8


def test_uint8_chain_is_bit_exact_on_sunway(tmp_path):
    m, x = uint8_conv_chain(), chain_input()
    plan, exe = build_runner(m, "sunway-emu", tmp_path, "u8")
    ref = check.onnxruntime_reference(m, {"x": x})
    doc = check.check_build(plan, exe, ref, {"x": x}, 0, 0, workdir=tmp_path)
    assert doc["status"] == "pass", doc.get("reason")
    got, _, _, code, _ = check.run_runner(exe, plan, {"x": x}, tmp_path)
    np.testing.assert_array_equal(got[0], ref[0])
    ops = [s.get("op") for k in plan["kernels"] for s in k.get("kernels", [k])]
    assert ops.count("QLinearConv") == 3, ops


def test_onnxruntime_qoperator_ops_join_the_int8_sets_with_their_own_zero_points(tmp_path):
    """QLinearAdd, QLinearGlobalAveragePool and QGemm read and write int8 sets with their zero
    points unchanged (ops/quant_ms.py adds the 128 back and computes on the uint8 values), so a
    QOperator ResNet's activations are int8 end to end; bit for bit against onnxruntime."""
    from quant_models import ort_quantized
    m = ort_quantized(tmp_path, "QOperator")
    before = {n.op_type: list(n.input) for n in m.graph.node}
    zps = {t.name: int(numpy_helper.to_array(t).reshape(-1)[0]) for t in m.graph.initializer
           if t.data_type == TP.UINT8 and t.name.endswith("zero_point")}
    g = _prepared(m)
    ms = {n.op.split(".")[-1]: n for n in g.nodes if n.op.startswith("com.microsoft.")}
    assert set(ms) == {"QLinearAdd", "QLinearGlobalAveragePool", "QGemm"}
    for op, n in ms.items():
        assert n.inputs == before[op], op           # zero points untouched
        assert g.rebiased.get(n.outputs[0]) == "uint8" and g.exact_ints[n.outputs[0]] == "int8", op
    add = ms["QLinearAdd"]
    assert g.rebiased.get(add.inputs[0]) == g.rebiased.get(add.inputs[3]) == "uint8"
    assert _zero_point(g, add.inputs[7]) == zps[add.inputs[7]] >= 0        # the model's uint8 zero point
    x = np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype(np.float32)
    plan, exe = build_runner(m, "sunway-emu", tmp_path, "qop8")
    ref = check.onnxruntime_reference(m, {"x": x})
    got = check.run_runner(exe, plan, {"x": x}, tmp_path)[0]
    np.testing.assert_array_equal(got[0], ref[0])
