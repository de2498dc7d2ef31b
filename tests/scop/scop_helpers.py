"""Shared helpers for the SCoP tests: build a kernel file the way `swbuild scop --exe` does,
run it under the emulator next to the plain serial program, compare the printed numbers.
(A module with a unique name: every test directory has a conftest.py, so importing from
`conftest` would be ambiguous in a whole-suite run.)

Generation runs in the test process (isl is not thread-safe); compiling and running use at
most two processes at a time (the CI machines have two cores).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KERNELS_DIR = Path(__file__).resolve().parent / "kernels"
KERNELS = ["gemm", "2mm", "3mm", "atax", "bicg", "mvt", "gesummv", "gemver", "syrk", "syr2k",
           "symm", "trmm", "doitgen", "jacobi-2d"]
WORKERS = 2

# Size sets: the files' own defaults are not multiples of 32; these cover the rest.
SIZES = {
    "mult64": dict(NI=64, NJ=128, NK=64, NL=128, NM=64, N=128, M=64, NR=8, NQ=8, NP=64, TSTEPS=3),
    "mult32": dict(NI=96, NJ=32, NK=96, NL=160, NM=32, N=96, M=160, NR=4, NQ=6, NP=96, TSTEPS=3),
    "odd": dict(NI=37, NJ=65, NK=129, NL=33, NM=47, N=67, M=41, NR=5, NQ=7, NP=29, TSTEPS=3),
}

sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

from swbuild.driver import build
from swbuild.config import toolchain  # noqa: E402
from swbuild.driver import scop as scop_cli  # noqa: E402

_NUM = re.compile(r"[-+]?\d\.\d+e[-+]\d+")


@dataclass
class Result:
    name: str
    defines: list
    ok: bool = False
    message: str = ""
    gen_seconds: float = 0.0
    stats: dict = field(default_factory=dict)
    plans: list = field(default_factory=list)
    out_dir: Path = None


def numbers(text):
    return [float(x) for x in _NUM.findall(text)]


def same_numbers(a, b, rel=1e-6):
    if len(a) != len(b) or not a:
        return False
    return all(abs(x - y) <= rel * max(abs(x), abs(y)) + 1e-12 for x, y in zip(a, b))


def _finish(res, steps, exe, src, includes=(str(KERNELS_DIR),), others=()):
    try:
        build.run_steps(steps, log=lambda m: None)
        stats_path = res.out_dir / "stats.json"
        env = dict(os.environ, SWEMU_STATS=str(stats_path), SWEMU_TIMEOUT="120")
        par = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=300)
        if par.returncode != 0:
            res.message = f"run failed ({par.returncode}): {par.stderr[-1500:]}"
            return res
        ser_exe = res.out_dir / "serial"
        subprocess.run(["gcc", "-O2"] + [f"-I{i}" for i in includes] + [f"-D{d}" for d in res.defines]
                       + [str(src)] + [str(o) for o in others] + ["-o", str(ser_exe), "-lm"],
                       check=True, capture_output=True)
        ser = subprocess.run([str(ser_exe)], capture_output=True, text=True, timeout=300)
        res.stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
        a, b = numbers(ser.stdout), numbers(par.stdout)
        res.ok = same_numbers(a, b)
        if not res.ok:
            bad = next(((x, y) for x, y in zip(a, b) if not same_numbers([x], [y])), (len(a), len(b)))
            res.message = f"results differ from the serial program: {bad}"
    except Exception as e:          # reported by the test with the kernel's name
        res.message = f"{type(e).__name__}: {e}"
    return res


def check_results(results, tc_name="sunway-emu"):
    """Every result equal to serial, LDM within the budget, no write conflicts."""
    tc = toolchain.load(tc_name)
    problems = []
    for r in results:
        tag = f"{r.name} {' '.join(r.defines)}"
        if not r.ok:
            problems.append(f"{tag}: {r.message}")
            continue
        for k in r.stats.get("kernels", []):
            if k["write_conflicts"]:
                problems.append(f"{tag}: kernel {k['name']}: {k['write_conflicts']} write conflicts")
            if k["ldm_peak_bytes"] > tc.ldm_budget:
                problems.append(f"{tag}: kernel {k['name']}: LDM peak {k['ldm_peak_bytes']} > {tc.ldm_budget}")
    assert not problems, "\n".join(problems)
