#!/usr/bin/env python3
"""How close a layer-by-layer schedule can come to a model's physical bound on the MLU (issue 34).

The report's bound is max(all flops at the peak, the compulsory bytes at the memory bandwidth):
it lets one layer's weight streaming hide under another layer's compute. A schedule that runs
the layers one after another, each with its activations on chip, cannot beat the sum over the
layers of max(the layer's MACs at the peak, its weights at the bandwidth); and `__bang_conv`
computes Ci padded to `conv_ci_multiple_bytes` and Co padded to `conv_co_multiple` (the
toolchain's hardware rules), so the padded MACs are what its cores execute (a kernel's columns
folded into Ci where that pads less, as the 7x7 stem's space-to-depth does). Prints JSON per
model: the bound, the two layer sums (exact MACs, padded MACs) and their ratios to the bound,
and the layers whose padded roof exceeds their exact one the most. Everything comes from the
ONNX graph (onnx shape inference) and `toolchains/diannao.toml`; nothing is compiled.

    python benchmarks/layer_bounds.py [--models light_resnet50 light_inception_v1 ...] [--top 5]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from swbuild.config.toolchain import load  # noqa: E402

DEFAULT = ("light_resnet50", "light_inception_v1", "light_densenet121")


def _shapes(model):
    m = shape_inference.infer_shapes(model)
    shapes = {i.name: list(i.dims) for i in m.graph.initializer}
    for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        shapes.setdefault(v.name, [d.dim_value for d in v.type.tensor_type.shape.dim])
    return m, shapes


def _up(x, k):
    return -(-x // k) * k


def layers(model, hw):
    """(name, op, MACs, padded MACs, weight bytes) per Conv / Gemm / MatMul with a constant B."""
    m, shapes = _shapes(model)
    consts = {i.name for i in m.graph.initializer}
    for n in m.graph.node:          # what only constants feed (the light models' ConstantOfShape weights)
        if all(i in consts for i in n.input if i):
            consts.update(n.output)
    ci_mult = int(hw["conv_ci_multiple_bytes"]) // 4       # float32 elements
    co_mult = int(hw["conv_co_multiple"])
    out = []
    for n in m.graph.node:
        if n.op_type not in ("Conv", "Gemm", "MatMul") or n.input[1] not in consts:
            continue
        w, y = shapes[n.input[1]], shapes[n.output[0]]
        wbytes = 4 * int(np.prod(w)) + (4 * int(np.prod(shapes[n.input[2]])) if len(n.input) > 2 and n.input[2] else 0)
        if n.op_type == "Conv":
            g = next((a.i for a in n.attribute if a.name == "group"), 1)
            pixels = int(np.prod(y)) // y[1]
            k = int(np.prod(w[2:]))
            macs = pixels * y[1] * w[1] * k
            # the kernel's columns folded into Ci where that pads less (the stem's space-to-depth)
            padded = pixels * g * _up(y[1] // g, co_mult) * min(_up(w[1], ci_mult) * k,
                                                                _up(w[1] * w[-1], ci_mult) * (k // w[-1]))
        else:
            macs = padded = int(np.prod(y)) * (w[0] if n.op_type == "MatMul" else shapes[n.input[0]][-1])
        out.append((n.name or n.output[0], n.op_type, macs, padded, wbytes))
    return out


def one(path, tc, top):
    hw = tc.hardware
    model = onnx.load(path)
    macs_per_cycle = int(hw["cores"]) * int(hw["conv_float_macs_per_cycle"])
    bytes_per_cycle = float(hw["mem_bandwidth_bytes_per_s"]) / float(hw["clock_hz"])
    ls = layers(model, hw)
    init = {i.name for i in model.graph.initializer}
    io = sum(4 * int(np.prod([d.dim_value for d in v.type.tensor_type.shape.dim]))
             for v in list(model.graph.input) + list(model.graph.output) if v.name not in init)
    weights = sum(w for *_, w in ls)
    macs = sum(x for _, _, x, _, _ in ls)
    bound = max(macs / macs_per_cycle, (weights + io) / bytes_per_cycle)
    exact = sum(max(x / macs_per_cycle, w / bytes_per_cycle) for _, _, x, _, w in ls)
    padded = sum(max(p / macs_per_cycle, w / bytes_per_cycle) for _, _, _, p, w in ls)
    worst = sorted(ls, key=lambda l: -(max(l[3] / macs_per_cycle, l[4] / bytes_per_cycle)
                                        - max(l[2] / macs_per_cycle, l[4] / bytes_per_cycle)))[:top]
    return {"model": Path(path).stem, "layers": len(ls), "macs": macs, "padded_macs": sum(p for _, _, _, p, _ in ls),
            "weights_mb": round(weights / 1e6, 2), "bound_cycles": round(bound),
            "layer_sum_cycles": round(exact), "layer_sum_ratio": round(exact / bound, 3),
            "padded_layer_sum_cycles": round(padded), "padded_layer_sum_ratio": round(padded / bound, 3),
            "most_padded": [{"layer": name, "op": op, "macs": x, "padded_macs": p, "weight_bytes": w}
                            for name, op, x, p, w in worst]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=list(DEFAULT),
                    help="light model names (from the onnx package) or .onnx paths")
    ap.add_argument("--target", default="diannao-emu")
    ap.add_argument("--top", type=int, default=5, help="layers listed per model")
    a = ap.parse_args(argv)
    tc = load(a.target)
    light = Path(os.path.dirname(onnx.__file__)) / "backend/test/data/light"
    rows = [one(m if m.endswith(".onnx") else light / f"{m}.onnx", tc, a.top) for m in a.models]
    print(json.dumps({"target": a.target, "models": rows}, indent=1))


if __name__ == "__main__":
    main()
