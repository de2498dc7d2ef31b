#!/usr/bin/env python3
"""Exposed time on Sunway: the part of each kernel's modelled time that no double buffering
hides, and what stitching producer/consumer pairs would remove (issue 16). One JSON document.

    python benchmarks/exposed_time.py                          # light resnet50 + inception_v1
    python benchmarks/exposed_time.py --models light_squeezenet --target sunway-pro-emu

Per model (grouping off: every kernel alone, as the predictor models it), on each kernel's
busiest CPE (cost/predict.py: simulate): its modelled seconds (without the spawn), compute,
and the exposed parts: the first fetch of each box, split into activations and constants
(weights), the last put of its output and the parameter struct. Summed over the model.

A stitched pair keeps an intermediate in local memory: its producer's last put and its
consumer's first fetch of it disappear (besides the intermediate's steady-state traffic).
`pairs` sums those two exposed parts over every producer -> consumer pair whose intermediate
has that one reader and is no graph output, by kind (e.g. "Conv3x3 -> Conv1x1"): a lower
bound of what stitching such pairs saves in the model, before the cost of moving the
intermediate between CPEs. `weight_prefetch_ms`, the constants' first fetches, bounds what
prefetching the next kernel's weights inside a launch can hide.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from swbuild.config import toolchain  # noqa: E402
from swbuild.backends.sunway.cost.predict import simulate  # noqa: E402
from swbuild.driver.compiler import build_program  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
DEFAULT = ["light_resnet50", "light_inception_v1"]


def kind(k):
    """Conv3x3, Conv1x1, ... (the window from the reduce axes k0, k1), else the op."""
    ext = {a.name: a.extent for a in k.reduce_axes}
    return f"{k.op}{ext['k0']}x{ext['k1']}" if k.op == "Conv" and "k0" in ext and "k1" in ext else k.op


def exposed(program, tc):
    """Per compute kernel, its busiest CPE's numbers in ms, and what it reads per buffer."""
    g = program.graph
    rows = {}
    for k in program.kernels:
        if k.kind != "compute" or k.schedule is None:
            continue
        r = simulate(k, tc.cores, 8 * len(k.buffers), tc.hardware)
        i = int(np.argmax(r["cpe_seconds"]))
        at = lambda v: float(np.broadcast_to(v, r["cpe_seconds"].shape)[i]) * 1e3
        first = {buf: at(v) for buf, v in r["first_fetch_seconds"].items()}
        const = {buf for buf in first if g.tensors[program.root(k.buffers[buf].tensor)].data is not None}
        by_tensor = {}
        for b, v in first.items():          # a tensor read through two buffers (x + x) counts twice
            t = program.root(k.buffers[b].tensor)
            by_tensor[t] = by_tensor.get(t, 0.0) + v
        rows[k.name] = {"kind": kind(k), "modeled_ms": at(r["cpe_seconds"]), "compute_ms": at(r["compute_seconds"]),
                        "first_activation_ms": sum(v for b, v in first.items() if b not in const),
                        "first_constant_ms": sum(v for b, v in first.items() if b in const),
                        "last_put_ms": at(r["last_put_seconds"]), "para_ms": at(r["para_seconds"]),
                        "first_by_tensor": by_tensor}
    return rows


def pairs(program, rows):
    """Producer -> sole consumer pairs of compute kernels, by kind: count and exposed ms saved."""
    readers = {}
    for k in program.kernels:
        for n, b in k.buffers.items():
            if n != k.out:
                readers.setdefault(program.root(b.tensor), set()).add(k.name)
    outputs = {program.root(t) for t in program.outputs}
    out = {}
    for k in program.kernels:
        t = program.root(k.buffers[k.out].tensor)
        who = readers.get(t, set())
        if k.name not in rows or t in outputs or len(who) != 1 or next(iter(who)) not in rows:
            continue
        c = next(iter(who))
        key = f"{rows[k.name]['kind']} -> {rows[c]['kind']}"
        e = out.setdefault(key, {"count": 0, "saved_ms": 0.0})
        e["count"] += 1
        e["saved_ms"] += rows[k.name]["last_put_ms"] + rows[c]["first_by_tensor"].get(t, 0.0)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["saved_ms"]))


def one(name, target):
    tc = toolchain.load(target)
    path = LIGHT / f"{name}.onnx" if not name.endswith(".onnx") else Path(name)
    program = build_program(str(path), tc, path.stem, options={"grouping": "off"})
    rows = exposed(program, tc)
    tot = {x: round(sum(r[x] for r in rows.values()), 3)
           for x in ("modeled_ms", "compute_ms", "first_activation_ms", "first_constant_ms", "last_put_ms", "para_ms")}
    exp = tot["first_activation_ms"] + tot["first_constant_ms"] + tot["last_put_ms"] + tot["para_ms"]
    prs = pairs(program, rows)
    for e in prs.values():
        e["saved_ms"] = round(e["saved_ms"], 3)
        e["share"] = round(e["saved_ms"] / tot["modeled_ms"], 4) if tot["modeled_ms"] else 0.0
    return {"target": target, "kernels": len(rows), **tot, "exposed_ms": round(exp, 3),
            "exposed_share": round(exp / tot["modeled_ms"], 4) if tot["modeled_ms"] else 0.0,
            "weight_prefetch_ms": tot["first_constant_ms"], "pairs": prs}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=DEFAULT, help="light model names or .onnx files")
    ap.add_argument("--target", default="sunway-emu")
    a = ap.parse_args(argv)
    print(json.dumps({m: one(m, a.target) for m in a.models}, indent=1))


if __name__ == "__main__":
    main()
