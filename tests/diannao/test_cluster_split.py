"""Convolutions whose weights outweigh their input split output-channel blocks over the
clusters and rows over a cluster's cores (schedule/conv.py, clusters mode): each weight byte
leaves GDRAM once per launch (GDRAM -> SRAM of one cluster, then SRAM -> WRAM of its cores),
where the rows mode brought the whole tensor into every cluster's SRAM."""
import pytest

from swbuild.driver import check

from dn_build import build_model, run_check
from dn_models import conv_relu_pairs

# (input channels, output channels, spatial size): 4 and 5 output-channel blocks of 64 (the
# fifth leaves clusters without a block in the last step: guarded, barriers still uniform)
CASES = [(256, 256, 8), (128, 320, 6)]


def convs():
    return conv_relu_pairs(CASES, 5, "cluster_split")


@pytest.fixture(scope="module")
def built(tc, tmp_path_factory):
    d = tmp_path_factory.mktemp("clusters")
    model = convs()
    plan, exe = build_model(tc, model, "csplit", d, grouping="off")
    inputs = check.seeded_inputs(plan["inputs"], 7)
    doc, stats = run_check(plan, exe, check.onnxruntime_reference(model, inputs), inputs)
    return plan, doc, stats


def test_weights_leave_gdram_once(built):
    plan, doc, stats = built
    assert doc["status"] == "pass", doc.get("reason")
    em = doc["emulator"]
    assert em["copy_mismatches"] == [] and em["violations"] == 0 and em["write_conflicts"] == 0
    meas = {k["name"]: k for k in stats["kernels"]}
    convs_ = [k for k in plan["kernels"] if k["class"] == "conv"]
    assert len(convs_) == len(CASES)
    for k, (ci, co, h) in zip(convs_, CASES):
        s = k["schedule"]
        assert s["mode"] == "clusters", (k["name"], s)
        image = s["NCB"] * s["Cob"] * 9 * s["NIB"] * s["Cib"] * 4     # the bank-layout weight image
        assert s["NCB"] * s["Cob"] >= co and image >= co * ci * 9 * 4
        mb = meas[k["name"]]["memcpy_bytes"]
        assert mb["GDRAM2SRAM"] == image, k["name"]            # once, not once per cluster
        assert mb["SRAM2WRAM"] == 4 * image, k["name"]         # each block to the 4 cores of its cluster
        assert "GDRAM2WRAM" not in mb or not mb["GDRAM2WRAM"]
        # input: each cluster reads the rows (and halo) of its cores, once per block it holds
        assert mb["NRAM2GDRAM"] == co * h * h * 4
