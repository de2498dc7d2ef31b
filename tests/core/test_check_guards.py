"""`swbuild check` guards: a runner that hangs is stopped after the timeout with the kernel it
was in; two checks of models with the same name into one output directory take turns."""
import json
import os
import subprocess
import sys

import onnx
import pytest
from onnx import helper

from core_models import make, rand
import shared_builds
from swbuild.driver import build, check
from swbuild.config import toolchain
from swbuild.driver.compiler import compile_to


def _built(tmp_path, target="sunway-emu"):
    m = make([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
             [("x", [4, 8])], [("z", [4, 8])], [("w", rand(8, 8))])
    tc = toolchain.load(target)
    prog, _ = compile_to(m, tc, tmp_path / "b", "hang")
    rt_lib = shared_builds.runtime_lib(tc, tmp_path / "b" / "rt")
    steps, _, exe = build.model_steps(tc, prog.prefix, tmp_path / "b", tmp_path / "b", rt_lib)
    build.run_steps(steps, log=lambda s: None)
    return json.loads((tmp_path / "b" / f"{prog.prefix}.plan.json").read_text()), exe, prog


@pytest.mark.parametrize("target", ["sunway-emu", pytest.param("diannao-emu", marks=pytest.mark.slow)])
def test_hung_runner_is_stopped_and_says_where_it_was(tmp_path, target):
    plan, exe, prog = _built(tmp_path, target)
    work = tmp_path / "w"
    work.mkdir()
    os.mkfifo(work / "out0.bin")        # nobody reads it: the runner blocks writing its output
    with pytest.raises(check.RunnerTimeout, match=r"after the 1 s timeout; it was outside the model's kernels"):
        check.run_runner(exe, plan, check.seeded_inputs(plan["inputs"], 0), work, timeout=1)
    doc = check.check_build(plan, exe, [], check.seeded_inputs(plan["inputs"], 0), 1e-3, 1e-4, workdir=work, timeout=1)
    assert doc["status"] == "fail" and "timeout" in doc["reason"]
    # while a kernel runs, SIGTERM names it (the host marks each launch)
    host = next(p for p in (tmp_path / "b").iterdir() if "_host." in p.name).read_text()
    for k in prog.kernels:
        assert f'{prog.prefix}_running_kernel = "{k.name}";' in host


def test_two_checks_of_the_same_model_name_take_turns(tmp_path):
    onnx.save(make([helper.make_node("Relu", ["x"], ["y"])], [("x", [64, 64])], [("y", [64, 64])]), tmp_path / "a.onnx")
    onnx.save(make([helper.make_node("Sigmoid", ["x"], ["y"])], [("x", [32, 8])], [("y", [32, 8])]), tmp_path / "b.onnx")
    procs = [subprocess.Popen([sys.executable, "-m", "swbuild.cli", "check", str(tmp_path / f), "--name", "same",
                               "--target", "sunway-emu"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for f in ("a.onnx", "b.onnx")]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1])["status"] == "pass"
