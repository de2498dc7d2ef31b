"""Time from C file to generated sources for the SCoP kernels (goal: mean <= 0.3 s).

    python benchmarks/scop_gen.py [--target sunway-emu] [--repeat 3] [--cli] [KERNEL ...]
    python benchmarks/scop_gen.py --polybench DIR [--size MEDIUM] [KERNEL ...]

Prints one JSON document: per kernel the in-process generation time (preprocess, parse,
polyhedral passes, printing; median of --repeat runs after one warm-up) as wall-clock and
as CPU seconds (this process plus the preprocessor), the number of CPE kernels, and the
means. --cli also times a fresh `python -m swbuild.driver.scop`
process per kernel (interpreter start and imports included), as the paper's 0.66 s does.
--polybench DIR (or $POLYBENCH_DIR) times PolyBench/C 4.2.1's 13 linear-algebra kernels as
distributed instead of the team's own (tests/scop/kernels), with PolyBench's flags.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from swbuild.config import toolchain  # noqa: E402
from swbuild.driver import scop as scop_cli  # noqa: E402

KERNELS_DIR = ROOT / "tests" / "scop" / "kernels"
KERNELS = ["gemm", "2mm", "3mm", "atax", "bicg", "mvt", "gesummv", "gemver", "syrk", "syr2k",
           "symm", "trmm", "doitgen", "jacobi-2d"]
PB_LINEAR_ALGEBRA = ["blas/gemm", "blas/gemver", "blas/gesummv", "blas/symm", "blas/syr2k", "blas/syrk",
                     "blas/trmm", "kernels/2mm", "kernels/3mm", "kernels/atax", "kernels/bicg",
                     "kernels/doitgen", "kernels/mvt"]


def _cpu():
    """CPU seconds of this process and its finished children (the preprocessor): on a
    shared machine a steadier measure than the wall clock."""
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + ch.ru_utime + ch.ru_stime


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kernels", nargs="*", default=KERNELS)
    ap.add_argument("--target", default="sunway-emu")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--symbolic", action="store_true", help="loop bounds from function arguments")
    ap.add_argument("--cli", action="store_true", help="also time a fresh CLI process per kernel")
    ap.add_argument("--polybench", default=os.environ.get("POLYBENCH_DIR"),
                    help="PolyBench/C 4.2.1 directory: time its 13 linear-algebra kernels")
    ap.add_argument("--size", default="MEDIUM", help="PolyBench dataset (with --polybench)")
    args = ap.parse_args(argv)
    tc = toolchain.load(args.target)
    defines = ["SYMBOLIC"] if args.symbolic else []
    sources = {name: (KERNELS_DIR / f"{name}.c", [str(KERNELS_DIR)]) for name in args.kernels}
    if args.polybench:
        pb = Path(args.polybench).resolve()
        defines = [f"{args.size}_DATASET", "POLYBENCH_DUMP_ARRAYS", "DATA_TYPE_IS_DOUBLE"]
        sources = {}
        for rel in PB_LINEAR_ALGEBRA:
            name = rel.rsplit("/", 1)[-1]
            if args.kernels != KERNELS and name not in args.kernels:
                continue
            d = pb / "linear-algebra" / rel
            sources[name] = (d / f"{name}.c", [str(pb / "utilities"), str(d)])
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (src, inc) in sources.items():
            out = Path(tmp) / name
            res = scop_cli.generate(src, tc, out, inc, defines)    # warm-up
            times, cpu = [], []
            for _ in range(args.repeat):
                t0, c0 = time.perf_counter(), _cpu()
                scop_cli.generate(src, tc, out, inc, defines)
                times.append(time.perf_counter() - t0)
                cpu.append(_cpu() - c0)
            row = {"seconds": round(statistics.median(times), 4),
                   "cpu_seconds": round(statistics.median(cpu), 4),
                   "cpe_kernels": sum(len(p.kernels) for p in res["plans"])}
            if args.cli:
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "swbuild.driver.scop", str(src), "--target",
                                args.target, "-o", str(out)] + [f"-I{i}" for i in inc]
                               + [f"-D{d}" for d in defines], check=True, cwd=ROOT)
                row["cli_seconds"] = round(time.perf_counter() - t0, 4)
            rows[name] = row
    doc = {"target": args.target, "symbolic": args.symbolic, "polybench": bool(args.polybench),
           "defines": defines, "repeat": args.repeat, "kernels": rows,
           "mean_seconds": round(statistics.mean(r["seconds"] for r in rows.values()), 4),
           "mean_cpu_seconds": round(statistics.mean(r["cpu_seconds"] for r in rows.values()), 4),
           "goal_seconds": 0.3}
    if args.cli:
        doc["mean_cli_seconds"] = round(statistics.mean(r["cli_seconds"] for r in rows.values()), 4)
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
