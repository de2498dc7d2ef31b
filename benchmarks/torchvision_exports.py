#!/usr/bin/env python3
"""torchvision models exported by PyTorch through `swbuild check`, grouping on and off (issue 16's
"the exported ResNet-18, MobileNetV2 and ShuffleNetV2 still match"). torch and torchvision are
no dependency of swbuild: the export runs in a Python that has them (--torch-python, or
$SWBUILD_TORCH_PYTHON; e.g. a venv with `pip install torch==2.14.1 torchvision==0.29.1`),
the checks in this one.

    python benchmarks/torchvision_exports.py --torch-python /tmp/torchvenv/bin/python
    python benchmarks/torchvision_exports.py --torch-python PY --models resnet18 --targets diannao-emu
    python benchmarks/torchvision_exports.py --torch-python PY --models efficientnet_b0 convnext_tiny --grouping on

Each model is built with random weights (no download; BatchNorm statistics drawn away from 0/1
so folding them is exercised), exported for a 1x3x224x224 input with both exporters
(TorchScript, `dynamo=False`, opset 17; and `dynamo=True`, weights in an external data file),
then checked against onnxruntime on every target and grouping mode. Prints one JSON document;
exit status 0 only when every check passes.
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

DEFAULT = ["resnet18", "mobilenet_v2", "shufflenet_v2_x1_0"]

EXPORT = r"""
import sys, torch, torchvision
name, exporter, out = sys.argv[1:4]
torch.manual_seed(0)
m = getattr(torchvision.models, name)(weights=None).eval()
for mod in m.modules():
    if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
        mod.running_mean.uniform_(-0.1, 0.1)
        mod.running_var.uniform_(0.5, 1.5)
        mod.weight.data.uniform_(0.5, 1.5)
        mod.bias.data.uniform_(-0.1, 0.1)
x = torch.randn(1, 3, 224, 224)
kw = dict(dynamo=True) if exporter == "dynamo" else dict(dynamo=False, opset_version=17)
torch.onnx.export(m, (x,), out, input_names=["input"], output_names=["logits"], **kw)
"""


def export(py, name, exporter, path):
    t0 = time.perf_counter()
    p = subprocess.run([py, "-c", EXPORT, name, exporter, str(path)], capture_output=True, text=True)
    if p.returncode != 0:
        return {"status": "error", "reason": p.stderr.strip()[-400:]}
    return {"status": "ok", "seconds": round(time.perf_counter() - t0, 1)}


def check(path, target, grouping, out):
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "swbuild.cli", "check", str(path), "--target", target,
                        "--grouping", grouping, "-o", str(out), "-Q"], capture_output=True, text=True)
    last = (p.stdout.strip().splitlines() or ["{}"])[-1]
    res = json.loads(last) if last.startswith("{") else {"status": "error", "reason": p.stderr.strip()[-400:]}
    emu = res.get("emulator") or {}
    return {"status": res.get("status"), "max_abs_err": res.get("max_abs_err"), "max_rel_err": res.get("max_rel_err"),
            "reason": res.get("reason"), "seconds": round(time.perf_counter() - t0, 1),
            **{k: emu[k] for k in ("dma_mismatches", "write_conflicts", "races", "violations") if k in emu}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--torch-python", default=os.environ.get("SWBUILD_TORCH_PYTHON", sys.executable),
                    help="a Python with torch and torchvision (default: $SWBUILD_TORCH_PYTHON, else this one)")
    ap.add_argument("--models", nargs="+", default=DEFAULT, help="torchvision.models names")
    ap.add_argument("--exporters", nargs="+", default=["torchscript", "dynamo"], choices=["torchscript", "dynamo"])
    ap.add_argument("--targets", nargs="+", default=["sunway-emu"])
    ap.add_argument("--grouping", nargs="+", default=["on", "off"], choices=["on", "off"])
    ap.add_argument("--keep", help="export and build here instead of a temporary directory")
    a = ap.parse_args(argv)
    probe = subprocess.run([a.torch_python, "-c", "import torch, torchvision; print(torch.__version__, torchvision.__version__)"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        print(json.dumps({"status": "skipped", "reason": f"{a.torch_python} has no torch and torchvision"}))
        return 0
    work = Path(a.keep or tempfile.mkdtemp(prefix="torchvision-exports-"))
    work.mkdir(parents=True, exist_ok=True)
    doc = {"torch_torchvision": probe.stdout.strip(), "models": []}
    for name in a.models:
        for exporter in a.exporters:
            path = work / f"{name}.{exporter}.onnx"
            row = {"model": name, "exporter": exporter, "export": export(a.torch_python, name, exporter, path),
                   "checks": {}}
            if row["export"]["status"] == "ok":
                for target in a.targets:
                    for mode in a.grouping:
                        out = work / "build" / f"{name}.{exporter}.{target}.grouping-{mode}"
                        row["checks"][f"{target} grouping={mode}"] = check(path, target, mode, out)
            doc["models"].append(row)
            print(f"{name} {exporter}: " + ", ".join(f"{k} {v['status']}" for k, v in row["checks"].items()),
                  file=sys.stderr, flush=True)
    ok = all(r["export"]["status"] == "ok" and r["checks"] and all(c["status"] == "pass" for c in r["checks"].values())
             for r in doc["models"])
    doc["status"] = "pass" if ok else "fail"
    print(json.dumps(doc, indent=2, sort_keys=True))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
