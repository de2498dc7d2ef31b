"""2-D sharing on SW26010-Pro (schedule/grid.py column_axes): a mesh row splits one axis and
RMA-broadcasts along the row what does not depend on it, while the rows run in lockstep so a
mesh column holds the same tile of the other axes and RMA-broadcasts along the column (or to
all 64) what depends only on those. Under the emulator's strictest landing the outputs match
onnxruntime, the DMA and every RMA form's count equal the prediction, and the kernel reads
fewer bytes than under row sharing alone with the same tiles."""
import pytest

from opt_models import conv_model, program, schedule, sunway
from test_emulated import _run_pinned
from swbuild.backends.sunway.cost.predict import predict_program
from swbuild.backends.sunway.report import emulator_findings
from swbuild.driver import check

CASES = [
    # rows split co, the input (with pads) goes along rows, weights and bias along columns
    (dict(c=16, hw=16, co=64), {"ci": 4, "co": 8, "o0": 2, "o1": 16, "k0": 1}, ("co", 8, 8), True, "wait",
     {"row_ibcast", "col_ibcast"}),
    # single-buffered, two waves of groups, DMA landing at seeded random points
    (dict(c=8, hw=16, co=128), {"ci": 8, "co": 8, "o0": 2, "o1": 16}, ("co", 8, 8), False, "random:7",
     {"row_ibcast", "col_ibcast"}),
    # batch of 8, rows split o0: the weights are the same on all 64 CPEs (one array broadcast)
    (dict(n=8, c=8, hw=16, co=8), {"ci": 4, "co": 8, "o0": 2, "o1": 16, "n": 1}, ("o0", 8, 8), True, "wait",
     {"ibcast"}),
]


@pytest.mark.parametrize("shape,tiles,lane,db,landing,forms", CASES)
def test_two_dimensional_sharing_is_exact(tmp_path, monkeypatch, shape, tiles, lane, db, landing, forms):
    monkeypatch.setenv("SWEMU_DMA", landing)
    model = conv_model(**shape)
    opts = {} if db else {"double_buffer": "off"}
    pins = dict(tiles={"Conv": tiles}, double_buffer=db, partition="cyclic")
    plan, stats, got, ref = _run_pinned(model, "sunway-pro-emu", opts, tmp_path, monkeypatch, lane=lane, **pins)
    k = plan["kernels"][0]
    assert k["row_shared"] == lane[0] and k["double_buffered"] == db and k["partition"] == "cyclic"
    f = emulator_findings(plan, stats)
    assert f["dma_mismatches"] == [] and f["write_conflicts"] == 0 and f["races"] == 0
    assert f["ldm_over_budget"] == []
    ok, err, _, _ = check.compare(got, ref, 1e-4, 1e-5)
    assert ok, err
    (m,) = [x for x in stats["kernels"] if x["name"] == k["name"]]
    assert {x: v for x, v in m["rma"].items() if v} == k["rma"]
    assert {x for x in k["rma"] if x.endswith("ibcast")} >= forms
    # row sharing alone with the same tiles (predicted: its counts are checked in test_emulated.py)
    tc = sunway("sunway-pro-emu")
    one = predict_program(schedule(program(model), tc, opts, lane=lane[0], **pins), tc)[0]
    assert one["row_shared"] == lane[0] and "col_ibcast" not in one.get("rma", {})
    assert k["dma"]["put"] == one["dma"]["put"]
    assert k["dma"]["get"]["bytes"] < one["dma"]["get"]["bytes"]


def test_search_takes_it_on_a_56_wide_layer_only_where_it_models_faster():
    """A 3x3 layer on 56x56 pixels (ResNet-50's first stage): the search shares in two
    dimensions, and the prediction is the faster for it; SW26010 (no column broadcast DMA)
    never does."""
    tc = sunway("sunway-pro-emu")
    p = schedule(program(conv_model(c=64, hw=56, co=64)), tc, {})
    s = p.kernels[0].schedule
    assert s.cols and {b.share_form for b in s.boxes if b.shared} >= {"row", "col"}
    two = predict_program(p, tc)[0]
    one = predict_program(schedule(program(conv_model(c=64, hw=56, co=64)), tc, {}, lane=(s.lane, 8)), tc)[0]
    assert two["modeled_seconds"] < one["modeled_seconds"]
    assert two["dma"]["get"]["bytes"] < one["dma"]["get"]["bytes"]
    p1 = schedule(program(conv_model(c=64, hw=56, co=64)), sunway("sunway-emu"), {})
    assert not p1.kernels[0].schedule.cols
