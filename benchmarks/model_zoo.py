#!/usr/bin/env python3
"""Modern models as PyTorch exports them, through `swbuild check` on every emulated target
(issue 37). torch, torchvision and transformers are no dependency of swbuild: the export runs
in a Python that has them (--torch-python, or $SWBUILD_TORCH_PYTHON; default this one).

    python benchmarks/model_zoo.py --list
    python benchmarks/model_zoo.py --models resnet18 distilbert --exporters dynamo --targets sunway-emu
    python benchmarks/model_zoo.py --out zoo.json            # everything: hours on two cores
    python benchmarks/model_zoo.py --models resnet18 mobilenet_v2 shufflenet_v2_x1_0 --grouping on off
    python benchmarks/model_zoo.py --table zoo1.json zoo2.json   # the Markdown table of earlier runs

Every model gets random weights (seeded; nothing is downloaded). BatchNorm statistics are
recalibrated on random batches in training mode before the export, and weight matrices
initialised to zeros (torchvision's ViT heads) get seeded random values, so the outputs are not
the vanishing values of a fresh initialisation (which a check cannot judge). Each model is
exported with both exporters (TorchScript: `dynamo=False`, opset 17; dynamo: `dynamo=True`,
the default since PyTorch 2.9) and checked against onnxruntime on each target. Prints one JSON
document: per model, exporter and target the status (pass, fail, refused, vacuous, error),
the reason, the error and the seconds, and a summary per exporter and target. An export that
onnxruntime cannot load either is `invalid` (no check: there is no reference). A refusal is
only as good as its reason: read them.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# name -> (source, constructor expression, inputs). Inputs: (name, shape, dtype); the export
# script builds them with a seeded generator (token ids below the vocabulary, masks of ones).
IMG = [("input", [1, 3, 224, 224], "float32")]
TOKENS = [("input_ids", [1, 32], "int64"), ("attention_mask", [1, 32], "int64")]
TV = "torchvision.models.{}(weights=None)"
MODELS = {
    # torchvision classification
    "alexnet": ("torchvision", TV.format("alexnet"), IMG),
    "vgg11_bn": ("torchvision", TV.format("vgg11_bn"), IMG),
    "resnet18": ("torchvision", TV.format("resnet18"), IMG),
    "resnet50": ("torchvision", TV.format("resnet50"), IMG),
    "resnext50_32x4d": ("torchvision", TV.format("resnext50_32x4d"), IMG),
    "wide_resnet50_2": ("torchvision", TV.format("wide_resnet50_2"), IMG),
    "squeezenet1_1": ("torchvision", TV.format("squeezenet1_1"), IMG),
    "densenet121": ("torchvision", TV.format("densenet121"), IMG),
    "googlenet": ("torchvision", "torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=True)", IMG),
    "inception_v3": ("torchvision", "torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=True)",
                     [("input", [1, 3, 299, 299], "float32")]),
    "mobilenet_v2": ("torchvision", TV.format("mobilenet_v2"), IMG),
    "mobilenet_v3_small": ("torchvision", TV.format("mobilenet_v3_small"), IMG),
    "mobilenet_v3_large": ("torchvision", TV.format("mobilenet_v3_large"), IMG),
    "shufflenet_v2_x1_0": ("torchvision", TV.format("shufflenet_v2_x1_0"), IMG),
    "mnasnet1_0": ("torchvision", TV.format("mnasnet1_0"), IMG),
    "efficientnet_b0": ("torchvision", TV.format("efficientnet_b0"), IMG),
    "efficientnet_v2_s": ("torchvision", TV.format("efficientnet_v2_s"), IMG),
    "regnet_x_400mf": ("torchvision", TV.format("regnet_x_400mf"), IMG),
    "regnet_y_400mf": ("torchvision", TV.format("regnet_y_400mf"), IMG),
    "convnext_tiny": ("torchvision", TV.format("convnext_tiny"), IMG),
    "swin_t": ("torchvision", TV.format("swin_t"), IMG),
    "swin_v2_t": ("torchvision", TV.format("swin_v2_t"), IMG),
    "vit_b_16": ("torchvision", TV.format("vit_b_16"), IMG),
    "maxvit_t": ("torchvision", TV.format("maxvit_t"), IMG),
    # torchvision segmentation
    "deeplabv3_mobilenet_v3_large": ("torchvision", "torchvision.models.segmentation.deeplabv3_mobilenet_v3_large("
                                     "weights=None, weights_backbone=None, aux_loss=False)", IMG),
    "fcn_resnet50": ("torchvision", "torchvision.models.segmentation.fcn_resnet50(weights=None, weights_backbone=None,"
                     " aux_loss=False)", IMG),
    "lraspp_mobilenet_v3_large": ("torchvision", "torchvision.models.segmentation.lraspp_mobilenet_v3_large("
                                  "weights=None, weights_backbone=None)", IMG),
    # transformers, from their default configurations (a LLaMA made small: its default is 7B)
    "bert": ("transformers", "transformers.BertModel(transformers.BertConfig())", TOKENS),
    "distilbert": ("transformers", "transformers.DistilBertModel(transformers.DistilBertConfig())", TOKENS),
    "roberta": ("transformers", "transformers.RobertaModel(transformers.RobertaConfig())", TOKENS),
    "albert": ("transformers", "transformers.AlbertModel(transformers.AlbertConfig())", TOKENS),
    "electra": ("transformers", "transformers.ElectraModel(transformers.ElectraConfig())", TOKENS),
    "gpt2": ("transformers", "transformers.GPT2Model(transformers.GPT2Config())", TOKENS),
    # eager attention: dynamo's decomposition of T5's SDPA path views a transposed tensor as
    # (1, 32, 512) and fails inside PyTorch (pytorch/pytorch#141107); the same model for both exporters
    "t5_encoder": ("transformers", "transformers.T5EncoderModel(transformers.T5Config(attn_implementation='eager'))",
                   TOKENS),
    "llama_small": ("transformers", "transformers.LlamaModel(transformers.LlamaConfig(hidden_size=256, "
                    "intermediate_size=688, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, "
                    "vocab_size=32000))", TOKENS),
    "whisper_encoder": ("transformers", "transformers.WhisperModel(transformers.WhisperConfig()).get_encoder()",
                        [("input_features", [1, 80, 3000], "float32")]),
    "hf_vit": ("transformers", "transformers.ViTModel(transformers.ViTConfig())", [("pixel_values", [1, 3, 224, 224], "float32")]),
    "segformer": ("transformers", "transformers.SegformerForSemanticSegmentation(transformers.SegformerConfig())",
                  [("pixel_values", [1, 3, 224, 224], "float32")]),
}

EXPORT = r"""
import json, sys, torch
import torchvision, torchvision.models.segmentation
try:
    import transformers
