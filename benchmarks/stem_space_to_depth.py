#!/usr/bin/env python3
"""What space-to-depth would win on the ResNet-18 stem on the MLU (issue 36), measured before
it is built into the compiler.

The stem is a 7x7 stride-2 convolution over the image's 3 channels, which `__bang_conv` pads
to Ci = 16 floats or 64 int8 (its 64-B rule): most of its MACs are on padded channels. The
same convolution is a 4x4 stride-1 one over the 12 channels of the image blocked 2x2
(SpaceToDepth, DCR order), pads (2, 2, 1, 1), weights W'[o, (2dy + dx)C + c, ky, kx] =
W[o, c, 2ky + dy - 1, 2kx + dx - 1] (0 outside the 7x7 window): 16 taps instead of 49 over
the same padded Ci. This script applies that rewrite to the ONNX file (float32 and the QDQ
int8 twin of benchmarks/quantized_resnet.py; in the int8 graph the SpaceToDepth moves the
quantized bytes, so the integer convolution sees the same integers), checks the rewritten
model against the original with onnxruntime (int8: bitwise equal outputs required), and
prints `swbuild report --json` figures of both on diannao-emu: total cycles and the launches
holding the stem (its convolution and the SpaceToDepth kernel, which today is a copy of one
element per segment). It also counts, for the image's QuantizeLinear scale, the float32 x whose
quantized value x * r differs from x / s's for r = fl(1/s) and its neighbours (exhaustive by
reciprocal.py's windows): what a per-value correction on the vector unit would have to fix.

    python benchmarks/stem_space_to_depth.py --torch-python /path/to/python-with-torch

Prints one JSON document.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quantized_resnet  # noqa: E402


def space_to_depth_stem(src, dst):
    """Rewrite the first 7x7 stride-2 pads-3 Conv of src (weights constant or a constant's
    DequantizeLinear) as SpaceToDepth(2) + a 4x4 stride-1 Conv; the SpaceToDepth goes before
    the input's DequantizeLinear when there is one. Returns the rewritten convolution's name."""
    import onnx
    from onnx import helper, numpy_helper as nh
    m = onnx.load(src)
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    prod = {o: n for n in g.node for o in n.output}

    def attr(n, name, default=None):
        a = next((a for a in n.attribute if a.name == name), None)
        return default if a is None else helper.get_attribute_value(a)
    conv = next((n for n in g.node if n.op_type == "Conv" and list(attr(n, "kernel_shape", [])) == [7, 7]
                 and list(attr(n, "strides", [])) == [2, 2] and list(attr(n, "pads", [])) == [3, 3, 3, 3]
                 and attr(n, "group", 1) == 1 and list(attr(n, "dilations", [1, 1])) == [1, 1]), None)
    if conv is None:
        raise SystemExit("no 7x7 stride-2 convolution with pads 3 in " + str(src))
    wdq = prod.get(conv.input[1])
    wt = inits[wdq.input[0]] if wdq is not None and wdq.op_type == "DequantizeLinear" else inits[conv.input[1]]
    if wdq is not None and wdq.op_type == "DequantizeLinear" and len(wdq.input) > 2 and wdq.input[2]:
        if np.any(nh.to_array(inits[wdq.input[2]]) != 0):
            raise SystemExit("the stem's weight zero point is not 0: the added taps would not be zero")
    w = nh.to_array(wt)
    co, c = w.shape[:2]
    w2 = np.zeros((co, 4 * c, 4, 4), w.dtype)
    for dy in range(2):
        for dx in range(2):
            for ky in range(4):
                for kx in range(4):
                    ty, tx = 2 * ky + dy - 1, 2 * kx + dx - 1
                    if 0 <= ty < 7 and 0 <= tx < 7:
                        w2[:, (2 * dy + dx) * c:(2 * dy + dx + 1) * c, ky, kx] = w[:, :, ty, tx]
    wt.CopyFrom(nh.from_array(w2, wt.name))
    xdq = prod.get(conv.input[0])
    reader = xdq if xdq is not None and xdq.op_type == "DequantizeLinear" else conv
    blocked = reader.input[0] + "_space_to_depth"
    g.node.insert(list(g.node).index(reader), helper.make_node("SpaceToDepth", [reader.input[0]], [blocked], blocksize=2))
    reader.input[0] = blocked
    for a in conv.attribute:
        if a.name in ("kernel_shape", "strides", "pads"):
            a.ints[:] = {"kernel_shape": [4, 4], "strides": [1, 1], "pads": [2, 2, 1, 1]}[a.name]
    onnx.checker.check_model(m)
    onnx.save(m, dst)
    return conv.name


def compare(a, b, exact):
    import onnxruntime as ort
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    ya = ort.InferenceSession(str(a)).run(None, {"input": x})[0]
    yb = ort.InferenceSession(str(b)).run(None, {"input": x})[0]
    return {"bitwise_equal": bool(np.array_equal(ya, yb)), "max_abs_diff": float(np.abs(ya - yb).max()),
            "ok": bool(np.array_equal(ya, yb)) if exact else bool(np.allclose(ya, yb, rtol=1e-4, atol=1e-4))}


def stem_launches(rep):
    """The launches up to the first one holding a convolution (the stem's; with the rewrite the
    SpaceToDepth's too), by their position in the launch names (<model>_k<i>_... / <model>_g<i>)."""
    def pos(ln):
        m = re.search(r"_[kg](\d+)(_|$)", ln["name"])
        return int(m.group(1)) if m else 1 << 30
    lns = sorted(rep.get("launches", []), key=pos)
    first = next((pos(ln) for ln in lns if {"Conv", "QLinearConv"} & set(ln["ops"])), -1)
    return [ln for ln in lns if pos(ln) <= first]


def reciprocal_exceptions(q8, candidates=2):
    """Per r = fl(1/s) + d ulps (|d| <= candidates): how many float32 x quantize differently as
    x * r than as x / s, s the scale of the QuantizeLinear reading the graph input. Both are
    non-decreasing in x, so they differ only inside reciprocal.py's windows around the
    half-integers, which are counted exhaustively (None: a window's ends do not bracket h)."""
    import onnx
    from onnx import numpy_helper as nh
    from swbuild.backends.diannao.schedule.reciprocal import _window
    m = onnx.load(q8)
    inits = {i.name: nh.to_array(i) for i in m.graph.initializer}
    inputs = {i.name for i in m.graph.input}
    q = next(n for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] in inputs)
    s = np.float32(inits[q.input[1]])
    z = int(inits[q.input[2]]) if len(q.input) > 2 and q.input[2] else 0
    lo, hi = (-128, 127) if len(q.input) < 3 or inits[q.input[2]].dtype == np.int8 else (0, 255)
    L, H = lo - z, hi - z
    out = {"scale": float(s), "zero_point": z}
    r0 = np.float32(1.0) / s
    for d in range(-candidates, candidates + 1):
        r = np.int32(r0.view(np.int32) + d).view(np.float32)
        n = 0
        for k in range(L, H):
            h = k + 0.5
            x = _window(np.float32(h * float(s)))
            if x is None:
                n = None
                break
            with np.errstate(all="ignore"):
                a, b = x * r, x / s
            if not (a[0] < h and b[0] < h and a[-1] > h and b[-1] > h):
                n = None
                break
            n += int(np.count_nonzero(np.clip(np.rint(a), L, H) != np.clip(np.rint(b), L, H)))
        out[f"fl(1/s){d:+d}ulp"] = n
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--torch-python", default=os.environ.get("SWBUILD_TORCH_PYTHON", sys.executable))
    ap.add_argument("--target", default="diannao-emu")
    ap.add_argument("--timeout", type=int, default=3600)
    ap.add_argument("--keep", help="export and build here instead of a temporary directory")
    a = ap.parse_args(argv)
    work = Path(a.keep or tempfile.mkdtemp(prefix="stem-s2d-"))
    work.mkdir(parents=True, exist_ok=True)
    f32, q8, failed = quantized_resnet.export_and_quantize(work, a.torch_python, a.timeout, reuse=True)
    if failed:
        print(json.dumps({"status": "error", "export": failed}))
        return 2
    doc = {"model": "resnet18", "target": a.target, "image_quantize": reciprocal_exceptions(q8)}
    for name, path, exact in (("float32", f32, False), ("int8", q8, True)):
        s2d = work / (path.stem + "_s2d.onnx")
        space_to_depth_stem(path, s2d)
        entry = {"rewrite_vs_original_onnxruntime": compare(path, s2d, exact)}
        for label, p in (("original", path), ("space_to_depth", s2d)):
            rep = quantized_resnet.report(p, a.target, work / "build" / f"{name}-{label}", a.timeout)
            if rep["status"] == "ok":
                rep = {"cycles": rep["cycles"], "gdram_bytes": rep["gdram_bytes"], "stem": stem_launches(rep)}
            entry[label] = rep
        doc[name] = entry
    print(json.dumps(doc, indent=1, sort_keys=True))
    return 0 if all(doc[k]["rewrite_vs_original_onnxruntime"]["ok"] for k in ("float32", "int8")) else 1


if __name__ == "__main__":
    sys.exit(main())
