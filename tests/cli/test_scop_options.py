"""`swbuild scop` spells its options as the other commands do (-t, -o/--out, -Q), and the old
--output still works."""
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GEMM = REPO / "tests" / "scop" / "kernels" / "gemm.c"


def scop(cwd, *args):
    return subprocess.run([sys.executable, "-m", "swbuild.cli", "scop", str(GEMM), "-I", str(GEMM.parent), *args],
                          cwd=cwd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))


def test_scop_takes_the_common_spellings(tmp_path):
    r = scop(tmp_path, "-t", "sunway-emu", "--out", "a", "-Q", "--exe", "gemm")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "a" / "gemm_host.c").is_file() and os.access(tmp_path / "a" / "gemm", os.X_OK)
    assert "CC-HOST" not in r.stderr and "LINK" not in r.stderr       # -Q: no step lines
    r = scop(tmp_path, "--target", "sunway-emu", "--output", "b", "--exe", "gemm")
    assert r.returncode == 0, r.stderr
    assert "CC-HOST gemm_host.c" in r.stderr and "LINK gemm" in r.stderr
    assert (tmp_path / "b" / "gemm_slave.c").read_text() == (tmp_path / "a" / "gemm_slave.c").read_text()
    r = scop(tmp_path, "-t", "sunway-emu", "-o", "c")
    assert r.returncode == 0 and (tmp_path / "c" / "gemm_scop.h").is_file(), r.stderr
