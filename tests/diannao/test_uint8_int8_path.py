"""uint8 activations on the MLU's int8 path (optimizer/uint8_as_int8.py, issue 36): a chain of
three QDQ convolutions reading uint8 with zero points 0, 128 and 255 stores its activations
as int8 bytes and convolves int8 x int8, bit-exact against onnxruntime."""
import sys
from pathlib import Path

from dn_build import build_bit_exact

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from uint8_models import chain_input, uint8_conv_chain  # noqa: E402


def test_uint8_chain_convolves_int8_from_bytes_bit_exact(tc, tmp_path):
    plan, _ = build_bit_exact(tc, uint8_conv_chain(), "u", chain_input(), tmp_path)
    convs = [s for k in plan["kernels"] for s in k.get("kernels", [k]) if s.get("op") == "QLinearConv"]
    assert len(convs) == 3
    for s in convs:
        ins = s.get("static_instructions", {})
        # int8 x int8: the input copied as bytes into the tile __bang_conv reads, never widened to int16
        assert s["class"] == "conv" and ins.get("__bang_conv") and s["schedule"].get("narrow_in"), s
        assert "__bang_float2int16_rn" not in ins
    # the three uint8 activations cross GDRAM as one byte each
    assert {"q0", "q1", "q2"} <= set(plan["int8_storage"])
    assert [s["schedule"].get("narrow_out") for s in convs] == [True, True, False]
