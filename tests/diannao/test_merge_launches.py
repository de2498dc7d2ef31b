"""Consecutive kernels in one launch (stitch.merged_launches, option merge_launches): the
concat_branches network, whose GraphTurbo groups take several launches, runs in one; its
outputs still match onnxruntime, the copies are the same bytes (predicted = emulator), and
the time falls by what the launches it no longer makes cost less the barriers replacing them."""
import pytest

from swbuild.backends.diannao.report import build_report
from swbuild.driver import check

from dn_build import build_model, run_check
from dn_models import concat_branches


@pytest.fixture(scope="module")
def built(tc, tmp_path_factory):
    model = concat_branches(4, 32, 14)
    out = {}
    for opt in ("off", "on"):
        plan, exe = build_model(tc, model, "ml", tmp_path_factory.mktemp(f"ml-{opt}"), merge_launches=opt,
                                sram_residency="off",   # its candidates depend on the launches
                                cross_layer_prefetch="off")   # so do its pairs: the saving is the launches' alone
        inputs = check.seeded_inputs(plan["inputs"], 2)
        out[opt] = (plan, *run_check(plan, exe, check.onnxruntime_reference(model, inputs), inputs))
    return out


def test_one_launch_same_copies_less_time(tc, built):
    for opt in ("off", "on"):
        plan, doc, stats = built[opt]
        assert doc["status"] == "pass", doc.get("reason")
        em = doc["emulator"]
        assert em["copy_mismatches"] == [] and em["violations"] == 0 and em["write_conflicts"] == 0
    off, on = built["off"][0], built["on"][0]
    assert len(off["kernels"]) > 1 and len(on["kernels"]) == 1
    (launch,) = on["kernels"]
    assert [k["name"] for k in launch["kernels"]] == [k["name"] for e in off["kernels"] for k in e.get("kernels", [e])]
    bytes_of = lambda plan: sum(sum(e["copy_bytes"].values()) for e in plan["kernels"])
    assert bytes_of(on) == bytes_of(off)
    saved = built["off"][1]["emulator"]["cycles"] - built["on"][1]["emulator"]["cycles"]
    hw = tc.hardware
    assert saved == (len(off["kernels"]) - 1) * (int(hw["launch_cycles"]) - int(hw["sync_all_cycles"]))


def test_report_of_the_one_launch_lists_each_kernels_schedule(tc, built):
    """`swbuild report --json` of a merged launch: each kernel it runs with the schedule its plan
    chose (a conv's mode and blocks), not only the launch's."""
    plan, _, stats = built["on"]
    (launch,) = build_report(plan, stats, tc)["kernels"]
    subs = plan["kernels"][0]["kernels"]
    assert [k["schedule"] for k in launch["kernels"]] == [k.get("schedule", {}) for k in subs]
    assert any(k["schedule"].get("mode") for k in launch["kernels"])     # the convolutions' partition
