#!/usr/bin/env python3
"""torchvision's quantizable ResNet-18 quantized BY PYTORCH, exported to ONNX and put through
`swbuild check` on every emulated target (issue 36).

Random weights, BatchNorm statistics recalibrated on random batches in train mode (as
benchmarks/model_zoo.py exports), then static int8 quantization by PyTorch along one of these paths:

    eager   fuse_model + prepare + calibrate + convert (torch.ao.quantization, "x86" qconfig)
    fx      prepare_fx + calibrate + convert_fx (same qconfig mapping)
    pt2e-xnnpack / pt2e-x86
            torch.export + prepare_pt2e + calibrate + convert_pt2e with XNNPACKQuantizer or
            X86InductorQuantizer (torch.ao's, or torchao's where torch no longer ships them)

and exported by the legacy TorchScript exporter (opset 17) or the dynamo exporter. Each export is
run by onnxruntime once (a graph onnxruntime refuses is reported, not checked), its op census is
recorded, and it is checked on the given targets. Prints one JSON document.

    python benchmarks/torch_quantized.py --torch-python /path/to/python-with-torch --keep /tmp/tq

torch is no dependency of swbuild: the export runs in a Python that has it (--torch-python, or
$SWBUILD_TORCH_PYTHON; default this one).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model_zoo import check  # noqa: E402

# (quantization path, exporter) pairs tried by default
PATHS = [("eager", "torchscript"), ("fx", "torchscript"), ("eager", "dynamo"), ("fx", "dynamo"),
         ("pt2e-xnnpack", "dynamo"), ("pt2e-x86", "dynamo")]

EXPORT = r"""
import sys, warnings, torch
warnings.filterwarnings("ignore")
from torchvision.models.quantization import resnet18
mode, exporter, out = sys.argv[1], sys.argv[2], sys.argv[3]
torch.manual_seed(0)
m = resnet18(weights=None, quantize=False)
g = torch.Generator().manual_seed(1)
# BatchNorm statistics from random batches (train mode), so outputs do not vanish
for b in [x for x in m.modules() if isinstance(x, torch.nn.modules.batchnorm._BatchNorm)]:
    b.reset_running_stats()
    b.momentum = None           # cumulative average over the batches below
m.train()
with torch.no_grad():
    for _ in range(4):
        m(torch.randn(4, 3, 224, 224, generator=g))
m.eval()
calib = [torch.randn(2, 3, 224, 224, generator=g) for _ in range(4)]
x = torch.randn(1, 3, 224, 224, generator=g)
if mode == "eager":
    import torch.ao.quantization as tq
    m.fuse_model(is_qat=False)
    m.qconfig = tq.get_default_qconfig("x86")
    tq.prepare(m, inplace=True)
    with torch.no_grad():
        for c in calib:
            m(c)
    q = tq.convert(m)
elif mode == "fx":
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
    p = prepare_fx(m, get_default_qconfig_mapping("x86"), (x,))
    with torch.no_grad():
        for c in calib:
            p(c)
    q = convert_fx(p)
else:
    try:
        from torch.ao.quantization.quantize_pt2e import convert_pt2e, prepare_pt2e
        from torch.ao.quantization.quantizer import x86_inductor_quantizer as xiq, xnnpack_quantizer as xnq
    except ImportError:     # torch >= 2.10 moved PT2E quantization to torchao
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as xiq
        from executorch.backends.xnnpack.quantizer import xnnpack_quantizer as xnq
    if mode == "pt2e-xnnpack":
        qz = xnq.XNNPACKQuantizer().set_global(xnq.get_symmetric_quantization_config())
    else:
        qz = xiq.X86InductorQuantizer().set_global(xiq.get_default_x86_inductor_quantization_config())
    p = prepare_pt2e(torch.export.export(m, (x,)).module(), qz)
    with torch.no_grad():
        for c in calib:
            p(c)
    q = convert_pt2e(p)
