"""Quantization ops (issue 36) on every emulated target: the onnx package's node tests of
QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, ConvInteger, MatMulInteger,
QLinearConv and QLinearMatMul in one program per target, integer outputs bit-exact (swbuild's
check compares integers exactly), or refused one by one naming the dtype; a QDQ convolution
against onnxruntime; ties rounded to even as onnxruntime does; exactness proven or refused."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from core_models import build_runner
from quant_models import node_cases, ort_as_written, qdq_conv_model, triage
from rnn_models import combine_expected
from swbuild.driver import check
from swbuild.config import toolchain
from swbuild.driver.compiler import build_program
from swbuild.support.errors import UnsupportedError
from swbuild.frontends.onnx import import_model

TARGETS = ["sunway-emu", "sunway-pro-emu", "diannao-emu"]
# what no target holds: float8, 4- and 2-bit integers (float16 scales widen to float32 exactly:
# optimizer/halves.py)
REFUSED = {"test_dequantizelinear_e4m3fn", "test_dequantizelinear_e4m3fn_float16", "test_dequantizelinear_e4m3fn_zero_point",
           "test_dequantizelinear_e5m2", "test_dequantizelinear_float4e2m1", "test_dequantizelinear_int2",
           "test_dequantizelinear_int4", "test_dequantizelinear_uint2", "test_dequantizelinear_uint4",
           "test_quantizelinear_e4m3fn", "test_quantizelinear_e5m2", "test_quantizelinear_float4e2m1",
           "test_quantizelinear_int2", "test_quantizelinear_int4", "test_quantizelinear_uint2", "test_quantizelinear_uint4"}


@pytest.fixture(scope="module")
def cases():
    return node_cases()


@pytest.mark.parametrize("target", TARGETS)
def test_node_tests_exact_or_refused_naming_the_dtype(cases, target, tmp_path):
    ok, refused = triage(cases, target)
    assert {n for n, _ in refused} == REFUSED, refused
    for name, reason in refused:
        assert "dtype" in reason and "node '" in reason, (name, reason)
    assert len(ok) == 26
    m, feed, refs = combine_expected(ok)
    plan, exe = build_runner(m, target, tmp_path, "qnodes")
    doc = check.check_build(plan, exe, refs, feed, 1e-6, 1e-7, workdir=tmp_path)
    assert doc["status"] == "pass", (doc.get("reason"), [(o["name"], o) for o in doc.get("outputs", []) if not o["pass"]])
    ints = [o for o, r in zip(plan["outputs"], refs) if r.dtype.kind in "iu"]
    assert len(ints) >= 20 and all(o["dtype"] != "float32" for o in ints)


@pytest.mark.parametrize("target", TARGETS)
def test_dynamic_quantize_expanded_casts_to_uint8_inside_the_program(target, tmp_path):
    """DynamicQuantizeLinear's function body: Clip, Round, then a Cast to uint8 whose result
    feeds QuantizeLinear (truncation and wrap-around as C converts, on exact float32)."""
    cases = node_cases(expanded=True)
    assert len(cases) == 3
    m, feed, refs = combine_expected(cases)
    plan, exe = build_runner(m, target, tmp_path, "qexp")
    doc = check.check_build(plan, exe, refs, feed, 1e-6, 1e-7, workdir=tmp_path)
    assert doc["status"] == "pass", (doc.get("reason"), [o for o in doc.get("outputs", []) if not o["pass"]])


def _rounding_model(shape):
    """QuantizeLinear to uint8, int8 and int16 per axis (axis 0), DynamicQuantizeLinear of x
    and of an all-zero input (its scale is then 1, as onnxruntime has it)."""
    n = helper.make_node
    nodes, inits, outs = [], [], []
    for dtype, scale, zp in (("uint8", [0.5, 0.1], [128, 3]), ("int8", [0.1, 0.5], [-3, 0]), ("int16", [0.1, 0.5], [7, -9])):
        nodes.append(n("QuantizeLinear", ["x", f"s_{dtype}", f"z_{dtype}"], [f"q_{dtype}"], axis=0))
        inits += [numpy_helper.from_array(np.asarray(scale, np.float32), f"s_{dtype}"),
                  numpy_helper.from_array(np.asarray(zp, dtype), f"z_{dtype}")]
        outs.append(helper.make_tensor_value_info(f"q_{dtype}", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape))
    for x in ("finite", "zeros"):
        nodes.append(n("DynamicQuantizeLinear", [x], [f"dq_{x}", f"ds_{x}", f"dz_{x}"]))
        outs += [helper.make_tensor_value_info(f"dq_{x}", TP.UINT8, shape), helper.make_tensor_value_info(f"ds_{x}", TP.FLOAT, []),
                 helper.make_tensor_value_info(f"dz_{x}", TP.UINT8, [])]
    g = helper.make_graph(nodes, "rounding", [helper.make_tensor_value_info(x, TP.FLOAT, shape) for x in ("x", "finite", "zeros")],
                          outs, initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=9)


@pytest.mark.parametrize("target", TARGETS)
def test_ties_round_to_even_and_saturate_as_onnxruntime(target, tmp_path):
    """x / scale lands exactly on k + 0.5 (scale 0.5 and 0.1: the division is not a product by
    a reciprocal), far outside the range, NaN and infinities: the bytes of onnxruntime; the
    dynamic scale and zero point bit for bit."""
    k = np.arange(-300, 300, dtype=np.float32)
    x = np.concatenate([(k + 0.5) * 0.5, (k + 0.5) * np.float32(0.1), k * np.float32(0.1),
                        [1e30, -1e30, np.inf, -np.inf, 0.0, -0.0]]).astype(np.float32)
    x = np.concatenate([x, np.zeros(8 - x.size % 8, np.float32)]).reshape(2, -1)
    feed = {"x": x, "finite": np.where(np.isfinite(x), x, 7.0).astype(np.float32), "zeros": np.zeros_like(x)}
    m = _rounding_model(list(x.shape))
    ref = check.onnxruntime_reference(m, feed)
    plan, exe = build_runner(m, target, tmp_path, "rounding")
    doc = check.check_build(plan, exe, ref, feed, 0, 0, workdir=tmp_path)
    assert doc["status"] == "pass", (doc.get("reason"), [o for o in doc.get("outputs", []) if not o["pass"]])
    assert [r.dtype.name for r in ref[:3]] == ["uint8", "int8", "int16"] and ref[7] == 1.0
    assert len({int(v) for v in ref[0].reshape(-1)}) > 200        # the ties are spread over the range


@pytest.mark.parametrize("target", TARGETS)
def test_qdq_convolution_matches_onnxruntime(target, tmp_path):
    """Dequantize(int8 weights) -> Conv -> Relu -> Quantize -> Dequantize: the weights fold to
    float32 at compile time, the rest runs in float32 as the graph says: bit-exact against
    onnxruntime running the graph as written, within one quantization step of its default
    session (which fuses the chain into an integer QLinearConv)."""
    m = qdq_conv_model()
    x = np.random.default_rng(3).standard_normal((1, 3, 10, 10)).astype(np.float32)
    plan, exe = build_runner(m, target, tmp_path, "qdq")
    doc = check.check_build(plan, exe, lambda ins: ort_as_written(m, ins), {"x": x}, 0, 0, workdir=tmp_path)
    assert doc["status"] == "pass", doc.get("reason")
    assert [o["dtype"] for o in plan["outputs"]] == ["float32", "uint8"]
    got, _, err, code, _ = check.run_runner(exe, plan, {"x": x}, tmp_path)
    fused = check.onnxruntime_reference(m, {"x": x})
    assert np.abs(got[1].astype(int) - fused[1].astype(int)).max() <= 1
    np.testing.assert_allclose(got[0], fused[0], rtol=0, atol=0.05 * 1.0001)


def test_qdq_weights_fold_at_compile_time():
    g = import_model(qdq_conv_model())
    ops = [n.op for n in g.nodes]
    assert ops == ["QuantizeLinear", "DequantizeLinear", "Conv", "Relu", "QuantizeLinear", "DequantizeLinear"]
    w = g.tensors[g.nodes[2].inputs[1]]
    assert w.dtype == "float32" and w.data is not None and w.shape == (8, 3, 3, 3)


def _matmul_integer(K, b_value):
    n = helper.make_node
    g = helper.make_graph([n("MatMulInteger", ["a", "b"], ["y"], name="/fc/MatMulInteger")], "mi",
                          [helper.make_tensor_value_info("a", TP.INT8, [2, K])],
                          [helper.make_tensor_value_info("y", TP.INT32, [2, 4])],
                          initializer=[numpy_helper.from_array(np.full((K, 4), b_value, np.int8), "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_integer_sums_are_proven_exact_or_refused_naming_the_node():
    tc = toolchain.load("sunway-emu")
    build_program(_matmul_integer(1024, 127), tc, name="ok")       # 1024 * 127 * 128 < 2^24
    with pytest.raises(UnsupportedError, match=r"node '/fc/MatMulInteger' \(MatMulInteger\): the integer sum can reach "
                                               r"16777216 >= 2\^24"):
        build_program(_matmul_integer(1024, -128), tc, name="big")  # 1024 * 128 * 128 = 2^24


def test_integer_arithmetic_outside_quantization_ops_is_refused():
    n = helper.make_node
    g = helper.make_graph([n("QuantizeLinear", ["x", "s"], ["q"]), n("Add", ["q", "q"], ["y"], name="add_q")], "bad",
                          [helper.make_tensor_value_info("x", TP.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TP.UINT8, [4])],
                          initializer=[numpy_helper.from_array(np.float32(0.1), "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    with pytest.raises(UnsupportedError, match=r"node 'add_q' \(Add\): tensor 'q' has dtype uint8"):
        build_program(m, toolchain.load("sunway-emu"), name="bad")


def test_ops_report_names_each_quantized_nodes_dtype_path(tmp_path, capsys):
    import json

    import onnx

    from swbuild import cli
    n = helper.make_node
    m = qdq_conv_model()
    m.graph.node.extend([n("QuantizeLinear", ["y", "y_scale", "y_zp"], ["yq"], name="requant"),
                         n("MatMulInteger", ["yq", "mw"], ["mm"], name="fc")])
    m.graph.initializer.append(numpy_helper.from_array(np.full((10, 3), 2, np.uint8), "mw"))
    m.graph.output.append(helper.make_tensor_value_info("mm", TP.INT32, [1, 8, 10, 3]))
    onnx.save(m, tmp_path / "q.onnx")
    assert cli.main(["ops", str(tmp_path / "q.onnx"), "--target", "sunway-emu", "--json"]) == 0
    rows = {r["node"]: r for r in json.loads(capsys.readouterr().out)["nodes"]}
    assert rows["/conv1/DequantizeLinear_1"]["status"] == "folded"          # int8 weights: float32 at compile time
    assert rows["/in/QuantizeLinear"]["dtype_path"].startswith("float32 -> int8 held as exact float32: rint(x / scale)")
    assert rows["/relu/DequantizeLinear"]["dtype_path"].startswith("uint8 (exact float32) -> float32")
    # 10 products of at most 255 * 2 per output: the proof's bound is printed
    assert rows["fc"]["dtype_path"] == "uint8 x uint8 -> int32: float32 sums proven exact (|sum| <= 5100 < 2^24)"
    # a float bias: the chain stays float (optimizer/qdq_fuse.py), and says why
    assert rows["/conv1/Conv"]["dtype_path"].startswith("float32 between DequantizeLinear and QuantizeLinear: its bias")


@pytest.mark.parametrize("target", TARGETS)
def test_onnxruntime_quantize_static_qdq_model(target, tmp_path):
    """A CNN quantized by onnxruntime's quantize_static (QDQ format): within one quantization
    step of onnxruntime's default session (it fuses the chains into integer kernels) and
    bit-exact against the graph as written."""
    from quant_models import ort_quantized
    m = ort_quantized(tmp_path)
    step = float(numpy_helper.to_array(next(t for t in m.graph.initializer if t.name == "y_scale")))
    x = np.random.default_rng(9).standard_normal((1, 3, 16, 16)).astype(np.float32)
    plan, exe = build_runner(m, target, tmp_path, "ortq")
    doc = check.check_build(plan, exe, lambda ins: check.onnxruntime_reference(m, ins), {"x": x}, 0, step * 1.0001,
                            workdir=tmp_path)
    assert doc["status"] == "pass", doc.get("reason")
    got, _, _, code, _ = check.run_runner(exe, plan, {"x": x}, tmp_path)
    np.testing.assert_array_equal(got[0], ort_as_written(m, {"x": x})[0])


def test_check_allows_a_dequantized_output_one_quantization_step():
    """`swbuild check` of a quantized model: a float output made by DequantizeLinear may differ
    from onnxruntime by its one step; integer outputs stay exact."""
    steps = check.quantization_steps(qdq_conv_model(), ["y", "rq"])
    assert steps == [pytest.approx(0.05), None]
    r = np.array([0.0, 0.05, 0.1], np.float32)
    one, two = r + np.float32(0.05), r + np.float32(0.1)
    assert check.compare([one], [r], 1e-3, 1e-4, steps[:1])[0]
    assert not check.compare([two], [r], 1e-3, 1e-4, steps[:1])[0]
    assert not check.compare([one], [r], 1e-3, 1e-4)[0]
    q = np.array([200, 3], np.uint8)
    assert not check.compare([q + np.uint8(1)], [q], 1e-3, 10.0)[0]       # integers: exact whatever atol


def test_the_quantization_step_is_read_from_a_constant_node_as_pytorchs_export_writes_it():
    """torch.onnx's TorchScript exporter writes a quantized model's scales as Constant nodes: the
    output's step is found there too (it was missed, and PyTorch's int8 ResNet-18 checked at atol)."""
    n = helper.make_node
    c = lambda name, v: n("Constant", [], [name], value=numpy_helper.from_array(v, name))   # noqa: E731
    g = helper.make_graph(
        [c("s", np.float32(0.25)), c("z", np.uint8(3)), c("v", np.array([0.5, 0.25], np.float32)),
         c("zv", np.zeros(2, np.uint8)),
         n("QuantizeLinear", ["x", "s", "z"], ["q"]), n("DequantizeLinear", ["q", "s", "z"], ["y"]),
         n("DequantizeLinear", ["q", "v", "zv"], ["w"], axis=1)], "g",
        [helper.make_tensor_value_info("x", TP.FLOAT, [1, 2])],
        [helper.make_tensor_value_info(k, TP.FLOAT, [1, 2]) for k in ("y", "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    assert check.quantization_steps(m, ["y", "w"]) == [0.25, None]     # per-axis scales: no single step


@pytest.mark.parametrize("target", TARGETS)
def test_onnxruntime_quantize_dynamic_mlp_is_bit_exact(target, tmp_path):
    """quantize_dynamic's pattern: a run-time uint8 zero point into ConvInteger (padded: x - zp
    first, so a pad adds 0) and MatMulInteger, their sums proven exact for any zero point, the
    int32 result Cast to float: onnxruntime's bytes."""
    from quant_models import ort_dynamic_mlp
    m = ort_dynamic_mlp(tmp_path)
    assert {n.op_type for n in m.graph.node} >= {"DynamicQuantizeLinear", "ConvInteger", "MatMulInteger", "Cast"}
    x = np.random.default_rng(4).standard_normal((1, 3, 4, 4)).astype(np.float32)
    plan, exe = build_runner(m, target, tmp_path, "dyn")
    doc = check.check_build(plan, exe, lambda ins: check.onnxruntime_reference(m, ins), {"x": x}, 0, 0, workdir=tmp_path)
    assert doc["status"] == "pass", doc.get("reason")


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_resnet18_quantized_by_onnxruntime_passes_check(target, tmp_path):
    """The zoo's ResNet-18 through quantize_static (QDQ, per-channel int8 weights, uint8
    activations): the logits within one quantization step of onnxruntime's default session,
    as `swbuild check` judges a dequantized output, and the same top class."""
    from quant_models import ort_quantized
    from swbuild.zoo.registry import MODELS
    import swbuild.zoo.resnet  # noqa: F401  (registers resnet18)
    build, shape = MODELS["resnet18"]
    am = build(1, 0)
    m = ort_quantized(tmp_path, model=am.to_proto() if hasattr(am, "to_proto") else am, images=4)
    name = m.graph.input[0].name
    x = np.random.default_rng(1).standard_normal((1,) + tuple(shape)).astype(np.float32)
    plan, exe = build_runner(m, target, tmp_path, "r18q")
    steps = check.quantization_steps(m, [o["name"] for o in plan["outputs"]])
    assert steps[0] is not None
    ref = check.onnxruntime_reference(m, {name: x})
    doc = check.check_build(plan, exe, ref, {name: x}, 1e-3, 1e-4, workdir=tmp_path, steps=steps)
    assert doc["status"] == "pass", doc.get("reason")
    got, _, _, _, _ = check.run_runner(exe, plan, {name: x}, tmp_path)
    assert got[0].argmax() == ref[0].argmax()


