"""A recipe whose source is a C file with #pragma scop regions, through the CLI and SCons."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from swbuild.support.errors import RecipeError
from swbuild.config.recipe import load_recipe

KERNELS = Path(__file__).parent / "kernels"
REPO = Path(__file__).resolve().parents[2]
RECIPE = """model: gemm
source:
  scop: ../src/gemm.c
  include: [../src]
  defines: ["NI=70", "NJ=33", "NK=65"]
targets: [sunway-emu, sunway-pro-emu, sunway]
check: {rtol: 1.0e-6, atol: 1.0e-9}
"""


@pytest.fixture
def project(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "recipes").mkdir()
    for f in ("gemm.c", "scop_util.h"):
        shutil.copy(KERNELS / f, tmp_path / "src" / f)
    (tmp_path / "recipes" / "gemm.yaml").write_text(RECIPE)
    shutil.copy(REPO / "SConstruct", tmp_path / "SConstruct")
    return tmp_path


def test_schema(project):
    r = load_recipe(project / "recipes" / "gemm.yaml")
    assert r.source_kind == "scop" and r.source == project / "src" / "gemm.c"
    assert r.normalized()["source"] == {"scop": "../src/gemm.c", "sources": [], "include": ["../src"],
                                        "defines": ["NI=70", "NJ=33", "NK=65"]}
    bad = project / "recipes" / "bad.yaml"
    bad.write_text("model: x\nsource:\n  scop: k.c\n  flags: [-O3]\n")
    with pytest.raises(RecipeError, match=r"bad.yaml:4: source.flags: unknown field of a scop source"):
        load_recipe(bad)


def test_cli_check_against_the_serial_program(project, swbuild_cli):
    r = swbuild_cli("check", "--recipe", project / "recipes" / "gemm.yaml", "--target", "sunway-emu",
                    "-o", project / "out")
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.returncode == 0 and doc["status"] == "pass", r.stderr
    assert doc["numbers_compared"] > 0 and doc["emulator"]["write_conflicts"] == 0 and doc["emulator"]["kernels"] >= 1


def test_scons_check_up_to_date_and_header_edits_rebuild(project):
    scons = [sys.executable, "-m", "SCons", "-Q", "target=sunway-emu", "model=gemm"]
    r = subprocess.run(scons + ["check"], cwd=project, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["status"] == "pass"
    q = [sys.executable, "-m", "SCons", "-q", "target=sunway-emu", "model=gemm"]
    assert subprocess.run(q, cwd=project, capture_output=True).returncode == 0
    (project / "src" / "scop_util.h").write_text((project / "src" / "scop_util.h").read_text() + "\n#define EDITED 1\n")
    assert subprocess.run(q, cwd=project, capture_output=True).returncode == 1
