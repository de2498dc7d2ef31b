"""The CLI builds through SCons (swbuild/scons/driver.py): an up-to-date build is reused,
the runtime lands in build/<target>/_runtime, option sets get their own directories, and
`weights: file` keeps the weights out of every object, archive and program."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from scons_project import REPO, write_tiny_onnx


def cli(cwd, *args, env=None):
    e = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    return subprocess.run([sys.executable, "-m", "swbuild.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=e, timeout=600)


@pytest.fixture(scope="module")
def proj(tmp_path_factory):
    p = tmp_path_factory.mktemp("cli")
    write_tiny_onnx(p / "tiny.onnx")
    return p


def test_check_reuses_an_up_to_date_build(proj):
    r = cli(proj, "check", "tiny.onnx", "--target", "sunway-emu")
    assert r.returncode == 0, r.stderr
    assert "SWGEN tiny -> build/sunway-emu/tiny" in r.stderr and "LINK tiny_runner" in r.stderr
    assert json.loads(r.stdout.splitlines()[-1])["status"] == "pass"
    assert (proj / "build/sunway-emu/_runtime/libswemu.a").is_file()       # as scons puts it
    assert not (proj / "build/sunway-emu/tiny/_runtime").exists()
    r = cli(proj, "check", "tiny.onnx", "--target", "sunway-emu")
    assert r.returncode == 0 and "SWGEN" not in r.stderr and "CC-" not in r.stderr, r.stderr
    assert "is up to date" in r.stderr
    # an option that changes the output: a directory of its own, the default one untouched
    r = cli(proj, "compile", "tiny.onnx", "--target", "sunway-emu", "--set", "batch=2", "--exe", "-Q")
    assert r.returncode == 0, r.stderr
    assert (proj / "build/sunway-emu/tiny-batch2/tiny_runner").is_file()
    plan = json.loads((proj / "build/sunway-emu/tiny/tiny.plan.json").read_text())
    assert plan["inputs"][0]["shape"][0] == 1


@pytest.mark.parametrize("target", ["sunway-emu", "diannao-emu"])
def test_new_weights_of_the_same_size_relink_the_runner(proj, target):
    # Issue 37 (vit_b_16): the thin archive names its members and their sizes only, so
    # weights of the same size leave lib<prefix>.a byte-identical; the runner must still be
    # relinked, or it runs the old weights.
    model, out = proj / f"relink-{target}.onnx", proj / f"relink-{target}"
    write_tiny_onnx(model)
    r = cli(proj, "check", str(model), "--target", target, "-o", str(out), "--name", "relink")
    assert r.returncode == 0, r.stderr
    write_tiny_onnx(model, w=-np.arange(108, dtype=np.float32).reshape(4, 3, 3, 3) / 50)
    r = cli(proj, "check", str(model), "--target", target, "-o", str(out), "--name", "relink")
    assert "LINK relink_runner" in r.stderr, r.stderr
    doc = json.loads(r.stdout.splitlines()[-1])
    assert r.returncode == 0 and doc["status"] == "pass" and doc["compared"] > 0, doc


def test_generator_error_reaches_the_cli_once(proj):
    bad = proj / "broken.onnx"
    bad.write_bytes(b"not an onnx file")
    r = cli(proj, "check", "broken.onnx", "--target", "sunway-emu", "-o", "out-broken")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    doc = json.loads(r.stdout.splitlines()[-1])
    assert doc["status"] == "error" and "broken.onnx" in doc["reason"] and "scons" not in doc["reason"], doc
    # SCons' signatures of a relative -o live in it, not beside the driver's SConstruct
    assert (proj / "out-broken" / ".sconsign.dblite").is_file()


@pytest.mark.parametrize("target", ["sunway-emu", "diannao-emu"])
def test_weights_file(proj, target):
    out = proj / f"wf-{target}"
    r = cli(proj, "check", "tiny.onnx", "--target", target, "--set", "weights=file", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[-1])["status"] == "pass"
    blob = (out / "tiny_weights.bin").read_bytes()
    assert len(blob) == 432           # 4x3x3x3 float32 (the weights object had them before)
    head = (out / "tiny.h").read_text()
    assert "#define TINY_WEIGHTS_BYTES 432u" in head and '#define TINY_WEIGHTS_FILE "tiny_weights.bin"' in head
    nm = subprocess.run(["nm", str(out / "tiny_weights.o")], capture_output=True, text=True).stdout
    assert " B tiny_weights" in nm                            # .bss: no bytes in the object
    for f in ("tiny_weights.o", "libtiny.a", "tiny_runner"):
        assert blob[16:80] not in (out / f).read_bytes(), f
    # the runner reads the file next to itself, or $TINY_WEIGHTS; a wrong file is refused
    x = np.ones((1, 3, 8, 8), np.float32)
    (out / "in.bin").write_bytes(x.tobytes())
    run = lambda env=None: subprocess.run([str(out / "tiny_runner"), str(out / "in.bin"), str(out / "o.bin")],  # noqa: E731
                                          capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    assert run().returncode == 0
    good = np.fromfile(out / "o.bin", np.float32)
    (out / "short.bin").write_bytes(blob[:100])
    r = run({"TINY_WEIGHTS": str(out / "short.bin")})
    assert r.returncode != 0 and "expected 432 bytes of weights, the file has fewer" in r.stderr
    os.rename(out / "tiny_weights.bin", out / "moved.bin")
    r = run()
    assert r.returncode != 0 and "cannot open the weights file" in r.stderr
    assert run({"TINY_WEIGHTS": str(out / "moved.bin")}).returncode == 0
    assert np.array_equal(np.fromfile(out / "o.bin", np.float32), good)


def test_progress_lines_only_when_asked(proj):
    import re
    r = cli(proj, "compile", "tiny.onnx", "--target", "sunway-emu", "-o", "out-progress", env={"SWBUILD_PROGRESS": "1"})
    assert r.returncode == 0, r.stderr
    assert re.search(r"^\[\d+/(\d+)\] tiny: choose_tiles \(1 kernels\)$", r.stderr, re.M), r.stderr
    assert re.search(r"^\[1/1\] schedule: tiny_k0_conv$", r.stderr, re.M), r.stderr
    r = cli(proj, "compile", "tiny.onnx", "--target", "sunway-emu", "-o", "out-progress")   # not a terminal: quiet
    assert r.returncode == 0 and "[1/" not in r.stderr and "\r" not in r.stderr, r.stderr
