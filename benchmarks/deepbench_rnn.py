#!/usr/bin/env python3
"""DeepBench's inference shapes on the Sunway and DianNao targets: one JSON document.

RNN problems (hidden, batch, steps, cell; input size = hidden, as DeepBench) and GEMM
problems (m, n, k: C = A[m, k] x B[k, n], A the weights, computed as C^T = B^T A^T) from DeepBench's inference server
set. Every shape is compiled (weights are constant-valued, so no large file is written) and
its plan read:

  sunway   modelled seconds (cost model), roofline seconds, their ratio, DMA bytes predicted
           (exact: the emulator's counters equal them) against the compulsory bytes; per
           recurrence: seconds per step, weights resident or streamed, weight bytes read per
           sequence
  diannao  the recurrence kernels' modelled cycles (equal to the BANG emulator's), GDRAM
           bytes against compulsory; the projection GEMM and DeepBench's GEMMs have no
           static model on DianNao: their cycles are the emulator's, for the shapes that
           are emulated (the CI-sized ones), else null

`--emulate` (default: the CI-sized shapes only) also builds and runs the shape on both
emulators against onnxruntime (swbuild's check: outputs, DMA predicted == measured, rules).

    python benchmarks/deepbench_rnn.py                  # all shapes, CI-sized ones emulated
    python benchmarks/deepbench_rnn.py --quick          # the CI-sized shapes only
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# DeepBench inference_server_set (baidu-research/DeepBench, code/kernels/rnn_problems.h):
# hidden, batch, steps, cell. The first two are CI-sized (emulated by default).
RNN = [(256, 4, 150, "lstm"), (512, 1, 25, "lstm"),
       (512, 4, 25, "lstm"), (1024, 4, 25, "lstm"), (1536, 4, 50, "lstm"), (2048, 4, 25, "lstm"),
       (1536, 4, 187, "gru"), (2048, 2, 375, "gru"), (2560, 4, 187, "gru"), (2816, 1, 375, "gru"),
       (2816, 4, 187, "gru")]
CI_RNN = 2
# DeepBench inference_server_set (code/kernels/gemm_problems.h): m, n, k (no transposes).
GEMM = [(512, 1, 512), (1024, 4, 512), (3072, 4, 1024), (1024, 700, 512), (35, 700, 2048), (7680, 1, 2560),
        (6144, 4, 2048), (8448, 1, 2816), (5124, 700, 2048), (512, 1500, 2816)]
CI_GEMM = 3


def splat(name, shape, value):
    """A constant-valued weight: ConstantOfShape, kept zero-stride by the compiler."""
    return [helper.make_node("Constant", [], [name + "_shape"], value=numpy_helper.from_array(np.array(shape, np.int64))),
            helper.make_node("ConstantOfShape", [name + "_shape"], [name],
                             value=helper.make_tensor("v", TensorProto.FLOAT, [1], [value]))]


def rnn_model(H, B, T, cell, random=False):
    G = {"lstm": 4, "gru": 3}[cell]
    op = cell.upper()
    I = H
    if random:       # CI-sized: real weights, so the check means something
        rng = np.random.default_rng(0)
        s = 1.0 / np.sqrt(H)
        inits = [numpy_helper.from_array(rng.uniform(-s, s, shp).astype(np.float32), n)
                 for n, shp in (("W", (1, G * H, I)), ("R", (1, G * H, H)), ("B", (1, 2 * G * H)))]
        nodes = []
    else:
        inits = []
        nodes = splat("W", [1, G * H, I], 0.01) + splat("R", [1, G * H, H], 0.01) + splat("B", [1, 2 * G * H], 0.1)
    attrs = {"hidden_size": H}
    if cell == "gru":
        attrs["linear_before_reset"] = 1          # as cuDNN and PyTorch compute GRUs
    nodes.append(helper.make_node(op, ["x", "W", "R", "B"], ["y", "y_h"], name=f"{cell}0", **attrs))
    g = helper.make_graph(nodes, f"{cell}_{H}_{B}_{T}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, B, I])],
                          [helper.make_tensor_value_info("y_h", TensorProto.FLOAT, [1, B, H])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def gemm_model(m, n, k, random=False):
    if random:
        inits = [numpy_helper.from_array((np.random.default_rng(0).standard_normal((m, k)) * 0.05).astype(np.float32), "A")]
        nodes = []
    else:
        inits, nodes = [], splat("A", [m, k], 0.01)
    # C^T = B^T A^T: activations [n, k] times the weights transposed, as a layer computes it
    # (the same FLOPs and bytes; DianNao maps a Gemm whose second operand is the weights to
    # its convolution unit)
    nodes.append(helper.make_node("Gemm", ["x", "A"], ["y"], transB=1))
    g = helper.make_graph(nodes, f"gemm_{m}_{n}_{k}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, m])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def sunway_summary(program, tc):
    from swbuild.backends.sunway.cost.predict import predict_program
    ks = predict_program(program, tc)
    mod = sum(k["modeled_seconds"] for k in ks)
    roof = sum(k["roofline_seconds"] for k in ks)
    moved = sum(k["dma"]["get"]["bytes"] + k["dma"]["put"]["bytes"] for k in ks)
    comp = sum(k["compulsory_bytes"] for k in ks)
    out = {"kernels": len(ks), "modeled_seconds": mod, "roofline_seconds": roof, "roofline_fraction": roof / mod if mod else 0.0,
           "dma_bytes": moved, "compulsory_bytes": comp, "traffic_ratio": moved / comp if comp else 0.0}
    rec = [k for k in ks if k.get("kind") == "recurrence"]
    if rec:
        r = rec[0]
        out["recurrence"] = {"modeled_seconds": r["modeled_seconds"], "step_seconds": r["step_seconds"],
                             "roofline_fraction": r["roofline_seconds"] / r["modeled_seconds"],
                             "weights": r["weights"], "weight_bytes_per_sequence": r["weight_bytes_per_sequence"],
                             "weight_bytes": r["weight_bytes"], "ldm_bytes": r["ldm_bytes"],
                             "traffic_ratio": (r["dma"]["get"]["bytes"] + r["dma"]["put"]["bytes"]) / r["compulsory_bytes"]}
    return out


def diannao_summary(program, tc):
    from swbuild.backends.diannao.outputs import plan
    p = plan(program, tc)
    clock = float(tc.hardware["clock_hz"])
    peak = 2 * float(tc.hardware["conv_float_macs_per_cycle"]) * int(tc.hardware["cores"]) * clock
    bw = float(tc.hardware["mem_bandwidth_bytes_per_s"])
    # the BANG emulator charges intrinsics only: a kernel of class "scalar" costs its launch
    out = {"kernels": len(p["kernels"]), "classes": [k["class"] for k in p["kernels"]]}
    rec = [k for k in p["kernels"] if k["class"] == "recurrence"]
    if rec:
        r = rec[0]["recurrence"]
        secs = r["modeled_cycles"] / clock
        roof = max(rec[0]["flops"] / peak, r["compulsory_bytes"] / bw)
        out["recurrence"] = {"modeled_seconds": secs, "step_seconds": r["step_cycles"] / clock,
                             "roofline_fraction": roof / secs, "weights": r["weights"],
                             "weight_bytes_per_sequence": r["weight_bytes_per_sequence"],
                             "traffic_ratio": r["gdram_bytes"] / r["compulsory_bytes"]}
    return out


def emulate(model, target, name):
    """Build, run and check on an emulated target; the check's verdict and the measured numbers."""
    from swbuild.driver import build, check
    from swbuild.config import toolchain
    from swbuild.driver.compiler import compile_to
    tc = toolchain.load(target)
    with tempfile.TemporaryDirectory(prefix="deepbench-") as d:
        d = Path(d)
        prog, _ = compile_to(model, tc, d, name)
        rt, lib = build.runtime_steps(tc, d / "rt")
        steps, _, exe = build.model_steps(tc, prog.prefix, d, d, lib)
        build.run_steps(rt + steps, log=lambda s: None)
        plan = json.loads((d / f"{prog.prefix}.plan.json").read_text())
        x = {i.name: np.random.default_rng(1).standard_normal([v.dim_value for v in i.type.tensor_type.shape.dim]).astype(np.float32)
             for i in model.graph.input}
        t0 = time.perf_counter()
        doc = check.check_build(plan, exe, check.onnxruntime_reference(model, x), x, 1e-3, 1e-4, workdir=d)
        out = {"status": doc["status"], "max_abs_err": doc.get("max_abs_err"), "run_seconds": round(time.perf_counter() - t0, 2)}
        if doc.get("reason"):
            out["reason"] = doc["reason"]
        em = doc.get("emulator", {})
        if "cycles" in em:
            out["cycles"] = em["cycles"]
            out["modeled_seconds"] = em["cycles"] / float(tc.hardware["clock_hz"])
        if "dma_mismatches" in em:
            out["dma_predicted_equals_measured"] = not em["dma_mismatches"]
        return out


