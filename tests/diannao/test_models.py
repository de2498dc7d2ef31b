"""Whole networks on diannao-emu: a small CNN with random weights that touches every
schedule (fast), the onnx light models and a seeded zoo ResNet-18 (slow), and the
`swbuild report` document."""
import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from swbuild.driver import check
from swbuild.backends.launches import kernel_entries

from dn_build import build_model, run_check
from dn_models import mini_cnn, save

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


@pytest.fixture(scope="module")
def mini(tc, tmp_path_factory):
    d = tmp_path_factory.mktemp("mini")
    path = save(mini_cnn(), d / "mini.onnx")
    return path, {p: build_model(tc, onnx.load(str(path)), "mini", d / p, p) for p in ("on", "off")}


@pytest.mark.parametrize("part", ["on", "off"])
def test_mini_cnn_matches_onnxruntime(mini, part):
    path, builds = mini
    plan, exe = builds[part]
    inputs = check.seeded_inputs(plan["inputs"], 3)
    doc, stats = run_check(plan, exe, check.onnxruntime_reference(onnx.load(str(path)), inputs), inputs)
    assert doc["status"] == "pass", doc.get("reason")
    assert stats["violations"] == 0
    kernels = kernel_entries(plan["kernels"])       # grouped launches opened up
    cls = {k["node"]: k["class"] for k in kernels}
    assert cls["c1"] == cls["c2"] == "conv" and cls["p1"] == cls["p2"] == "pool" and cls["fc"] == "gemm"
    assert cls["l1"] == "lrn"                     # LRN: vector unit, schedule/lrn.py
    conv2 = next(k for k in kernels if k["node"] == "c2")
    assert conv2["tensorized_statements"] == conv2["compute_statements"]
    assert plan["tensorized_fraction"] > 0.85


def test_report_document(mini):
    path, builds = mini
    plan, exe = builds["on"]
    r = subprocess.run([sys.executable, "-m", "swbuild.cli", "report", str(path), "--target", "diannao-emu",
                        "--runner", str(exe), "--name", "mini", "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    # every kernel of the mini CNN is tensorized since LRN and softmax's reductions left the scalar class
    assert rep["tensorized_fraction"] == plan["tensorized_fraction"] == 1.0
    assert rep["cycles"] > 0 and rep["violations"] == 0
    assert rep["instructions"]["__bang_conv"] > 0 and rep["instructions"]["__memcpy"] > 0
    assert rep["partition"] == "on" and sum(k["cycles"] for k in rep["kernels"]) == rep["cycles"]


def _cli_check(model, tmp_path, *extra):
    r = subprocess.run([sys.executable, "-m", "swbuild.cli", "check", str(model), "--target", "diannao-emu",
                        "-o", str(tmp_path), *extra], capture_output=True, text=True, timeout=3600)
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.returncode == 0 and doc["status"] == "pass", (doc, r.stderr[-2000:])
    assert doc["emulator"]["violations"] == 0
    return doc, json.loads(next(Path(tmp_path).glob("*.plan.json")).read_text())


@pytest.mark.slow
@pytest.mark.parametrize("name", ["light_vgg19", "light_bvlc_alexnet", "light_resnet50"])
def test_light_models(name, tmp_path):
    doc, plan = _cli_check(LIGHT / f"{name}.onnx", tmp_path)
    assert plan["tensorized_fraction"] > 0.85
    assert all(k["class"] != "scalar" for k in kernel_entries(plan["kernels"]) if k["op"] in ("Conv", "Gemm", "MaxPool"))


@pytest.mark.slow
def test_seeded_resnet18(tmp_path):
    from swbuild import zoo
    path = tmp_path / "resnet18.onnx"
    onnx.save(zoo.build("resnet18", batch=1, seed=0), str(path))
    doc, plan = _cli_check(path, tmp_path / "out")
    assert doc["max_rel_err"] < 1e-2
