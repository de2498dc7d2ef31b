#!/usr/bin/env python3
"""Optimizer benchmark on the emulated Sunway target: one JSON summary over models.

For every model (the onnx "light" models and zoo recipes), builds it, runs it under the
Athread emulator (`swbuild report`), checks its outputs against the reference
(`swbuild check --runner`, same build) and summarises what issue 4 asks for: DMA measured
== predicted, write conflicts, LDM peak vs budget, arena vs its liveness lower bound, mean
DMA transfer size, main-memory traffic relative to the compulsory traffic (every kernel's
inputs, weights and output once), modelled time vs roofline (and, per model, the 3x3
convolutions' share of their roofline bound).

    python benchmarks/sunway_report.py                       # light models + vgg16 + resnet50
    python benchmarks/sunway_report.py --models vgg16 light_squeezenet --out /tmp/s.json
    python benchmarks/sunway_report.py --models light --target sunway-pro-emu
    python benchmarks/sunway_report.py --models light_resnet50 --set channel_blocks=on

One model is built and run at a time. Exit status 1 if any model fails a check.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ZOO_DEFAULT = ["vgg16", "resnet50"]


def light_dir():
    import onnx
    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def model_args(name):
    """CLI arguments naming a model: a light model, a zoo recipe or an .onnx path."""
    if name.endswith(".onnx"):
        return [name], Path(name).stem
    if name.startswith("light_"):
        return [str(light_dir() / f"{name}.onnx")], name
    recipe = ROOT / "recipes" / f"{name}.yaml"
    if recipe.exists():
        return ["--recipe", str(recipe)], name
    raise SystemExit(f"unknown model {name}: not a light model, a recipe in recipes/ or an .onnx file")


def expand(models):
    out = []
    for m in models:
        if m == "light":
            out += sorted(Path(p).stem for p in glob.glob(str(light_dir() / "light_*.onnx")))
        elif m == "zoo":
            out += [z for z in ZOO_DEFAULT if (ROOT / "recipes" / f"{z}.yaml").exists()]
        else:
            out.append(m)
    return out


def run(cmd, timeout):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    return p, time.perf_counter() - t0


def conv3x3(rep):
    ks = [k for k in rep["kernels"] if k["op"] == "Conv" and k.get("tiles", {}).get("k0") == 3
          and k.get("tiles", {}).get("k1") == 3 and k["flops"]]
    if not ks:
        return None
    fr = [k["roofline_fraction"] for k in ks]
    return {"kernels": len(ks), "min_roofline_fraction": min(fr),
            "flops_weighted_roofline_fraction": sum(k["roofline_seconds"] for k in ks) / sum(k["modeled_seconds"] for k in ks),
            "gflops_modeled": sum(k["flops"] for k in ks) / sum(k["modeled_seconds"] for k in ks) / 1e9}


def report_and_check(args, target, out, timeout, extra=()):
    """`swbuild report --json` into `out`, then `swbuild check` of the runner it built:
    (report, check document, report seconds), or (None, error document, None)."""
    p, secs = run([sys.executable, "-m", "swbuild.cli", "report", *args, "--target", target, "--json", *extra,
                   "-o", str(out)], timeout)
    if p.returncode != 0:
        return None, {"status": "error", "reason": (p.stderr.strip().splitlines() or ["?"])[-1]}, None
    rep = json.loads(p.stdout.strip().splitlines()[-1])
    runner = next(Path(out).glob("*_runner"), None)
    chk = {"status": "not run"}
    if runner is not None:
        c, _ = run([sys.executable, "-m", "swbuild.cli", "check", *args, "--target", target, *extra,
                    "--runner", str(runner)], timeout)
        try:
            chk = json.loads(c.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            chk = {"status": "error", "reason": c.stderr.strip()[-300:]}
    return rep, chk, secs


def bench(name, target, work, timeout, extra=()):
    args, stem = model_args(name)
    rep, chk, secs = report_and_check(args, target, Path(work) / stem, timeout, extra)
    if rep is None:
        return chk
    ok = (chk.get("status") == "pass" and rep["dma_match"] and rep["write_conflicts"] == 0
          and not rep["ldm_over_budget"] and rep["arena_ratio"] <= 1.05)
    summary = {
        "status": "pass" if ok else "fail",
        "outputs_match": chk.get("status") == "pass", "max_abs_err": chk.get("max_abs_err"),
        "kernel_launches": rep["kernel_launches"], "flops": rep["flops"],
        "dma_match": rep["dma_match"], "dma_mismatches": rep["dma_mismatches"],
        "dma_ops": rep["dma"]["measured"]["ops"], "main_memory_bytes": rep["main_memory_bytes"],
        "compulsory_bytes": rep["compulsory_bytes"], "traffic_ratio": rep["traffic_ratio"],
        "mean_dma_bytes": rep["mean_dma_bytes"],
        "write_conflicts": rep["write_conflicts"],
        "ldm_peak_bytes": rep["ldm_peak_bytes"], "ldm_budget_bytes": rep["ldm_budget_bytes"],
        "ldm_over_budget": rep["ldm_over_budget"],
        "arena_bytes": rep["arena_bytes"], "arena_lower_bound": rep["arena_lower_bound"], "arena_ratio": rep["arena_ratio"],
        "modeled_seconds": rep["modeled_seconds"], "roofline_seconds": rep["roofline_seconds"],
        "roofline_fraction": rep["roofline_fraction"],
        "emulated_kernel_seconds": rep["emulated_seconds"], "run_seconds": chk.get("run_seconds"),
        "build_and_report_seconds": round(secs, 1),
        "conv3x3": conv3x3(rep),
    }
    if not ok:
        summary["reason"] = chk.get("reason") or ("dma mismatch" if not rep["dma_match"] else "see fields")
    return summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="sunway-emu")
    ap.add_argument("--models", nargs="*", default=["light", "zoo"],
                    help="light, zoo, light_<name>, a zoo recipe name or an .onnx path (default: light zoo)")
    ap.add_argument("--out", help="write the JSON summary here (default: stdout)")
    ap.add_argument("--work", help="build directory (default: a temporary one)")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a recipe option for every build, as `swbuild report --set` (repeatable)")
    a = ap.parse_args(argv)
    extra = [x for kv in a.set for x in ("--set", kv)]
    models = expand(a.models)
    res = {}
    with tempfile.TemporaryDirectory(prefix="swbench-") as tmp:
        work = a.work or tmp
        for m in models:
            print(f"sunway_report: {m} ...", file=sys.stderr, flush=True)
            try:
                res[m] = bench(m, a.target, work, a.timeout, extra)
            except subprocess.TimeoutExpired:
                res[m] = {"status": "error", "reason": f"timeout after {a.timeout} s"}
            r = res[m]
            print(f"sunway_report: {m}: {r['status']}" + (
                f" traffic x{r['traffic_ratio']:.2f} mean DMA {r['mean_dma_bytes']:.0f} B arena x{r['arena_ratio']:.3f}"
                f" roofline {r['roofline_fraction']:.2f}" if "traffic_ratio" in r else f" {r.get('reason')}"),
                file=sys.stderr, flush=True)
    done = [r for r in res.values() if "main_memory_bytes" in r]
    tot_bytes = sum(r["main_memory_bytes"] for r in done)
    tot_ops = sum(r["dma_ops"] for r in done)
    doc = {"target": a.target, "options": a.set, "models": res, "summary": {
        "models": len(res), "passed": sum(r["status"] == "pass" for r in res.values()),
        "mean_dma_bytes": tot_bytes / tot_ops if tot_ops else 0.0,
        "traffic_ratio": tot_bytes / max(1, sum(r["compulsory_bytes"] for r in done)),
        "max_arena_ratio": max((r["arena_ratio"] for r in done), default=0.0),
        "all_dma_match": all(r["dma_match"] for r in done) and len(done) == len(res),
        "write_conflicts": sum(r["write_conflicts"] for r in done),
    }}
    text = json.dumps(doc, indent=1, sort_keys=True)
    if a.out:
        Path(a.out).write_text(text + "\n")
    else:
        print(text)
    return 0 if doc["summary"]["passed"] == len(res) else 1


if __name__ == "__main__":
    sys.exit(main())
