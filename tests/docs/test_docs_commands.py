"""Every `swbuild ...` and `scons ...` command of README.md's and docs/*.md's code blocks, and of
`swbuild --help`'s examples, runs as written, in a temp copy of the project that holds the
files the examples name (model.onnx, in.npz, out.npz, kernel.c, main.c).

The files are read when the tests are collected, so an edit of the docs is what is tested.
`[--opt ...]` parts run both left out and given. Commands that need a real chip's compiler
(sw5cc, cncc) must fail with the build's own message naming it when it is not installed, and
pass when it is. Whole-model commands (the zoo's recipes, the light VGG-19, every recipe at
once) are `slow`.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from swbuild import cli
from swbuild.config import toolchain

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
# whole models: minutes each under emulation (and scons without model= builds every recipe)
SLOW = re.compile(r"vgg1[69]|resnet|dcgan|mobilenet|shufflenet|yolov3|bert")


def _lines(text):
    """Lines of a code block, `\\`-continued lines joined."""
    out, cur = [], ""
    for ln in text.splitlines():
        if ln.rstrip().endswith("\\"):
            cur += ln.rstrip()[:-1] + " "
            continue
        out.append(cur + ln)
        cur = ""
    return out


def _strip_comment(cmd):
    """The command without its trailing `# comment` (a `#` outside quotes after a blank)."""
    quote, for_at = None, None
    for i, ch in enumerate(cmd):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and i and cmd[i - 1].isspace():
            for_at = i
            break
    return (cmd[:for_at] if for_at is not None else cmd).strip()


def _variants(cmd):
    """`a [--x 1] [--y]` → `a` and `a --x 1 --y`."""
    if "[" not in cmd:
        return [cmd]
    bare = re.sub(r"\s*\[[^\[\]]+\]", "", cmd)
    full = re.sub(r"\[([^\[\]]+)\]", r"\1", cmd)
    return [bare, full]


# a block that unpacks and builds an archive (`tar xf`, `make`) is a script: a command after
# such lines needs them, and the commands before them, to have run first
SCRIPT_LINE = re.compile(r"(tar|make) ")


def doc_commands():
    """(where, command, prelude) of every swbuild/scons command in the docs' code blocks and
    --help; `prelude`: the lines of its block that must run before it (script blocks), or ()."""
    found = []
    for path in DOCS:
        text = path.read_text()
        for block in FENCE.finditer(text):
            first = text.count("\n", 0, block.start(1)) + 1
            lines = [_strip_comment(ln) for ln in _lines(block.group(1))]
            script = any(SCRIPT_LINE.match(ln) for ln in lines)
            for i, ln in enumerate(_lines(block.group(1))):
                for seg in ln.split("&&"):        # `... && scons target=... check` (the README's set-up)
                    seg = _strip_comment(seg)
                    if re.match(r"(swbuild|scons)( |$)", seg):
                        before = [x for x in lines[:i] if x and (SCRIPT_LINE.match(x) or re.match(r"(swbuild|scons) ", x))]
                        found.append((f"{path.relative_to(REPO)}:{first + i}", seg,
                                      tuple(before) if script and any(SCRIPT_LINE.match(x) for x in before) else ()))
    for ln in cli.EPILOG.splitlines():
        ln = ln.strip()
        if ln.startswith("swbuild "):
            found.append(("swbuild --help", re.sub(r"\s{2,}\(.*\)$", "", ln).strip(), ()))
    out = []
    for where, cmd, prelude in found:
        for v in _variants(cmd):
            out.append((where, v, prelude))
    return out


def _target(cmd):
    m = re.search(r"(?:--target |-t |target=)(\S+)", cmd)
    return m.group(1) if m else ("sunway-emu" if cmd.startswith("scons") else None)


def expected_failure(cmd):
    """The message a command must fail with on this machine, or None when it must pass: a
    build for a real chip needs its compiler (SW5CC=... when given, else PATH)."""
    target = _target(cmd)
    if not target or re.search(r"(^scons -h)|( export( |$))|(^swbuild (export|ops|pipeline|calibrate) )", cmd):
        return None     # exporting, calibration archives, help and listings compile nothing
    if cmd.startswith("swbuild compile") and "--exe" not in cmd:
        return None     # sources only
    tc = toolchain.load(target)
    if tc.emulated:
        return None
    if cmd.startswith("swbuild check") or cmd.startswith("swbuild report"):
        return f"target {target} is a real chip; run checks on its emulated twin"
    var, exe = tc.compilers.get("path_variable"), tc.compilers.get("primary")
    given = re.search(rf"\b{var}=(\S+)", cmd) if var else None
    if given:
        path = given.group(1)
        return None if os.access(path, os.X_OK) else f"{path} is not an executable"
    return None if shutil.which(exe) else f"compiler '{exe}' not found"


def _params():
    out = []
    for where, cmd, prelude in doc_commands():
        slow = bool(SLOW.search(cmd)) or (cmd.startswith("scons") and "model=" not in cmd and cmd != "scons -h")
        out.append(pytest.param(cmd, prelude, id=f"{where}: {cmd}", marks=[pytest.mark.slow] if slow else []))
    return out


def _tiny_model(path):
    """model.onnx of the examples: input `data` 1x3x224x224, Conv 3→4 + Relu."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.2, "w")
    nodes = [helper.make_node("Conv", ["data", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["out"])]
    g = helper.make_graph(nodes, "model", [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 224, 224])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 224, 224])], [w])
    onnx.save_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))


