"""The CI image (ci/Dockerfile) really builds a user's repository with the swbuild installed
in it, and what it builds is byte-identical to a host build of the same recipe.

Needs a reachable Docker daemon (skipped otherwise; ci/start-dockerd.sh starts one as root).
There is no registry for base images here: the setup makes `debian:bookworm` with
ci/make-base-image.sh (debootstrap + docker import) when the daemon lacks it.

A "user's repository" here is SConstruct + recipes/ (+ models/), without swbuild/ and
toolchains/: the container can only use the package and the targets installed in the image.

Environment:
  SWBUILD_TEST_IMAGE   tag to build and test (default swbuild-ci:pytest)
  SWBUILD_TEST_MODEL   zoo model of the big check (default vgg16); the target is sunway-emu
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CI = REPO / "ci"
IMAGE = os.environ.get("SWBUILD_TEST_IMAGE", "swbuild-ci:pytest")
TARGET = "sunway-emu"
MODEL = os.environ.get("SWBUILD_TEST_MODEL", "vgg16")

_PENDING: list = []   # (stage, seconds) not yet attached to a test report


@pytest.fixture(autouse=True)
def _timings(request):
    """Attach the stages timed during this test (and its fixtures) to its report; the
    conftest prints them in a "container stage timings" section."""
    yield
    while _PENDING:
        request.node.user_properties.append(("container-timing", _PENDING.pop(0)))


def _run(argv, *, timeout, cwd=None, env=None, what=None):
    t0 = time.monotonic()
    p = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    if what:
        seconds = round(time.monotonic() - t0, 1)
        _PENDING.append([what, seconds])
        print(f"[container] {what}: {seconds} s")
    return p


def _tail(text, n=60):
    return "\n".join(text.splitlines()[-n:])


@pytest.fixture(scope="module")
def docker():
    exe = shutil.which("docker")
    if exe is None:
        pytest.skip("no Docker daemon reachable: no `docker` client on PATH "
                    "(ci/start-dockerd.sh installs docker.io and starts dockerd as root)")
    try:
        p = subprocess.run([exe, "info", "--format", "{{.ServerVersion}} {{.Driver}}"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.skip("no Docker daemon reachable: `docker info` timed out after 30 s")
    if p.returncode != 0:
        last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else f"exit {p.returncode}"
        pytest.skip(f"no Docker daemon reachable: `docker info` failed: {last} "
                    "(ci/start-dockerd.sh starts one as root)")
    print(f"[container] docker daemon {p.stdout.strip()}")
    return exe


@pytest.fixture(scope="module")
def base_image(docker):
    name = "debian:bookworm"
    if subprocess.run([docker, "image", "inspect", name], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode == 0:
        return name
    if os.geteuid() != 0 or shutil.which("debootstrap") is None:
        pytest.skip(f"{name} is not in the Docker daemon and cannot be made here: "
                    "ci/make-base-image.sh needs root and debootstrap")
    p = _run(["sh", str(CI / "make-base-image.sh")], timeout=1800, what="debootstrap + docker import")
    assert p.returncode == 0, f"ci/make-base-image.sh failed:\n{_tail(p.stdout)}"
    return name


@pytest.fixture(scope="module")
def image(docker, base_image):
    p = _run(["sh", str(CI / "build-image.sh"), "-t", IMAGE], timeout=3600, what="image build")
    assert p.returncode == 0, f"ci/build-image.sh failed:\n{_tail(p.stdout)}"
    return IMAGE


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A module-wide scratch directory, removed at the end (VGG-16 build trees are GBs)."""
    d = tmp_path_factory.mktemp("container")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _zoo_repo(dest: Path) -> Path:
    """This repository's SConstruct and recipes, as a user would copy them."""
    if not (REPO / "SConstruct").is_file():
        pytest.fail("no SConstruct at the top of the repository")
    dest.mkdir(parents=True)
    shutil.copy2(REPO / "SConstruct", dest / "SConstruct")
    shutil.copytree(REPO / "recipes", dest / "recipes")
    return dest


def _tiny_onnx() -> bytes:
    """A small CNN (Conv, Relu, MaxPool, Flatten, Gemm) with seeded weights, as ONNX bytes."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)

    def tensor(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["data", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p1"], ["f1"]),
        helper.make_node("Gemm", ["f1", "w2", "b2"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "tiny",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        [tensor("w1", (8, 3, 3, 3), 0.3), tensor("b1", (8,), 0.1),
         tensor("w2", (10, 512), 0.05), tensor("b2", (10,), 0.1)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="swbuild-ci-test")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _onnx_repo(dest: Path) -> Path:
    """A user's repository with its own ONNX model: SConstruct, recipes/tiny.yaml, models/tiny.onnx."""
    data = _tiny_onnx()
    (dest / "models").mkdir(parents=True)
    (dest / "recipes").mkdir()
    shutil.copy2(REPO / "SConstruct", dest / "SConstruct")
    (dest / "models" / "tiny.onnx").write_bytes(data)
    (dest / "recipes" / "tiny.yaml").write_text(
        "model: tiny\n"
        "source:\n"
        "  onnx: ../models/tiny.onnx\n"
        f'  sha256: "{hashlib.sha256(data).hexdigest()}"\n'
        f"targets: [{TARGET}]\n"
        "check: {rtol: 1.0e-3, atol: 1.0e-4, seed: 0}\n")
    return dest


