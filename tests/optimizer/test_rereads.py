"""Per-box re-reads (backends/sunway/cost/rereads.py): what each input box of a built kernel
fetches against the region it reads once. The boxes add up to the predictor's own numbers."""
import pytest

from opt_models import conv_model
from stitch_models import pool_branch
from swbuild.backends.sunway.cost.predict import compulsory_bytes, predict_kernel
from swbuild.backends.sunway.cost.rereads import box_rereads
from swbuild.config.toolchain import load
from swbuild.driver.compiler import build_program

MODELS = {"conv3x3": lambda: conv_model(c=32, hw=28, co=96),       # weights and input both tiled
          "pool_branch": lambda: pool_branch(c=32, hw=28)}             # a pool branch into a 1x1 (a stage box where stitched)


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_boxes_add_up_to_the_kernels_predicted_gets_and_compulsory_bytes(model, target):
    tc = load(target)
    p = build_program(MODELS[model](), tc, "t", options={})
    kernels = [k for k in p.kernels if k.kind == "compute" and k.schedule is not None]
    assert kernels
    for k in kernels:
        rows = box_rereads(k, tc.cores)
        assert [r["buf"] for r in rows] == [b.buf for b in k.schedule.boxes if b.context != "out"]
        assert sum(r["get_bytes"] for r in rows) == predict_kernel(k, tc.cores, 0)["get"]["bytes"]
        if len({k.buffers[r["buf"]].tensor for r in rows}) == len(rows):     # no tensor read by two boxes
            assert sum(r["compulsory_bytes"] for r in rows) + k.points * k.elem_bytes == compulsory_bytes(k)
        for r in rows:
            assert r["compulsory_bytes"] > 0 and r["get_bytes"] >= r["compulsory_bytes"], (k.name, r)
