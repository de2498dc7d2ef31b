"""Fixture projects for SCons system tests and a runner for `python -m SCons`."""
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

FAKE_TOOLCHAIN = """\
# A project-local target: plain gcc, no emulation runtime (tests the tool, not the runtime).
name = "fake-emu"
family = "sunway"
emulates = "sunway"
emulated = true
[compilers]
host_cc = ["gcc"]
slave_cc = ["gcc"]
asm = ["gcc"]
link = ["gcc"]
ar = ["ar"]
primary = "gcc"
[flags]
host = ["-O1"]
slave = ["-O1"]
link = []
libs = []
"""

FAKE_SCONSTRUCT = """\
import swbuild.scons
env = swbuild.scons.setup(ARGUMENTS, SWCLI="$( $PYTHON $) fakecli.py")
for model in env["SWBUILD_MODELS"]:
    Default(env.SwModel(model).runner)
"""


def write_tiny_onnx(path, w=None):
    """Conv(3→4, 3x3, pad 1) + Relu on 1x3x8x8; `w` (4x3x3x3) replaces the default weights."""
    w = np.arange(108, dtype=np.float32).reshape(4, 3, 3, 3) / 100 if w is None else np.asarray(w, np.float32)
    w = numpy_helper.from_array(w, "w")
    nodes = [helper.make_node("Conv", ["data", "w"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c"], ["out"])]
    g = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 8, 8])], [w])
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_project(root, fake=True):
    """recipes/tiny.yaml over models/tiny.onnx; with fake=True a fake CLI and target."""
    sha = write_tiny_onnx(root / "models" / "tiny.onnx")
    (root / "recipes").mkdir(parents=True)
    (root / "recipes" / "tiny.yaml").write_text(
        f"model: tiny\nsource:\n  onnx: ../models/tiny.onnx\n  sha256: {sha}\n"
        "check: {rtol: 1e-3, atol: 1e-4}\n")
    if fake:
        (root / "toolchains").mkdir()
        (root / "toolchains" / "fake-emu.toml").write_text(FAKE_TOOLCHAIN)
        shutil.copy(HERE / "fakecli.py", root / "fakecli.py")
        (root / "SConstruct").write_text(FAKE_SCONSTRUCT)
    else:
        shutil.copy(REPO / "SConstruct", root / "SConstruct")
    return root


def run_scons(project, *args, env=None, timeout=600):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("SWBUILD_", "SW5CC", "SWGCC"))}
    e["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "SCons", *args], cwd=project, env=e,
                          capture_output=True, text=True, timeout=timeout)


def gen_runs(project):
    log = project / "gen.log"
    return [l for l in log.read_text().splitlines() if l.startswith("compile")] if log.exists() else []


