"""Channel Concats of NHWC tensors written in place (concat_slices.py, option concat_in_place):
an Inception module's branches (Conv 1x1, Conv 3x3, MaxPool) write their channels of the Concat
output with segmented copies, a second Concat nests the first (DenseNet), an Add reads a slice
directly. Outputs match onnxruntime, predicted copy bytes equal the emulator's, no violation or
write conflict, the Concat copy kernels are gone and GDRAM moves their bytes fewer."""
import pytest

from swbuild.backends.diannao.layout import NHWC, view_strides
from swbuild.driver import check

from dn_build import build_model, run_check
from dn_models import concat_branches

C, H = 32, 14


@pytest.fixture(scope="module")
def built(tc, tmp_path_factory):
    model = concat_branches(3, C, H)
    out = {}
    for opt in ("off", "on"):
        plan, exe = build_model(tc, model, "cat", tmp_path_factory.mktemp(f"cat-{opt}"), concat_in_place=opt,
                                sram_residency="off")   # GDRAM bytes compared: no SRAM residency
        inputs = check.seeded_inputs(plan["inputs"], 5)
        out[opt] = (plan, *run_check(plan, exe, check.onnxruntime_reference(model, inputs), inputs))
    return out


def ops(plan):
    return [op for k in plan["kernels"] for op in ([k["op"]] + [s["op"] for s in k.get("kernels", [])])]


def gdram(plan):
    return sum(b for k in plan["kernels"] for d, b in k["copy_bytes"].items() if "GDRAM" in d)


def test_outputs_match_and_copies_are_exact(built):
    for opt in ("off", "on"):
        plan, doc, stats = built[opt]
        assert doc["status"] == "pass", doc.get("reason")
        assert doc["elements"] == 2 * 2 * C * H * H
        em = doc["emulator"]
        assert em["copy_mismatches"] == [] and em["violations"] == 0 and em["write_conflicts"] == 0


def test_concat_copies_dropped(built):
    off, on = built["off"][0], built["on"][0]
    assert ops(off).count("Concat") == 5 and "Concat" not in ops(on)
    notes = [n for n in on["notes"] if "written in place" in n]
    assert len(notes) == 5 and any("of NHWC d" in n and " cat " in n for n in notes)
    # each Concat copy read and wrote its input once: the bytes saved, in both directions
    copied = 4 * H * H * (2 * C + C + C) + 4 * H * H * (4 * C + 2 * C)
    assert gdram(off) - gdram(on) == 2 * copied


def test_slice_strides_use_the_container_pitch():
    # a 32-channel slice of a 192-channel NHWC tensor: channels 1 apart, pixels 192 apart
    assert view_strides((1, 32, 14, 14), (1, 32, 14, 14), NHWC, (1, 192, 14, 14)) == [14 * 14 * 192, 1, 14 * 192, 192]
    assert view_strides((1, 32, 14, 14), (1, 32, 14, 14), NHWC) == [14 * 14 * 32, 1, 14 * 32, 32]
