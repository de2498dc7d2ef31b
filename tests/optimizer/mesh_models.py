"""Models and a strict emulated check for the mesh kernel tests (test_mesh_gemm.py,
test_mesh_chain.py); never written to the repository."""
import json
import os
import subprocess
import sys

import onnx
from onnx import helper

from opt_models import make, rand
from swbuild.config import toolchain


def chain_model():
    """Two 1x1 convolutions: bias + Relu, then a residual Add + Relu (ResNet's block end).
    81 pixels (a ragged last column), channels whose per-CPE pieces are not whole messages."""
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"]),
             helper.make_node("Add", ["c2", "x"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    return make(nodes, [("x", [1, 24, 9, 9])], [("y", [1, 24, 9, 9])],
                [("w1", rand(40, 24, 1, 1, seed=1, scale=0.3)), ("b1", rand(40, seed=2)),
                 ("w2", rand(24, 40, 1, 1, seed=3, scale=0.3))])


def bn_chain_model(n=2, c=32, cm=128, co=48, hw=18):
    """1x1 -> BatchNormalization -> Relu -> 1x1 with bias, two images."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"]),
             helper.make_node("BatchNormalization", ["c1", "s", "bb", "m", "v"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["y"])]
    return make(nodes, [("x", [n, c, hw, hw])], [("y", [n, co, hw, hw])],
                [("w1", rand(cm, c, 1, 1, seed=1, scale=0.3)), ("s", rand(cm, seed=2)), ("bb", rand(cm, seed=3)),
                 ("m", rand(cm, seed=4)), ("v", rand(cm, seed=5, scale=0.1) ** 2 + 0.5),
                 ("w2", rand(co, cm, 1, 1, seed=6, scale=0.3)), ("b2", rand(co, seed=7))])


def strict_env(tmp_path, mode):
    """A project toolchain with a one-message receive buffer (the strictest), DMA landing as
    `mode` (SWEMU_DMA) says."""
    (tmp_path / "tc").mkdir(parents=True)
    text = toolchain.find_file("sunway-emu").read_text()
    (tmp_path / "tc" / "sunway-emu.toml").write_text(text + "\n[hardware]\nregcomm_buffer_entries = 1\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEMU_")}
    env.update(SWBUILD_TOOLCHAINS=str(tmp_path / "tc"), SWEMU_DMA=mode)
    return env


def strict_check(tmp_path, name, model, extra, mode):
    """`swbuild check` with mesh_gemm=all under strict_env: (its result, the plan)."""
    f = tmp_path / f"{name}.onnx"
    onnx.save(model, f)
    env = strict_env(tmp_path, mode)
    defines = subprocess.run([sys.executable, "-c", "from swbuild.config import toolchain; "
                              "print(toolchain.load('sunway-emu').runtime_defines())"],
                             capture_output=True, text=True, env=env).stdout
    assert "'SWEMU_REGCOMM_DEPTH=1'" in defines
    r = subprocess.run([sys.executable, "-m", "swbuild.cli", "check", str(f), "--target", "sunway-emu", "-o",
                        str(tmp_path / "out"), "--set", "mesh_gemm=all", *extra],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["status"] == "pass" and doc["emulator"]["dma_mismatches"] == [], doc
    assert doc["emulator"]["races"] == 0 and doc["emulator"]["write_conflicts"] == 0
    return doc, json.loads((tmp_path / "out" / f"{name}.plan.json").read_text())
