#!/usr/bin/env python3
"""Is a failed `swbuild check` a wrong kernel or float32 rounding? (issue 37, inception_v3)

    python benchmarks/float64_error.py model.onnx [--target sunway-emu ...] [--cut TENSOR ...] [--seed 0]

Runs the model (or, with --cut, the subgraph from the graph inputs to TENSOR: cut at a few
tensors to bisect) three ways on the inputs `swbuild check` uses (seeded_inputs, same seed):
onnx's reference evaluator on the model converted to float64 (the truth, up to float64's own
rounding), onnxruntime in float32 (check's reference) and swbuild on each target. Prints one
JSON document: per cut and per implementation the error against float64 (max abs, rms relative
to the output's rms, max abs over the output's peak) and how many elements fail check's
rtol/atol against float64. A kernel that computes something wrong stands out against float64
by orders of magnitude; rounding is within a small factor of onnxruntime's own error.
The float64 evaluation is pure numpy: minutes for an ImageNet model on two cores. The widening
and the error measures are swbuild's own (driver/float64_check.py, `swbuild check`'s second
opinion when a check fails on finite values).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from swbuild.driver.float64_check import errors, to_float64


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--target", action="append", help="default sunway-emu")
    ap.add_argument("--cut", action="append", help="a tensor name: check the subgraph from the inputs to it")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--keep", help="build here instead of a temp dir")
    a = ap.parse_args(argv)
    import onnx
    import onnx.utils
    from onnx.reference import ReferenceEvaluator

    import swbuild
    from swbuild.driver import check as chk
    work = Path(a.keep or tempfile.mkdtemp(prefix="float64-error-"))
    work.mkdir(parents=True, exist_ok=True)
    whole = onnx.load(a.model, load_external_data=False)
    init = {t.name for t in whole.graph.initializer}
    specs = [{"name": i.name, "shape": [d.dim_value for d in i.type.tensor_type.shape.dim],
              "dtype": onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type).name}
             for i in whole.graph.input if i.name not in init]
    inputs = chk.seeded_inputs(specs, a.seed, chk.index_bounds(a.model))
    doc = {"model": a.model, "seed": a.seed, "rtol": a.rtol, "atol": a.atol, "cuts": {}}
    for cut in a.cut or [None]:
        path = a.model
        if cut is not None:
            path = str(work / f"cut{len(doc['cuts'])}.onnx")
            onnx.utils.extract_model(a.model, path, [s["name"] for s in specs], [cut])
        m = onnx.load(path)
        outs = [o.name for o in m.graph.output]
        t0 = time.perf_counter()
        ev = ReferenceEvaluator(to_float64(m))
        with np.errstate(all="ignore"):
            truth = ev.run(None, {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in inputs.items()})
        res = {"outputs": outs, "float64_seconds": round(time.perf_counter() - t0, 1),
               "peak": [float(np.max(np.abs(t))) for t in truth]}
        res["onnxruntime"] = [errors(g, t, a.rtol, a.atol) for g, t in zip(chk.onnxruntime_reference(m, inputs), truth)]
        for target in a.target or ["sunway-emu"]:
            r = swbuild.check(path, target=target, out=str(work / f"{Path(path).stem}-{target}"), inputs=inputs,
                              quiet=True)
            if not r.outputs:
                res[target] = {"status": r.status, "reason": r.reason}
                continue
            res[target] = [dict(errors(r.outputs[n], t, a.rtol, a.atol), check_vs_onnxruntime=r.status)
                           for n, t in zip(outs, truth)]
        doc["cuts"][cut or "(whole model)"] = res
    print(json.dumps(doc, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
