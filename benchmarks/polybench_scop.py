"""PolyBench/C 4.2.1, as distributed, through `swbuild scop` and the emulator.

    python benchmarks/polybench_scop.py --polybench DIR [--size MEDIUM] [--serial-fallback]
                                        [--target sunway-emu] [--no-run] [KERNEL ...]

DIR (or $POLYBENCH_DIR) is an unpacked PolyBench/C 4.2.1 (utilities/polybench.h and the 30
kernel directories); it is not part of this repository. Each kernel is built as PolyBench
says (`kernel.c` with `utilities/polybench.h`, linked with `utilities/polybench.c`,
`-D<SIZE>_DATASET -DPOLYBENCH_DUMP_ARRAYS -DDATA_TYPE_IS_DOUBLE`): once by `swbuild scop
--exe` (generation timed in-process, CPU seconds), once by plain gcc; both programs run and
their POLYBENCH_DUMP_ARRAYS output is compared number by number within the dump's two
decimals. Prints one JSON document: per kernel the regions transformed / left serial (with
the reason), the CPE kernels, the generation time, whether the dumps match, any error.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

from swbuild.driver import build
from swbuild.config import toolchain  # noqa: E402
from swbuild.support.errors import SwbuildError  # noqa: E402
from swbuild.driver import scop as scop_cli  # noqa: E402

LINEAR_ALGEBRA = ["blas/gemm", "blas/gemver", "blas/gesummv", "blas/symm", "blas/syr2k", "blas/syrk",
                  "blas/trmm", "kernels/2mm", "kernels/3mm", "kernels/atax", "kernels/bicg",
                  "kernels/doitgen", "kernels/mvt"]
OTHERS = ["linear-algebra/solvers/" + k for k in ("cholesky", "durbin", "gramschmidt", "lu", "ludcmp", "trisolv")] + \
    ["datamining/correlation", "datamining/covariance", "medley/deriche", "medley/floyd-warshall",
     "medley/nussinov"] + ["stencils/" + k for k in ("adi", "fdtd-2d", "heat-3d", "jacobi-1d", "jacobi-2d", "seidel-2d")]
ALL = ["linear-algebra/" + k for k in LINEAR_ALGEBRA] + OTHERS


def _cpu():
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + ch.ru_utime + ch.ru_stime


def dump(text):
    """The tokens between POLYBENCH_DUMP_ARRAYS' begin and end markers."""
    m = re.search(r"==BEGIN DUMP_ARRAYS==(.*)==END   DUMP_ARRAYS==", text, re.S)
    return m.group(1).split() if m else None


def same_dump(a, b, tol=0.0100001):
    if a is None or b is None or len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        try:
            if abs(float(x) - float(y)) > tol:
                return False
        except ValueError:
            return False
    return True


def run_kernel(pb, rel, tc, size, serial_fallback, work, do_run, timeout):
    kdir = pb / rel
    name = kdir.name
    src = kdir / f"{name}.c"
    inc = [str(pb / "utilities"), str(kdir)]
    defs = [f"{size}_DATASET", "POLYBENCH_DUMP_ARRAYS", "DATA_TYPE_IS_DOUBLE"]
    out = work / name
    row = {"kernel": rel}
    c0 = _cpu()
    try:
        res = scop_cli.generate(src, tc, out, inc, defs, serial_fallback=serial_fallback,
                                log=None)
    except SwbuildError as e:
        row.update(error=str(e), transformed=False)
        return row
    row["gen_cpu_seconds"] = round(_cpu() - c0, 4)
    row["gen_seconds"] = round(res["seconds"], 4)
    plans = res["plans"]
    row["regions"] = len(plans)
    row["serial_regions"] = [p.reason for p in plans if p.serial]
    row["mpe_regions"] = [p.reason for p in plans if not p.serial and not p.kernels]    # no parallel loop
    row["cpe_kernels"] = sum(len(p.kernels) for p in plans)
    row["transformed"] = not row["serial_regions"] and row["cpe_kernels"] > 0
    if not do_run:
        return row
    try:
        steps, exe = scop_cli.exe_steps(tc, res["paths"], [pb / "utilities" / "polybench.c"], out, name,
                                        inc, defs, kdir)
        build.run_steps(steps, verbose=False, log=lambda m: None)
        ref = out / f"{name}_serial"
        subprocess.run(["gcc", "-O2", *[f"-I{i}" for i in inc], *[f"-D{d}" for d in defs], str(src),
                        str(pb / "utilities" / "polybench.c"), "-lm", "-o", str(ref)],
                       check=True, capture_output=True, text=True)
        t0 = time.perf_counter()
        got = subprocess.run([str(exe)], capture_output=True, text=True, timeout=timeout)
        row["run_seconds"] = round(time.perf_counter() - t0, 2)
        want = subprocess.run([str(ref)], capture_output=True, text=True, timeout=timeout)
    except (SwbuildError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        row["error"] = str(e) + (getattr(e, "stderr", "") or "")[-2000:]
        return row
    if got.returncode != 0:
        row["error"] = f"exit {got.returncode}: {got.stderr[-2000:]}"
    row["matches"] = got.returncode == 0 and same_dump(dump(got.stderr), dump(want.stderr))
    row["values"] = len(dump(want.stderr) or [])
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kernels", nargs="*", help="e.g. gemm or linear-algebra/blas/gemm (default: all 30)")
    ap.add_argument("--polybench", default=os.environ.get("POLYBENCH_DIR"), help="PolyBench/C 4.2.1 directory")
    ap.add_argument("--size", default="MEDIUM", choices=["MINI", "SMALL", "MEDIUM", "LARGE", "EXTRALARGE"])
    ap.add_argument("--target", default="sunway-emu")
    ap.add_argument("--serial-fallback", action="store_true")
    ap.add_argument("--linear-algebra", action="store_true", help="only the 13 linear-algebra kernels")
    ap.add_argument("--no-run", action="store_true", help="generate only")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args(argv)
    if not args.polybench or not (Path(args.polybench) / "utilities" / "polybench.h").is_file():
        ap.error("--polybench DIR (or $POLYBENCH_DIR) must name an unpacked PolyBench/C 4.2.1")
    pb = Path(args.polybench).resolve()
    names = ["linear-algebra/" + k for k in LINEAR_ALGEBRA] if args.linear_algebra else ALL
    if args.kernels:
        names = [n for n in ALL if n in args.kernels or n.rsplit("/", 1)[-1] in args.kernels]
    tc = toolchain.load(args.target)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for rel in names:
            rows.append(run_kernel(pb, rel, tc, args.size, args.serial_fallback, Path(tmp), not args.no_run,
                                   args.timeout))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    gen = [r["gen_cpu_seconds"] for r in rows if "gen_cpu_seconds" in r]
    doc = {"target": args.target, "size": args.size, "serial_fallback": args.serial_fallback,
           "kernels": rows, "transformed": sum(bool(r.get("transformed")) for r in rows),
           "through": sum("error" not in r for r in rows),
           "matches": sum(bool(r.get("matches")) for r in rows), "count": len(rows),
           "mean_gen_cpu_seconds": round(sum(gen) / len(gen), 4) if gen else None}
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
