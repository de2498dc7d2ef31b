"""onnxruntime's QOperator format on the MLU's vector unit (issue 36): quantize_static's small
CNN (QLinearConv, MaxPool, QLinearAdd fused into a convolution's epilogue,
QLinearGlobalAveragePool, QGemm) compiles to no scalar statement: the QLinearAdd's rounding and
saturation as clamps and the 1.5 * 2^23 rounding (schedule/quantize.py), QGemm through
__bang_conv as a gemm (schedule/integer.py), the global pool's exact sum from __bang_avgpool
(schedule/pool_sum.py, reading the sum's bytes); its uint8 activations held as int8
(optimizer/uint8_as_int8.py) and stored as bytes.
Bit for bit against onnxruntime, with the emulator's byte counts equal to the plan's."""
import sys
from pathlib import Path

import numpy as np

from dn_build import build_bit_exact

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from quant_models import ort_quantized  # noqa: E402


def test_qoperator_cnn_is_vector_code_bit_exact(tc, tmp_path):
    m = ort_quantized(tmp_path, "QOperator")
    x = np.random.default_rng(5).standard_normal((1, 3, 16, 16)).astype(np.float32)
    plan, _ = build_bit_exact(tc, m, "qop", x, tmp_path)      # also: no violation, no copy mismatch
    subs = {}
    for s in (s for k in plan["kernels"] for s in k.get("kernels", [k])):
        subs.setdefault(s["op"], []).append(s)
    assert sorted(subs) == ["MaxPool", "QGemm", "QLinearConv", "QLinearGlobalAveragePool", "QuantizeLinear"]
    # every kernel after the input's QuantizeLinear (its division by the scale stays: no reciprocal proven)
    for op, ss in subs.items():
        for s in ss:
            assert s["class"] != "scalar" and (op == "QuantizeLinear" or not s["scalar_statements"]), (op, s)
    # the second convolution with the QLinearAdd in its epilogue: all vector code
    conv2 = subs["QLinearConv"][1]
    assert conv2["compute_statements"] == conv2["tensorized_statements"] == 14
    subs = {op: ss[0] for op, ss in subs.items()}
    assert subs["QGemm"]["class"] == "gemm" and "__bang_conv" in subs["QGemm"]["static_instructions"]
    assert subs["QLinearGlobalAveragePool"]["class"] == "pool"
    assert "__bang_avgpool" in subs["QLinearGlobalAveragePool"]["static_instructions"]
    # the uint8 activations are held as int8 and cross GDRAM as bytes: the ones the QLinearAdd reads
    # (the max pool's, also the second convolution's input) and its sum, which the global pool
    # widens in NRAM; the pooled vector stays float32 lanes (QGemm's __bang_conv reads it as a gemm)
    assert sorted(plan["int8_storage"]) == ["a_quantized", "c1_quantized", "p1_quantized", "x_quantized"]
    assert subs["QLinearGlobalAveragePool"]["schedule"]["narrow_in"]
