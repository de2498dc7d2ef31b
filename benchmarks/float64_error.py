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
The float64 evaluation is pure numpy: minutes for an ImageNet model on two cores.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def to_float64(model):
    """A copy computing in float64: float initializers, Constant values, graph inputs and outputs,
    Cast/ConstantOfShape to float. Anything else that pins float32 makes the evaluator raise."""
    import onnx
    from onnx import TensorProto, numpy_helper
    m = onnx.ModelProto.FromString(model.SerializeToString())

    def widen(t):
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
    for t in m.graph.initializer:
        widen(t)
    for n in m.graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                widen(a.t)
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.DOUBLE
    for v in list(m.graph.input) + list(m.graph.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.DOUBLE
    del m.graph.value_info[:]
    return m


def errors(got, truth, rtol, atol):
    got, truth = np.asarray(got, dtype=np.float64), np.asarray(truth, dtype=np.float64)
    d = np.abs(got - truth)
    rms = float(np.sqrt(np.mean(truth ** 2)))
    peak = float(np.max(np.abs(truth)))
    return {"max_abs_err": float(d.max()), "rms_rel_err": float(np.sqrt(np.mean(d ** 2))) / rms if rms else None,
            "err_vs_peak": float(d.max()) / peak if peak else None,
            "failing_vs_float64": int(np.count_nonzero(~np.isclose(got, truth, rtol=rtol, atol=atol))),
            "elements": int(d.size)}


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