def test_layout_ops_copy_quantized_values_and_outputs_keep_their_dtype(tmp_path):
    """A uint8 input reshaped, transposed (a graph output too) and cast to float, quantized to
    int8, concatenated and dequantized: every typed output bit-exact against onnxruntime."""
    n = helper.make_node
    g = helper.make_graph([n("Reshape", ["u", "shp"], ["ur"]), n("Transpose", ["ur"], ["ut"], perm=[1, 0]),
                           n("Cast", ["ut"], ["uf"], to=TP.FLOAT), n("QuantizeLinear", ["uf", "s", "z"], ["q"]),
                           n("Concat", ["q", "q"], ["qq"], axis=0), n("DequantizeLinear", ["qq", "s", "z"], ["y"])],
                          "layout", [helper.make_tensor_value_info("u", TP.UINT8, [2, 3, 4])],
                          [helper.make_tensor_value_info("ut", TP.UINT8, [12, 2]), helper.make_tensor_value_info("q", TP.INT8, [12, 2]),
                           helper.make_tensor_value_info("qq", TP.INT8, [24, 2]), helper.make_tensor_value_info("y", TP.FLOAT, [24, 2])],
                          initializer=[numpy_helper.from_array(np.array([2, 12], np.int64), "shp"),
                                       numpy_helper.from_array(np.float32(1.5), "s"), numpy_helper.from_array(np.int8(-5), "z")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    feed = {"u": np.random.default_rng(0).integers(0, 256, (2, 3, 4)).astype(np.uint8)}
    plan, exe = build_runner(m, "sunway-emu", tmp_path, "layout")
    assert [o["dtype"] for o in plan["outputs"]] == ["uint8", "int8", "int8", "float32"]
    doc = check.check_build(plan, exe, check.onnxruntime_reference(m, feed), feed, 0, 0, workdir=tmp_path)
    assert doc["status"] == "pass", doc.get("reason")


def test_casts_into_quantized_dtypes_inside_the_program_truncate_and_wrap(tmp_path):
    """float32 -> uint8/int8/int16 and int8 -> uint8 (negative values wrap) inside the program,
    each read back by DequantizeLinear: onnxruntime's values."""
    n = helper.make_node
    casts = [("xr", "a", TP.UINT8), ("x", "b", TP.INT8), ("x", "c", TP.INT16), ("b", "d", TP.UINT8)]
    nodes = [n("Relu", ["x"], ["xr"])] + [n("Cast", [i], [o], to=t) for i, o, t in casts]
    nodes += [n("DequantizeLinear", [o, "s"], [f"y{o}"]) for _, o, _ in casts]
    g = helper.make_graph(nodes, "casts", [helper.make_tensor_value_info("x", TP.FLOAT, [64])],
                          [helper.make_tensor_value_info(f"y{o}", TP.FLOAT, [64]) for _, o, _ in casts],
                          initializer=[numpy_helper.from_array(np.float32(1.0), "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=9)
    feed = {"x": np.concatenate([np.linspace(-127.9, 127.9, 40), np.linspace(-3.5, 3.5, 24)]).astype(np.float32)}
    plan, exe = build_runner(m, "sunway-emu", tmp_path, "casts")
    doc = check.check_build(plan, exe, check.onnxruntime_reference(m, feed), feed, 0, 0, workdir=tmp_path)
    assert doc["status"] == "pass", doc.get("reason")
