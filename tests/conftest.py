"""Fixtures shared by every test directory."""
import os
import shutil
import subprocess
import sys

import pytest

# Tests never read or write the user's schedule and zoo caches; the caches' own tests give them a temp dir.
os.environ["SWBUILD_SCHEDULE_CACHE"] = "off"
os.environ["SWBUILD_ZOO_CACHE"] = "off"
# pytest-xdist already keeps the cores busy: searches stay in each test process (the parallel
# search's own test sets SWBUILD_JOBS itself).
os.environ.setdefault("SWBUILD_JOBS", "1")
# Generated code runs under the Athread emulator's strictest settings in every test (issue 15):
# DMA lands at its reply wait, every LDM buffer in flight is page-protected, plain loads and
# stores of slave code are checked (built with SWEMU_INSTRUMENT=1).  Tests of other modes set
# their own SWEMU_* variables; a developer's explicit setting wins.
for _k, _v in {"SWEMU_DMA": "wait", "SWEMU_CHECKS": "full", "SWEMU_INSTRUMENT": "1"}.items():
    os.environ.setdefault(_k, _v)


@pytest.fixture
def swbuild_cli():
    """Run `python -m swbuild.cli ARGS` and return the CompletedProcess."""
    def run(*args, env=None, cwd=None):
        return subprocess.run([sys.executable, "-m", "swbuild.cli", *map(str, args)],
                              capture_output=True, text=True, env=env, cwd=cwd)
    return run


@pytest.fixture(scope="session")
def shared_once(tmp_path_factory, request):
    """`shared_once(name, build)`: run `build(dir)` once per test session, not once per
    xdist worker. The first worker builds under a file lock and pickles the result; the
    others wait and load it (the node-test bundle is minutes of compiling: twice is waste)."""
    import fcntl
    import pickle
    root = _shared_root(tmp_path_factory, request.config)

    def get(name, build):
        d = root / f"shared_{name}"
        done = root / f"shared_{name}.pickle"
        with open(root / f"shared_{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if done.exists():
                return pickle.loads(done.read_bytes())
            d.mkdir(exist_ok=True)
            result = build(d)
            tmp = done.with_suffix(".tmp")
            tmp.write_bytes(pickle.dumps(result))
            tmp.replace(done)       # a failed build leaves no result: the next worker retries
            return result
    return get


def _shared_root(tmp_path_factory, config):
    """The run's directory every xdist worker sees (the workers' basetemps are its children)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if hasattr(config, "workerinput") else base


@pytest.fixture(scope="session", autouse=True)
def shared_builds_root(tmp_path_factory, request):
    """shared_builds.py's builds (the emulation runtime library) go to the run's directory."""
    import shared_builds
    d = _shared_root(tmp_path_factory, request.config) / "shared_builds"
    d.mkdir(exist_ok=True)
    shared_builds.ROOT = d
    yield d
    shared_builds.ROOT = None


@pytest.fixture(scope="session")
def shared_check(shared_once):
    """`shared_check(*ARGS)`: `swbuild check ARGS -o DIR` run once per test session
    (shared_once, keyed by ARGS) and returned as (returncode, stdout, stderr, DIR). Tests that
    need the same model built for the same target with the same options (tests/models,
    tests/optimizer: the light models, vgg16 and resnet50 on sunway-emu) take its runner in DIR
    instead of building it again: the build, not the run, is most of a whole-model test's CPU.
    A failed check is a result too, so every test that asks for it fails. DIR stays to the
    end of the run: share only what two tests use."""
    import hashlib

    def get(*args):
        key = hashlib.sha256("\0".join(map(str, args)).encode()).hexdigest()[:16]

        def build(d):
            r = subprocess.run([sys.executable, "-m", "swbuild.cli", "check", *map(str, args), "-o", str(d)],
                               capture_output=True, text=True)
            return r.returncode, r.stdout, r.stderr, d
        return shared_once(f"check_{key}", build)
    return get


# Disk: a whole run compiles thousands of programs (9 to 18 GB of build trees, enough to
# fill CI's disk). tmp_path_retention_policy = "failed" (pyproject) drops each passing test's
# own tmp_path; the hook below drops the directories a module- or class-scoped fixture made
# with tmp_path_factory while it was set up, when that fixture is torn down, unless a test of
# its module failed. What session fixtures make during their setup stays to the end (so a
# session fixture makes its top directory at setup, not lazily in a getter it returns).
_failed_key = pytest.StashKey[bool]()
_session_dirs = set()


def _new_dirs(base, before):
    return {d for d in set(base.iterdir()) - before
            if d.is_dir() and not d.is_symlink() and not d.name.startswith("shared_")}


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    if fixturedef.scope not in ("module", "class", "session"):
        return (yield)
    base = request.config._tmp_path_factory.getbasetemp()
    before = set(base.iterdir())
    if fixturedef.scope == "session":
        try:
            return (yield)
        finally:
            _session_dirs.update(_new_dirs(base, before))
    module = request.node.getparent(pytest.Module)
    made = set()

    def drop():     # registered first, so it runs after the fixture's own teardown
        if module is None or not module.stash.get(_failed_key, False):
            for d in made - _session_dirs:
                shutil.rmtree(d, ignore_errors=True)
    fixturedef.addfinalizer(drop)
    result = yield
    made.update(_new_dirs(base, before))
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    module = item.getparent(pytest.Module)
    if report.failed and module is not None:
        module.stash[_failed_key] = True
    return report
