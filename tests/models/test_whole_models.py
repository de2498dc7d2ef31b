"""Whole models on the emulated Sunway targets (the slow tier: minutes, run by .ci/run).

Light models come with the onnx package and are compared with their shipped expected
outputs; zoo models are compared with onnxruntime. Tolerances are the recipes' (rtol 1e-3,
atol 1e-4): float32 kernels accumulate in another order than onnxruntime's.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

pytestmark = pytest.mark.slow

LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
LIGHT = ["light_bvlc_alexnet", "light_densenet121", "light_inception_v1", "light_inception_v2", "light_resnet50",
         "light_shufflenet", "light_squeezenet", "light_vgg19", "light_zfnet512"]
REPO = Path(__file__).resolve().parents[2]
ZOO = [("vgg16", 1), ("resnet18", 1), ("resnet50", 1), ("mobilenet", 1), ("shufflenet", 1), ("dcgan", 1),
       ("yolov3", 1), ("bert-base", 1), ("resnet18", 8), ("mobilenet", 8)]


def _verdict(returncode, stdout, stderr):
    """The check's JSON document; fails the test unless it passed with no write conflict
    and no DMA mismatch."""
    doc = json.loads(stdout.strip().splitlines()[-1])
    if returncode != 0 or doc["status"] != "pass":
        # in full (an assertion's text is cut): the emulator's own message names the kernel,
        # the CPE and the limit
        pytest.fail(f"{json.dumps(doc)}\n--- stderr (last 6000 characters) ---\n{stderr[-6000:]}",
                    pytrace=False)
    assert doc["emulator"]["write_conflicts"] == 0 and doc["emulator"]["dma_mismatches"] == []
    return doc


def _check(swbuild_cli, *args):
    r = swbuild_cli("check", *args)
    return _verdict(r.returncode, r.stdout, r.stderr)


# what tests/optimizer/test_models_slow.py reports on: built once a run (shared_check), the
# same arguments there
SHARED_ZOO = {("vgg16", 1), ("resnet50", 1)}


@pytest.mark.parametrize("name", LIGHT)
def test_light_model_matches_shipped_outputs(shared_check, name):
    _verdict(*shared_check(LIGHT_DIR / f"{name}.onnx", "--target", "sunway-emu")[:3])


@pytest.mark.parametrize("name,batch", ZOO, ids=[f"{n}-b{b}" for n, b in ZOO])
def test_zoo_model_matches_onnxruntime(swbuild_cli, shared_check, tmp_path, name, batch):
    args = ["--recipe", REPO / "recipes" / f"{name}.yaml", "--target", "sunway-emu", "--set", f"batch={batch}"]
    if (name, batch) in SHARED_ZOO:
        _verdict(*shared_check(*args)[:3])
    else:
        _check(swbuild_cli, *args, "-o", tmp_path)


def test_light_model_on_sunway_pro(swbuild_cli, tmp_path):
    _check(swbuild_cli, LIGHT_DIR / "light_squeezenet.onnx", "--target", "sunway-pro-emu", "-o", tmp_path)


def test_scons_main_job_then_nothing_to_do(tmp_path):
    """The README's main job in a copy of the project: build, check, then up to date."""
    for f in ("SConstruct",):
        shutil.copy(REPO / f, tmp_path / f)
    (tmp_path / "recipes").mkdir()
    shutil.copy(REPO / "recipes" / "vgg16.yaml", tmp_path / "recipes")
    scons = [sys.executable, "-m", "SCons", "-Q", "target=sunway-emu", "model=vgg16"]
    r = subprocess.run(scons + ["check"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["status"] == "pass"
    out = tmp_path / "build" / "sunway-emu" / "vgg16"
    lock = json.loads((out / "vgg16.lock.json").read_text())
    assert set(lock["outputs"]) >= {"vgg16_host.c", "vgg16_slave.c", "vgg16_weights.bin"}
    assert subprocess.run(scons[:3] + ["-q"] + scons[3:], cwd=tmp_path).returncode == 0
    # a second generation elsewhere gives byte-identical sources (same lock output hashes)
    env = dict(os.environ, PYTHONHASHSEED="777")
    r = subprocess.run([sys.executable, "-m", "swbuild.cli", "compile", "--recipe", str(tmp_path / "recipes" / "vgg16.yaml"),
                        "--target", "sunway-emu", "-o", str(tmp_path / "again")], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    again = json.loads((tmp_path / "again" / "vgg16.lock.json").read_text())
    assert again["outputs"] == lock["outputs"]


def test_real_sunway_target_writes_sources_and_fails_clearly(tmp_path):
    shutil.copy(REPO / "SConstruct", tmp_path / "SConstruct")
    (tmp_path / "recipes").mkdir()
    shutil.copy(REPO / "recipes" / "vgg16.yaml", tmp_path / "recipes")
    env = {k: v for k, v in os.environ.items() if k != "SW5CC"}
    r = subprocess.run([sys.executable, "-m", "SCons", "-Q", "target=sunway", "model=vgg16"], cwd=tmp_path,
                       capture_output=True, text=True, env=env)
    assert r.returncode != 0
    assert "compiler 'sw5cc' not found" in r.stdout + r.stderr and "Traceback" not in r.stdout + r.stderr
    assert (tmp_path / "build" / "sunway" / "vgg16" / "vgg16_slave.c").exists()
