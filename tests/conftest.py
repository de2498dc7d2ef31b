"""Fixtures shared by every test directory."""
import os
import subprocess
import sys

import pytest

# Tests never read or write the user's schedule cache; the cache's own tests give it a temp dir.
os.environ["SWBUILD_SCHEDULE_CACHE"] = "off"
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
