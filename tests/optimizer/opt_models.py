"""Small ONNX models and helpers for the optimizer tests (never written to the repository)."""
import json
import subprocess
import sys
from dataclasses import replace

from onnx import helper

from onnx_builders import make, rand  # noqa: F401  (re-exported to the tests here)

from swbuild import backends
from swbuild.config import toolchain
from swbuild.backends.sunway.pipeline import PIPELINE
from swbuild.backends.sunway.kinds import schedule_special_kernels
from swbuild.backends.sunway.schedule import passes
from swbuild.support.errors import LdmError
from swbuild.frontends.onnx import import_model
from swbuild.driver.lowering import lower
from swbuild.optimizer.fuse import fuse_epilogues


def conv_model(n=1, c=8, hw=16, co=16, k=3, stride=1, pads=(1, 1, 1, 1), group=1, relu=True):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=[stride, stride], pads=list(pads), group=group)]
    out = "y"
    if relu:
        nodes.append(helper.make_node("Relu", ["y"], ["z"]))
        out = "z"
    oh = (hw + pads[0] + pads[2] - k) // stride + 1
    return make(nodes, [("x", [n, c, hw, hw])], [(out, [n, co, oh, oh])],
                [("w", rand(co, c // group, k, k, seed=1, scale=0.3)), ("b", rand(co, seed=2))])


def program(model, name="t", fuse=True):
    p = lower(import_model(model), name)
    return fuse_epilogues(p) if fuse else p


def sunway(name="sunway-emu"):
    return toolchain.load(name)


# -- the Sunway scheduling passes, and test pins on their decisions ---------------------------

KEEP = object()       # a pin left alone


def scheduling_passes():
    """The Sunway passes from the first scheduling decision on (tests run them on a fused program)."""
    return PIPELINE[PIPELINE.index(schedule_special_kernels):]


def schedule(p, tc, options=None, budget=None, **pins):
    """Schedule every kernel of a lowered, fused program as the Sunway pipeline would;
    `budget` stands for an LDM budget (through the recipe's ldm_reserve), `pins` as in pinned."""
    options = dict(options or {})
    if budget is not None:
        options["ldm_reserve"] = int(tc.hardware["ldm_bytes"]) - budget
    p.target_state = passes.SunwayState()
    for run in pinned(scheduling_passes(), **pins):
        p = run(p, tc, options)
    return p


def pin_pipeline(monkeypatch, **pins):
    """Pin the Sunway schedule of every compile in this test (`compile_to`, the CLI in-process)."""
    fam = backends.FAMILIES["sunway"]
    monkeypatch.setitem(backends.FAMILIES, "sunway", replace(fam, pipeline=pinned(PIPELINE, **pins)))


def pinned(runs, tiles=None, double_buffer=False, lane=KEEP, partition=None):
    """The passes with test pins applied right after the pass that decides each: `tiles`
    {op: {axis: size}}, `double_buffer` (when it fits), `lane` (row sharing axis, (axis, width)
    for array sharing with width 64, (axis, 8, 8) for 2-D sharing, or None for none; ignored
    where it is no lane),
    `partition` ("cyclic" | "block")."""
    def fix_tiles(p, tc):
        for k in p.kernels:
            d = p.target_state.drafts.get(k.name)
            forced = (tiles or {}).get(k.op)
            if d is None or not forced:
                continue
            d.tiles = dict(d.tiles, **{a: min(int(t), d.search.ext[a]) for a, t in forced.items() if a in d.tiles})
            if d.search.ldm(d.tiles, False) > d.search.budget:
                raise LdmError(k.name, d.search.ldm(d.tiles, False), d.search.budget)

    def fix_buffering(p, tc):
        for d in p.target_state.drafts.values():
            if double_buffer and d.search.ldm(d.tiles, True) <= d.search.budget:
                d.double_buffer = True

    def fix_lane(p, tc):
        for d in p.target_state.drafts.values():
            if lane is not KEEP:
                want = (lane, 8) if isinstance(lane, str) else lane     # an axis: row sharing
                got = want if want in d.search.lanes(d.tiles) else (None, 8)
                d.lane, d.share_width, d.cols = got[0], got[1], len(got) == 3    # (axis, 8, 8): 2-D

    def fix_partition(p, tc):
        for k in p.kernels:
            if partition and k.kind == "compute":
                k.schedule.partition = partition

    fixes = {passes.choose_tiles: fix_tiles, passes.choose_buffering: fix_buffering,
             passes.choose_row_sharing: fix_lane, passes.choose_partition: fix_partition}

    def after(run, fix):
        def pinned_run(p, tc, options):
            p = run(p, tc, options)
            fix(p, tc)
            return p
        pinned_run.__name__ = run.__name__
        return pinned_run
    return [after(r, fixes[r]) if r in fixes else r for r in runs]


# -- a model through `swbuild check` under the emulator ---------------------------------------

def checked_plan(model_file, out, target, *args):
    """`swbuild check` of model_file on an emulated Sunway target (extra CLI `args`): asserts it
    matches onnxruntime with every kernel's DMA predicted exactly, no write conflict or race and
    LDM within budget; returns the build's plan."""
    r = subprocess.run([sys.executable, "-m", "swbuild.cli", "check", str(model_file), "--target", target, *args,
                        "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["status"] == "pass" and doc["max_abs_err"] < 1e-5
    em = doc["emulator"]
    assert em["dma_mismatches"] == [] and em["write_conflicts"] == 0 and em["races"] == 0
    assert em["ldm_over_budget"] == []
    return json.loads(next(out.glob("*.plan.json")).read_text())
