"""Buffer stitching on chip (residency.py, option sram_residency): in the grouped launch of
Conv 1x1 -> Relu -> Conv 1x1, the intermediate stays in its cluster's SRAM (NRAM2SRAM, then
SRAM2NRAM) instead of GDRAM; outputs match onnxruntime, the predicted copy bytes equal the
emulator's, and GDRAM moves the intermediate's bytes fewer in each direction."""
import pytest

from swbuild.backends.diannao.residency import cluster_layout
from swbuild.driver import check

from dn_build import build_model, run_check
from dn_models import pointwise_chain

CI, CO, H = 64, 64, 56


@pytest.fixture(scope="module")
def built(tc, tmp_path_factory):
    model = pointwise_chain(CI, CO, H, 3)
    out = {}
    for res in ("off", "on"):
        plan, exe = build_model(tc, model, "pw", tmp_path_factory.mktemp(f"res-{res}"), sram_residency=res)
        inputs = check.seeded_inputs(plan["inputs"], 7)
        out[res] = (plan, *run_check(plan, exe, check.onnxruntime_reference(model, inputs), inputs))
    return out


def gdram(copies):
    return sum(b for d, b in copies.items() if "GDRAM" in d)


def test_intermediate_in_sram(built):
    for res in ("off", "on"):
        plan, doc, stats = built[res]
        assert doc["status"] == "pass", doc.get("reason")
        em = doc["emulator"]
        assert em["copy_mismatches"] == [] and em["violations"] == 0 and em["write_conflicts"] == 0
    (off, _, s_off), (on, _, s_on) = built["off"][:3], built["on"][:3]
    (k_off,), (k_on,) = off["kernels"], on["kernels"]      # one grouped launch
    assert k_off["class"] == k_on["class"] == "group"
    assert "NRAM2SRAM" not in k_off["copy_bytes"] and off["on_chip_tensors"] == {}
    (t,) = on["on_chip_tensors"].values()
    inter = CO * H * H * 4
    # a cluster's block of whole rows: at least a quarter of the tensor, less than all of it
    assert t["launch"] == k_on["name"] and inter // 4 <= t["bytes"] < inter and t["bytes"] % (H * CO * 4) == 0
    assert k_on["copy_bytes"]["NRAM2SRAM"] == k_on["copy_bytes"]["SRAM2NRAM"] == inter
    assert k_on["copy_bytes"]["NRAM2GDRAM"] == k_off["copy_bytes"]["NRAM2GDRAM"] - inter
    assert k_on["copy_bytes"]["GDRAM2NRAM"] == k_off["copy_bytes"]["GDRAM2NRAM"] - inter
    assert gdram(k_on["copy_bytes"]) == gdram(k_off["copy_bytes"]) - 2 * inter
    # the cluster's block above the weights' staging in the SRAM arena the emulator checks
    assert s_on["sram_declared_bytes"] >= s_off["sram_declared_bytes"] + t["bytes"]


def test_layout_refuses_what_crosses_clusters():
    # cluster 1 reads a row cluster 0 wrote (a 3x3 consumer's halo): stays in GDRAM
    w = {0: (0, 100), 1: (100, 200), 2: (200, 300), 3: (300, 350)}
    assert cluster_layout(w, {0: (0, 100), 1: (90, 200)}) is None
    assert cluster_layout({0: (0, 120), 1: (100, 200)}, {}) is None          # write ranges overlap
    assert cluster_layout(w, {0: (0, 100), 3: (300, 350)}) == (0, 100, 100)
    assert cluster_layout({0: (0, 100), 1: (150, 200)}, {}) == (0, 150, 100)
    assert cluster_layout({0: (0, 100), 1: (100, 200), 2: (250, 300)}, {}) is None   # starts not linear in the cluster
