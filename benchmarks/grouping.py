#!/usr/bin/env python3
"""GraphTurbo grouping (issue 16), on vs off, on an emulated target: one JSON document.

Per model and mode: kernel launches, main-memory bytes, model-level compulsory bytes
(weights + graph inputs + graph outputs once) and their ratio, modelled milliseconds, DMA
predicted == measured, write conflicts, LDM over budget and the check against onnxruntime;
with grouping on also what the grouping decided (groups, instances, the traffic its plan
implies) and how the generator realised it. On DianNao (`--target diannao-emu`) the
modelled time is the BANG emulator's cycles, and the checks are its rule violations and
write conflicts. `done_when` compares on with off against the issue's targets (launches <=
1/3, model traffic <= 2.0x, modelled time >= 20% lower), from the measured numbers only. On
Sunway, `layer_by_layer_floor` is the model traffic ratio of the kernels' own compulsory
bytes: no schedule that writes every intermediate back to main memory goes below it.

    python benchmarks/grouping.py                                  # light resnet50 + inception_v1
    python benchmarks/grouping.py --models light_resnet50 --out /tmp/g.json
    python benchmarks/grouping.py --target diannao-emu
    python benchmarks/grouping.py --set mesh_gemm=on             # any option, on both builds
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sunway_report import model_args, report_and_check  # noqa: E402

DEFAULT = ["light_resnet50", "light_inception_v1"]


def one(name, target, work, mode, timeout, sets=()):
    args, stem = model_args(name)
    rep, chk, secs = report_and_check(args, target, Path(work) / f"{stem}-grouping-{mode}", timeout,
                                      ("--grouping", mode, *(x for s in sets for x in ("--set", s))))
    if rep is None:
        return chk
    g = rep.get("grouping")
    doc = {"check": chk.get("status"), "max_abs_err": chk.get("max_abs_err"),
           "kernel_launches": rep["kernel_launches"], "main_memory_bytes": rep["main_memory_bytes"],
           "model_compulsory_bytes": rep["model_compulsory_bytes"], "model_traffic_ratio": rep["model_traffic_ratio"],
           "modeled_ms": rep["modeled_seconds"] * 1e3, "seconds": round(secs, 1)}
    if rep.get("family") == "diannao":      # the BANG emulator's cycles are the modelled time
        em = chk.get("emulator", {})
        doc.update(cycles=rep["cycles"], violations=rep["violations"], write_conflicts=em.get("write_conflicts"))
        ok = rep["violations"] == 0 and em.get("write_conflicts") == 0
    else:
        # the kernels' own compulsory bytes over the model's: the model traffic ratio no
        # layer-by-layer schedule (every intermediate written and read back) can go below
        floor = rep["compulsory_bytes"] / rep["model_compulsory_bytes"] if rep["model_compulsory_bytes"] else None
        doc.update(traffic_ratio_per_kernel=rep["traffic_ratio"], layer_by_layer_floor=floor,
                   dma_match=rep["dma_match"], write_conflicts=rep["write_conflicts"],
                   ldm_over_budget=rep["ldm_over_budget"])
        ok = rep["dma_match"] and rep["write_conflicts"] == 0 and not rep["ldm_over_budget"]
    if g is not None:
        doc["grouping"] = {"groups": len(g["groups"]), "instances": g["instances"], "realised": g["realised"],
                           "planned_main_memory_bytes": g["planned_main_memory_bytes"],
                           "planned_model_traffic_ratio": g["planned_main_memory_bytes"] / rep["model_compulsory_bytes"],
                           "layers_per_group": [len(x["kernels"]) for x in g["groups"]],
                           "splits": [f"{x['split']['axis']}/{x['split']['factor']}" for x in g["groups"]],
                           # producers recomputed in their consumer's LDM (stitch_producers.py)
                           "stitched": len(g.get("stitched", []))}
        inner = [e for k in rep["kernels"] for e in k.get("kernels") or ()]
        if rep.get("family") != "diannao":      # cross-layer weight prefetch (backends/sunway/passes/prefetch.py)
            doc["grouping"]["prefetch"] = {"targets": sum(1 for e in inner if e.get("prefetched")),
                                           "saved_ms": 1e3 * sum(e.get("prefetch_saved_seconds", 0.0) for e in inner)}
    doc["status"] = "pass" if chk.get("status") == "pass" and ok else "fail"
    return doc


def done_when(on, off):
    if "kernel_launches" not in on or "kernel_launches" not in off:
        return None
    return {"launches_ratio": on["kernel_launches"] / off["kernel_launches"],
            "launches_at_most_a_third": on["kernel_launches"] * 3 <= off["kernel_launches"],
            "model_traffic_ratio_on": on["model_traffic_ratio"],
            "model_traffic_at_most_2x": on["model_traffic_ratio"] <= 2.0,
            "modeled_time_reduction": 1 - on["modeled_ms"] / off["modeled_ms"] if off["modeled_ms"] else 0.0,
            "modeled_time_20pct_lower": on["modeled_ms"] <= 0.8 * off["modeled_ms"],
            "both_pass": on["status"] == off["status"] == "pass"}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="sunway-emu")
    ap.add_argument("--models", nargs="*", default=DEFAULT)
    ap.add_argument("--out", help="write the JSON here (default: stdout)")
    ap.add_argument("--work", help="build directory (default: a temporary one)")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an option for every build")
    a = ap.parse_args(argv)
    res = {}
    with tempfile.TemporaryDirectory(prefix="swgroup-") as tmp:
        for m in a.models:
            res[m] = {}
            for mode in ("off", "on"):
                print(f"grouping: {m} grouping={mode} ...", file=sys.stderr, flush=True)
                try:
                    res[m][mode] = one(m, a.target, a.work or tmp, mode, a.timeout, a.set)
                except subprocess.TimeoutExpired:
                    res[m][mode] = {"status": "error", "reason": f"timeout after {a.timeout} s"}
                print(f"grouping: {m} grouping={mode}: {res[m][mode]['status']}", file=sys.stderr, flush=True)
            res[m]["done_when"] = done_when(res[m]["on"], res[m]["off"])
    text = json.dumps({"target": a.target, "batch": 1, "options": a.set, "models": res}, indent=1, sort_keys=True)
    if a.out:
        Path(a.out).write_text(text + "\n")
    else:
        print(text)
    return 0 if all(r[m]["status"] == "pass" for r in res.values() for m in ("on", "off")) else 1


if __name__ == "__main__":
    sys.exit(main())