KERNEL_C = """\
/* y = a*x + y: the region becomes a CPE kernel */
#define N 4096
void saxpy(float a, float x[N], float y[N])
{
#pragma scop
    for (int i = 0; i < N; i++)
        y[i] = a * x[i] + y[i];
#pragma endscop
}
"""
MAIN_C = """\
#include <stdio.h>
#define N 4096
void saxpy(float a, float x[N], float y[N]);
static float x[N], y[N];
int main(void)
{
    for (int i = 0; i < N; i++) { x[i] = i * 0.5f; y[i] = 1.0f; }
    saxpy(2.0f, x, y);
    printf("%g %g %g\\n", y[0], y[1], y[N - 1]);
    return 0;
}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A copy of the project (SConstruct, recipes, the SCoP kernels the docs name) plus the
    files the examples take as given."""
    import onnxruntime as ort
    p = tmp_path_factory.mktemp("docs") / "proj"
    p.mkdir()
    shutil.copy(REPO / "SConstruct", p / "SConstruct")
    shutil.copytree(REPO / "recipes", p / "recipes")
    shutil.copytree(REPO / "tests" / "scop" / "kernels", p / "tests" / "scop" / "kernels")
    _tiny_model(p / "model.onnx")
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    np.savez(p / "in.npz", data=x)
    y = ort.InferenceSession(str(p / "model.onnx"), providers=["CPUExecutionProvider"]).run(None, {"data": x})[0]
    np.savez(p / "out.npz", out=y)
    (p / "kernel.c").write_text(KERNEL_C)
    (p / "main.c").write_text(MAIN_C)
    return p


def test_the_docs_have_commands():
    cmds = [c for _, c, _ in doc_commands()]
    assert len(cmds) >= 30
    for needed in ("scons -h", "swbuild pipeline --target sunway-emu", "swbuild ops --target sunway-emu"):
        assert needed in cmds
    assert not [c for c in cmds if "light_vgg19.onnx --target" in c and c.split()[2] == "light_vgg19.onnx"]


@pytest.mark.parametrize("cmd,prelude", _params())
def test_doc_command_runs_as_written(project, cmd, prelude, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SW5CC", "SWGCC", "CNCC"))}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    cwd = project
    if prelude:     # a script block: its lines first, in a directory of its own (it may write toolchains/)
        cwd = tmp_path
        for q in project.iterdir():
            (cwd / q.name).symlink_to(q)
        pre = subprocess.run(["bash", "-c", " && ".join(prelude)], cwd=cwd, env=env, capture_output=True, text=True,
                             timeout=3600)
        assert pre.returncode == 0, (pre.stdout + pre.stderr)[-3000:]
    r = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    out = r.stdout + r.stderr
    assert "Traceback" not in out, out[-3000:]
    fail = expected_failure(cmd)
    if fail is not None:
        assert r.returncode != 0 and fail in out, out[-3000:]
        return
    assert r.returncode == 0, out[-3000:]
    if re.match(r"swbuild check ", cmd):
        assert json.loads(r.stdout.strip().splitlines()[-1])["status"] == "pass"
