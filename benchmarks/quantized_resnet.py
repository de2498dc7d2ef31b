#!/usr/bin/env python3
"""Int8 against float32 on the MLU (issue 36): torchvision's ResNet-18 (random weights,
BatchNorm recalibrated, exported as benchmarks/model_zoo.py exports it), quantized by
onnxruntime's quantize_static (QDQ, int8 activations and per-tensor int8 weights unless told
otherwise, seeded calibration images), both through `swbuild report --json` on diannao-emu:
modelled time and GDRAM bytes of each and their ratios, and per launch (a kernel or a stitched
group) its cycles, GDRAM bytes, operators and costliest instructions, largest first, so what
still dominates is visible; with --check, `swbuild check` of the int8 model on the given targets.

    python benchmarks/quantized_resnet.py --torch-python /path/to/python-with-torch
    python benchmarks/quantized_resnet.py --check sunway-emu sunway-pro-emu diannao-emu

Prints one JSON document. torch is no dependency of swbuild: the export runs in a Python
that has it (--torch-python, or $SWBUILD_TORCH_PYTHON; default this one).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import model_zoo  # noqa: E402


def quantize(src, dst, activations, weights, per_channel, images):
    import numpy as np
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Images(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(0)
            self.it = iter([{"input": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)} for _ in range(images)])

        def get_next(self):
            return next(self.it, None)
    quantize_static(str(src), str(dst), Images(), quant_format=QuantFormat.QDQ, per_channel=per_channel,
                    activation_type=getattr(QuantType, activations), weight_type=getattr(QuantType, weights))


def export_and_quantize(work, torch_python, timeout, activations="QInt8", weights="QInt8", per_channel=False,
                        images=4, reuse=False):
    """(float32 path, int8 path, None): ResNet-18 exported (TorchScript) into `work` and quantized
    there, or (.., .., the export's error document). `reuse`: files already there are kept."""
    f32, q8 = work / "resnet18.onnx", work / "resnet18_int8.onnx"
    if not (reuse and f32.exists()):
        exp = model_zoo.export(torch_python, "resnet18", "torchscript", f32, timeout)
        if exp["status"] != "ok":
            return f32, q8, exp
    if not (reuse and q8.exists()):
        quantize(f32, q8, activations, weights, per_channel, images)
    return f32, q8, None


def report(path, target, out, timeout):
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "swbuild.cli", "report", str(path), "--target", target, "-o", str(out),
                        "--json", "-Q"], capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        return {"status": "error", "error": (p.stderr.strip().splitlines() or [""])[-1][-600:]}
    d = json.loads(p.stdout)
    return {"status": "ok", "seconds": round(time.perf_counter() - t0, 1), "modeled_ms": d["modeled_seconds"] * 1e3,
            "cycles": d["cycles"], "gdram_bytes": d["gdram_bytes"], "kernel_launches": d["kernel_launches"],
            "tensorized_fraction": d["tensorized_fraction"], "memcpy_bytes": d["memcpy_bytes"],
            "instruction_cycles": d["instruction_cycles"],
            "classes": sorted({s.get("class") for k in d["kernels"] for s in k.get("kernels", [k])}),
            "launches": launches(d)}


def launches(d, top=3):
    """Per launch, largest first: cycles, share of the model's, GDRAM bytes, the operators it
    runs and its `top` costliest instructions (summed over the 16 cores, as the report has them)."""
    out = []
    for ln in sorted(d["kernels"], key=lambda k: -k["cycles"]):
        ic = sorted(ln.get("instruction_cycles", {}).items(), key=lambda kv: -kv[1])
        out.append({"name": ln["name"], "cycles": ln["cycles"], "share": round(ln["cycles"] / max(1, d["cycles"]), 3),
                    "gdram_bytes": ln["gdram_bytes"], "ops": [k["op"] for k in ln.get("kernels", [ln])],
                    "top_instructions": {k: v for k, v in ic[:top] if v}})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--torch-python", default=os.environ.get("SWBUILD_TORCH_PYTHON", sys.executable))
    ap.add_argument("--target", default="diannao-emu", help="where float and int8 are compared (default diannao-emu)")
    ap.add_argument("--activations", default="QInt8", choices=["QInt8", "QUInt8"])
    ap.add_argument("--weights", default="QInt8", choices=["QInt8", "QUInt8"])
    ap.add_argument("--per-channel", action="store_true")
    ap.add_argument("--images", type=int, default=4, help="calibration images")
    ap.add_argument("--check", nargs="*", default=[], help="targets to `swbuild check` the int8 model on")
    ap.add_argument("--timeout", type=int, default=3600)
    ap.add_argument("--keep", help="export and build here instead of a temporary directory")
    a = ap.parse_args(argv)
    work = Path(a.keep or tempfile.mkdtemp(prefix="quantized-resnet-"))
    work.mkdir(parents=True, exist_ok=True)
    f32, q8, failed = export_and_quantize(work, a.torch_python, a.timeout, a.activations, a.weights, a.per_channel,
                                          a.images)
    if failed:
        print(json.dumps({"status": "error", "export": failed}))
        return 2
    doc = {"model": "resnet18", "target": a.target, "quantization": {"format": "QDQ", "activations": a.activations,
                                                                      "weights": a.weights, "per_channel": a.per_channel},
           "float32": report(f32, a.target, work / "build" / "f32", a.timeout),
           "int8": report(q8, a.target, work / "build" / "int8", a.timeout), "checks": {}}
    if doc["float32"]["status"] == doc["int8"]["status"] == "ok":
        doc["speedup"] = doc["float32"]["cycles"] / doc["int8"]["cycles"]
        doc["gdram_ratio"] = doc["float32"]["gdram_bytes"] / doc["int8"]["gdram_bytes"]
    for t in a.check:
        doc["checks"][t] = model_zoo.check(q8, t, work / "build" / f"check-{t}", a.timeout)
    print(json.dumps(doc, indent=1, sort_keys=True))
    return 0 if all(c.get("status") == "pass" for c in doc["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