def _host_build(repo: Path, model: str) -> Path:
    """Build on the host with this checkout's sources (what the image was built from)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    p = _run([sys.executable, "-m", "SCons", f"target={TARGET}", f"model={model}"],
             cwd=repo, env=env, timeout=3600, what=f"host build ({model})")
    assert p.returncode == 0, f"host scons failed:\n{_tail(p.stdout)}"
    return _lock_path(repo / "build" / TARGET / model, model)


def _lock_path(directory: Path, model: str) -> Path:
    path = directory / f"{model}.lock.json"
    assert path.is_file(), f"{path} was not written"
    return path


def _outputs(lock: Path) -> dict:
    outputs = json.loads(lock.read_text(encoding="utf-8"))["outputs"]
    assert outputs, f"{lock} lists no outputs"
    return outputs


def _assert_same_outputs(container_lock: Path, host_lock: Path):
    a, b = _outputs(container_lock), _outputs(host_lock)
    differ = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    assert not differ, f"outputs differ between the container and the host build: {differ}"


def test_build_recipe_exports_artifacts(docker, image, scratch):
    """ci/build-recipe.sh on a user's own ONNX model: check, report, artifacts, same bytes."""
    host_lock = _host_build(_onnx_repo(scratch / "host-onnx"), "tiny")

    repo = _onnx_repo(scratch / "onnx")
    out = scratch / "artifacts"
    p = _run(["sh", str(CI / "build-recipe.sh"), "-i", image, "-C", str(repo), "-o", str(out),
              TARGET, "tiny"], timeout=1800, what="build-recipe.sh (tiny: build, check, report)")
    assert p.returncode == 0, f"ci/build-recipe.sh failed:\n{_tail(p.stdout)}"
    names = {f.name for f in out.iterdir()}
    for expected in ("tiny_host.c", "tiny_slave.c", "tiny.h", "tiny.lock.json", "tiny_runner"):
        assert expected in names, f"{expected} not exported: {sorted(names)}"
    # libtiny.a is a thin archive on an emulated target: the objects it names come along
    assert {"libtiny.a", "tiny_host.o", "tiny_slave.o", "tiny_weights.o"} <= names, sorted(names)
    check = json.loads((out / "tiny.check.json").read_text(encoding="utf-8"))
    assert check["status"] == "pass", check
    report = json.loads((out / "tiny.report.json").read_text(encoding="utf-8"))
    assert report.get("model") == "tiny" and report.get("kernels"), sorted(report)
    assert not (repo / "build").exists(), "build-recipe.sh wrote into the repository"
    _assert_same_outputs(out / "tiny.lock.json", host_lock)


def test_site_toolchain_build_arg(docker, image, tmp_path):
    """A site's cross compiler goes to /opt/<name> and its path into SW5CC."""
    fake = tmp_path / "sw5cc"
    (fake / "bin").mkdir(parents=True)
    cc = fake / "bin" / "sw5cc"
    cc.write_text("#!/bin/sh\necho fake-sw5cc \"$@\"\n")
    cc.chmod(0o755)
    tag = f"{IMAGE}-site"
    p = _run(["sh", str(CI / "build-image.sh"), "-t", tag, "--site-toolchain", str(fake),
              "--build-arg", "SW5CC=/opt/sw5cc/bin/sw5cc"], timeout=3600,
             what="image build with a site toolchain")
    try:
        assert p.returncode == 0, f"ci/build-image.sh --site-toolchain failed:\n{_tail(p.stdout)}"
        p = _run([docker, "run", "--rm", tag, "sh", "-c", 'echo "SW5CC=$SW5CC"; "$SW5CC" -v'], timeout=300)
        assert p.returncode == 0, p.stdout
        assert "SW5CC=/opt/sw5cc/bin/sw5cc" in p.stdout and "fake-sw5cc -v" in p.stdout, p.stdout
    finally:
        subprocess.run([docker, "image", "rm", tag], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_test_suite_collects_in_container(docker, image):
    """ci/run-tests.sh: the suite imports against the installed swbuild inside the image."""
    p = _run(["sh", str(CI / "run-tests.sh"), "-i", image, "--collect-only", "-q", "-m", "not docker"],
             timeout=900, what="run-tests.sh --collect-only")
    errors = "\n".join(line for line in p.stdout.splitlines() if "::" not in line)
    assert p.returncode == 0, f"collection failed in the container:\n{_tail(errors)}"
    assert "run-tests: swbuild from /opt/swbuild/" in p.stdout, p.stdout[:2000]


def test_container_check_matches_host_build(docker, image, scratch):
    """The documented command: the repository mounted at /src, run as the invoking user."""
    host_lock = _host_build(_zoo_repo(scratch / "host-zoo"), MODEL)

    repo = _zoo_repo(scratch / "zoo")
    uid, gid = os.getuid(), os.getgid()
    p = _run([docker, "run", "--rm", "--user", f"{uid}:{gid}", "-v", f"{repo}:/src", image,
              "sh", "-c",
              "cd /src && python3 -c 'import swbuild; print(\"swbuild from\", swbuild.__file__)' && "
              f"scons target={TARGET} model={MODEL} check"],
             timeout=5400, what=f"container check ({MODEL})")
    assert p.returncode == 0, f"scons ... check failed in the container:\n{_tail(p.stdout)}"
    assert "swbuild from /opt/swbuild/" in p.stdout, p.stdout[:2000]

    built = repo / "build" / TARGET / MODEL
    owners = {f.stat().st_uid for f in built.rglob("*")}
    assert owners == {uid}, f"files under {built} are owned by {owners}, expected {uid}"
    _assert_same_outputs(_lock_path(built, MODEL), host_lock)
