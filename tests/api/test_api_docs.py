"""docs/api.md runs as written: every ```sh and ```python block, in a directory holding the
`model.onnx` the page talks about (input x 1x3x8x8, output y) and the project's recipes/."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from onnx_builders import make, rand

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "api.md"


def blocks(text):
    return re.findall(r"```(sh|python)\n(.*?)```", text, re.S)


def test_every_example_of_docs_api_md_runs(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    onnx.save(make(nodes, [("x", [1, 3, 8, 8])], [("y", [1, 8, 8, 8])], [("w", rand(8, 3, 3, 3))]),
              tmp_path / "model.onnx")
    (tmp_path / "recipes").symlink_to(ROOT / "recipes")
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    found = blocks(DOC.read_text())
    assert [k for k, _ in found] == ["sh", "python", "python", "python"]
    outs = []
    for kind, code in found:
        argv = ["bash", "-ec", code] if kind == "sh" else [sys.executable, "-c", code]
        p = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert p.returncode == 0, f"{kind} block failed:\n{code}\n{p.stderr[-3000:]}"
        outs.append(p.stdout)
    assert outs[0] == "pass\n"                                  # the Done-when line
    status, err, shape = outs[1].split(" ", 2)
    assert status == "pass" and float(err) < 1e-4 and shape.strip() == "(1, 8, 8, 8)"
    with np.load(tmp_path / "out.npz") as z:
        assert z.files == ["y"] and z["y"].shape == (1, 8, 8, 8)
    assert "ms per run" in outs[2] and re.search(r"^\d+ kernels;", outs[2], re.M)
    assert outs[3] == "vgg16 2 on\n"