except ImportError:
    transformers = None
expr, inputs, exporter, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
torch.manual_seed(0)
m = eval(expr)
if hasattr(m, "config"):       # (return_dict stays: transformers 5's SegFormer reads its encoder's
    m.config.use_cache = False  # outputs by attribute, a tuple breaks it; Wrap takes the first output)
g = torch.Generator().manual_seed(1)
def make(shape, dtype, batch=None):
    shape = [batch or shape[0]] + shape[1:]
    if dtype == "int64":
        return torch.randint(0, 1000, shape, generator=g) if len(shape) == 2 else torch.zeros(shape, dtype=torch.int64)
    return torch.randn(shape, generator=g)
# A weight matrix initialised to zeros (torchvision's ViT heads) makes the output exactly 0,
# which a check cannot judge: give it seeded random values of a Linear layer's usual scale
with torch.no_grad():
    for p in m.parameters():
        if p.dim() >= 2 and not p.any():
            p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(2)) * 0.02)
# BatchNorm statistics from random batches (train mode), so outputs do not vanish
bns = [x for x in m.modules() if isinstance(x, torch.nn.modules.batchnorm._BatchNorm)]
if bns:
    for b in bns:
        b.reset_running_stats()
        b.momentum = None           # cumulative average over the batches below
    m.train()
    with torch.no_grad():
        for _ in range(4):
            m(*[make(s, d, 4) for n, s, d in inputs if d == "float32"])
m.eval()
args = []
for n, s, d in inputs:
    args.append(torch.ones(s, dtype=torch.int64) if n == "attention_mask" else make(s, d))
names = [n for n, s, d in inputs]
class Wrap(torch.nn.Module):
    # one tensor out: the first of a tuple, of a segmentation model's dict ("out") or of a
    # transformers ModelOutput (its first field set). transformers models take their inputs
    # by name: GPT-2's second positional parameter is the cache, not the attention mask
    def __init__(self, m):
        super().__init__()
        self.m = m
        self.by_name = transformers is not None and isinstance(m, transformers.PreTrainedModel)
    def forward(self, *a):
        y = self.m(**dict(zip(names, a))) if self.by_name else self.m(*a)
        if isinstance(y, dict):
            y = y["out"] if "out" in y else next(iter(y.values()))
        while isinstance(y, (tuple, list)):
            y = y[0]
        return y
