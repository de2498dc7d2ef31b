"""Fixtures shared by every test directory."""
import subprocess
import sys

import pytest


@pytest.fixture
def swbuild_cli():
    """Run `python -m swbuild.cli ARGS` and return the CompletedProcess."""
    def run(*args, env=None, cwd=None):
        return subprocess.run([sys.executable, "-m", "swbuild.cli", *map(str, args)],
                              capture_output=True, text=True, env=env, cwd=cwd)
    return run
