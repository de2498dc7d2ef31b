#!/usr/bin/env python3
"""SCons build of a shipped recipe in a fresh project: tree size, null build, compile db.

In a temporary project (the repository's SConstruct, recipes/<model>.yaml, no build tree):

  build        `scons target=T model=M` from nothing: seconds;
  tree         bytes under build/ (st_blocks, so a .bss array or a sparse file counts as
               what it holds), the weights file, and tree / weights (goal <= 1.5 for vgg16);
  null build   `scons -Q -q target=T model=M` on the up-to-date tree, against `scons -h` in
               the same run: median of --repeat wall-clock seconds each, and the ratio;
  check        `scons -Q -q ... check` after `scons ... check`: exit status (0 = up to date);
  compiledb    `scons ... compiledb`: the files compile_commands.json lists, by role.

    python benchmarks/scons_build.py                        # vgg16 on sunway-emu (a few minutes)
    python benchmarks/scons_build.py --model tiny_cnn --no-check
    python benchmarks/scons_build.py --set weights=embed    # the same with the weights linked in

Prints one JSON document.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def scons(project, *args, check=True):
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "SCons", *args], cwd=project, capture_output=True, text=True)
    dt = time.monotonic() - t0
    if check and p.returncode != 0:
        sys.exit(f"scons {' '.join(args)} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p, dt


def tree_bytes(root):
    """Bytes the files under root occupy on disk (allocated blocks), and their apparent size."""
    disk = apparent = 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            st = os.lstat(os.path.join(dirpath, f))
            disk += st.st_blocks * 512
            apparent += st.st_size
    return disk, apparent


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="vgg16", help="a recipe in recipes/ (default vgg16)")
    ap.add_argument("--target", default="sunway-emu")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="scons option, e.g. weights=embed")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-check", action="store_true", help="skip the check target (it runs the model)")
    ap.add_argument("--keep", help="build in this directory and keep it")
    a = ap.parse_args()

    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="swbuild-scons-bench-"))
    project = work / "proj"
    (project / "recipes").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "SConstruct", project / "SConstruct")
    shutil.copy(REPO / "recipes" / f"{a.model}.yaml", project / "recipes" / f"{a.model}.yaml")
    args = [f"target={a.target}", f"model={a.model}", *a.set]
    try:
        _, build_s = scons(project, "-Q", *args)
        build = project / "build"
        out = next(d for d in (build / a.target).iterdir() if d.name.startswith(a.model))
        weights = next(out.glob("*_weights.bin"))
        disk, apparent = tree_bytes(build)
        wbytes = weights.stat().st_size
        nulls, helps = [], []
        for _ in range(a.repeat):       # interleaved: both see the same machine load
            p, dt = scons(project, "-Q", "-q", *args, check=False)
            if p.returncode != 0:
                sys.exit(f"null build not up to date:\n{p.stdout}{p.stderr}")
            nulls.append(dt)
            helps.append(scons(project, "-h", *args)[1])
        doc = {"model": a.model, "target": a.target, "options": a.set, "build_seconds": round(build_s, 1),
               "tree_bytes_on_disk": disk, "tree_bytes_apparent": apparent, "weights_bytes": wbytes,
               "tree_over_weights": round(disk / wbytes, 3),
               "largest_files": sorted(((f.stat().st_blocks * 512, str(f.relative_to(build))) for f in build.rglob("*")
                                        if f.is_file()), reverse=True)[:6],
               "null_build_seconds": round(statistics.median(nulls), 3), "help_seconds": round(statistics.median(helps), 3),
               "null_over_help": round(statistics.median(nulls) / statistics.median(helps), 2)}
        if not a.no_check:
            p, dt = scons(project, "-Q", *args, "check")
            q, qdt = scons(project, "-Q", "-q", *args, "check", check=False)
            doc.update(check_seconds=round(dt, 1), check_status=p.stdout.strip().splitlines()[-1][:300],
                       check_null_exit=q.returncode, check_null_output=q.stdout + q.stderr, check_null_seconds=round(qdt, 3))
        scons(project, "-Q", *args, "compiledb")
        db = json.loads((project / "compile_commands.json").read_text())
        files = [Path(e["file"]).name for e in db]
        doc["compile_commands"] = {"entries": len(db), "model_files": sorted(f for f in files if f.startswith(a.model)),
                                   "runtime_files": sum(1 for e in db if "/runtime/" in e["file"])}
        print(json.dumps(doc, indent=1))
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
