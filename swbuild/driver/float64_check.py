"""A float64 second opinion for a check that failed on finite values: float32 rounding or a
wrong kernel?

Two float32 implementations of a deep network disagree by more than rtol/atol when the network
amplifies rounding (torchvision's inception_v3: swbuild and onnxruntime differ by 3.7e-4 while
each is within 3-4e-5 rms relative of the float64 truth). Against a float64 evaluation of the
same model on the same inputs, rounding shows as an error of onnxruntime's own size, a wrong
kernel as one orders of magnitude larger (a flipped AveragePool count_include_pad: 0.37 rms
relative, 1e4 times onnxruntime's). `judge` compares swbuild's and onnxruntime's errors against
float64 per output; benchmarks/float64_error.py uses the same pieces to bisect a model.
"""
from __future__ import annotations

import time

import numpy as np

# swbuild's error against float64 may be this multiple of onnxruntime's own, in rms relative
# error and in max error over the output's peak. Measured on inception_v3 (docs/architecture.md):
# float32 implementations land at 0.6x (diannao-emu) to 1.5x (sunway-emu, one accumulator over
# ci*kh*kw) onnxruntime's rms error, summation order alone 2-3x on a single block; a wrong
# kernel is 1e4x. 4 leaves room above the orders of summation and none for a bug.
ROUNDING_FACTOR = 4.0
# one rounding of every output to float32 (2**-24 relative): an error no float32 result avoids,
# the floor of onnxruntime's error when it happens to be exact
FLOAT32_ROUNDOFF = 2.0 ** -24
# the float64 evaluation runs on the host, by onnxruntime where it has a double kernel for every
# node, else by onnx's reference evaluator (numpy), whose speed no flops count predicts: on a
# shared 2-core machine 215 s for inception_v3's 11.5 GFLOP, 9 s for fcn_resnet50's 53 GFLOP.
# So it runs in a child process stopped after this many seconds (or the check's timeout when
# shorter); past it the second opinion is skipped, saying so, and the check fails as without one
REFERENCE_SECONDS = 600.0


class Unavailable(Exception):
    """No float64 evaluation of this model (an op the evaluators lack at float64, or out of time)."""


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
            if n.op_type in ("Cast", "EyeLike", "RandomNormal", "RandomUniform") and a.name in ("to", "dtype") \
                    and a.i == TensorProto.FLOAT:
                a.i = TensorProto.DOUBLE
    for v in list(m.graph.input) + list(m.graph.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.DOUBLE
    del m.graph.value_info[:]
    return m


def errors(got, truth, rtol, atol):
    """Errors of `got` against the float64 `truth`: max abs, rms relative to the truth's rms,
    max abs over the truth's peak, and the elements failing rtol/atol against it."""
    got, truth = np.asarray(got, dtype=np.float64), np.asarray(truth, dtype=np.float64)
    d = np.abs(got.reshape(truth.shape) - truth)
    rms = float(np.sqrt(np.mean(truth ** 2))) if truth.size else 0.0
    peak = float(np.max(np.abs(truth), initial=0.0))
    return {"max_abs_err": float(d.max(initial=0.0)),
            "rms_rel_err": float(np.sqrt(np.mean(d ** 2))) / rms if rms else None,
            "err_vs_peak": float(d.max(initial=0.0)) / peak if peak else None,
            "failing_vs_float64": int(np.count_nonzero(~np.isclose(got.reshape(truth.shape), truth, rtol=rtol, atol=atol))),
            "elements": int(d.size)}


def _within(mine, theirs):
    """swbuild's error is within ROUNDING_FACTOR of onnxruntime's (floored at one rounding)."""
    if mine is None:     # an all-zero truth: only an exact result is rounding
        return theirs is None
    return mine <= ROUNDING_FACTOR * max(theirs or 0.0, FLOAT32_ROUNDOFF)


def judge(names, got, ref, wide, inputs, rtol, atol, seconds=REFERENCE_SECONDS):
    """The second opinion as a dict: per output swbuild's and onnxruntime's errors against
    float64 and whether swbuild's are within ROUNDING_FACTOR of onnxruntime's; `rounding` is
    True when every output is. `wide(inputs, seconds)` gives (float64 outputs, evaluator name)
    (check.float64_outputs), giving onnx's slow reference evaluator at most `seconds`.
    Skipped (with the reason) when no evaluator runs."""
    doc = {"factor": ROUNDING_FACTOR, "floor": FLOAT32_ROUNDOFF}
    t0 = time.perf_counter()
    try:
        truth, evaluator = wide(inputs, seconds)
    except Unavailable as e:
        doc.update(rounding=False, skipped=f"no float64 evaluation of the model ({e})")
        return doc
    doc.update(evaluator=evaluator, seconds=round(time.perf_counter() - t0, 1), outputs=[])
    ok = True
    for name, g, r, t in zip(names, got, ref, truth):
        mine, theirs = errors(g, t, rtol, atol), errors(r, t, rtol, atol)
        within = all(_within(mine[k], theirs[k]) for k in ("rms_rel_err", "err_vs_peak"))
        doc["outputs"].append({"name": name, "swbuild": mine, "onnxruntime": theirs, "within_factor": within})
        ok &= within
    doc["rounding"] = ok
    return doc


def summary(doc):
    """One line of the numbers: the worst output's errors, swbuild's then onnxruntime's."""
    if doc.get("skipped"):
        return doc["skipped"]
    worst = max(doc["outputs"], key=lambda o: (not o["within_factor"], o["swbuild"]["rms_rel_err"] or 0.0))
    fmt = lambda v: "n/a" if v is None else f"{v:.3g}"   # noqa: E731
    s, o = worst["swbuild"], worst["onnxruntime"]
    return (f"against a float64 evaluation ({doc['evaluator']}) of '{worst['name']}' swbuild's error is "
            f"{fmt(s['rms_rel_err'])} rms relative, {fmt(s['err_vs_peak'])} of the peak; onnxruntime's own "
            f"{fmt(o['rms_rel_err'])} and {fmt(o['err_vs_peak'])}")
