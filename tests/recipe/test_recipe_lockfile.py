"""Lock files: deterministic bytes, no absolute paths, atomic writes."""
import hashlib
import json
import os
import shutil

from swbuild.config import toolchain
from swbuild.config.lockfile import read_lock, write_lock
from swbuild.config.recipe import load_recipe


def _build_dir(root, sha):
    (root / "recipes").mkdir(parents=True, exist_ok=True)
    rec = root / "recipes" / "tiny.yaml"
    rec.write_text(f"model: tiny\nsource: {{onnx: ../models/tiny.onnx, sha256: {sha}}}\n")
    out = root / "build" / "sunway-emu" / "tiny"
    out.mkdir(parents=True, exist_ok=True)
    (out / "tiny_host.c").write_text("int tiny_run(void) { return 0; }\n")
    (out / "tiny_weights.bin").write_bytes(bytes(range(256)))
    return rec, out


def _write(root, rec, out):
    tc = toolchain.load("sunway-emu")
    return write_lock(out / "tiny.lock.json", recipe_normalized=load_recipe(rec).normalized(),
                      inputs={"recipe": rec, "model": root / "models" / "tiny.onnx"}, toolchain=tc,
                      outputs={"host": out / "tiny_host.c", "weights": out / "tiny_weights.bin"},
                      swbuild_version="0.1.0")


def test_lock_is_byte_identical_across_directories(project, tmp_path):
    d, sha = project
    rec, out = _build_dir(d, sha)
    a = _write(d, rec, out).read_bytes()
    other = tmp_path / "moved" / "elsewhere"
    shutil.copytree(d, other)
    (other / "build" / "sunway-emu" / "tiny" / "tiny.lock.json").unlink()
    b = _write(other, other / "recipes" / "tiny.yaml", other / "build" / "sunway-emu" / "tiny").read_bytes()
    assert a == b
    assert _write(d, rec, out).read_bytes() == a          # and across runs
    text = a.decode()
    assert str(tmp_path) not in text and text.endswith("}\n") and '\n  "inputs"' in text


def test_lock_contents(project):
    d, sha = project
    rec, out = _build_dir(d, sha)
    lock = read_lock(_write(d, rec, out))
    tc = toolchain.load("sunway-emu")
    assert lock["target"] == "sunway-emu" and lock["toolchain"] == {"name": "sunway-emu", "sha256": tc.sha256}
    assert lock["swbuild_version"] == "0.1.0"
    assert lock["inputs"] == {"model": sha, "recipe": hashlib.sha256(rec.read_bytes()).hexdigest()}
    assert lock["outputs"] == {"tiny_host.c": hashlib.sha256(b"int tiny_run(void) { return 0; }\n").hexdigest(),
                               "tiny_weights.bin": hashlib.sha256(bytes(range(256))).hexdigest()}
    assert lock["recipe"]["source"] == {"onnx": "../models/tiny.onnx", "sha256": sha}
    text = (out / "tiny.lock.json").read_text()
    assert text == json.dumps(lock, sort_keys=True, indent=2) + "\n"
    assert set(lock) == {"lock_version", "swbuild_version", "target", "toolchain", "recipe", "inputs", "outputs"}


def test_lock_write_is_atomic_and_readable(project):
    d, sha = project
    rec, out = _build_dir(d, sha)
    p = _write(d, rec, out)
    assert sorted(x.name for x in out.iterdir()) == ["tiny.lock.json", "tiny_host.c", "tiny_weights.bin"]
    assert oct(os.stat(p).st_mode & 0o777) == oct(0o644)
