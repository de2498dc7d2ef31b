"""Fixtures shared by every test directory."""
import os
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
    base = tmp_path_factory.getbasetemp()
    root = base.parent if hasattr(request.config, "workerinput") else base   # xdist worker

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
