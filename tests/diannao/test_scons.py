"""The SCons flow for the DianNao targets: `scons target=diannao` writes the BANG C sources
and stops with a clear message without cncc; `scons target=diannao-emu ... check` builds,
runs and compares; `partition=off` reaches the generated code."""
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from dn_models import table2_conv

REPO = Path(__file__).resolve().parents[2]


def _project(root):
    (root / "models").mkdir(parents=True)
    (root / "recipes").mkdir()
    path = root / "models" / "conv.onnx"
    onnx.save(table2_conv([(9, 64, 32)]), str(path))
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    (root / "recipes" / "conv.yaml").write_text(
        f"model: conv\nsource:\n  onnx: ../models/conv.onnx\n  sha256: {sha}\n"
        "targets: [diannao, diannao-emu]\ncheck: {rtol: 1e-3, atol: 1e-4}\n")
    shutil.copy(REPO / "SConstruct", root / "SConstruct")
    return root


def _scons(project, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWBUILD_", "CNCC"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not (Path(p) / "cncc").exists())
    return subprocess.run([sys.executable, "-m", "SCons", *args], cwd=project, env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.mark.slow      # two SCons builds of a model; tests/scons/test_cli_builds.py keeps diannao-emu via SCons quick
def test_scons_diannao_and_diannao_emu(tmp_path):
    proj = _project(tmp_path / "proj")
    r = _scons(proj, "target=diannao", "model=conv")
    assert r.returncode != 0
    assert "compiler 'cncc' not found" in r.stderr and "CNCC=" in r.stderr
    out = proj / "build" / "diannao" / "conv"
    dev = (out / "conv_device.mlu").read_text()
    assert "__mlu_global__" in dev and "__bang_conv(" in dev and "__nram__ char conv_nram" in dev
    assert (out / "conv_host.cpp").exists() and not (out / "conv_runner").exists()

    r = _scons(proj, "target=diannao-emu", "model=conv", "check")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("{")][-1])
    assert doc["status"] == "pass" and doc["emulator"]["violations"] == 0

    r = _scons(proj, "target=diannao-emu", "model=conv", "partition=off")
    assert r.returncode == 0, r.stderr
    plan = json.loads((proj / "build" / "diannao-emu" / "conv-partitionoff" / "conv.plan.json").read_text())
    assert plan["partition"] == "off"
