"""Small models through the whole Sunway pipeline under the Athread emulator: outputs match
onnxruntime, every kernel's measured DMA operations and bytes equal the compiler's
prediction, no write conflicts, LDM within budget. Tight LDM budgets force reduce tiling,
double buffering, footprint reuse, constant blocking and pads at every tile edge."""
import json
import subprocess
import sys

import onnx
import pytest
from onnx import helper

from opt_models import make, rand
import shared_builds
from swbuild.backends.launches import kernel_entries
from swbuild.backends.sunway.report import emulator_findings


def mix_model():
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], strides=[2, 2], pads=[1, 0, 0, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], group=8, pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["p1", "w3", "b3"], ["c3"]),
        helper.make_node("Concat", ["c2", "c3"], ["cat"], axis=1),
        helper.make_node("Add", ["cat", "bias"], ["ad"]),
        helper.make_node("AveragePool", ["ad"], ["ap"], kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1]),
        helper.make_node("Conv", ["ap", "w4"], ["c4"], pads=[1, 1, 1, 1]),
        helper.make_node("Flatten", ["c4"], ["f"]),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["g"], transB=1),
        helper.make_node("Softmax", ["g"], ["y"]),
    ]
    inits = [("w1", rand(8, 6, 3, 3, seed=1, scale=0.3)), ("b1", rand(8, seed=2)),
             ("w2", rand(8, 1, 3, 3, seed=3, scale=0.3)), ("w3", rand(12, 8, 1, 1, seed=4, scale=0.3)),
             ("b3", rand(12, seed=5)), ("bias", rand(1, 20, 1, 1, seed=6)),
             ("w4", rand(128, 20, 3, 3, seed=7, scale=0.1)),
             ("fw", rand(10, 128 * 4 * 4, seed=8, scale=0.02)), ("fb", rand(10, seed=9))]
    return make(nodes, [("x", [1, 6, 14, 14])], [("y", [1, 10])], inits)


@pytest.fixture(scope="module")
def mix_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("mix") / "mix.onnx"
    onnx.save(mix_model(), p)
    return p


CASES = [("sunway-emu", None, 65536 - 8192), ("sunway-emu", 61440, 4096), ("sunway-pro-emu", 262144 - 4096, 4096)]


