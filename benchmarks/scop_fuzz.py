"""The long run of the SCoP differential fuzzer (the CI slice is tests/scop/test_scop_fuzz.py).

    python benchmarks/scop_fuzz.py [--seeds 100] [--first 1000] [--cases 25] [--target sunway-emu]

Each seed is one program of --cases random regions (tests/scop/scop_fuzzgen.py), generated
by `swbuild scop --serial-fallback` in-process, compiled and run under the emulator, and
compiled by gcc and run serially. A seed passes when the outputs are equal (1e-9 relative),
every refused region names file:line, and every planted defect is refused. Prints one JSON
document: cases, regions transformed / refused (by reason), failures with their seeds.
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "scop"))

from scop_fuzzgen import program  # noqa: E402
from scop_helpers import numbers, same_numbers  # noqa: E402  (also puts swbuild on the path)

from swbuild.driver import build
from swbuild.config import toolchain  # noqa: E402
from swbuild.support.errors import SwbuildError  # noqa: E402
from swbuild.driver import scop as scop_cli  # noqa: E402

LOCATED = re.compile(r"^\S+\.c:\d+(:\d+)?: ")


def reason_kind(reason):
    r = reason.split(": ", 1)[-1]
    for key in ("out of bounds", "loop variable", "interleaved write sets", "unbounded", "recurrence",
                "non-affine", "negative values", "local memory", "no loop of the region"):
        if key in r:
            return key
    return r[:60]


def run_seed(seed, cases, tc, lib, work):
    text, cs = program(seed, cases)
    d = work / f"s{seed}"
    d.mkdir()
    src = d / f"fuzz{seed}.c"
    src.write_text(text)
    out = {"seed": seed, "problems": [], "kinds": collections.Counter(), "transformed": 0}
    try:
        gen = scop_cli.generate(src, tc, d / "out", serial_fallback=True)
    except SwbuildError as e:
        out["problems"].append(f"generation failed: {e}")
        return out
    for plan, case in zip(gen["plans"], cs):
        if plan.serial:
            out["kinds"][reason_kind(plan.reason)] += 1
            if "internal error" in plan.reason:
                out["problems"].append(f"case{case.index}: {plan.reason}")
            if not LOCATED.match(plan.reason):
                out["problems"].append(f"case{case.index}: refusal without file:line: {plan.reason}")
        elif plan.kernels:
            out["transformed"] += 1
        else:
            out["kinds"]["no loop of the region"] += 1
        if case.defect and not plan.serial:
            out["problems"].append(f"case{case.index}: planted defect '{case.defect}' not refused")
    try:
        steps, exe = scop_cli.exe_steps(tc, gen["paths"], [], d / "out", "fuzz", [], [], d)
        steps = [s for s in steps if not s.label.startswith(("CC-EMU", "AR "))]
        steps[-1].argv = [str(lib) if str(a).endswith("libswemu.a") else a for a in steps[-1].argv]
        build.run_steps(steps, log=lambda m: None)
        subprocess.run(["gcc", "-O2", str(src), "-o", str(d / "serial"), "-lm"], check=True, capture_output=True)
        par = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
        ser = subprocess.run([str(d / "serial")], capture_output=True, text=True, timeout=300)
    except (SwbuildError, subprocess.SubprocessError) as e:
        out["problems"].append(f"build/run failed: {e}")
        return out
    if par.returncode != 0:
        out["problems"].append(f"exit {par.returncode}: {par.stderr[-500:]}")
    elif not same_numbers(numbers(par.stdout), numbers(ser.stdout), rel=1e-9):
        out["problems"].append("output differs from the serial program")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--first", type=int, default=1000)
    ap.add_argument("--cases", type=int, default=25)
    ap.add_argument("--target", default="sunway-emu")
    args = ap.parse_args(argv)
    tc = toolchain.load(args.target)
    kinds = collections.Counter()
    failures, transformed = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        steps, lib = build.runtime_steps(tc, work / "runtime")
        build.run_steps(steps, log=lambda m: None)
        for seed in range(args.first, args.first + args.seeds):
            try:
                r = run_seed(seed, args.cases, tc, lib, work)
            except Exception as e:      # a traceback would reach the user: a failure
                r = {"problems": [f"crash: {type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}"],
                     "kinds": {}, "transformed": 0}
            kinds.update(r["kinds"])
            transformed += r["transformed"]
            if r["problems"]:
                failures.append({"seed": seed, "problems": r["problems"]})
            print(json.dumps({"seed": seed, "transformed": r["transformed"], "problems": r["problems"]}),
                  file=sys.stderr, flush=True)
    doc = {"target": args.target, "seeds": args.seeds, "first": args.first, "cases": args.seeds * args.cases,
           "transformed": transformed, "refused": dict(sorted(kinds.items())), "failures": failures}
    print(json.dumps(doc, indent=2))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