kw = dict(dynamo=True) if exporter == "dynamo" else dict(dynamo=False, opset_version=17)
torch.onnx.export(Wrap(m), tuple(args), out, input_names=[n for n, s, d in inputs], output_names=["output"], **kw)
"""


def export(py, name, exporter, path, timeout):
    _, expr, inputs = MODELS[name]
    t0 = time.perf_counter()
    try:
        p = subprocess.run([py, "-c", EXPORT, expr, json.dumps(inputs), exporter, str(path)],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "error", "error": f"export did not finish in {timeout} s", "seconds": timeout}
    sec = round(time.perf_counter() - t0, 1)
    if p.returncode != 0:
        return {"status": "error", "error": p.stderr.strip()[-600:], "reason": last_error_line(p.stderr), "seconds": sec}
    return {"status": "ok", "seconds": sec}


ANSI = re.compile(r"\x1b\[[0-9;]*m")
# a traceback's verdict: "AttributeError: ...", or torch.onnx's "<class 'AttributeError'>: ..."
EXCEPTION_LINE = re.compile(r"^(<class '[\w.]+'>|[\w.]*(Error|Exception|Exit|Interrupt|Warning)|[\w.]+\.[A-Z]\w*)\s*:")


def last_error_line(text):
    """One line for a table's footnote: the last exception line of a traceback, else the last
    non-empty line; colours stripped, whitespace collapsed, pipes escaped for Markdown."""
    lines = [" ".join(ANSI.sub("", ln).split()) for ln in (text or "").splitlines()]
    lines = [ln for ln in lines if ln]
    hits = [ln for ln in lines if EXCEPTION_LINE.match(ln)]
    line = (hits or lines or [""])[-1]
    return line[:300].replace("|", "\\|")


def validate(path):
    """None when onnxruntime loads the export, else why not (one line): an export onnxruntime
    rejects too is invalid ONNX, and no check has a reference for it."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    try:
        ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as e:
        return f"onnxruntime rejects the export too: {last_error_line(f'{type(e).__name__}: {e}')}"
    return None


