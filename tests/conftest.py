"""Fixtures shared by every test directory."""
import os
import subprocess
import sys

import pytest

# Tests never read or write the user's schedule and zoo caches; the caches' own tests give them a temp dir.
os.environ["SWBUILD_SCHEDULE_CACHE"] = "off"
os.environ["SWBUILD_ZOO_CACHE"] = "off"


@pytest.fixture
def swbuild_cli():
    """Run `python -m swbuild.cli ARGS` and return the CompletedProcess."""
    def run(*args, env=None, cwd=None):
        return subprocess.run([sys.executable, "-m", "swbuild.cli", *map(str, args)],
                              capture_output=True, text=True, env=env, cwd=cwd)
    return run
