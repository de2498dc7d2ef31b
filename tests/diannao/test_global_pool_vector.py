"""The tail of PyTorch's QDQ ResNet-18 (issue 36): Q -> DQ -> GlobalAveragePool -> Q -> DQ ->
Flatten -> Q -> DQ. The GlobalAveragePool runs as one __bang_avgpool window per channel block
(schedule/conv_geometry.py global_pool_window: the scalar loop's summation order, one division),
its channels split over the tasks, and the Quantize after the Flatten, which gives back the
integers it was given, is gone (optimizer/requantize_identity.py). Bit for bit against
onnxruntime."""
import numpy as np
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from dn_build import build_bit_exact
from swbuild.optimizer.requantize_identity import round_trips


def _tail(C=64, H=7, s=0.064161516726017):
    s = np.float32(s)
    inits = [numpy_helper.from_array(np.array(s, np.float32), "s"), numpy_helper.from_array(np.array(0, np.uint8), "z")]
    n = helper.make_node
    nodes = [n("Relu", ["x"], ["r"], name="relu"),
             n("QuantizeLinear", ["r", "s", "z"], ["q0"], name="q0"),
             n("DequantizeLinear", ["q0", "s", "z"], ["d0"], name="d0"),
             n("GlobalAveragePool", ["d0"], ["g"], name="gap"),
             n("QuantizeLinear", ["g", "s", "z"], ["q1"], name="q1"),
             n("DequantizeLinear", ["q1", "s", "z"], ["d1"], name="d1"),
             n("Flatten", ["d1"], ["f"], axis=1, name="flat"),
             n("QuantizeLinear", ["f", "s", "z"], ["q2"], name="requant"),
             n("DequantizeLinear", ["q2", "s", "z"], ["y"], name="d2")]
    g = helper.make_graph(nodes, "tail", [helper.make_tensor_value_info("x", TP.FLOAT, [1, C, H, H])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, C])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_round_trip_is_proven_on_every_value_and_refused_where_it_fails():
    assert round_trips("uint8", np.float32(0.064161516726017), 0)
    assert round_trips("int8", np.float32(0.0214098934084177), -128)
    assert round_trips("int16", np.float32(3e-5), 7)
    assert not round_trips("uint8", np.float32(1e38), 0)        # (v - z) * s overflows to inf
    assert not round_trips("uint8", np.float32(0.0), 0)         # x / 0: NaN, saturated to 0
    assert round_trips("uint8", np.float32(1e-44), 0)           # subnormal, yet exact multiples


def test_quantized_global_pool_is_vector_code_bit_exact(tc, tmp_path):
    x = (np.random.default_rng(0).standard_normal((1, 64, 7, 7)) * 4).astype(np.float32)
    plan, _ = build_bit_exact(tc, _tail(), "tail", x, tmp_path)
    device = next((tmp_path / "b").glob("*_device.mlu")).read_text()
    gap = device.split("_globalaveragepool(")[1].split("__mlu_global__")[0]
    assert "__bang_avgpool(" in gap and "acc +=" not in gap, gap
    assert "requant" not in device and "_quantizelinear(" not in device
