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




def generated_files(gen_dir, stem):
    """What the SCoP printer writes for <stem>.c (backends/sunway/scop_printer.print_files)."""
    d = Path(gen_dir)
    return {"host": d / f"{stem}_host.c", "slave": d / f"{stem}_slave.c", "header": d / f"{stem}_scop.h"}


def program_build(r, tc, gen_dir, out_dir, prefix, runtime_lib=None, overrides=None):
    """How the generated host + slave C and the recipe's other C files become the program, as
    the ModelBuild the SCons tool hands to its own C builders (no library: `compiles` are the
    program's objects). The flags are frontends/scop_cli.exe_steps' own: the target's side
    flags, then the C file's directory, the recipe's include dirs and defines (host side)."""
    gen_dir, out_dir = Path(gen_dir), Path(out_dir)
    src = Path(r.source)
    paths = generated_files(gen_dir, src.stem)
    user = dict(include=[src.parent] + [Path(i) for i in r.scop["include"]], defines=list(r.scop["defines"]))

    def unit(label, side, tool, source, extra):
        p = build._side(tc, side, gen_dir, tc.argv(tool, overrides))
        return build.Compile(label, source=Path(source), obj=out_dir / f"{Path(source).stem}.o", deps=[paths["header"]],
                             tool=p["tool"], flags=p["flags"], include=p["include"] + extra.get("include", []),
                             defines=p["defines"] + extra.get("defines", []))
    compiles = [unit("CC-HOST", "host", "host_cc", paths["host"], user),
                unit("CC-SLAVE", "slave", "slave_cc", paths["slave"], {})]
    compiles += [unit("CC-HOST", "host", "host_cc", o, user) for o in r.scop["sources"]]
    return build.ModelBuild(compiles, None, tc.argv("ar", overrides), build.ar_flags(tc), None,
                            tc.argv("link", overrides), list(tc.flags.get("link", [])), list(tc.flags.get("libs", [])),
                            out_dir / prefix, Path(runtime_lib) if runtime_lib else None)


def report(r, tc, runner):
    """Run the program once; the emulator's numbers per kernel (the `swbuild report` of a
    SCoP recipe: there is no plan of predicted numbers to set them against)."""
    if not tc.emulated:
        from ..support.errors import SwbuildError
        raise SwbuildError(f"target {tc.name} is a real chip; report on its emulated twin")
    with tempfile.TemporaryDirectory(prefix="swscop-") as tmp:
        stats = Path(tmp) / "stats.json"
        got = subprocess.run([str(runner)], capture_output=True, text=True, env=dict(os.environ, SWEMU_STATS=str(stats)))
        if got.returncode:
            from ..support.errors import SwbuildError
            raise SwbuildError(f"{runner} exited with status {got.returncode}"
                               + (" (emulated hardware limit violated)" if got.returncode == LDM_EXIT else "")
                               + f": {got.stderr.strip()[-500:]}")
        st = json.loads(stats.read_text())
    kernels = []
    for k in st["kernels"]:
        get, put = k["dma"]["get"], k["dma"]["put"]
        kernels.append({"name": k["name"], "spawns": k["spawns"], "dma_bytes": get["bytes"] + put["bytes"],
                        "dma_ops": get["ops"] + put["ops"], "dma_get_bytes": get["bytes"], "dma_put_bytes": put["bytes"],
                        "ldm_peak_bytes": k["ldm_peak_bytes"], "write_conflicts": k["write_conflicts"],
                        "races": k.get("races", 0)})
    tot = lambda key: sum(k[key] for k in kernels)  # noqa: E731
    return {"model": r.name, "target": tc.name, "source": "scop", "kernels": kernels,
            "dma_bytes": tot("dma_bytes"), "dma_ops": tot("dma_ops"), "spawns": tot("spawns"),
            "ldm_peak_bytes": max((k["ldm_peak_bytes"] for k in kernels), default=0),
            "ldm_budget_bytes": st.get("ldm_bytes"), "write_conflicts": tot("write_conflicts"), "races": tot("races")}


def report_lines(rep):
    """The report of a SCoP program as the table `swbuild report` prints."""
    from ..backends.table import mb, table
    rows = [[k["name"], str(k["spawns"]), mb(k["dma_bytes"]), str(k["dma_ops"]),
             f"{k['dma_bytes'] / k['dma_ops']:.0f}" if k["dma_ops"] else "-", str(k["ldm_peak_bytes"]),
             str(k["write_conflicts"])] for k in rep["kernels"]]
    n = len(rep["kernels"])
    total = ["total", str(rep["spawns"]), mb(rep["dma_bytes"]), str(rep["dma_ops"]),
             f"{rep['dma_bytes'] / rep['dma_ops']:.0f}" if rep["dma_ops"] else "-", str(rep["ldm_peak_bytes"]),
             str(rep["write_conflicts"])]
    head = ["kernel", "spawns", "DMA MB", "DMA ops", "mean DMA B", "LDM B", "conflicts"]
    return ([f"{rep['model']} on {rep['target']}: {n} kernel{'s' if n != 1 else ''} from #pragma scop regions "
             f"(measured by the emulator; LDM budget {rep['ldm_budget_bytes']} B)"]
            + table(head, rows, total))
