"""The swbuild command loads numpy with one OpenBLAS thread (swbuild/support/blas.py), unless the user
chose a count, and leaves the environment of the programs it starts as it found it."""
import ast
import os
import subprocess
import sys

import pytest

PROBE = r"""
import os, sys
from swbuild.support.blas import load_numpy_single_threaded
took = load_numpy_single_threaded()
import numpy
threads = len(os.listdir("/proc/self/task"))
print(took, repr(os.environ.get("OPENBLAS_NUM_THREADS")), threads)
"""

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")


def probe(**env):
    base = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", PROBE], env=dict(base, **env), capture_output=True, text=True,
                         check=True).stdout.split()
    return out[0] == "True", ast.literal_eval(out[1]), int(out[2])


def test_one_thread_and_the_environment_restored():
    took, var, threads = probe()
    assert took and var is None
    assert threads == 1                     # no OpenBLAS pool beside the main thread


def test_the_users_count_wins():
    took, var, threads = probe(OPENBLAS_NUM_THREADS="2")
    assert not took and var == "2"
    assert threads == min(2, len(os.sched_getaffinity(0)))    # OpenBLAS: at most one per CPU


def test_a_variable_set_empty_is_left_alone():
    took, var, _ = probe(OPENBLAS_NUM_THREADS="")
    assert not took and var == ""


def test_the_command_line_asks_for_it():
    src = open(os.path.join(os.path.dirname(__file__), "..", "..", "swbuild", "cli.py")).read()
    main = src[src.index("def main("):]
    assert main.index("load_numpy_single_threaded()") < main.index("parser()")    # before numpy is imported
