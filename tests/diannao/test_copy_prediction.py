"""The bytes a DianNao plan predicts each kernel copies (traffic.py, per direction: GDRAM and
on chip) equal what the BANG emulator counts, kernel by kernel, over a small CNN with a
kernel of every class; a plan that disagrees with the counters fails `check`, naming the
kernel."""
import copy

import onnx
import pytest

from swbuild.driver import check

from dn_build import build_model, run_check
from dn_models import mini_cnn, save


@pytest.fixture(scope="module")
def mini(tc, tmp_path_factory):
    d = tmp_path_factory.mktemp("copies")
    path = save(mini_cnn(), d / "mini.onnx")
    # grouping off: one launch per kernel, so the emulator's counters are per kernel
    plan, exe = build_model(tc, onnx.load(str(path)), "mini", d / "b", grouping="off")
    inputs = check.seeded_inputs(plan["inputs"], 3)
    ref = check.onnxruntime_reference(onnx.load(str(path)), inputs)
    doc, stats = run_check(plan, exe, ref, inputs)
    return plan, exe, ref, inputs, doc, stats


def test_every_class_predicted_exactly(mini):
    plan, _, _, _, doc, stats = mini
    assert doc["status"] == "pass", doc.get("reason")
    assert doc["emulator"]["copy_mismatches"] == []
    meas = {k["name"]: k for k in stats["kernels"]}
    seen = set()
    for k in plan["kernels"]:
        m = meas[k["name"]]
        assert m["launches"] == 1
        assert k["copy_bytes"] == {d: v for d, v in m["memcpy_bytes"].items() if v}, k["name"]
        if k["copy_bytes"]:
            assert any(d.startswith("GDRAM2") for d in k["copy_bytes"]) and any(d.endswith("2GDRAM") for d in k["copy_bytes"])
            seen.add(k["class"])
        elif k["class"] == "scalar":   # direct GDRAM loads and stores: no copy, none predicted
            seen.add("scalar")
    # no scalar kernel is left in the mini CNN (its LRN and softmax reductions run on the vector
    # unit); test_scalar_charge.py checks a scalar kernel's (empty) copy prediction
    assert {"conv", "pool", "gemm", "elementwise", "lrn", "rowreduce"} <= seen


def test_per_channel_operands_come_from_gdram_once_per_channel_block(mini, tc, tmp_path):
    """A convolution's bias (a per-channel epilogue operand) is copied from GDRAM for one
    pixel: by default it stays that row of channels, read by __bang_cycle_add (cycle_ops.py),
    no on-chip copy; with cycle_ops off it is repeated over the tile on chip (schedule/conv.py
    channel_reps, by doubling contiguous copies, replicate.py). Either way its GDRAM bytes are
    those of the channels, not of the tile; predicted exactly (test above)."""
    plan, exe, _, _, doc, stats = mini
    device = next(exe.parent.glob("*_device.mlu")).read_text()
    convs = [k for k in plan["kernels"] if k["class"] == "conv"]
    assert convs and not any((k["copy_bytes"] or {}).get("NRAM2NRAM") for k in convs)
    assert any("__bang_cycle_add(" in device.split(f"void {k['name']}(")[1].split("\n}\n")[0] for k in convs)
    path = next(exe.parent.parent.glob("*.onnx"))
    plan, exe = build_model(tc, onnx.load(str(path)), "mini", tmp_path / "b", grouping="off", cycle_ops="off")
    inputs = check.seeded_inputs(plan["inputs"], 3)
    doc, _ = run_check(plan, exe, check.onnxruntime_reference(onnx.load(str(path)), inputs), inputs)
    assert doc["status"] == "pass" and doc["emulator"]["copy_mismatches"] == []
    device = next(exe.parent.glob("*_device.mlu")).read_text()
    repeated = [k for k in plan["kernels"] if k["class"] == "conv" and (k["copy_bytes"] or {}).get("NRAM2NRAM")]
    assert repeated and "__bang_cycle_" not in device
    for k in repeated:
        body = device.split(f"void {k['name']}(")[1].split("\n}\n")[0]
        # contiguous on-chip copies (rows [0, m) to [m, 2m)), none strided with source stride 0
        assert body.count("NRAM2NRAM);") > 0
        assert body.count("NRAM2NRAM, 256, 0, ") + body.count("NRAM2NRAM, 512, 0, ") == 0


@pytest.mark.parametrize("tamper", ["bytes", "direction", "unpredicted"])
def test_a_wrong_prediction_fails_check(mini, tamper):
    plan, exe, ref, inputs, _, _ = mini
    bad = copy.deepcopy(plan)
    k = next(k for k in bad["kernels"] if k["class"] == "conv")
    if tamper == "bytes":
        d = next(iter(k["copy_bytes"]))
        k["copy_bytes"][d] += 4
    elif tamper == "direction":
        k["copy_bytes"]["SRAM2NRAM"] = k["copy_bytes"].get("SRAM2NRAM", 0) + 64
    else:
        k["copy_bytes"], k["copy_bytes_unpredicted"] = None, "told so by the test"
    doc = check.check_build(bad, exe, ref, inputs, 1e-3, 1e-4)
    assert doc["status"] == "fail" and f"in 1 launches: {k['name']}" in doc["reason"]
    [m] = doc["emulator"]["copy_mismatches"]
    assert m["kernel"] == k["name"] and (m.get("why") == "told so by the test") == (tamper == "unpredicted")