def one(model, name, emulated):
    from swbuild.config import toolchain
    from swbuild.driver.compiler import build_program
    from swbuild.support.errors import SwbuildError
    row = {}
    for target, summary in (("sunway-emu", sunway_summary), ("diannao-emu", diannao_summary)):
        tc = toolchain.load(target)
        t0 = time.perf_counter()
        try:
            prog = build_program(model, tc, name)
        except SwbuildError as e:       # e.g. an LDM budget no schedule fits: reported, not hidden
            row[target] = {"refused": str(e)}
            continue
        row[target] = summary(prog, tc)
        row[target]["compile_seconds"] = round(time.perf_counter() - t0, 2)
        if emulated:
            row[target]["emulated"] = emulate(model, target, name)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the CI-sized shapes only")
    ap.add_argument("--emulate", choices=["ci", "none"], default="ci", help="which shapes also run on the emulators")
    ap.add_argument("--out", help="also write the JSON here")
    a = ap.parse_args(argv)
    rnn = RNN[:CI_RNN] if a.quick else RNN
    gemm = GEMM[:CI_GEMM] if a.quick else GEMM
    doc = {"rnn": [], "gemm": []}
    for i, (H, B, T, cell) in enumerate(rnn):
        ci = i < CI_RNN and a.emulate == "ci"
        row = {"cell": cell, "hidden": H, "batch": B, "steps": T, "emulated": ci}
        row.update(one(rnn_model(H, B, T, cell, random=ci), f"{cell}_{H}_{B}_{T}", ci))
        doc["rnn"].append(row)
        print(json.dumps(row), file=sys.stderr)
    for i, (m, n, k) in enumerate(gemm):
        ci = i < CI_GEMM and a.emulate == "ci"
        row = {"m": m, "n": n, "k": k, "emulated": ci}
        row.update(one(gemm_model(m, n, k, random=ci), f"gemm_{m}_{n}_{k}", ci))
        doc["gemm"].append(row)
        print(json.dumps(row), file=sys.stderr)
    text = json.dumps(doc, indent=1)
    if a.out:
        Path(a.out).write_text(text + "\n")
    print(text)
    bad = [r for r in doc["rnn"] + doc["gemm"] for t in ("sunway-emu", "diannao-emu")
           if r.get(t, {}).get("emulated", {}).get("status", "pass") != "pass"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
