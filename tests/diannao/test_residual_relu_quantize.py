"""A residual Add -> Relu -> QuantizeLinear whose shortcut has a DequantizeLinear of its own, as
PyTorch's QDQ export writes a ResNet block (issue 36): that DequantizeLinear is computed in the
convolution's epilogue, which reads the shortcut's int8 bytes (backends/diannao/
inline_dequantize.py, schedule/conv.py), so the fused Add has two int8-ranged leaves and takes
the pair form, proven on all their combinations (schedule/quantize.py); the Relu is the byte
conversion's saturation where the output's zero point is int8's lowest value. Bit-exact
against onnxruntime, no scalar statement left."""
import sys
from pathlib import Path

import pytest
from onnx import TensorProto as TP

from dn_build import build_bit_exact

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from residual_models import block_input, residual_relu_block  # noqa: E402


@pytest.mark.parametrize("out_type, out_zero", [(TP.UINT8, 0), (TP.INT8, -128)])
def test_residual_relu_quantize_takes_the_pair_form_bit_exact(tc, tmp_path, out_type, out_zero):
    plan, _ = build_bit_exact(tc, residual_relu_block(out_type, out_zero), "rr", block_input(), tmp_path)
    subs = [s for k in plan["kernels"] for s in k.get("kernels", [k])]
    conv = [s for s in subs if s.get("op") == "QLinearConv"]
    # the shortcut's DequantizeLinear is computed in the epilogue, which reads q0's bytes
    assert len(conv) == 2 and not any(s.get("op") == "DequantizeLinear" for s in subs)
    assert any("DequantizeLinear computed in the epilogues that read r" in n for n in plan["notes"])
    assert {"q0", "qo"} <= set(plan["int8_storage"])
    assert not conv[0]["scalar_statements"], conv[0]["scalar_statements"]
    device = next((tmp_path / "b").glob("*_device.mlu")).read_text()
    body = device.split(f"void {conv[0]['name']}(")[1].split("\n}\n")[0]
    assert "SWB_SCALAR(" not in body and "__bang_active_relu(" not in body and "__bang_int82float(" in body
    assert any("QuantizeLinear by 0.0526704341173172 on the vector unit, as a product" in n for n in plan["notes"])
