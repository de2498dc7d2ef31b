"""End to end on the emulated Sunway targets: build, run, compare, and the build's contracts."""
import hashlib
import json
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper

from core_models import cnn, make, rand

@pytest.fixture(scope="module")
def cnn_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("cnn")
    p = d / "cnn.onnx"
    onnx.save(cnn(), p)
    return p


def _last_json(text):
    return json.loads(text.strip().splitlines()[-1])


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu"])
def test_check_passes_and_dma_matches_prediction(swbuild_cli, cnn_file, tmp_path, target):
    r = swbuild_cli("check", cnn_file, "--target", target, "-o", tmp_path / "out")
    doc = _last_json(r.stdout)
    assert r.returncode == 0, r.stderr
    assert doc["status"] == "pass"
    assert doc["max_abs_err"] < 1e-5
    assert doc["emulator"]["dma_mismatches"] == []
    assert doc["emulator"]["write_conflicts"] == 0
    budget = 65536 if target == "sunway-emu" else 262144
    assert 0 < doc["emulator"]["ldm_peak_bytes"] <= budget


def _hashes(d):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir()) if p.is_file()}


def test_builds_are_byte_identical_across_hash_seeds_and_dirs(cnn_file, tmp_path):
    outs = []
    for seed, sub in (("1", "a/deep/dir"), ("12345", "b")):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = tmp_path / sub
        r = subprocess.run([sys.executable, "-m", "swbuild.cli", "compile", str(cnn_file), "--target", "sunway-emu",
                            "-o", str(out), "--name", "net"], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        outs.append(_hashes(out))
    assert outs[0] == outs[1]
    assert set(outs[0]) == {"net_host.c", "net_slave.c", "net_para.h", "net.h", "net_weights.bin", "net_weights.S",
                            "net_runner.c", "net.plan.json", "net.lock.json"}
    lock = json.loads((tmp_path / "b" / "net.lock.json").read_text())
    assert lock["outputs"] == {n: h for n, h in outs[1].items() if n != "net.lock.json"}     # hashed as written
    assert str(tmp_path) not in (tmp_path / "b" / "net.lock.json").read_text()


def test_hostile_names_never_reach_the_c_text(swbuild_cli, cnn_file, tmp_path):
    r = swbuild_cli("compile", cnn_file, "--target", "sunway-emu", "-o", tmp_path)
    assert r.returncode == 0, r.stderr
    for f in tmp_path.glob("*.[ch]"):
        text = f.read_text()
        assert not re.search(r"^\s*#define x", text, re.M), f
        assert '"evil"' not in text
        # the sanitised graph input becomes a parameter named from it
    header = (tmp_path / "cnn.h").read_text()
    assert "int cnn_run(const float *gpu_0_data_0, float *prob_0, void *workspace);" in header
    assert re.search(r"#define CNN_WORKSPACE_SIZE \d+", header)


def test_two_models_link_into_one_binary(swbuild_cli, tmp_path):
    from swbuild.driver import build
    from swbuild.config import toolchain
    tc = toolchain.load("sunway-emu")
    m1 = make([helper.make_node("Relu", ["x"], ["y"])], [("x", [4, 5])], [("y", [4, 5])])
    m2 = make([helper.make_node("Sigmoid", ["x"], ["y"])], [("x", [4, 5])], [("y", [4, 5])])
    libs = []
    for name, m in (("first", m1), ("second-net", m2)):
        onnx.save(m, tmp_path / f"{name}.onnx")
        out = tmp_path / name
        r = swbuild_cli("compile", tmp_path / f"{name}.onnx", "--target", "sunway-emu", "-o", out, "--exe")
        assert r.returncode == 0, r.stderr
        libs.append(out / f"lib{name.replace('-', '_')}.a")
    main = tmp_path / "main.c"
    main.write_text("""#include <stdio.h>
#include <math.h>
#include "first.h"
#include "second_net.h"
static float ws[1024];
int main(void) {
  float x[20], a[20], b[20];
  for (int i = 0; i < 20; i++) x[i] = i - 10;
  first_init(); second_net_init();
  if (first_run(x, a, ws) || second_net_run(x, b, ws)) return 1;
  first_teardown(); second_net_teardown();
  for (int i = 0; i < 20; i++)
    if (fabsf(a[i] - (x[i] > 0 ? x[i] : 0)) > 1e-6f || fabsf(b[i] - 1.0f / (1.0f + expf(-x[i]))) > 1e-6f) return 2;
  puts("ok");
  return 0;
}
""")
    steps, rt = build.runtime_steps(tc, tmp_path / "rt")
    build.run_steps(steps, log=lambda s: None)
    exe = tmp_path / "both"
    cmd = (tc.argv("host_cc") + ["-I", str(tmp_path / "first"), "-I", str(tmp_path / "second-net"), str(main)]
           + [str(x) for x in libs] + [str(rt)] + tc.flags["libs"] + ["-o", str(exe)])
    subprocess.run(cmd, check=True)
    assert subprocess.run([str(exe)], capture_output=True, text=True).stdout.strip() == "ok"


def test_real_target_writes_sources_and_names_missing_compiler(swbuild_cli, cnn_file, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SW5CC"}
    r = swbuild_cli("compile", cnn_file, "--target", "sunway", "-o", tmp_path, "--exe", env=env)
    assert r.returncode == 2
    assert "compiler 'sw5cc' not found" in r.stderr and "SW5CC=/path/to/sw5cc" in r.stderr
    assert "Traceback" not in r.stderr
    assert (tmp_path / "cnn_slave.c").exists() and (tmp_path / "cnn.lock.json").exists()
    assert "#include <slave.h>" in (tmp_path / "cnn_slave.c").read_text()
    r = swbuild_cli("compile", cnn_file, "--target", "sunway-pro", "-o", tmp_path / "pro")
    assert r.returncode == 0
    slave = (tmp_path / "pro" / "cnn_slave.c").read_text()
    assert "CRTS_dma_iget" in slave and "athread_get" not in slave


def test_kernel_that_cannot_fit_reports_bytes_needed(swbuild_cli, cnn_file, tmp_path):
    r = swbuild_cli("compile", cnn_file, "--target", "sunway-emu", "-o", tmp_path, "--set", "ldm_reserve=65500")
    assert r.returncode == 2
    assert re.search(r"kernel cnn_k\d+_\w+: needs at least \d+ bytes of local memory per core, budget is 36 bytes", r.stderr)
    assert list(tmp_path.iterdir()) == []


def test_failed_compile_leaves_previous_outputs_intact(swbuild_cli, tmp_path):
    good = make([helper.make_node("Relu", ["x"], ["y"])], [("x", [4])], [("y", [4])])
    bad = make([helper.make_node("Celu", ["x"], ["y"])], [("x", [4])], [("y", [4])])
    onnx.save(good, tmp_path / "good.onnx")
    onnx.save(bad, tmp_path / "bad.onnx")
    out = tmp_path / "out"
    assert swbuild_cli("compile", tmp_path / "good.onnx", "--target", "sunway-emu", "-o", out, "--name", "m").returncode == 0
    before = _hashes(out)
    r = swbuild_cli("compile", tmp_path / "bad.onnx", "--target", "sunway-emu", "-o", out, "--name", "m")
    assert r.returncode == 2 and "operator Celu is not supported" in r.stderr
    assert _hashes(out) == before
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def test_check_statuses_and_exit_codes(swbuild_cli, tmp_path):
    m = make([helper.make_node("Relu", ["x"], ["y"])], [("x", [3, 4])], [("y", [3, 4])])
    onnx.save(m, tmp_path / "m.onnx")
    x = rand(3, 4)
    np.savez(tmp_path / "in.npz", x=x)
    np.savez(tmp_path / "good.npz", y=np.maximum(x, 0))
    np.savez(tmp_path / "bad.npz", y=np.maximum(x, 0) + 0.5)
    r = swbuild_cli("check", tmp_path / "m.onnx", "--target", "sunway-emu", "-o", tmp_path / "o",
                    "--inputs", tmp_path / "in.npz", "--expected", tmp_path / "good.npz")
    assert r.returncode == 0 and _last_json(r.stdout)["status"] == "pass"
    r = swbuild_cli("check", tmp_path / "m.onnx", "--target", "sunway-emu", "-o", tmp_path / "o",
                    "--inputs", tmp_path / "in.npz", "--expected", tmp_path / "bad.npz")
    doc = _last_json(r.stdout)
    assert r.returncode == 1 and doc["status"] == "fail" and abs(doc["max_abs_err"] - 0.5) < 1e-6
    bad = make([helper.make_node("Celu", ["x"], ["y"])], [("x", [4])], [("y", [4])])
    onnx.save(bad, tmp_path / "bad.onnx")
    r = swbuild_cli("check", tmp_path / "bad.onnx", "--target", "sunway-emu", "-o", tmp_path / "o2")
    doc = _last_json(r.stdout)
    assert r.returncode == 3 and doc["status"] == "unsupported" and "Celu" in doc["reason"]


def test_ops_lists_the_supported_operators(swbuild_cli):
    r = swbuild_cli("ops", "--target", "sunway-emu")
    ops = r.stdout.split()
    assert r.returncode == 0
    for op in ["Conv", "Relu", "MaxPool", "Gemm", "Flatten", "Reshape", "Dropout", "Softmax", "LRN", "Add"]:
        assert op in ops


def test_help_is_useful(swbuild_cli):
    r = swbuild_cli("--help")
    assert r.returncode == 0 and "check" in r.stdout and "examples" in r.stdout
    r = swbuild_cli("check", "--help")
    assert "--expected" in r.stdout and "exit 0 only on pass" in r.stdout


def test_emulated_host_names_every_kernel_buffer_and_the_real_one_does_not(swbuild_cli, cnn_file, tmp_path):
    # under the emulator, race/conflict warnings print `addr (tensor+offset)` for model tensors
    for target in ("sunway-emu", "sunway"):        # grouping off: one spawn per kernel to read
        r = swbuild_cli("compile", cnn_file, "--target", target, "-o", tmp_path / target, "--grouping", "off")
        assert r.returncode == 0, r.stderr
    emu = (tmp_path / "sunway-emu" / "cnn_host.c").read_text()
    real = (tmp_path / "sunway" / "cnn_host.c").read_text()
    assert "SW_NAME" not in real and "swemu" not in real
    assert "#if defined(SWEMU_API_V1) || defined(SWEMU_API_CRTS)" in emu
    plan = json.loads((tmp_path / "sunway-emu" / "cnn.plan.json").read_text())
    para = (tmp_path / "sunway-emu" / "cnn_para.h").read_text()
    fields = re.findall(r"^struct (\w+)_para \{\n((?:    .*\n)*?)\};", para, re.M)
    assert len(fields) == len(plan["kernels"]) > 0
    for kernel, body in fields:
        block = emu[emu.index(f"struct {kernel}_para sw_para"):emu.index(f"athread_spawn({kernel},")]
        names = re.findall(r"SW_NAME\(sw_para\.(\w+), (\d+), \"([^\"]*)\"\);", block)
        assert [n for n, _, _ in names] == re.findall(r"\*(\w+);", body)
        for (_, nbytes, _), dims in zip(names, re.findall(r"\[([\d, ]+)\] \*/", body)):
            assert int(nbytes) >= 4 * int(np.prod([int(d) for d in dims.split(",")]))
    inputs = re.findall(r'SW_NAME\(sw_para\.\w+, (\d+), "gpu_0/data_0"\);', emu)
    assert inputs and {int(n) for n in inputs} == {4 * int(np.prod(plan["inputs"][0]["shape"]))}


def test_assembler_include_survives_a_comma_in_the_directory():
    """gcc's -Wa splits its argument at commas: a build directory like "out,v2" would lose the
    weights' .incbin path; -Xassembler passes it whole."""
    from swbuild.driver.build import asm_include_args
    assert asm_include_args("/tmp/out") == ["-Wa,-I,/tmp/out"]
    assert asm_include_args("/tmp/out,v2") == ["-Xassembler", "-I", "-Xassembler", "/tmp/out,v2"]
