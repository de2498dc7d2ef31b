"""float16 conversions of real exports through `swbuild check` (issue 36's Done-when; needs
torch, torchvision, transformers and onnxconverter-common, which CI lacks: tests/core/
test_float16.py converts small onnx.helper graphs instead).

    python benchmarks/fp16_exports.py [--model resnet18 --model bert ...] [--target T ...] [--keep DIR]

Exports torchvision's resnet18 (random weights, 1x3x224x224) and a BertModel (2 layers,
sequence 32, `hf_exports.export_bert`), converts each with
`onnxconverter_common.float16.convert_float_to_float16`, and runs `swbuild check` on each
target (default: sunway-emu, sunway-pro-emu, diannao-emu). Prints one JSON document: per
model and target the status, max abs error, the output's peak, the fp16 tolerance used and
wall-clock seconds.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS = ["sunway-emu", "sunway-pro-emu", "diannao-emu"]


def export(name, path):
    import torch
    if name == "resnet18":
        import torchvision
        torch.manual_seed(0)
        m = torchvision.models.resnet18().eval()
        torch.onnx.export(m, (torch.randn(1, 3, 224, 224),), str(path), input_names=["x"], output_names=["y"],
                          opset_version=17, dynamo=False)
    else:
        sys.path.insert(0, str(Path(__file__).parent))
        from hf_exports import export_bert
        export_bert(path, 2, 32)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", choices=["resnet18", "bert"])
    ap.add_argument("--target", action="append")
    ap.add_argument("--keep", help="export and build here instead of a temp dir")
    a = ap.parse_args(argv)
    try:
        import onnx
        from onnxconverter_common import float16
        import torch  # noqa: F401
    except ImportError as e:
        print(json.dumps({"status": "skipped", "reason": f"needs torch, torchvision, transformers and "
                                                         f"onnxconverter-common: {e}"}))
        return 0
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="fp16-exports-"))
    work.mkdir(parents=True, exist_ok=True)
    doc = {}
    for name in a.model or ["resnet18", "bert"]:
        f32, f16 = work / f"{name}.onnx", work / f"{name}_fp16.onnx"
        export(name, f32)
        onnx.save(float16.convert_float_to_float16(onnx.load(str(f32))), str(f16))
        doc[name] = {}
        for target in a.target or TARGETS:
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "swbuild.cli", "check", str(f16), "--target", target,
                                "-o", str(work / f"{name}-{target}")], capture_output=True, text=True)
            last = (p.stdout.strip().splitlines() or ["{}"])[-1]
            res = json.loads(last) if last.startswith("{") else {"status": "error", "reason": p.stderr.strip()[-300:]}
            outs = res.get("outputs") or [{}]
            doc[name][target] = {"status": res.get("status"), "max_abs_err": res.get("max_abs_err"),
                                 "peak": outs[0].get("peak"), "fp16_tolerance": outs[0].get("fp16_tolerance"),
                                 "reason": res.get("reason"), "seconds": round(time.perf_counter() - t0, 1)}
    print(json.dumps(doc, indent=2, sort_keys=True))
    return 0 if all(c["status"] == "pass" for m in doc.values() for c in m.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
