#!/usr/bin/env python3
"""torchvision's ResNet-18 quantized by onnxruntime, through `swbuild check` on every emulated
target (issue 36). The export needs torch (--torch-python, or $SWBUILD_TORCH_PYTHON); random
weights with BatchNorm recalibrated, as benchmarks/model_zoo.py exports it. The float model is
quantized by onnxruntime.quantization.quantize_static (uint8 activations, int8 per-channel
weights, seeded calibration images) in the QOperator format (QLinearConv, com.microsoft
QLinearAdd / QLinearGlobalAveragePool / QGemm) and in the QDQ format, and each, with the float
model, is checked against onnxruntime. Prints one JSON document: per format and target the
status, the largest error, the quantization step `check` allows and the emulator's modelled
cycles (DianNao) or seconds (Sunway).

    python benchmarks/quant_resnet18.py --torch-python /path/to/python-with-torch --keep /tmp/q18
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

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model_zoo import export  # noqa: E402

FORMATS = ("float", "QOperator", "QDQ")


def quantize(src, dst, fmt, images=4, seed=0):
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    m = onnx.load(src)
    x = m.graph.input[0]
    shape = [d.dim_value for d in x.type.tensor_type.shape.dim]
    rng = np.random.default_rng(seed)

    class Images(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{x.name: rng.standard_normal(shape).astype(np.float32)} for _ in range(images)])

        def get_next(self):
            return next(self.it, None)
    quantize_static(str(src), str(dst), Images(), quant_format=getattr(QuantFormat, fmt),
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True)


def check(path, target, out, timeout):
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "swbuild.cli", "check", str(path), "--target", target, "-o", str(out),
                        "-Q"], capture_output=True, text=True, timeout=timeout)
    last = (p.stdout.strip().splitlines() or [""])[-1]
    try:
        res = json.loads(last)
    except ValueError:
        return {"status": "error", "error": (p.stderr.strip().splitlines() or [""])[-1][-600:]}
    emu = res.get("emulator") or {}
    row = {"status": res.get("status"), "reason": res.get("reason"), "max_abs_err": res.get("max_abs_err"),
           "seconds": round(time.perf_counter() - t0, 1)}
    outs = res.get("outputs") or [{}]
    row["quantization_step"] = outs[0].get("quantization_step")
    for k in ("cycles", "modeled_seconds", "seconds_modeled"):
        if emu.get(k) is not None:
            row[k] = emu[k]
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--torch-python", default=os.environ.get("SWBUILD_TORCH_PYTHON", sys.executable))
    ap.add_argument("--targets", nargs="+", default=["sunway-emu", "sunway-pro-emu", "diannao-emu"])
    ap.add_argument("--formats", nargs="+", default=list(FORMATS), choices=FORMATS)
    ap.add_argument("--timeout", type=int, default=3600)
    ap.add_argument("--keep", help="export and build here instead of a temporary directory")
    a = ap.parse_args(argv)
    work = Path(a.keep or tempfile.mkdtemp(prefix="quant-resnet18-"))
    work.mkdir(parents=True, exist_ok=True)
    src = work / "resnet18.onnx"
    ex = export(a.torch_python, "resnet18", "torchscript", src, a.timeout)
    if ex["status"] != "ok":
        print(json.dumps({"status": "error", "export": ex}))
        return 2
    rows = {}
    for fmt in a.formats:
        path = src if fmt == "float" else work / f"resnet18_{fmt}.onnx"
        if fmt != "float":
            quantize(src, path, fmt)
        rows[fmt] = {t: check(path, t, work / "build" / f"{fmt}.{t}", a.timeout) for t in a.targets}
        print(f"{fmt}: " + ", ".join(f"{t} {r['status']}" for t, r in rows[fmt].items()), file=sys.stderr, flush=True)
    print(json.dumps({"export": ex, "checks": rows}, indent=1, sort_keys=True))
    return 0 if all(r["status"] == "pass" for f in rows.values() for r in f.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
