"""A SCoP recipe (a C file with #pragma scop regions) is a model like any other under SCons:
the generator writes the C, SCons' own C builders compile it (so the emulation runtime is
built once, also under -j2, and compile_commands.json lists the files), `check` compares
with the serial program and `report` prints the emulator's numbers."""
import json
import shutil

import pytest

from scons_project import REPO, run_scons

KERNELS = REPO / "tests" / "scop" / "kernels"
RECIPE = """model: gemm
source:
  scop: ../src/gemm.c
  include: [../src]
  defines: ["NI=70", "NJ=33", "NK=65"]
targets: [sunway-emu, sunway-pro-emu, sunway]
check: {rtol: 1.0e-6, atol: 1.0e-9}
"""
OUT = "build/sunway-emu/gemm"


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    p = tmp_path_factory.mktemp("scop") / "proj"
    (p / "src").mkdir(parents=True)
    (p / "recipes").mkdir()
    for f in ("gemm.c", "scop_util.h"):
        shutil.copy(KERNELS / f, p / "src" / f)
    (p / "recipes" / "gemm.yaml").write_text(RECIPE)
    shutil.copy(REPO / "SConstruct", p / "SConstruct")
    return p


def test_scop_recipe_builds_through_scons_c_builders(project):
    p = project
    r = run_scons(p, "-Q", "-j2", "target=sunway-emu", "model=gemm", "check", "report", "compiledb")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "SWGEN gemm -> build/sunway-emu/gemm" in out
    assert out.count("CC-EMU core.c") == 1 and out.count("AR libswemu.a") == 1      # the runtime once
    assert "CC-HOST gemm_host.c" in out and "CC-SLAVE gemm_slave.c" in out and "LINK gemm" in out
    db = json.loads((p / "compile_commands.json").read_text())
    files = {e["file"] for e in db}
    assert {f"{OUT}/gemm_host.c", f"{OUT}/gemm_slave.c"} <= files
    host = next(e for e in db if e["file"] == f"{OUT}/gemm_host.c")
    assert "-DNI=70" in host["command"] and "-Isrc" in host["command"]
    assert sum("athread/src/" in f for f in files) >= 8
    check = json.loads((p / OUT / "gemm.check.json").read_text())
    assert check["status"] == "pass" and check["numbers_compared"] > 0
    rep = json.loads((p / OUT / "gemm.report.json").read_text())
    k = rep["kernels"][0]
    assert rep["source"] == "scop" and k["dma_bytes"] > 0 and k["dma_ops"] > 0 and k["write_conflicts"] == 0
    row = next(ln for ln in r.stdout.splitlines() if ln.startswith(k["name"] + " "))
    assert row.split()[1:4] == [str(k["spawns"]), f"{k['dma_bytes'] / 1e6:.2f}", str(k["dma_ops"])]
    # up to date; the report still prints, as JSON on request
    assert run_scons(p, "-q", "target=sunway-emu", "model=gemm", "check", "report").returncode == 0
    r = run_scons(p, "-Q", "target=sunway-emu", "model=gemm", "report", "json=1")
    assert r.returncode == 0 and "REPORT" not in r.stdout
    assert json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("{")][0]) == rep
    # a header the C file includes: regenerated, recompiled
    h = p / "src" / "scop_util.h"
    h.write_text(h.read_text() + "\n/* edited */\n")
    assert run_scons(p, "-q", "target=sunway-emu", "model=gemm").returncode == 1


def test_scop_recipe_export_builds_with_make(project, tmp_path):
    import os
    import subprocess
    import sys
    import tarfile

    from swbuild import cli
    p = project
    r = run_scons(p, "-Q", "target=sunway-emu", "model=gemm", "export")
    assert r.returncode == 0, r.stdout + r.stderr
    tar = p / OUT / "gemm-sunway-emu.tar"
    assert "EXPORT build/sunway-emu/gemm/gemm-sunway-emu.tar" in r.stdout
    # the command writes the same bytes from the same recipe
    assert cli.main(["export", "--recipe", str(p / "recipes" / "gemm.yaml"), "--target", "sunway-emu",
                     "-o", str(tmp_path / "cli.tar")]) == 0
    assert (tmp_path / "cli.tar").read_bytes() == tar.read_bytes()
    assert run_scons(p, "-q", "target=sunway-emu", "model=gemm", "export").returncode == 0
    with tarfile.open(tar) as t:
        t.extractall(tmp_path / "x")
    d = tmp_path / "x" / "gemm"
    assert {"Makefile", "gemm_host.c", "gemm_slave.c", "gemm_scop.h", "include/d0/scop_util.h",
            "metadata.json", "runtime/include/athread.h"} <= {q.relative_to(d).as_posix() for q in d.rglob("*")}
    # on the machine: make with the target's compilers (here the emulated twin's gcc)
    env = dict(os.environ, PYTHONPATH=str(REPO), PATH=os.pathsep.join([os.path.dirname(sys.executable),
                                                                       os.environ["PATH"]]))
    m = subprocess.run(["make", "-s"], cwd=d, capture_output=True, text=True, env=env)
    assert m.returncode == 0, m.stdout + m.stderr
    got = subprocess.run([str(d / "gemm")], capture_output=True, text=True)
    # SCons' own build of the program (another test of this module may have made it, on another worker)
    assert run_scons(p, "-Q", "target=sunway-emu", "model=gemm").returncode == 0
    want = subprocess.run([str(p / OUT / "gemm")], capture_output=True, text=True)
    assert got.returncode == 0 and got.stdout == want.stdout and "C sum" in got.stdout
