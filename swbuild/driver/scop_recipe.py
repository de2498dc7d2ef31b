"""Recipes whose source is a C file with #pragma scop regions.

Build: the SCoP frontend generates host + slave C, which are compiled with the target's
compilers together with the recipe's other C files into one program. Check: the same C
files compiled unchanged by the host compiler form the serial reference; both programs
run and every number they print must agree within the recipe's rtol/atol (a reduction
whose order changed may differ in the last bits).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from . import build
from .check import LDM_EXIT


NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)", re.I)


def build_program(r, tc, out_dir, verbose=False, log=print):
    """Generate and build the recipe's program; returns its path."""
    from .scop import exe_steps, generate
    from ..support.names import c_prefix
    r.verify_source()
    src = Path(r.source)
    res = generate(src, tc, out_dir, r.scop["include"], r.scop["defines"])
    tc.check_compilers()
    steps, exe = exe_steps(tc, res["paths"], r.scop["sources"], out_dir, c_prefix(r.name),
                           r.scop["include"], r.scop["defines"], src.parent)
    build.run_steps(steps, verbose=verbose, log=log)
    return exe


def build_reference(r, out_dir, cc="gcc"):
    """The serial program: the recipe's C files compiled unchanged for this machine."""
    exe = Path(out_dir) / "serial_reference"
    argv = [cc, "-O2", "-std=gnu11", f"-I{Path(r.source).parent}"] + [f"-I{i}" for i in r.scop["include"]] \
        + [f"-D{d}" for d in r.scop["defines"]] + [str(Path(r.source))] + [str(s) for s in r.scop["sources"]] \
        + ["-lm", "-o", str(exe)]
    build.run_steps([build.Step(f"CC-SERIAL {exe.name}", argv, [], [exe])], log=lambda s: None)
    return exe


def numbers(text):
    return np.array([float(x) for x in NUMBER.findall(text)], dtype=np.float64)


def check(r, tc, runner, out_dir):
    """Run the program and the serial reference; the check document (status pass/fail)."""
    ref_exe = build_reference(r, out_dir)
    with tempfile.TemporaryDirectory(prefix="swscop-") as tmp:
        stats = Path(tmp) / "stats.json"
        env = dict(os.environ, SWEMU_STATS=str(stats))
        got = subprocess.run([str(runner)], capture_output=True, text=True, env=env)
        want = subprocess.run([str(ref_exe)], capture_output=True, text=True)
        st = json.loads(stats.read_text()) if stats.exists() else {"kernels": []}
    doc = {"model": r.name, "target": tc.name, "rtol": r.check["rtol"], "atol": r.check["atol"]}
    if got.returncode or want.returncode:
        which = "program" if got.returncode else "serial reference"
        code = got.returncode or want.returncode
        doc.update(status="fail", reason=f"{which} exited with status {code}"
                   + (" (emulated hardware limit violated)" if code == LDM_EXIT else ""),
                   stderr=(got.stderr or want.stderr).strip().splitlines()[-5:], max_abs_err=None, max_rel_err=None)
        return doc
    a, b = numbers(got.stdout), numbers(want.stdout)
    conflicts = sum(int(k.get("write_conflicts", 0)) for k in st["kernels"])
    peak = max((int(k.get("ldm_peak_bytes", 0)) for k in st["kernels"]), default=0)
    doc["emulator"] = {"write_conflicts": conflicts, "ldm_peak_bytes": peak, "kernels": len(st["kernels"])}
    if a.shape != b.shape:
        doc.update(status="fail", reason=f"the program printed {a.size} numbers, the serial reference {b.size}",
                   max_abs_err=None, max_rel_err=None)
        return doc
    d = np.abs(a - b)
    big = np.abs(b) > r.check["atol"]
    doc["max_abs_err"] = float(d.max(initial=0.0))
    doc["max_rel_err"] = float((d[big] / np.abs(b[big])).max(initial=0.0))
    doc["numbers_compared"] = int(a.size)
    ok = bool(np.all(np.isclose(a, b, rtol=r.check["rtol"], atol=r.check["atol"], equal_nan=True)))
    reasons = ([] if ok else ["printed numbers differ from the serial program beyond rtol/atol"]) + \
        ([f"{conflicts} write conflicts between CPEs"] if conflicts else [])
    doc["status"] = "fail" if reasons else "pass"
    if reasons:
        doc["reason"] = "; ".join(reasons)
    return doc


