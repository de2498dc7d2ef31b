"""Real PyTorch / Hugging Face exports through `swbuild check` (needs torch and transformers;
CI has neither: tests/core/test_dtypes.py builds the same mask arithmetic with onnx.helper).

    python benchmarks/hf_exports.py [--layers 12] [--seq 16] [--target sunway-emu ...] [--keep DIR]

Exports a randomly initialised `BertModel(BertConfig(num_hidden_layers=L))` (no hub download)
with int64 input_ids / attention_mask / token_type_ids at opset 17, then runs `swbuild check`
(seeded inputs: ids within the vocabulary, a random 0/1 mask) on each target. Prints one JSON
document: export seconds, the model's op counts and, per target, the check's status, errors
and wall-clock seconds.
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


def export_bert(path, layers, seq):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import BertConfig, BertModel

    class Wrapped(torch.nn.Module):     # keyword arguments: the positional order changes between versions
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.m(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state

    torch.manual_seed(0)
    cfg = BertConfig(num_hidden_layers=layers)
    model = Wrapped(BertModel(cfg, add_pooling_layer=False).eval())
    ids = torch.randint(0, cfg.vocab_size, (1, seq))
    args = (ids, torch.ones((1, seq), dtype=torch.long), torch.zeros((1, seq), dtype=torch.long))
    torch.onnx.export(model, args, str(path), input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["last_hidden_state"], opset_version=17, dynamo=False)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--target", action="append", help="default: sunway-emu")
    ap.add_argument("--keep", help="export and build here instead of a temp dir")
    a = ap.parse_args(argv)
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print(json.dumps({"status": "skipped", "reason": f"needs torch and transformers: {e}"}))
        return 0
    import onnx
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="hf-exports-"))
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"bert_l{a.layers}_s{a.seq}.onnx"
    t0 = time.perf_counter()
    export_bert(path, a.layers, a.seq)
    doc = {"model": path.name, "export_seconds": round(time.perf_counter() - t0, 1),
           "inputs": {i.name: onnx.TensorProto.DataType.Name(i.type.tensor_type.elem_type)
                      for i in onnx.load(str(path), load_external_data=False).graph.input},
           "ops": dict(sorted(collections.Counter(n.op_type for n in onnx.load(str(path), load_external_data=False)
                                                  .graph.node).items())),
           "checks": {}}
    for target in a.target or ["sunway-emu"]:
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "swbuild.cli", "check", str(path), "--target", target,
                            "-o", str(work / target)], capture_output=True, text=True)
        last = (p.stdout.strip().splitlines() or ["{}"])[-1]
        res = json.loads(last) if last.startswith("{") else {"status": "error", "reason": p.stderr.strip()[-300:]}
        doc["checks"][target] = {"status": res.get("status"), "max_abs_err": res.get("max_abs_err"),
                                 "max_rel_err": res.get("max_rel_err"), "reason": res.get("reason"),
                                 "seconds": round(time.perf_counter() - t0, 1)}
    print(json.dumps(doc, indent=2, sort_keys=True))
    return 0 if all(c["status"] == "pass" for c in doc["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
