"""System tests with the real compiler: the repository's SConstruct copied into a tmp
project with a tiny ONNX recipe (Conv+Relu on 1x3x8x8), target sunway-emu / sunway."""
import json
import os

import pytest

from scons_project import make_project, run_scons

from swbuild.driver.build import generated_files

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    p = make_project(tmp_path_factory.mktemp("real") / "proj", fake=False)
    r = run_scons(p, "-Q", "target=sunway-emu", "model=tiny")
    return p, r


def test_real_build_and_up_to_date(built):
    p, r = built
    assert r.returncode == 0, r.stdout + r.stderr
    out = p / "build/sunway-emu/tiny"
    assert "SWGEN tiny -> build/sunway-emu/tiny" in r.stdout and "LINK tiny_runner" in r.stdout
    for name in generated_files("tiny").values():
        assert (out / name).is_file(), name
    assert os.access(out / "tiny_runner", os.X_OK) and (out / "libtiny.a").is_file()
    assert (p / "build/sunway-emu/_runtime/libswemu.a").is_file()
    lock = (out / "tiny.lock.json").read_text()
    assert str(p) not in lock and json.loads(lock)["target"] == "sunway-emu"
    assert run_scons(p, "-q", "target=sunway-emu", "model=tiny").returncode == 0


def test_real_sunway_without_sw5cc_writes_sources_then_fails(built):
    p, _ = built
    r = run_scons(p, "-Q", "target=sunway", "model=tiny", env={"PATH": "/usr/bin:/bin"})
    assert r.returncode != 0
    assert "compiler 'sw5cc' not found" in r.stderr and "Traceback" not in r.stdout + r.stderr
    for name in generated_files("tiny").values():
        assert (p / "build/sunway/tiny" / name).is_file(), name


@pytest.mark.slow
def test_real_check_alias(built):
    p, _ = built
    r = run_scons(p, "-Q", "target=sunway-emu", "model=tiny", "check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "CHECK tiny (sunway-emu)" in r.stdout and '"status": "pass"' in r.stdout
    assert json.loads((p / "build/sunway-emu/tiny/tiny.check.json").read_text())["status"] == "pass"
    r = run_scons(p, "-Q", "-q", "target=sunway-emu", "model=tiny", "check")     # reused, silent
    assert r.returncode == 0 and r.stdout + r.stderr == ""


def test_compiledb_lists_the_models_c_with_user_flags(built):
    p, _ = built
    r = run_scons(p, "-Q", "target=sunway-emu", "model=tiny", "CCFLAGS=-DUSER_FLAG=1 -g", "compiledb")
    assert r.returncode == 0, r.stdout + r.stderr
    db = {os.path.basename(e["file"]): e for e in json.loads((p / "compile_commands.json").read_text())}
    for f in ("tiny_host.c", "tiny_slave.c", "tiny_runner.c", "dma.c"):
        assert f in db, sorted(db)
    slave = db["tiny_slave.c"]["command"]
    # the target's flags first, the user's after them, SCons' -I/-D from the toolchain
    assert slave.index("-O2") < slave.index("-DUSER_FLAG=1") and "-DSWEMU_LDM_BYTES=65536" in slave
    assert "swbuild.runtime.slavecc" in slave and db["tiny_slave.c"]["output"] == "build/sunway-emu/tiny/tiny_slave.o"
    # the flags change the objects: SCons rebuilds them, and the build is up to date with them
    r = run_scons(p, "-Q", "target=sunway-emu", "model=tiny", "CCFLAGS=-DUSER_FLAG=1 -g")
    assert r.returncode == 0 and "CC-SLAVE tiny_slave.c" in r.stdout and "SWGEN" not in r.stdout
    assert run_scons(p, "-q", "target=sunway-emu", "model=tiny", "CCFLAGS=-DUSER_FLAG=1 -g").returncode == 0


def test_clean_removes_the_runtime(tmp_path):
    p = make_project(tmp_path / "proj", fake=False)
    assert run_scons(p, "-Q", "target=sunway-emu", "model=tiny").returncode == 0
    assert (p / "build/sunway-emu/_runtime/libswemu.a").is_file()
    r = run_scons(p, "-Q", "-c", "target=sunway-emu", "model=tiny")
    assert r.returncode == 0 and not list((p / "build/sunway-emu").rglob("*.[oa]"))
    assert not (p / "build/sunway-emu/tiny/tiny_runner").exists()


USER_SCONSTRUCT = """\
import swbuild.scons
env = Environment(tools=["default", swbuild.scons.generate], target="sunway-emu", CPPDEFINES=["APP_SCALE=2"])
env.Tool("compilation_db")
tiny = env.SwModel("tiny")
# the user's own program, through a VariantDir, links the model's library and the runtime
VariantDir("build/app", "src", duplicate=0)
app = env.Program("build/app/app", ["build/app/main.c"], CPPPATH=[tiny.dir],
                  LIBS=[tiny.lib, tiny.runtime, "pthread", "m"])
env.Depends(app, tiny.lib[0].sources)   # the thin archive's members (docs/scons.md)
Default(app)
env.Alias("compiledb", env.CompilationDatabase())
"""

USER_MAIN = r'''#include <stdio.h>
#include <stdlib.h>
#include "tiny.h"
int main(void)
{
    static float in[TINY_INPUT0_ELEMS], out[TINY_OUTPUT0_ELEMS];
    for (int i = 0; i < TINY_INPUT0_ELEMS; i++) in[i] = (float)(i % 7) / APP_SCALE;
    void *ws = aligned_alloc(64, ((TINY_WORKSPACE_SIZE + 63) / 64) * 64 + 64);
    if (tiny_init() != 0 || tiny_run(in, out, ws) != 0) return 1;
    double s = 0;
    for (int i = 0; i < TINY_OUTPUT0_ELEMS; i++) s += out[i];
    printf("sum %.4f\n", s);
    tiny_teardown();
    return 0;
}
'''


def test_users_own_sconstruct_links_the_library(tmp_path):
    import subprocess
    import numpy as np
    p = make_project(tmp_path / "proj", fake=False)
    (p / "SConstruct").write_text(USER_SCONSTRUCT)
    (p / "src").mkdir()
    (p / "src" / "main.c").write_text(USER_MAIN)
    r = run_scons(p, "-Q", "build/app/app", "compiledb")
    assert r.returncode == 0, r.stdout + r.stderr
    # the user's CPPDEFINES reach the generated C as well as their own
    db = {os.path.basename(e["file"]): e["command"] for e in json.loads((p / "compile_commands.json").read_text())}
    assert "-DAPP_SCALE=2" in db["tiny_host.c"] and "-DAPP_SCALE=2" in db["main.c"]
    got = subprocess.run([str(p / "build/app/app")], capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    # the same Conv+Relu in numpy
    import onnx
    from onnx import numpy_helper
    w = numpy_helper.to_array(onnx.load(str(p / "models/tiny.onnx")).graph.initializer[0])
    x = (np.arange(192) % 7).astype(np.float32).reshape(1, 3, 8, 8) / 2
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((4, 8, 8), np.float32)
    for o in range(4):
        for i in range(8):
            for j in range(8):
                y[o, i, j] = (xp[0, :, i:i + 3, j:j + 3] * w[o]).sum()
    assert abs(float(got.stdout.split()[1]) - float(np.maximum(y, 0).sum())) < 1e-2 * max(1, float(np.maximum(y, 0).sum()))
    assert run_scons(p, "-q", "build/app/app").returncode == 0
