"""`swbuild export`: one deterministic archive (sources, headers, weights, Makefile for the
target's own compilers, lock file, plan, metadata) that builds without swbuild. The real
targets' Makefiles are built here with stand-in compilers (gcc/g++ against the emulation
runtimes, make CC=... on the command line) and the programs they link pass `swbuild check`."""
import json
import os
import re
import subprocess
import sys
import tarfile

import pytest

from cli_models import conv_softmax_pad
from swbuild.driver import build
from swbuild import cli
from swbuild.config import toolchain


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return conv_softmax_pad(tmp_path_factory.mktemp("export") / "small.onnx")


def export(tmp_path, model, target, name):
    assert cli.main(["export", str(model), "--target", target, "-o", str(tmp_path / name)]) == 0
    return tmp_path / name


def unpack(archive, into):
    with tarfile.open(archive) as t:
        t.extractall(into, filter="data")
    return into / "small"


def check_runner(model, target, runner, capsys):
    capsys.readouterr()
    code = cli.main(["check", str(model), "--target", target, "--runner", str(runner)])
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and doc["status"] == "pass", doc
    return doc


def stand_in(emu):
    """Makefile overrides that build a real target's archive with this machine's compilers
    against the emulation runtime of its twin (headers, defines, and the runtime library)."""
    tc = toolchain.load(emu)
    emu_flags = " ".join([f"-I{d}" for d in tc.runtime_include_dirs()] + [f"-D{d}" for d in tc.runtime_defines()])
    return tc, emu_flags


def test_sunway_archive_builds_with_a_stand_in_compiler(tmp_path, model, capsys):
    a = export(tmp_path, model, "sunway", "small.tar")
    b = export(tmp_path, model, "sunway", "again.tar")
    assert a.read_bytes() == b.read_bytes()                  # deterministic, byte for byte
    with tarfile.open(a) as t:
        infos = t.getmembers()
    names = [i.name for i in infos]
    assert names == sorted(names) and all(i.mtime == 0 and i.uid == 0 and i.gid == 0 and not i.uname for i in infos)
    assert {f"small/{n}" for n in ("Makefile", "metadata.json", "small.lock.json", "small.plan.json", "small.h",
                                   "small_host.c", "small_slave.c", "small_para.h", "small_weights.bin",
                                   "small_weights.S", "small_runner.c")} <= set(names)
    d = unpack(a, tmp_path / "x")
    mk = (d / "Makefile").read_text()
    assert re.search(r"^CC = sw5cc -host$", mk, re.M) and re.search(r"^SLAVE_CC = sw5cc -slave$", mk, re.M)
    assert re.search(r"^AR = swar$", mk, re.M) and re.search(r"^LDLIBS = -lm_slave -lm$", mk, re.M)
    meta = json.loads((d / "metadata.json").read_text())
    header = (d / "small.h").read_text()
    assert f"#define SMALL_WORKSPACE_SIZE {meta['workspace_bytes']}" in header
    assert meta["inputs"] == [{"name": "x", "dtype": "float32", "shape": [1, 4, 8, 8]}]
    assert meta["outputs"] == [{"name": "y", "dtype": "float32", "shape": [1, 8, 10, 10]}]
    assert meta["target"]["name"] == "sunway" and meta["target"]["chip"] == "SW26010"
    assert meta["weights_bytes"] == (d / "small_weights.bin").stat().st_size == 8 * 4 * 3 * 3 * 4
    assert meta["versions"]["swbuild"] and json.loads((d / "small.lock.json").read_text())["target"] == "sunway"
    # gcc stands in for sw5cc; the emulated twin's runtime stands in for the chip
    tc, emu = stand_in("sunway-emu")
    steps, lib = build.runtime_steps(tc, tmp_path / "rt")
    build.run_steps(steps, log=lambda s: None)
    r = subprocess.run(["make", "-C", str(d), "CC=gcc", f"SLAVE_CC={sys.executable} -m swbuild.runtime.slavecc gcc",
                        "ASM=gcc", "LINK=gcc", "AR=ar", f"CFLAGS=-O2 {emu} -I.", f"SLAVE_CFLAGS=-O2 {emu} -I.",
                        "LDFLAGS=", f"LDLIBS={lib} -lpthread -lm"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (d / "libsmall.a").is_file()
    check_runner(model, "sunway-emu", d / "small_runner", capsys)


def test_diannao_archive_builds_with_a_stand_in_cncc(tmp_path, model, capsys):
    d = unpack(export(tmp_path, model, "diannao", "small.tar.gz"), tmp_path / "x")
    mk = (d / "Makefile").read_text()
    assert re.search(r"^DEVICE_CC = cncc$", mk, re.M) and "--bang-mlu-arch=mtp_372" in mk
    _, emu = stand_in("diannao-emu")
    r = subprocess.run(["make", "-C", str(d), "CC=g++", "DEVICE_CC=g++ -x c++", "ASM=gcc", "LINK=g++",
                        f"CFLAGS=-O2 -std=c++17 {emu} -I.", f"DEVICE_CFLAGS=-O2 -std=c++17 {emu} -I.",
                        "LDFLAGS=-pthread", "LDLIBS=-lm"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = check_runner(model, "diannao-emu", d / "small_runner", capsys)
    assert doc["emulator"]["violations"] == 0


def test_emulated_archive_carries_its_runtime(tmp_path, model, capsys):
    d = unpack(export(tmp_path, model, "sunway-emu", "small.tgz"), tmp_path / "x")
    assert (d / "runtime" / "include" / "athread.h").is_file() and list((d / "runtime" / "src").glob("*.c"))
    # a plain `make`: gcc, and the slave compiler wrapper of the swbuild on PATH
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    r = subprocess.run(["make", "-C", str(d)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    check_runner(model, "sunway-emu", d / "small_runner", capsys)


def test_export_refuses_a_bad_archive_name(tmp_path, model, capsys):
    assert cli.main(["export", str(model), "--target", "sunway", "-o", str(tmp_path / "small.zip")]) == 2
    assert "must end in .tar, .tar.gz or .tgz" in capsys.readouterr().err


def test_export_refuses_an_mpi_build(tmp_path, model, capsys):
    assert cli.main(["export", str(model), "--target", "sunway", "--set", "core_groups=2", "--set", "batch=2",
                     "-o", str(tmp_path / "small.tar")]) == 2
    err = capsys.readouterr().err
    assert "exporting a build over MPI ranks" in err and not (tmp_path / "small.tar").exists()
