#!/usr/bin/env python3
"""Compile-time benchmark: ONNX -> generated C, cold and warm schedule cache, against TVM.

For every model, whole `swbuild compile` processes (CPU seconds = user + system of the child,
peak RSS from its rusage), median of --repeat runs (cold runs alternate with TVM's, so load
that drifts during the run weighs on both; `cold_over_tvm_pairs` lists each pair's ratio):

  cold   fresh, empty schedule and zoo cache directories and output directory (every kernel
         searched, zoo weights drawn, every file written);
  warm   the same build again on the caches and output the cold run left (a CI rebuild, an
         edit: files that come out the same are not rewritten);

CPU seconds include the tile-search worker processes (schedule/parallel.py; SWBUILD_JOBS
from the environment applies), wall seconds are reported next to them; and, when a Python
with TVM is available (--tvm-python, or $SWBUILD_TVM_PYTHON; TVM is no
dependency of swbuild: install apache-tvm in a separate venv), TVM's
`relax.frontend.onnx.from_onnx` + `tvm.compile(target="llvm")` of the same ONNX model in the
same run, and the ratio swbuild cold / TVM.

    python benchmarks/compile_time.py                                   # light_resnet50 + vgg16
    python benchmarks/compile_time.py --models light zoo --repeat 3 --tvm-python /work/tvm-venv/bin/python
    python benchmarks/compile_time.py --models light_inception_v1 --target sunway-pro-emu

Zoo models are compiled from their recipe (recipes/NAME.yaml, as `scons model=NAME` does: the
zoo hands its arrays to the importer) and written to a temporary .onnx file for TVM (the same
bytes). Prints one JSON document.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sunway_report import ROOT, expand, light_dir  # noqa: E402  (model names: light, zoo, paths)

DEFAULT = ["light_resnet50", "vgg16"]

TVM_SCRIPT = r"""
import sys, onnx, tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx
m = onnx.load(sys.argv[1])
shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in m.graph.input
          if i.name not in {t.name for t in m.graph.initializer}}
mod = from_onnx(m, shape_dict=shapes, keep_params_in_input=False)
tvm.compile(mod, target="llvm")
"""


def run(argv, env):
    """(cpu seconds, peak RSS bytes, returncode, stderr tail, wall seconds) of one child
    process; its CPU time includes the worker processes it waited for (tile searches)."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = err.read()[-800:].decode(errors="replace")
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, p.returncode, tail, wall


def onnx_file(name, tmp):
    """An .onnx file of a light model, a zoo model or a path."""
    if name.endswith(".onnx"):
        return Path(name)
    if name.startswith("light_"):
        return light_dir() / f"{name}.onnx"
    # in a child: a child's peak RSS counts the parent's at fork, so this process stays small
    path = tmp / f"{name}.onnx"
    code = "import sys, onnx; from swbuild import zoo; onnx.save(zoo.build(sys.argv[1]), sys.argv[2])"
    subprocess.run([sys.executable, "-c", code, name, str(path)], check=True)
    return path


def checked_run(argv, env):
    c, r, rc, tail, w = run(argv, env)
    if rc != 0:
        raise SystemExit(f"{' '.join(map(str, argv))} failed (exit {rc}):\n{tail}")
    return c, r, w


def summary(runs):
    """(median CPU seconds, peak RSS bytes, median wall seconds) of (cpu, rss, wall) runs."""
    return (round(statistics.median(r[0] for r in runs), 3), max(r[1] for r in runs),
            round(statistics.median(r[2] for r in runs), 3))


def bench(name, target, repeat, tvm_python, tmp, sets=()):
    model = onnx_file(name, tmp)
    cache, zcache = tmp / f"cache-{name}", tmp / f"zoo-{name}"
    out = tmp / f"out-{name}"
    env = dict(os.environ, SWBUILD_SCHEDULE_CACHE=str(cache), SWBUILD_ZOO_CACHE=str(zcache))
    recipe = ROOT / "recipes" / f"{name}.yaml"
    source = ["--recipe", str(recipe)] if not name.startswith("light_") and recipe.exists() else [str(model)]
    argv = [sys.executable, "-m", "swbuild.cli", "compile", *source, "--target", target, "-o", str(out)]
    argv += [x for kv in sets for x in ("--set", kv)]

    # cold swbuild and TVM runs alternate: on a shared machine the load drifts within a run,
    # and a drift then weighs on both sides of the ratio alike
    colds, tvms = [], []
    for _ in range(repeat):
        for d in (cache, zcache, out):
            shutil.rmtree(d, ignore_errors=True)
        colds.append(checked_run(argv, env))
        if tvm_python:
            tvms.append(checked_run([tvm_python, "-c", TVM_SCRIPT, str(model)], dict(os.environ)))
    warm = summary([checked_run(argv, env) for _ in range(repeat)])
    cold = summary(colds)
    row = {"model": name, "source": "recipe" if source[0] == "--recipe" else "onnx", "target": target,
           "cold_cpu_s": cold[0], "cold_wall_s": cold[2], "cold_peak_rss_mb": round(cold[1] / 2**20, 1),
           "warm_cpu_s": warm[0], "warm_wall_s": warm[2], "warm_peak_rss_mb": round(warm[1] / 2**20, 1)}
    if tvm_python:
        tvm = summary(tvms)
        row.update(tvm_cpu_s=tvm[0], tvm_wall_s=tvm[2], tvm_peak_rss_mb=round(tvm[1] / 2**20, 1),
                   cold_over_tvm=round(cold[0] / tvm[0], 3), warm_over_tvm=round(warm[0] / tvm[0], 3),
                   cold_over_tvm_pairs=[round(c[0] / t[0], 3) for c, t in zip(colds, tvms)])
    shutil.rmtree(out, ignore_errors=True)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=DEFAULT, help="light, zoo, light_NAME, a zoo name or .onnx")
    ap.add_argument("--target", default="sunway-emu")
    ap.add_argument("--repeat", type=int, default=1, help="runs per measurement (median)")
    ap.add_argument("--tvm-python", default=os.environ.get("SWBUILD_TVM_PYTHON"),
                    help="a Python interpreter with TVM installed")
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a compiler option (swbuild --set)")
    a = ap.parse_args()
    tvm_python = a.tvm_python
    if tvm_python and subprocess.run([tvm_python, "-c", "import tvm"], capture_output=True).returncode != 0:
        tvm_python = None
    tmp = Path(tempfile.mkdtemp(prefix="swbuild-compile-time-"))
    try:
        rows = [bench(m, a.target, max(1, a.repeat), tvm_python, tmp, a.set) for m in expand(a.models)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    doc = {"target": a.target, "repeat": a.repeat, "tvm": bool(tvm_python), "models": rows} | ({"set": a.set} if a.set else {})
    text = json.dumps(doc, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