def check(path, target, out, timeout, grouping=None):
    """`swbuild check` in a process of its own; its last stdout line is the verdict document."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-m", "swbuild.cli", "check", str(path), "--target", target,
                            "-o", str(out), "-Q"] + (["--grouping", grouping] if grouping else []),
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "error", "error": f"check did not finish in {timeout} s", "seconds": timeout}
    sec = round(time.perf_counter() - t0, 1)
    last = (p.stdout.strip().splitlines() or [""])[-1]
    try:
        res = json.loads(last)
    except ValueError:
        err = (p.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
        return {"status": "error", "error": err[-600:], "exit": p.returncode, "seconds": sec}
    emu = res.get("emulator") or {}
    row = {"status": res.get("status"), "reason": res.get("reason"), "exit": p.returncode, "seconds": sec}
    for k in ("max_abs_err", "max_rel_err", "compared", "error", "note"):   # note: a pass by float64 rounding
        if res.get(k) is not None:
            row[k] = res[k]
    for k in ("dma_mismatches", "write_conflicts", "races", "violations"):
        if emu.get(k):
            row[k] = emu[k]
    return row


def summary(rows, exporters, targets):
    out = {}
    for e in exporters:
        for t in targets:
            counts = {}
            for r in rows:
                if r["exporter"] != e:
                    continue
                st = r["export"]["status"]
                s = r["checks"].get(t, {}).get("status") if st == "ok" else f"{st} export" if st == "invalid" else "export error"
                counts[s or "error"] = counts.get(s or "error", 0) + 1
            out[f"{e} {t}"] = dict(sorted(counts.items()))
    return out


def table(paths):
    """A Markdown table of the rows of earlier runs' JSON documents (--out files): a line per
    model, a column per exporter and target; a refusal or failure points to a footnote of one
    line (last_error_line), listed after the table. A model and exporter in several files (a
    run split over sessions, a target redone) is one row: the later file's export and checks win."""
    merged = {}
    for p in paths:
        for r in json.loads(Path(p).read_text())["rows"]:
            key = (r["model"], r["exporter"])
            old = merged.get(key)
            merged[key] = dict(r, checks={**(old["checks"] if old and r["export"]["status"] == "ok" else {}),
                                          **r["checks"]})
    rows = list(merged.values())
    targets = sorted({t for r in rows for t in r["checks"]})
    cols = [(e, t) for e in sorted({r["exporter"] for r in rows}) for t in targets]
    lines = ["| model | " + " | ".join(f"{e} {t}" for e, t in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    models = sorted({r["model"] for r in rows})
    notes = {}     # footnote text -> its number (an export's failure is one note for all its targets)

    def note(text):
        return notes.setdefault(text, len(notes) + 1)
    for m in models:
        cells = []
        for e, t in cols:
            r = next((r for r in rows if r["model"] == m and r["exporter"] == e), None)
            if r is None:
                cells.append("")
            elif r["export"]["status"] == "invalid":
                why = r["export"]["reason"]
                cells.append(f"invalid export [{note(f'{m} ({e}): {why}')}]")
            elif r["export"]["status"] != "ok":
                why = r["export"].get("reason") or last_error_line(r["export"].get("error", ""))
                cells.append(f"export error [{note(f'{m} ({e}): export failed: {why}')}]")
            elif t not in r["checks"]:
                cells.append("")
            else:
                c = r["checks"][t]
                if c["status"] == "pass":
                    why = f" [{note(f'{m} ({e}, {t}): ' + last_error_line(c['note']))}]" if c.get("note") else ""
                    cells.append(f"pass ({c['seconds']:.0f} s){why}")
                else:
                    why = last_error_line(c.get("reason") or c.get("error") or "")
                    cells.append(f"{c['status']} [{note(f'{m} ({e}, {t}): {why}')}]")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines + [""] + [f"- [{i}] {n}" for n, i in notes.items()])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--torch-python", default=os.environ.get("SWBUILD_TORCH_PYTHON", sys.executable),
                    help="a Python with torch, torchvision and transformers (default: $SWBUILD_TORCH_PYTHON, else this one)")
    ap.add_argument("--models", nargs="+", default=list(MODELS), help="names from --list (default: all)")
    ap.add_argument("--exporters", nargs="+", default=["torchscript", "dynamo"], choices=["torchscript", "dynamo"])
    ap.add_argument("--targets", nargs="+", default=["sunway-emu", "sunway-pro-emu", "diannao-emu"])
    ap.add_argument("--grouping", nargs="+", choices=["on", "off"],
                    help="check with grouping on and/or off (default: the target's default); a check per mode")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per export and per check")
    ap.add_argument("--keep", help="export here instead of a temporary directory; an export already there is"
                    " reused (delete it to export again); builds always go to a temporary directory")
    ap.add_argument("--out", help="also write the JSON document to this file")
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    ap.add_argument("--table", nargs="+", metavar="JSON", help="print the Markdown table of earlier --out files and exit")
    a = ap.parse_args(argv)
    if a.table:
        print(table(a.table))
        return 0
    if a.list:
        for n, (src, _, ins) in MODELS.items():
            print(f"{n:32} {src:13} " + ", ".join(f"{i}{s}" for i, s, _ in ins))
        return 0
    unknown = [m for m in a.models if m not in MODELS]
    if unknown:
        ap.error(f"unknown models: {', '.join(unknown)} (see --list)")
    probe = subprocess.run([a.torch_python, "-c", "import torch, torchvision, transformers; "
                            "print(torch.__version__, torchvision.__version__, transformers.__version__)"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        print(json.dumps({"status": "error", "reason": f"{a.torch_python} lacks torch, torchvision or transformers"}))
        return 2
    work = Path(a.keep or tempfile.mkdtemp(prefix="model-zoo-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in a.models:
        for exporter in a.exporters:
            path = work / f"{name}.{exporter}.onnx"
            done = a.keep and path.exists()
            row = {"model": name, "source": MODELS[name][0], "exporter": exporter, "checks": {},
                   "export": {"status": "ok", "reused": True} if done else export(a.torch_python, name, exporter,
                                                                                  path, a.timeout)}
            why = validate(path) if row["export"]["status"] == "ok" else None
            if why:
                row["export"].update(status="invalid", reason=why)
            if row["export"]["status"] == "ok":
                for t in a.targets:
                    for mode in a.grouping or [None]:
                        key = t if mode is None else f"{t} grouping={mode}"
                        # builds are thrown away after their check: a big model with embedded
                        # weights is about 1 GB, and a whole zoo of kept builds filled the disk
                        with tempfile.TemporaryDirectory(prefix="model-zoo-build-") as b:
                            row["checks"][key] = check(path, t, Path(b) / f"{name}.{exporter}", a.timeout, mode)
            rows.append(row)
            print(f"{name} {exporter}: " + (", ".join(f"{t} {c['status']}" for t, c in row["checks"].items())
                                            or row["export"]["status"]), file=sys.stderr, flush=True)
    doc = {"torch_torchvision_transformers": probe.stdout.strip(), "rows": rows,
           "summary": summary(rows, a.exporters, sorted({t for r in rows for t in r["checks"]}))}
    text = json.dumps(doc, indent=1, sort_keys=True)
    if a.out:
        Path(a.out).write_text(text + "\n")
    print(text)
    ok = all(r["export"]["status"] == "ok" and all(c["status"] == "pass" for c in r["checks"].values()) for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
