#!/usr/bin/env python3
"""Where a Sunway build's DMA exceeds its kernels' own compulsory bytes (issue 35): per input box,
the bytes the predictor has it fetch against the region it reads once (cost/rereads.py), the
largest excess first, and the model's totals. Compile only (no emulator): the predictor's
counts are the emulator's (`swbuild check` compares them), so this is what a build moves, less
each CPE's fetch of its kernels' parameter structs (`predicted_bytes`, `model_traffic_ratio`).

    python benchmarks/sunway_rereads.py --models light_inception_v1 --target sunway-pro-emu
    python benchmarks/sunway_rereads.py --models light_resnet50 --target sunway-emu --top 20 --out /tmp/r.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sunway_report import expand, model_args  # noqa: E402  (the same model names)

from swbuild.backends.sunway.cost.predict import compulsory_bytes, predict_kernel  # noqa: E402
from swbuild.backends.sunway.cost.rereads import box_rereads  # noqa: E402
from swbuild.config.toolchain import load  # noqa: E402
from swbuild.driver.compiler import build_program  # noqa: E402
from swbuild.optimizer.grouping import model_compulsory_bytes  # noqa: E402


def one(name, target, sets, top):
    args, label = model_args(name)
    tc = load(target)
    if args[0] == "--recipe":
        raise SystemExit(f"{name}: recipes are not read here; give a light model or an .onnx file")
    p = build_program(args[0], tc, label, options=sets)
    boxes, kernels_comp, moved = [], 0, 0
    for k in p.kernels:
        if k.schedule is None:
            continue
        pred = predict_kernel(k, tc.cores, 0)
        moved += pred["get"]["bytes"] + pred["put"]["bytes"]
        if k.kind != "compute":
            continue
        kernels_comp += compulsory_bytes(k)
        for r in box_rereads(k, tc.cores):
            boxes.append(dict(r, kernel=k.name, node=k.node, op=k.op,
                              excess_bytes=r["get_bytes"] - r["compulsory_bytes"]))
    boxes.sort(key=lambda r: (-r["excess_bytes"], r["kernel"], r["buf"]))
    mc = model_compulsory_bytes(p)
    return {"model": label, "target": target, "model_compulsory_bytes": mc,
            "kernels_compulsory_bytes": kernels_comp, "predicted_bytes": moved,
            "kernels_compulsory_ratio": kernels_comp / mc, "model_traffic_ratio": moved / mc,
            "box_excess_bytes": sum(r["excess_bytes"] for r in boxes), "top": boxes[:top]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["light_inception_v1", "light_resnet50"])
    ap.add_argument("--target", default="sunway-pro-emu")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    sets = dict(s.split("=", 1) for s in a.set)
    doc = {"target": a.target, "options": a.set, "models": [one(m, a.target, sets, a.top) for m in expand(a.models)]}
    text = json.dumps(doc, indent=1)
    if a.out:
        Path(a.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
