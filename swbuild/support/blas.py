"""One OpenBLAS thread for the swbuild command.

numpy's OpenBLAS starts a thread per core when numpy is imported, and those threads spin
before they sleep: about 0.1 s of CPU per process on two cores, a tenth of a cold ResNet-50
compile. swbuild makes no BLAS-sized calls (its arrays are tile-search tables; models run in
onnxruntime or the emulators), so the command asks for one thread unless the user set a
count. OpenBLAS reads the request from the environment once, when numpy loads it; the
variable is removed again afterwards, so the programs swbuild starts see the user's
environment.
"""
from __future__ import annotations

import os
import sys

VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")      # OpenBLAS reads the first one set


def load_numpy_single_threaded() -> bool:
    """Import numpy with one BLAS thread, unless numpy is loaded or the user chose a count;
    True when this set the count."""
    if "numpy" in sys.modules or any(v in os.environ for v in VARS):
        return False
    os.environ[VARS[0]] = "1"
    try:
        import numpy  # noqa: F401 -- loads OpenBLAS, which reads the variable now
    finally:
        del os.environ[VARS[0]]
    return True
