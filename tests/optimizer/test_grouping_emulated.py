"""Grouped launches (option grouping) under the Athread emulator: one small model with a
residual block, parallel branches into an in-place Concat and a down-sampling convolution.
A group's kernels share one athread_spawn; outputs still match onnxruntime, every launch's
measured DMA equals the prediction, no write conflicts or races, LDM within budget, and
the model makes fewer launches than it has kernels."""
import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import helper

from opt_models import checked_plan, make, rand
from swbuild.config.toolchain import load


def grouped_model(c=8, hw=16, gain=1.0):
    """`gain` scales every weight (wider models keep their values, and float error, small)."""
    def conv(x, y, w, k=1, s=1):
        return helper.make_node("Conv", [x, w], [y], strides=[s, s], pads=[k // 2] * 4)
    nodes = [conv("x", "a0", "wa"), helper.make_node("Relu", ["a0"], ["a"]),
             conv("a", "b0", "wb0", 3), helper.make_node("Relu", ["b0"], ["b"]), conv("b", "b1", "wb1", 3),
             helper.make_node("Add", ["b1", "a"], ["s"]), helper.make_node("Relu", ["s"], ["r"]),
             conv("r", "p", "wp"), conv("r", "q", "wq", 3), helper.make_node("Concat", ["p", "q"], ["cat"], axis=1),
             conv("cat", "y", "wy", 3, 2)]
    inits = [("wa", rand(c, 3, 1, 1, seed=1, scale=0.5 * gain)), ("wb0", rand(c, c, 3, 3, seed=2, scale=0.2 * gain)),
             ("wb1", rand(c, c, 3, 3, seed=3, scale=0.2 * gain)), ("wp", rand(c, c, 1, 1, seed=4, scale=0.3 * gain)),
             ("wq", rand(c, c, 3, 3, seed=5, scale=0.2 * gain)), ("wy", rand(c, 2 * c, 3, 3, seed=6, scale=0.2 * gain))]
    return make(nodes, [("x", [1, 3, hw, hw])], [("y", [1, c, hw // 2, hw // 2])], inits)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("grouped") / "grouped.onnx"
    onnx.save(grouped_model(), p)
    return p


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu"])
def test_grouped_launches_match_and_predict_exactly(model_file, tmp_path, target):
    plan = checked_plan(model_file, tmp_path, target, "--grouping", "on")
    kernels = sum(len(g["kernels"]) for g in plan["grouping"]["groups"])
    launches = plan["kernels"]
    assert any(k["op"] == "Group" for k in launches) and len(launches) < kernels
    # every kernel runs in exactly one launch
    ran = [n for k in launches for n in (k["fused"] if k["op"] == "Group" else [k["name"]])]
    assert sorted(ran) == sorted(n for g in plan["grouping"]["groups"] for n in g["kernels"])
    if target == "sunway-pro-emu":      # rows share by RMA broadcast: the launch's counts were checked exactly
        assert any(k.get("rma", {}).get("row_ibcast") for k in launches)


def test_diannao_group_runs_in_one_launch(model_file, tmp_path):
    """DianNao: a group's kernels share one Union1 launch, a __sync_all between two of them;
    outputs match, no rule broken, and the launches saved show in the emulator's cycles."""
    runs = {}
    for mode in ("off", "on"):
        out = tmp_path / mode
        r = subprocess.run([sys.executable, "-m", "swbuild.cli", "check", str(model_file), "--target", "diannao-emu",
                            "--grouping", mode, "--set", "sram_residency=off", "--set", "cross_layer_prefetch=off", "-o", str(out)],
                           capture_output=True, text=True)      # the launches alone: no SRAM residency
        assert r.returncode == 0, r.stderr[-2000:]
        doc = json.loads(r.stdout.strip().splitlines()[-1])
        em = doc["emulator"]
        assert doc["status"] == "pass" and doc["max_abs_err"] < 1e-5
        assert em["violations"] == 0 and em["write_conflicts"] == 0 and em["missing_kernels"] == []
        runs[mode] = (em["cycles"], json.loads(next(out.glob("*.plan.json")).read_text()),
                      next(out.glob("*_device.mlu")).read_text())
    (c_off, plan_off, _), (c_on, plan_on, mlu) = runs["off"], runs["on"]
    groups = [k for k in plan_on["kernels"] if k["op"] == "Group"]
    assert groups and len(plan_on["kernels"]) < len(plan_off["kernels"])
    ran = [n for k in plan_on["kernels"] for n in (k["fused"] if k["op"] == "Group" else [k["name"]])]
    assert sorted(ran) == sorted(k["name"] for k in plan_off["kernels"])
    for k in groups:
        assert f"__mlu_global__ void {k['name']}(" in mlu
        assert all(f"__mlu_func__ void {n}(" in mlu for n in k["fused"])
        assert mlu.count("__sync_all();   /* ") >= len(k["fused"]) - 1
    hw = load("diannao-emu").hardware
    saved = len(plan_off["kernels"]) - len(plan_on["kernels"])
    # each kernel that joins a launch trades its launch for one barrier, nothing else changes
    assert c_off - c_on == saved * (int(hw["launch_cycles"]) - int(hw["sync_all_cycles"])) > 0


LIGHT = ["light_resnet50", "light_inception_v1"]


@pytest.mark.slow
@pytest.mark.parametrize("name", LIGHT)
def test_grouped_light_model_matches_in_a_third_of_the_launches(tmp_path, name):
    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"{name}.onnx"
    r = subprocess.run([sys.executable, "-m", "swbuild.cli", "check", str(light), "--target", "sunway-emu",
                        "--grouping", "on", "-o", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    em = doc["emulator"]
    assert doc["status"] == "pass" and em["dma_mismatches"] == [] and em["write_conflicts"] == 0
    assert em["races"] == 0 and em["ldm_over_budget"] == []
    plan = json.loads(next(tmp_path.glob("*.plan.json")).read_text())
    kernels = sum(len(g["kernels"]) for g in plan["grouping"]["groups"])
    assert 3 * len(plan["kernels"]) <= kernels


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["dcgan", "resnet18", "mobilenet", "shufflenet"])
def test_grouped_zoo_recipe_matches(tmp_path, recipe):
    """The zoo's recipes grouped (dcgan's ConvTranspose zeroes its output before a scatter-add:
    grouping once moved the zeroing after it)."""
    rec = Path(__file__).resolve().parents[2] / "recipes" / f"{recipe}.yaml"
    r = subprocess.run([sys.executable, "-m", "swbuild.cli", "check", "--recipe", str(rec), "--target", "sunway-emu",
                        "--grouping", "on", "-o", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    em = doc["emulator"]
    assert doc["status"] == "pass" and em["dma_mismatches"] == [] and em["write_conflicts"] == 0 and em["races"] == 0
    plan = json.loads(next(tmp_path.glob("*.plan.json")).read_text())
    assert plan["grouping"]["groups"]


@pytest.mark.parametrize("target", ["sunway-emu", "diannao-emu"])
def test_report_lists_every_group_and_the_model_level_traffic(model_file, tmp_path, target):
    """`swbuild report --grouping on`: the table names each group (its kernels, split and the
    instances' binding), the model-level traffic line equals the JSON's numbers, and --plot
    draws the groups."""
    pytest.importorskip("matplotlib")   # in the `test` extra
    png = tmp_path / "g.png"
    r = subprocess.run([sys.executable, "-m", "swbuild.cli", "report", str(model_file), "--target", target,
                        "--grouping", "on", "-o", str(tmp_path / "b"), "--plot", str(png)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    js = subprocess.run([sys.executable, "-m", "swbuild.cli", "report", str(model_file), "--target", target,
                         "--grouping", "on", "--runner", str(tmp_path / "b" / "grouped_runner"), "--json"],
                        capture_output=True, text=True)
    assert js.returncode == 0, js.stderr[-2000:]
    rep = json.loads(js.stdout)
    g = rep["grouping"]
    assert g["groups"] and g["realised"] == "launches"
    assert rep["model_compulsory_bytes"] > 0 and rep["main_memory_bytes"] > 0
    assert rep["model_traffic_ratio"] == pytest.approx(rep["main_memory_bytes"] / rep["model_compulsory_bytes"])
    lines = r.stdout.splitlines()
    traffic = next(ln for ln in lines if ln.startswith("model-level traffic"))
    assert f"{rep['main_memory_bytes'] / 1e6:.2f} MB = {rep['model_traffic_ratio']:.2f}x" in traffic
    assert f"{rep['kernel_launches']} launches" in traffic
    rows = [ln for ln in lines if ln.startswith("  g")]
    assert len(rows) == len(g["groups"])
    for ln, grp in zip(rows, g["groups"]):
        first = grp["kernels"][0].removeprefix("grouped_")
        assert ln.startswith(f"  g{grp['group']}: {first}")
        assert f"split {grp['split']['axis']}/{grp['split']['factor']}" in ln
        assert f"{len(grp['binding'])} instance" in ln
    # no kernel is in two groups; the table lists a grouped launch's kernels under its row
    names = [n for grp in g["groups"] for n in grp["kernels"]]
    assert len(names) == len(set(names))
    launch = next(k for k in rep["kernels"] if k["op"] == "Group")
    at = next(i for i, ln in enumerate(lines) if ln.startswith(launch["name"].removeprefix("grouped_") + " "))
    assert f"Group of {len(launch['fused'])}" in lines[at]
    assert [ln.split()[0] for ln in lines[at + 1:at + 1 + len(launch["fused"])]] == [
        n.removeprefix("grouped_") for n in launch["fused"]]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_draws_one_labelled_band_per_group():
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    import matplotlib.pyplot as plt
    from swbuild.backends.grouping_report import shade_groups
    rep = {"grouping": {"groups": [
        {"group": 0, "kernels": ["m_k0", "m_k1"], "split": {"axis": "o0", "factor": 2}},
        {"group": 1, "kernels": ["m_k2"], "split": {"axis": "co", "factor": 4}},
        {"group": 2, "kernels": ["m_gone"], "split": {"axis": "n", "factor": 1}}]}}    # no bar: no band
    fig, ax = plt.subplots()
    ax.bar(range(4), [1, 2, 3, 4])
    before = len(ax.patches)
    shade_groups(ax, rep, [["m_k0"], ["m_k1"], ["m_k2"], ["m_k3"]])
    fig.canvas.draw()
    bands = ax.patches[before:]
    assert len(bands) == 2
    inv = ax.transData.inverted()
    spans = []
    for p in bands:
        bb = p.get_window_extent()
        spans.append(tuple(round(float(x), 2) for x in inv.transform([[bb.x0, 0], [bb.x1, 0]])[:, 0]))
    assert spans == [(-0.45, 1.45), (1.55, 2.45)]
    assert [t.get_text() for t in ax.texts] == ["g0 o0/2", "g1 co/4"]
    plt.close(fig)
    # a bar standing for a grouped launch: its group's band covers that bar alone
    fig, ax = plt.subplots()
    ax.bar(range(3), [1, 2, 3])
    before = len(ax.patches)
    shade_groups(ax, rep, [["m_k0", "m_k1"], ["m_k2"], ["m_k3"]])
    fig.canvas.draw()
    inv = ax.transData.inverted()
    bb = ax.patches[before].get_window_extent()
    assert [round(float(x), 2) for x in inv.transform([[bb.x0, 0], [bb.x1, 0]])[:, 0]] == [-0.45, 0.45]
    assert len(ax.patches) - before == 2
    plt.close(fig)