kw = dict(dynamo=True) if exporter == "dynamo" else dict(dynamo=False, opset_version=17)
torch.onnx.export(q, (x,), out, input_names=["input"], output_names=["output"], **kw)
"""


def export(py, mode, exporter, path, timeout):
    t0 = time.perf_counter()
    try:
        p = subprocess.run([py, "-c", EXPORT, mode, exporter, str(path)], capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "error", "error": f"export did not finish in {timeout} s", "seconds": timeout}
    sec = round(time.perf_counter() - t0, 1)
    if p.returncode != 0 or not path.exists():
        # the exception's own line (the dynamo exporter ends with advice, not the cause)
        lines = [ln.strip() for ln in p.stderr.splitlines() if ln.strip() and not ln.startswith(" ")]
        cause = [ln for ln in lines if ("Error" in ln or "Exception" in ln) and ":" in ln and "Refer to" not in ln]
        return {"status": "error", "error": ((cause or lines or ["no file written"])[-1])[-600:], "seconds": sec}
    return {"status": "ok", "seconds": sec}


def census(path):
    """The export's op counts and whether onnxruntime runs it (the reference `check` compares to)."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    m = onnx.load(str(path))
    ops = collections.Counter((n.domain + "::" if n.domain else "") + n.op_type for n in m.graph.node)
    row = {"opsets": {o.domain or "ai.onnx": o.version for o in m.opset_import}, "ops": dict(sorted(ops.items()))}
    try:
        s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        feed = {i.name: np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
                for i in s.get_inputs()}
        s.run(None, feed)
        row["onnxruntime"] = "ok"
    except Exception as e:  # noqa: BLE001 - any refusal by onnxruntime is the finding
        row["onnxruntime"] = f"error: {str(e).splitlines()[0][:400]}"
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--torch-python", default=os.environ.get("SWBUILD_TORCH_PYTHON", sys.executable))
    ap.add_argument("--paths", nargs="+", default=[f"{q}:{e}" for q, e in PATHS],
                    help="quantization:exporter pairs (default: all of " + ", ".join(f"{q}:{e}" for q, e in PATHS) + ")")
    ap.add_argument("--targets", nargs="+", default=["sunway-emu", "sunway-pro-emu", "diannao-emu"])
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per export and per check")
    ap.add_argument("--keep", help="export and build here instead of a temporary directory; an export already"
                    " there is reused (delete it to export again)")
    a = ap.parse_args(argv)
    work = Path(a.keep or tempfile.mkdtemp(prefix="torch-quantized-"))
    work.mkdir(parents=True, exist_ok=True)
    probe = subprocess.run([a.torch_python, "-c", "import torch, torchvision; print(torch.__version__, "
                            "torchvision.__version__)"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(json.dumps({"status": "error", "reason": f"{a.torch_python} lacks torch or torchvision"}))
        return 2
    rows = []
    for pe in a.paths:
        mode, exporter = pe.split(":")
        path = work / f"resnet18.{mode}.{exporter}.onnx"
        reused = bool(a.keep) and path.exists()
        row = {"quantization": mode, "exporter": exporter, "checks": {},
               "export": {"status": "ok", "reused": True} if reused else export(a.torch_python, mode, exporter,
                                                                                path, a.timeout)}
        if row["export"]["status"] == "ok":
            row.update(census(path))
            if row["onnxruntime"] == "ok":
                for t in a.targets:
                    row["checks"][t] = check(path, t, work / "build" / f"{mode}.{exporter}.{t}", a.timeout)
        rows.append(row)
        print(f"{pe}: " + (", ".join(f"{t} {c['status']}" for t, c in row["checks"].items())
                           or row.get("onnxruntime") or row["export"]["status"]), file=sys.stderr, flush=True)
    print(json.dumps({"torch_torchvision": probe.stdout.strip(), "rows": rows}, indent=1, sort_keys=True))
    ok = any(r["checks"] for r in rows) and all(c["status"] == "pass" for r in rows for c in r["checks"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
