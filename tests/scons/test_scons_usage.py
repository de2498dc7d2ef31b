"""What a new user of a project's SConstruct meets (issue 39): `report` prints the table
(`json=1` the document), progress lines under SCons, the CLI's errors for a missing model
file, a bad recipe that does not break `scons -h`, a truthful `-h`, and check-only options
that do not regenerate the model."""
import json
import os
import re
import shutil

import pytest

from scons_project import gen_runs, make_project, run_scons

OUT = "build/sunway-emu/tiny"


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    p = make_project(tmp_path_factory.mktemp("usage") / "proj", fake=False)
    r = run_scons(p, "-Q", "target=sunway-emu", "model=tiny", env={"SWBUILD_PROGRESS": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    return p, r


def test_progress_lines_reach_the_scons_output(real):
    _, r = real
    out = r.stdout + r.stderr
    assert re.search(r"^\[\d+/\d+\] tiny: choose_tiles \(1 kernels\)$", out, re.M), out
    assert re.search(r"^\[1/1\] schedule: tiny_k0_conv$", out, re.M), out


def test_report_prints_the_table_and_json_on_request(real):
    p, _ = real
    r = run_scons(p, "-Q", "target=sunway-emu", "model=tiny", "report")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "REPORT tiny (sunway-emu)" in r.stdout
    assert re.search(r"^k0_conv +Conv\+Relu ", r.stdout, re.M) and re.search(r"^total +1 kernel ", r.stdout, re.M)
    assert r.stdout.count("k0_conv  Conv+Relu") == 1            # printed once, by the run
    doc = json.loads((p / OUT / "tiny.report.json").read_text())
    assert [k["name"] for k in doc["kernels"]] == ["tiny_k0_conv"]
    # up to date: nothing runs, the table is printed from the document
    r = run_scons(p, "-Q", "target=sunway-emu", "model=tiny", "report")
    assert r.returncode == 0 and "REPORT" not in r.stdout
    assert r.stdout.count("k0_conv  Conv+Relu") == 1, r.stdout
    # json=1: the document on one line, and no new run for another format
    r = run_scons(p, "-Q", "target=sunway-emu", "model=tiny", "report", "json=1")
    assert r.returncode == 0 and "REPORT" not in r.stdout
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    assert len(lines) == 1 and json.loads(lines[0]) == doc
    assert run_scons(p, "-Q", "-q", "target=sunway-emu", "model=tiny", "report").returncode == 0


def test_check_only_option_runs_the_check_again_without_regenerating(fake_project):
    p = fake_project
    r = run_scons(p, "-Q", "target=fake-emu", "check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(gen_runs(p)) == 1
    assert run_scons(p, "-q", "target=fake-emu", "rtol=1e-2").returncode == 0     # the build is up to date
    r = run_scons(p, "-Q", "target=fake-emu", "rtol=1e-2", "atol=1e-3", "timeout=60", "check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SWGEN" not in r.stdout and "CHECK tiny (fake-emu)" in r.stdout
    assert len(gen_runs(p)) == 1
    last = (p / "gen.log").read_text().splitlines()[-1]
    assert last.startswith("check ") and last.endswith("--set atol=0.001 --set rtol=0.01 --set timeout=60"), last
    # an option that shapes the code still regenerates, in its own directory
    r = run_scons(p, "-Q", "target=fake-emu", "batch=2", "rtol=1e-2")
    assert "SWGEN tiny -> build/fake-emu/tiny-batch2" in r.stdout
    assert gen_runs(p)[-1].endswith("--set batch=2")


def test_missing_model_file_gives_the_clis_error(fake_project):
    p = fake_project
    rec = p / "recipes" / "tiny.yaml"
    rec.write_text(rec.read_text().replace("tiny.onnx", "tinynet.onnx"))
    r = run_scons(p, "-Q", "target=fake-emu")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "recipes/tiny.yaml:3: source.onnx: model file not found: " in r.stderr
    assert "models/tinynet.onnx" in r.stderr and "Implicit dependency" not in r.stdout + r.stderr
    # a bare model file: SwModel(onnx=...)
    (p / "SConstruct").write_text("import swbuild.scons\nenv = swbuild.scons.setup(ARGUMENTS)\n"
                                  "env.SwModel(onnx='models/tinynet.onnx', inputs={'data': [1, 3, 8, 8]})\n")
    r = run_scons(p, "-Q", "target=fake-emu")
    assert r.returncode == 2 and "scons: *** models/tinynet.onnx: no such ONNX file" in r.stderr, r.stderr


def test_a_bad_recipe_does_not_break_help(fake_project):
    p = fake_project
    (p / "recipes" / "bad.yaml").write_text("model: bad\nsource: {zoo: x, onnx: y}\n")
    r = run_scons(p, "-h")
    assert r.returncode == 0, r.stderr
    assert "(bad|tiny|all)" in r.stdout and "target:" in r.stdout
    assert "recipes/bad.yaml:2: source: give exactly one" in r.stderr
    r = run_scons(p, "-Q", "target=fake-emu", "model=tiny")     # the good one still builds
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_scons(p, "-Q", "target=fake-emu")                   # all of them: the error, no traceback
    assert r.returncode == 2 and "recipes/bad.yaml:2: source: give exactly one" in r.stderr
    assert "Traceback" not in r.stderr


def test_help_says_where_the_cross_compiler_is(fake_project, tmp_path):
    p = fake_project
    bare = tmp_path / "bin"
    bare.mkdir()
    path = os.pathsep.join([str(bare), os.path.dirname(shutil.which("gcc"))])
    r = run_scons(p, "-h", env={"PATH": path})
    assert r.returncode == 0, r.stderr
    block = r.stdout.split("SW5CC:", 1)[1].split("\n\n", 1)[0]
    assert "actual: (unset; sw5cc not found on PATH)" in block and "(found on PATH)" not in block
    sw5cc = bare / "sw5cc"
    sw5cc.write_text("#!/bin/sh\nexit 0\n")
    sw5cc.chmod(0o755)
    block = run_scons(p, "-h", env={"PATH": path}).stdout.split("SW5CC:", 1)[1].split("\n\n", 1)[0]
    assert f"actual: (unset; sw5cc on PATH: {sw5cc})" in block
    block = run_scons(p, "-h", env={"PATH": path, "SW5CC": "/opt/sw/sw5cc"}).stdout.split("SW5CC:", 1)[1]
    assert "actual: (from the environment: /opt/sw/sw5cc)" in block.split("\n\n", 1)[0]
    assert "\n    export " in r.stdout and "export-<model>" in r.stdout
    assert "report      build and run the runners and print the performance table" in r.stdout
    assert "JSON performance report" not in r.stdout
    assert "json: report: print the JSON document instead of the table" in r.stdout
    assert "CCFLAGS:" in r.stdout and "default: (none)" in r.stdout.split("CCFLAGS:", 1)[1].split("\n\n", 1)[0]


def test_a_clean_build_has_no_warnings(real):
    p, r = real
    assert "warning" not in (r.stdout + r.stderr).lower(), r.stdout + r.stderr
    # sunway-pro-emu: floatv8 is a 32-byte vector, which gcc flagged with -Wpsabi
    r = run_scons(p, "-Q", "target=sunway-pro-emu", "model=tiny")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "CC-SLAVE tiny_slave.c" in r.stdout
    assert "warning" not in (r.stdout + r.stderr).lower(), r.stdout + r.stderr
