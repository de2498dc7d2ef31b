#!/usr/bin/env python3
"""GraphTurbo-style ablation on the MLU (issue 34): the light models of the `onnx` package
through `swbuild report --json` on diannao-emu, once per configuration, each step switched on
over the previous one by its option:

    off            grouping, double_buffer and cluster_split off: one launch per kernel,
                   synchronous copies, weights through every cluster's SRAM
    pipelined      + double_buffer (pingpong.py: load / compute / store over ping-pong NRAM)
    grouped        + grouping (optimizer/grouping: one launch per group instance)
    cluster_split  + cluster_split (schedule/conv.py: output-channel blocks over the clusters,
                   each weight byte GDRAM -> SRAM once per launch)
    weight_prefetch + weight_prefetch (schedule/conv.py: a weight block through SRAM moves in
                   chunks, chunk j + 1 GDRAM -> SRAM async while chunk j goes SRAM -> WRAM;
                   where the weights change per input-channel block, block i + 1 GDRAM ->
                   SRAM async while block i computes)
    concat_in_place + concat_in_place (concat_slices.py: the inputs of a channel Concat of NHWC
                   tensors written by their producers into their channels of its output, the
                   Concat's copy kernels dropped)
    merge_launches + merge_launches (stitch.py: consecutive kernels in one launch whatever
                   their groups, a __sync_all() between two)
    sram_residency + sram_residency (residency.py: an intermediate written and read only
                   inside one grouped launch stays in its cluster's SRAM where every cluster
                   reads back what its own cores wrote)
    residency_split + residency_split (schedule/residency_split.py: an element-wise kernel read
                   only by rows-mode convolutions splits its pixels as they split their rows,
                   so its output can stay in SRAM)
    sram_concats   + sram_concats (residency_concat.py: a Concat written in place and its slices
                   in SRAM where all its writers and readers split rows alike)
    cross_layer    + cross_layer_prefetch (cross_layer.py: the next convolution's chunk-0
                   weight copy GDRAM -> SRAM issued by the kernel before it, after its last
                   compute)
    cycle_ops      + cycle_ops (schedule/cycle_ops.py: a convolution epilogue's per-channel
                   operands read by __bang_cycle_add/sub/mul as one row of channels, not
                   replicated over the tile by NRAM2NRAM copies); the default options
    weight_broadcast + weight_broadcast=all (schedule/weight_broadcast.py: in rows mode each
                   cluster loads a quarter of a weight block and sends it to the other clusters'
                   SRAM with __memcpy SRAM2SRAM, so weights leave GDRAM once; off by default:
                   the synchronous sends cost more cycles than they save, docs/diannao.md)

Per model and configuration: modelled ms (emulator cycles at the toolchain's clock), GDRAM
bytes, their ratio to the model's compulsory bytes, the physical bound and bound_ratio.
The paper's remaining steps (intermediates kept in NRAM, instance ordering) are not built
yet (issue 34): they are listed as such, not measured.

    python benchmarks/graphturbo_ablation.py                       # ResNet-50, Inception-v1, DenseNet-121
    python benchmarks/graphturbo_ablation.py --models all          # the nine light models
    python benchmarks/graphturbo_ablation.py --models resnet50 --configs off cluster_split

Prints one JSON document.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEPS = ["double_buffer", "grouping", "cluster_split", "weight_prefetch", "concat_in_place", "merge_launches",
         "sram_residency", "residency_split", "sram_concats", "cross_layer_prefetch", "cycle_ops",
         "weight_broadcast"]   # switched on in this order
ON = {"weight_broadcast": "all"}    # the step's value where "on" is not the one measured
CONFIGS = {name: {k: (ON.get(k, "on") if i < n else "off") for i, k in enumerate(STEPS)}
           for n, name in enumerate(["off", "pipelined", "grouped", "cluster_split", "weight_prefetch", "concat_in_place",
                                         "merge_launches", "sram_residency", "residency_split", "sram_concats",
                                         "cross_layer", "cycle_ops", "weight_broadcast"])}
NOT_BUILT = ["intermediates in NRAM", "instance ordering"]
DEFAULT_MODELS = ["resnet50", "inception_v1", "densenet121"]
ALL_MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet",
              "vgg19", "zfnet512"]


def light_dir():
    import onnx
    return Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light"


def report(path, target, options, out, timeout):
    cmd = [sys.executable, "-m", "swbuild.cli", "report", str(path), "--target", target, "-o", str(out), "--json", "-Q"]
    for k, v in options.items():
        cmd += ["--set", f"{k}={v}"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        return {"status": "error", "error": (p.stderr.strip().splitlines() or [""])[-1][-600:]}
    d = json.loads(p.stdout)
    return {"status": "ok", "seconds": round(time.perf_counter() - t0, 1),
            "modeled_ms": round(d["modeled_seconds"] * 1e3, 4), "cycles": d["cycles"],
            "gdram_bytes": d["gdram_bytes"], "predicted_gdram_bytes": d.get("predicted_gdram_bytes"),
            "model_traffic_ratio": round(d["model_traffic_ratio"], 3), "kernel_launches": d["kernel_launches"],
            "physical_bound_ms": round(d["physical_bound_seconds"] * 1e3, 4), "bound_ratio": round(d["bound_ratio"], 3),
            "copy_mismatches": len(d.get("copy_mismatches") or []), "violations": d.get("violations", 0)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=DEFAULT_MODELS, help="light model names (light_<name>.onnx), or all")
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--target", default="diannao-emu")
    ap.add_argument("--timeout", type=int, default=1800)
    a = ap.parse_args(argv)
    models = ALL_MODELS if a.models == ["all"] else a.models
    src = light_dir()
    doc = {"benchmark": "graphturbo_ablation", "target": a.target, "configs": {c: CONFIGS[c] for c in a.configs},
           "not_built": NOT_BUILT, "models": {}}
    with tempfile.TemporaryDirectory(prefix="swb-ablation-") as tmp:
        for m in models:
            path = src / f"light_{m}.onnx"
            doc["models"][m] = {c: report(path, a.target, CONFIGS[c], Path(tmp) / f"{m}-{c}", a.timeout)
                                for c in a.configs}
    json.dump(doc, sys.stdout, indent=1)
    print()
    return 0 if all(r["status"] == "ok" for rs in doc["models"].values() for r in rs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
