"""System tests with the real compiler: the repository's SConstruct copied into a tmp
project with a tiny ONNX recipe (Conv+Relu on 1x3x8x8), target sunway-emu / sunway."""
import json
import os

import pytest

from scons_project import make_project, run_scons

from swbuild.build import generated_files

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