@pytest.mark.parametrize("target,reserve,budget", CASES, ids=["emu", "emu-4KB", "pro-4KB"])
def test_measured_dma_equals_prediction(mix_file, tmp_path, target, reserve, budget):
    cmd = [sys.executable, "-m", "swbuild.cli", "check", str(mix_file), "--target", target, "-o", str(tmp_path)]
    if reserve is not None:
        cmd += ["--set", f"ldm_reserve={reserve}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.returncode == 0, r.stderr[-2000:]
    assert doc["status"] == "pass" and doc["max_abs_err"] < 1e-5
    em = doc["emulator"]
    assert em["dma_mismatches"] == [] and em["write_conflicts"] == 0 and em["ldm_over_budget"] == []
    assert 0 < em["ldm_peak_bytes"] <= budget
    plan = json.loads((tmp_path / "mix.plan.json").read_text())
    assert plan["arena_bytes"] <= 1.05 * plan["arena_lower_bound"]
    ks = kernel_entries(plan["kernels"])      # grouped launches opened up (grouping is on)
    assert not any(k["op"] == "Concat" for k in ks)                        # written in place
    if budget == 4096:
        assert any(k["reduce_steps"] > 1 for k in ks)                       # reduce tiling
        assert any(k["blocked"] for k in ks)                                # re-laid-out weights
        assert sum(k["spatial_tiles"] for k in ks) > 64 * 4
    else:
        assert any(k["double_buffered"] for k in ks)
        assert any(k["simd"] for k in ks)


def test_report_has_the_documented_keys(mix_file, tmp_path):
    r = subprocess.run([sys.executable, "-m", "swbuild.cli", "report", str(mix_file), "--target", "sunway-emu",
                        "--json", "-o", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    rep = json.loads(r.stdout)
    for key in ("model", "target", "kernel_launches", "flops", "dma", "mean_dma_bytes", "ldm_peak_bytes",
                "ldm_budget_bytes", "write_conflicts", "arena_bytes", "arena_lower_bound", "main_memory_bytes",
                "compulsory_bytes", "modeled_seconds", "roofline_seconds", "kernels"):
        assert key in rep, key
    assert set(rep["dma"]) >= {"predicted", "measured"} and rep["dma"]["predicted"] == rep["dma"]["measured"]
    assert rep["dma_match"] and rep["write_conflicts"] == 0
    assert rep["kernel_launches"] == len(rep["kernels"])
    for k in rep["kernels"]:
        for key in ("name", "op", "flops", "dma", "ldm_peak_bytes", "write_conflicts", "modeled_seconds",
                    "roofline_seconds"):
            assert key in k, key
        assert 0 < k["roofline_seconds"] <= k["modeled_seconds"]
    assert rep["mean_dma_bytes"] == pytest.approx(rep["main_memory_bytes"] / rep["dma"]["measured"]["ops"])
    assert rep["main_memory_bytes"] >= rep["compulsory_bytes"] > 0
    assert sum(k["flops"] for k in rep["kernels"]) == rep["flops"]


def _run_pinned(model, target, options, tmp_path, monkeypatch=None, **pins):
    """Compile with options and pinned schedule decisions (opt_models.pinned), build, run under
    the emulator; (plan, stats, outputs)."""
    from opt_models import pin_pipeline
    from swbuild.driver import build, check
    from swbuild.config import toolchain
    from swbuild.driver.compiler import compile_to
    if monkeypatch is not None:
        pin_pipeline(monkeypatch, **pins)
    tc = toolchain.load(target)
    program, _ = compile_to(model, tc, tmp_path, "pin", options=options)
    rt_lib = shared_builds.runtime_lib(tc, tmp_path / "_runtime")
    steps, _, exe = build.model_steps(tc, program.prefix, tmp_path, tmp_path, rt_lib)
    build.run_steps(steps, log=lambda s: None)
    plan = json.loads((tmp_path / f"{program.prefix}.plan.json").read_text())
    x = rand(*plan["inputs"][0]["shape"], seed=11)
    got, stats, err, code, _ = check.run_runner(exe, plan, {plan["inputs"][0]["name"]: x}, tmp_path)
    assert code == 0, err
    ref = check.onnxruntime_reference(model, {plan["inputs"][0]["name"]: x})
    return plan, stats, got, ref


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu"])
@pytest.mark.parametrize("mode", ["cyclic", "block"])
def test_double_buffered_reduce_tiles_over_several_tiles_per_cpe(tmp_path, monkeypatch, target, mode):
    from opt_models import conv_model
    from swbuild.driver import check
    model = conv_model(c=32, hw=12, co=16, pads=(1, 2, 0, 1))
    pins = dict(tiles={"Conv": {"ci": 4, "co": 4, "o0": 1, "o1": 8, "k0": 2}}, double_buffer=True, partition=mode)
    plan, stats, got, ref = _run_pinned(model, target, {}, tmp_path, monkeypatch, **pins)
    k = kernel_entries(plan["kernels"])[0]
    assert k["double_buffered"] and k["reduce_steps"] == 8 * 2 and k["spatial_tiles"] > 64
    assert k["partition"] == mode and k["simd"]
    f = emulator_findings(plan, stats)
    assert f["dma_mismatches"] == [] and f["write_conflicts"] == 0 and f["ldm_over_budget"] == []
    ok, err, _, _ = check.compare(got, ref, 1e-4, 1e-5)
    assert ok, err


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu"])
def test_reduction_split_over_cpes(tmp_path, target):
    """A 1x1 convolution with a long reduction and few output pixels: the cost model splits the
    reduction into partial sums plus a summing kernel, and the result is still exact."""
    from opt_models import conv_model
    from swbuild.driver import check
    model = conv_model(c=1024, hw=14, co=256, k=1, pads=(0, 0, 0, 0))
    # without row sharing (SW26010's broadcast makes the unsplit kernel good enough here)
    plan, stats, got, ref = _run_pinned(model, target, {"row_share": "off"}, tmp_path)
    names = [k["name"] for k in kernel_entries(plan["kernels"])]
    assert len(names) == 2 and names[0].endswith("_part") and names[1].endswith("_sum"), names
    assert kernel_entries(plan["kernels"])[0]["flops"] >= 256 * 196 * 1024 * 2
    f = emulator_findings(plan, stats)
    assert f["dma_mismatches"] == [] and f["write_conflicts"] == 0
    ok, err, _, _ = check.compare(got, ref, 1e-4, 1e-5)
    assert ok, err


SHARING = [
    ("co", (32, 16, 32), {"ci": 4, "co": 2, "o0": 2, "o1": 8, "k0": 2}, True, "cyclic"),     # input broadcast, pads
    ("co", (32, 16, 32), {"ci": 8, "co": 2, "o0": 4, "o1": 4}, False, "block"),              # single-buffered
    ("o0", (32, 16, 32), {"ci": 4, "co": 4, "o0": 1, "o1": 16, "k0": 1}, True, "block"),     # weights broadcast
    # array sharing: all 64 CPEs split the lane axis, one broadcast feeds every row
    (("co", 64), (32, 16, 64), {"ci": 4, "co": 1, "o0": 4, "o1": 16, "k0": 2}, True, "cyclic"),
    (("co", 64), (32, 16, 128), {"ci": 8, "co": 1, "o0": 8, "o1": 8}, False, "block"),
    (("o0", 64), (8, 64, 8), {"ci": 4, "co": 4, "o0": 1, "o1": 32, "k0": 1}, True, "block"),
]


# SW26010 (broadcast DMA) every case; SW26010-Pro (DMA + RMA broadcast) a row case with pads,
# a single-buffered one and an array one: the same emitter paths, the time spent where it differs
@pytest.mark.parametrize("target,lane,shape,tiles,db,mode",
                         [("sunway-emu", *c) for c in SHARING] + [("sunway-pro-emu", *SHARING[i]) for i in (0, 1, 5)])
def test_row_sharing_broadcasts_once_per_row(tmp_path, monkeypatch, lane, shape, tiles, db, mode, target):
    """The 8 CPEs of a mesh row (all 64, array sharing) split the lane axis and one broadcast
    DMA per row (array) feeds them the boxes that do not depend on it: outputs stay exact, the
    emulator's counts equal the prediction (which counts one DMA per row and fetch,
    test_predict.py), and the kernel reads fewer bytes in fewer DMAs than with every CPE
    fetching its own copy under the same tiles. On SW26010-Pro (no broadcast DMA) one CPE
    fetches and RMA-broadcasts: the plan's RMA counts equal the emulator's too."""
    from opt_models import conv_model
    from swbuild.driver import check
    c, hw, co = shape
    model = conv_model(c=c, hw=hw, co=co)
    axis, width = (lane, 8) if isinstance(lane, str) else lane
    opts = {} if db else {"double_buffer": "off"}
    pins = dict(tiles={"Conv": tiles}, partition=mode, double_buffer=db)
    runs = {}
    for share in (lane, None):
        out = tmp_path / str(share)
        out.mkdir()
        plan, stats, got, ref = _run_pinned(model, target, opts, out, monkeypatch, lane=share, **pins)
        k = plan["kernels"][0]
        assert k["row_shared"] == (axis if share else None) and bool(k["broadcast"]) == (share is not None)
        assert k["shared_by"] == (width if share else None)
        assert k["double_buffered"] == db and k["partition"] == mode
        f = emulator_findings(plan, stats)
        assert f["dma_mismatches"] == [] and f["write_conflicts"] == 0 and f["ldm_over_budget"] == []
        ok, err, _, _ = check.compare(got, ref, 1e-4, 1e-5)
        assert ok, err
        (m,) = [x for x in stats["kernels"] if x["name"] == k["name"]]
        form = "row_ibcast" if width == 8 else "ibcast"
        if target == "sunway-pro-emu" and share:
            assert k["rma"][form] > 0 and m["rma"][form] == k["rma"][form]
        else:
            assert "rma" not in k and not any(m.get("rma", {}).values())
        runs[share] = k
    shared, own = runs[lane], runs[None]
    assert shared["dma"]["put"] == own["dma"]["put"]
    assert shared["dma"]["get"]["bytes"] < own["dma"]["get"]["bytes"]
    assert shared["dma"]["get"]["ops"] < own["dma"]["get"]["ops"]


@pytest.mark.parametrize("c,co,k,pads,tiles,transposed", [
    (64, 256, 3, (1, 1, 1, 1), {"co": 24, "o0": 7, "o1": 7, "ci": 8}, True),
    (128, 256, 1, (0, 0, 0, 0), {"co": 20, "o0": 3, "o1": 7, "ci": 16}, True),
    (32, 48, 3, (1, 1, 1, 1), {"co": 20, "o0": 7, "o1": 7, "ci": 8}, False)])
def test_seven_wide_layer_vectorised_along_output_channels(tmp_path, monkeypatch, c, co, k, pads, tiles, transposed):
    """A 7x7-output convolution on SW26010-Pro: 7 is under floatv8's lanes, so the vector plan
    runs along the output channels, accumulator lanes gathered and scattered (tiles not a
    multiple of 8: the masked tail vector too), the weights transposed to [CI][KH][KW][CO]
    (passes/vector_weights.py: vector loads) or, that pass left out, gathered lane by lane;
    exact against onnxruntime, DMA as predicted."""
    from opt_models import conv_model
    from swbuild.backends.sunway.passes import flat_pixels, vector_weights
    from swbuild.driver import check
    if not transposed:
        monkeypatch.setattr(vector_weights, "_candidate", lambda *a: None)
    # the 1x1 layer's pixels stay two axes (as one axis of 49 it is no 7-wide layer: test_flat_pixels.py)
    monkeypatch.setattr(flat_pixels, "candidate", lambda k: None)
    model = conv_model(c=c, hw=7, co=co, k=k, pads=pads)
    plan, stats, got, ref = _run_pinned(model, "sunway-pro-emu", {}, tmp_path, monkeypatch,
                                        tiles={"Conv": tiles})
    e = kernel_entries(plan["kernels"])[0]
    assert e["simd"] and "along co" in e["simd"] and "strided acc" in e["simd"], e["simd"]
    assert ("b1:vec" if transposed else "b1:gather") in e["simd"], e["simd"]
    f = emulator_findings(plan, stats)
    assert f["dma_mismatches"] == [] and f["write_conflicts"] == 0 and f["ldm_over_budget"] == []
    ok, err, _, _ = check.compare(got, ref, 1e-4, 1e-5)
    assert ok, err
