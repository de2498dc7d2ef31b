"""Channel windows read in place (read_slices.py, with option concat_in_place): the two
half-channel sums of a wide QLinearConv (ops/quant_split.py) read channels [0, 64) and
[64, 128) of their NHWC int8 input where it is, instead of two copy kernels writing each half
to a tensor of its own. Outputs bit-exact against onnxruntime either way, predicted copy bytes
equal the emulator's, the copy kernels gone and exactly their bytes saved."""
import sys
from pathlib import Path

import pytest
from onnx import helper

from swbuild.driver import check

from dn_build import build_model, run_check

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from quant_models import wide_qlinear_conv_model  # noqa: E402

C, HW = 128, 5 * 5


def _pooled_wide_conv():
    """The wide convolution of quant_models fed by a uint8 MaxPool (an intermediate int8
    tensor, stored as bytes): a graph input would stay where it is."""
    m, feed = wide_qlinear_conv_model(peak=100)
    g = m.graph
    conv = g.node[0]
    conv.input[0] = "xp"
    g.node.insert(0, helper.make_node("MaxPool", ["x"], ["xp"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="pool"))
    return m, feed


@pytest.fixture(scope="module")
def built(tc, tmp_path_factory):
    m, feed = _pooled_wide_conv()
    ref = check.onnxruntime_reference(m, feed)
    out = {}
    for opt in ("off", "on"):
        plan, exe = build_model(tc, m, "halves", tmp_path_factory.mktemp(f"rs-{opt}"), concat_in_place=opt,
                                sram_residency="off", grouping="off")
        out[opt] = (plan, *run_check(plan, exe, ref, feed, 0, 0))
    return out


def _ops(plan):
    return [s["op"] for k in plan["kernels"] for s in k.get("kernels", [k])]


def _gdram(plan):
    return sum(b for k in plan["kernels"] for d, b in k["copy_bytes"].items() if "GDRAM" in d)


def test_halves_bit_exact_and_copies_predicted(built):
    for opt in ("off", "on"):
        plan, doc, stats = built[opt]
        assert doc["status"] == "pass", (opt, doc.get("reason"))
        em = doc["emulator"]
        assert em["copy_mismatches"] == [] and em["violations"] == 0 and em["write_conflicts"] == 0


def test_channel_copies_dropped_and_their_bytes_saved(built):
    off, on = built["off"][0], built["on"][0]
    assert _ops(off).count("QLinearConv.a") == 1 and _ops(off).count("QLinearConv.b") == 1
    assert "QLinearConv.a" not in _ops(on) and "QLinearConv.b" not in _ops(on)
    assert _ops(on).count("QLinearConv.half_sum") == 2
    notes = [n for n in on["notes"] if "read in place" in n]
    assert len(notes) == 2 and any("channels 0..63" in n for n in notes) and any("channels 64..127" in n for n in notes)
    # each copy read its 64 channels of every pixel and wrote them once; the half sums read the
    # same elements from the input in place: exactly the copies' bytes are saved
    copies = [k for k in off["kernels"] if k["op"] in ("QLinearConv.a", "QLinearConv.b")]
    moved = sum(b for k in copies for d, b in k["copy_bytes"].items() if "GDRAM" in d)
    assert moved in (2 * 2 * (C // 2) * HW, 2 * 2 * (C // 2) * HW * 4)     # bytes or float32 elements
    assert _gdram(off) - _gdram(on) == moved
