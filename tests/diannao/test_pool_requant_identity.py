"""A QDQ MaxPool requantized with its input's own scale and zero point (schedule/quantize.py
identity_on_domain, issue 36): (q - z) * s quantized again by s gives q back on every int8 value,
proven value by value, so the pool stores its maximum as it is; a different output scale keeps
its requantization. End to end bit for bit against onnxruntime."""
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from dn_build import build_bit_exact
from swbuild.backends.diannao.schedule.quantize import identity_on_domain, vector_quantize
from swbuild.ir.loopnest import Acc, Axis, Bin, Buffer, Const, Kernel, Load
from test_vector_quantize import I, _program, _saturate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from quant_models import ort_quantized  # noqa: E402


def _pool(s_in, z, s_out):
    """max over a window of int8 q, dequantized by (s_in, z) and quantized by (s_out, z)."""
    epi = _saturate(Bin("*", Bin("-", Acc(), Const(z)), Const(s_in)), s_out, z)
    bufs = {"x": Buffer("x", "x", (4,), "float32"), "o": Buffer("o", "y", (4,), "float32")}
    k = Kernel("k", "MaxPool", "pool", "o", (Axis("i", 4),), Load("x", (I,)), bufs, epilogue=epi, combine="max",
               reduce_axes=(Axis("r", 9),), init=float("-inf"))
    epi, notes = vector_quantize(epi, k, _program({"x": "int8"}), True)
    assert notes and notes[0][1] is not None          # a proven reciprocal
    return replace(k, epilogue=epi)


def test_the_round_trip_is_dropped_only_where_it_gives_every_value_back():
    p = _program({"x": "int8"})
    for s, z in [(0.0214098934084177, -128.0), (0.1, 3.0), (0.03657234460115433, -2.0)]:
        s = float(np.float32(s))
        assert identity_on_domain(_pool(s, z, s), p).epilogue == Acc()
    k = _pool(0.1, 3.0, 0.2)                          # another output scale: q changes
    assert identity_on_domain(k, p) is k


def _conv_pool(seed=0):
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array((rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float32), "w"),
             numpy_helper.from_array((rng.standard_normal(64) * 0.1).astype(np.float32), "b")]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv"),
             n("Relu", ["c"], ["r"], name="relu"),
             n("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], name="pool"),
             n("Conv", ["p", "w", "b"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv2")]
    g = helper.make_graph(nodes, "cp", [helper.make_tensor_value_info("x", TP.FLOAT, [1, 64, 16, 16])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, 64, 8, 8])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_qdq_max_pool_stores_its_maximum_bit_exact(tc, tmp_path):
    m = ort_quantized(tmp_path, model=_conv_pool(), activations="QInt8")
    x = np.random.default_rng(1).standard_normal((1, 64, 16, 16)).astype(np.float32)
    plan, _ = build_bit_exact(tc, m, "cpool", x, tmp_path)
    device = next((tmp_path / "b").glob("*_device.mlu")).read_text()
    pool = device.split("__bang_maxpool(")[1].split("__bang_float2int8_rn(")[0]
    assert "__bang_mul_scalar(" not in pool and "__bang_sub_scalar(" not in pool, pool
