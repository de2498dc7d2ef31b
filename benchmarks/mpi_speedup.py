#!/usr/bin/env python3
"""Modelled speed-up of MPI builds over one core group: one JSON document.

For each (recipe, target, core_groups, nodes, parallel) case, generates the sources (no C
build, no run) and prints the plan's `mpi.model`: per-rank compute, communication, modelled
seconds and speed-up over one core group (docs/mpi.md says how they are computed).

    python benchmarks/mpi_speedup.py                     # resnet18 batch 8: 4 CGs, 6 CGs (pro), pipeline
    python benchmarks/mpi_speedup.py --recipe recipes/vgg16.yaml --batch 16 --cases sunway-emu:4:1:data
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = ["sunway-emu:4:1:data", "sunway-pro-emu:6:1:data", "sunway-emu:4:2:data", "sunway-emu:4:1:pipeline"]


def one(recipe, batch, case):
    target, cgs, nodes, parallel = case.split(":")
    with tempfile.TemporaryDirectory(prefix="swmpi-") as tmp:
        p = subprocess.run([sys.executable, "-m", "swbuild", "compile", "--recipe", str(recipe), "--target", target,
                            "--set", f"batch={batch}", "--set", f"core_groups={cgs}", "--set", f"nodes={nodes}",
                            "--set", f"parallel={parallel}", "-o", tmp], capture_output=True, text=True)
        if p.returncode != 0:
            return {"case": case, "error": p.stderr.strip().splitlines()[-1:]}
        plan = json.loads(next(Path(tmp).glob("*.plan.json")).read_text())
    m = plan["mpi"]
    keep = {k: v for k, v in m["model"].items() if k not in ("ranks", "how")}
    return {"case": case, "ranks": m["ranks"], "counts": m["counts"], **({"stages": m["stages"]} if "stages" in m else {}),
            **keep}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", default=str(ROOT / "recipes" / "resnet18.yaml"))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--cases", nargs="*", default=CASES, help="target:core_groups:nodes:parallel")
    a = ap.parse_args()
    rows = [one(a.recipe, a.batch, c) for c in a.cases]
    print(json.dumps({"recipe": Path(a.recipe).name, "batch": a.batch, "cases": rows}, indent=2, sort_keys=True))
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
