"""NaN, ±inf and -0.0 through the element-wise ops, Max/Min, Clip and the min/max reductions
on every emulated target (one program per target).

Element-wise results are compared with onnxruntime, NaN positions and the sign of zero too.
Min/max reductions and MaxPool propagate NaN (as numpy does): onnxruntime's own result there
depends on where the NaN falls in its SIMD packets (a row [1.5, -2.5, 0.3, NaN, inf, ...]
reduces to -inf), so they are compared with numpy."""

import numpy as np
import pytest
from onnx import helper

from core_models import build_and_run, make
from swbuild.driver import check

UNARY = ["Relu", "HardSigmoid", "HardSwish", "LeakyRelu", "Sigmoid", "Tanh", "Abs", "Neg", "Sign", "Floor", "Elu",
         "Selu", "Softplus", "Softsign", "ThresholdedRelu", "Shrink", "Exp", "Erf", "Round", "Ceil", "Reciprocal"]

def _model():
    nodes, outs = [], []
    for op in UNARY:
        nodes.append(helper.make_node(op, ["x"], [f"{op}_o"]))
        outs.append((f"{op}_o", [4, 8]))
    nodes += [helper.make_node("Clip", ["x", "lo", "hi"], ["Clip_o"]), helper.make_node("Max", ["x", "y"], ["Max_o"]),
              helper.make_node("Min", ["x", "y"], ["Min_o"]), helper.make_node("Add", ["x", "y"], ["Add_o"]),
              helper.make_node("Mul", ["x", "y"], ["Mul_o"]), helper.make_node("Div", ["x", "y"], ["Div_o"])]
    outs += [(f"{o}_o", [4, 8]) for o in ("Clip", "Max", "Min", "Add", "Mul", "Div")]
    for r in ("ReduceMin", "ReduceMax"):
        nodes.append(helper.make_node(r, ["x"], [f"{r}_o"], axes=[1], keepdims=0))
        outs.append((f"{r}_o", [4]))
    nodes += [helper.make_node("Reshape", ["x", "s4"], ["x4"]),
              helper.make_node("MaxPool", ["x4"], ["MaxPool_o"], kernel_shape=[2, 2], strides=[2, 2])]
    outs.append(("MaxPool_o", [1, 4, 2, 1]))
    inits = [("lo", np.array(-1, np.float32)), ("hi", np.array(1, np.float32)), ("s4", np.array([1, 4, 4, 2], np.int64))]
    return make(nodes, [("x", [4, 8]), ("y", [4, 8])], outs, inits, opset=14)


def _inputs():
    s = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.5, 0.3]
    x = np.array([s, np.roll(s, 3), np.roll(s, 5), [-v for v in s]], np.float32)
    y = np.array([[0.0, np.nan, 1.0, 0.0, -0.0, np.nan, -np.inf, np.inf]] * 4, np.float32)
    return {"x": x, "y": y}


def _numpy(name, ins):
    x = ins["x"]
    if name == "ReduceMin_o":
        return np.min(x, axis=1)
    if name == "ReduceMax_o":
        return np.max(x, axis=1)
    return np.max(x.reshape(1, 4, 2, 2, 1, 2), axis=(3, 5))   # MaxPool 2x2 stride 2 over [1, 4, 4, 2]


def _same(g, r):
    """Equal values, NaN where the reference has NaN, and the sign of every zero."""
    r = np.asarray(r, np.float32).reshape(g.shape)
    ok = np.isclose(g, r, rtol=1e-5, atol=1e-6, equal_nan=True) & (np.isnan(g) == np.isnan(r))
    zeros = (g == 0) & (r == 0)
    ok &= ~zeros | (np.signbit(g) == np.signbit(r))
    return ok


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu", "diannao-emu"])
def test_nan_inf_and_negative_zero_match_onnxruntime(tmp_path, target):
    m = _model()
    ins = _inputs()
    plan, got = build_and_run(m, target, tmp_path, ins, "sv")
    ref = check.onnxruntime_reference(m, ins)
    wrong = []
    for spec, g, r in zip(plan["outputs"], got, ref):
        name = spec["name"]
        if name in ("ReduceMin_o", "ReduceMax_o", "MaxPool_o"):
            r = _numpy(name, ins)
        ok = _same(g, r)
        if target == "diannao-emu" and name == "Clip_o":
            # Known gap, generated code: max(x, s) = relu(x - s) + s (three_address.py) gives
            # +0.0 for x = -0.0; exactly those lanes may differ, and only in the sign.
            r = np.asarray(r, np.float32).reshape(g.shape)
            neg0 = (ins["x"] == 0) & np.signbit(ins["x"])
            assert ((g[neg0] == 0) & ~np.signbit(g[neg0]) & np.signbit(r[neg0])).all()
            ok |= neg0
        if not ok.all():
            wrong.append(name)
    assert wrong == [], wrong
