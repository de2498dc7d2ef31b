"""A seeded differential fuzzer: random small graphs of claimed ops against onnxruntime.

`cases(seed, n)` draws n independent cases (random ops, dtypes, shapes, attributes; each a
chain of 1-3 ops over its own inputs). A case is kept when onnxruntime runs it. `run(...)`
then puts every kept case into one model (one program per target: a single C build), asks
swbuild for each case first (a refusal must carry a reason) and compares every output of
the build with onnxruntime: floats within rtol/atol with NaN in the same places, integers
and booleans exactly.

Special values (NaN, ±inf, -0.0) go into the inputs of cases whose ops all have
onnxruntime-exact semantics for them (SPECIAL_OK), on every target.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

OPSET = 17
UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Floor", "Ceil", "Round", "Sign", "Erf", "Softsign",
         "Softplus", "Elu", "Selu", "LeakyRelu", "HardSigmoid", "HardSwish", "Sin", "Cos", "Atan", "Reciprocal",
         "ThresholdedRelu", "Identity"]
BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Mean"]
COMPARE = ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"]
# ops whose NaN/inf/-0 results match onnxruntime on every target
SPECIAL_OK = {"Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Floor", "Ceil", "Sign", "Identity", "Add", "Sub", "Mul",
              "Max", "Min", "Sum", "Where", "Clip", "IsNaN", "Not", "And", "Or", "Xor", "Cast", "Transpose",
              "Reshape", "Concat", "Slice", "Gather"} | set(COMPARE)
FLOAT_ATTRS = {"LeakyRelu": ("alpha", -1.0, 1.0), "Elu": ("alpha", 0.1, 2.0), "HardSigmoid": ("alpha", 0.05, 0.5),
               "ThresholdedRelu": ("alpha", -1.0, 1.0)}


@dataclass
class Case:
    name: str
    nodes: list
    inputs: list            # (name, onnx dtype, shape, array)
    outputs: list           # (name, onnx dtype)
    inits: list = field(default_factory=list)
    ops: set = field(default_factory=set)
    special: bool = False

    def model(self):
        return make_model(self.name, self.nodes, self.inputs, self.outputs, self.inits)

    def feeds(self):
        return {n: a for n, _, _, a in self.inputs}


def make_model(name, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, t, list(s)) for n, t, s, _ in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
                          initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)


class _Builder:
    def __init__(self, rng, name):
        self.rng, self.name = rng, name
        self.nodes, self.inputs, self.inits, self.ops = [], [], [], set()
        self._n = 0

    def t(self, hint):
        self._n += 1
        return f"{self.name}_{hint}{self._n}"

    def node(self, op, ins, n_out=1, **attrs):
        outs = [self.t(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, ins, outs, name=self.t("n"), **attrs))
        self.ops.add(op)
        return outs[0] if n_out == 1 else outs

    def input(self, shape, dtype=TP.FLOAT, array=None):
        name = self.t("in")
        a = array if array is not None else self.rng.standard_normal(shape).astype(np.float32)
        self.inputs.append((name, dtype, tuple(shape), a))
        return name

    def const(self, array):
        name = self.t("c")
        self.inits.append((name, np.asarray(array)))
        return name


def _shape(rng, rank=None):
    rank = rng.integers(1, 5) if rank is None else rank
    return [int(d) for d in rng.integers(1, 7, rank)]


def _bshape(rng, shape):
    """A shape that broadcasts to `shape` (numpy rules)."""
    s = [d if rng.random() < 0.6 else 1 for d in shape]
    return s[int(rng.integers(0, len(s))):] or [1]


def _step(b, x, shape):
    """One random op on x (float32 of `shape`); returns (tensor, shape)."""
    rng = b.rng
    if not shape:                               # a scalar (a full reduction): back to rank 1
        return b.node("Reshape", [x, b.const(np.array([1], np.int64))]), [1]
    kind = rng.choice(["unary", "binary", "compare", "logical", "clip", "softmax", "reduce", "transpose", "reshape",
                       "concat", "slice", "gather", "matmul", "cast", "isnan", "pool", "conv"])
    r = len(shape)
    if kind == "unary":
        op = str(rng.choice(UNARY))
        attrs = {}
        if op in FLOAT_ATTRS:
            k, lo, hi = FLOAT_ATTRS[op]
            attrs[k] = float(np.float32(rng.uniform(lo, hi)))
        return b.node(op, [x], **attrs), shape
    if kind == "binary":
        op = str(rng.choice(BINARY))
        ys = _bshape(rng, shape)
        y = b.input(ys) if rng.random() < 0.5 else b.const(rng.standard_normal(ys).astype(np.float32))
        ins = [y, x] if rng.random() < 0.3 else [x, y]
        if op == "Div":
            ins = [x, b.const((rng.uniform(0.5, 2, ys) * rng.choice([-1, 1], ys)).astype(np.float32))]
        return b.node(op, ins), shape
    if kind == "compare":
        y = b.input(_bshape(rng, shape))
        c = b.node(str(rng.choice(COMPARE)), [x, y])
        return (b.node("Where", [c, x, y]) if rng.random() < 0.6 else b.node("Cast", [c], to=TP.FLOAT)), shape
    if kind == "logical":
        c1 = b.node("Less", [x, b.const(np.float32(rng.uniform(-1, 1)))])
        c2 = b.node("Greater", [x, b.const(np.float32(rng.uniform(-1, 1)))])
        c = b.node(str(rng.choice(["And", "Or", "Xor"])), [c1, c2])
        if rng.random() < 0.5:
            c = b.node("Not", [c])
        return b.node("Where", [c, x, b.const(np.float32(0.5))]), shape
    if kind == "clip":
        lo = float(rng.uniform(-1.5, 0))
        return b.node("Clip", [x, b.const(np.float32(lo)), b.const(np.float32(lo + rng.uniform(0, 2)))]), shape
    if kind == "softmax":
        return b.node(str(rng.choice(["Softmax", "LogSoftmax"])), [x], axis=int(rng.integers(-r, r))), shape
    if kind == "reduce":
        op = str(rng.choice(["ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL2"]))
        axes = sorted({int(a) for a in rng.integers(0, r, rng.integers(1, r + 1))})
        keep = int(rng.integers(0, 2))
        out = [1 if i in axes else d for i, d in enumerate(shape)] if keep else [d for i, d in enumerate(shape) if i not in axes]
        return b.node(op, [x], axes=axes, keepdims=keep), out or []
    if kind == "transpose" and r > 1:
        perm = [int(p) for p in rng.permutation(r)]
        return b.node("Transpose", [x], perm=perm), [shape[p] for p in perm]
    if kind == "reshape":
        n = int(np.prod(shape))
        return b.node("Reshape", [x, b.const(np.array([n], np.int64))]), [n]
    if kind == "concat":
        ax = int(rng.integers(0, r))
        return b.node("Concat", [x, x], axis=ax), [d * 2 if i == ax else d for i, d in enumerate(shape)]
    if kind == "slice":
        ax = int(rng.integers(0, r))
        lo = int(rng.integers(0, shape[ax]))
        hi = int(rng.integers(lo + 1, shape[ax] + 1))
        s = b.node("Slice", [x, b.const(np.array([lo], np.int64)), b.const(np.array([hi], np.int64)),
                             b.const(np.array([ax], np.int64))])
        return s, [hi - lo if i == ax else d for i, d in enumerate(shape)]
    if kind == "gather":
        ax = int(rng.integers(0, r))
        idx = rng.integers(-shape[ax], shape[ax], int(rng.integers(1, 4))).astype(np.int64)
        return b.node("Gather", [x, b.const(idx)], axis=ax), shape[:ax] + [len(idx)] + shape[ax + 1:]
    if kind == "matmul" and r >= 2:
        n = int(rng.integers(1, 7))
        w = (rng.standard_normal((shape[-1], n)) * 0.5).astype(np.float32)
        return b.node("MatMul", [x, b.const(w)]), shape[:-1] + [n]
    if kind == "cast":
        c = b.node("Cast", [x], to=TP.BOOL)
        return b.node("Cast", [c], to=TP.FLOAT), shape
    if kind == "isnan":
        return b.node("Where", [b.node("IsNaN", [x]), b.const(np.float32(7.0)), x]), shape
    if kind == "pool" and r == 4 and min(shape[2:]) >= 2:
        op = str(rng.choice(["MaxPool", "AveragePool"]))
        k = [int(rng.integers(1, min(3, shape[2]) + 1)), int(rng.integers(1, min(3, shape[3]) + 1))]
        out = shape[:2] + [shape[2] - k[0] + 1, shape[3] - k[1] + 1]
        return b.node(op, [x], kernel_shape=k), out
    if kind == "conv" and r == 4 and min(shape[2:]) >= 2:
        co = int(rng.integers(1, 5))
        k = [int(rng.integers(1, min(3, shape[2]) + 1)), int(rng.integers(1, min(3, shape[3]) + 1))]
        w = (rng.standard_normal((co, shape[1], *k)) * 0.4).astype(np.float32)
        return b.node("Conv", [x, b.const(w), b.const(rng.standard_normal(co).astype(np.float32))]), \
            [shape[0], co, shape[2] - k[0] + 1, shape[3] - k[1] + 1]
    return b.node("Neg", [x]), shape


def _typed_front(b, rng):
    """Typed inputs: an int64 lookup into a constant table, or a bool input choosing values."""
    if rng.random() < 0.5:
        n, h = int(rng.integers(2, 9)), int(rng.integers(1, 6))
        q = [int(d) for d in rng.integers(1, 5, int(rng.integers(1, 3)))]
        ids = b.input(q, TP.INT64, rng.integers(0, n, q).astype(np.int64))
        table = b.const(rng.standard_normal((n, h)).astype(np.float32))
        return b.node("Gather", [table, ids]), q + [h]
    shape = _shape(rng)
    c = b.input(shape, TP.BOOL, rng.random(shape) < 0.5)
    return b.node("Where", [c, b.input(shape), b.const(np.float32(-1.0))]), shape


def _special(rng, a):
    a = a.copy()
    flat = a.reshape(-1)
    for i in rng.choice(flat.size, size=max(1, flat.size // 4), replace=False):
        flat[i] = rng.choice([np.nan, np.inf, -np.inf, -0.0, 0.0])
    return a


def make_case(seed, k):
    rng = np.random.default_rng([seed, k])
    b = _Builder(rng, f"c{k}")
    if rng.random() < 0.25:
        x, shape = _typed_front(b, rng)
    else:
        shape = _shape(rng)
        x = b.input(shape)
    for _ in range(int(rng.integers(1, 4))):
        x, shape = _step(b, x, shape)
    outputs = [(x, TP.FLOAT)]
    if rng.random() < 0.15:                     # a typed graph output
        to = int(rng.choice([TP.BOOL, TP.INT32, TP.INT64]))
        outputs = [(b.node("Cast", [x], to=to), to)]
    case = Case(b.name, b.nodes, b.inputs, outputs, b.inits, b.ops)
    if b.ops <= SPECIAL_OK and rng.random() < 0.5:
        case.special = True
        case.inputs = [(n, t, s, _special(rng, a) if t == TP.FLOAT else a) for n, t, s, a in case.inputs]
    return case


def ort_outputs(case):
    """onnxruntime's outputs, or None when it cannot run the case (it is then dropped)."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    try:
        sess = ort.InferenceSession(case.model().SerializeToString(), opts, providers=["CPUExecutionProvider"])
        return sess.run(None, case.feeds())
    except Exception:
        return None


def cases(seed, n):
    out = []
    for k in range(n):
        c = make_case(seed, k)
        ref = ort_outputs(c)
        if ref is not None:
            out.append((c, ref))
    return out


def same(got, ref, rtol=1e-3, atol=1e-4):
    ref = np.asarray(ref)
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return False
    if ref.dtype.kind != "f":
        return bool(np.array_equal(got, ref))
    close = np.isclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)
    return bool(close.all() and (np.isnan(got) == np.isnan(ref)).all())


def run(seed, n, targets, work, options=None):
    """Compile the kept cases into one program per target, run, compare. Returns a document
    with per-target pass/wrong/refused counts and the wrong cases' names. `options`: recipe
    options for the combined program (e.g. {"grouping": "on"})."""
    from pathlib import Path

    from swbuild.driver import build, check
    from swbuild.config import toolchain
    from swbuild.driver.compiler import compile_to
    from swbuild.support.errors import SwbuildError, UnsupportedError
    work = Path(work)
    kept = cases(seed, n)
    doc = {"seed": seed, "drawn": n, "kept": len(kept), "targets": {}}
    for target in targets:
        tc = toolchain.load(target)
        accepted, refused = [], []
        for c, ref in kept:
            try:
                compile_to(c.model(), tc, work / target / "single" / c.name, c.name)
                accepted.append((c, ref))
            except UnsupportedError as e:
                refused.append({"case": c.name, "reason": e.reason})
        res = {"passed": 0, "wrong": [], "refused": refused}
        if accepted:
            nodes = [nd for c, _ in accepted for nd in c.nodes]
            model = make_model("fuzz", nodes, [i for c, _ in accepted for i in c.inputs],
                               [o for c, _ in accepted for o in c.outputs], [i for c, _ in accepted for i in c.inits])
            out = work / target / "all"
            try:
                prog, _ = compile_to(model, tc, out, "fuzz", options=options)
                rt_steps, rt_lib = build.runtime_steps(tc, out / "rt")
                steps, _, exe = build.model_steps(tc, prog.prefix, out, out, rt_lib)
                build.run_steps(rt_steps + steps, log=lambda s: None)
            except SwbuildError as e:
                res["wrong"].append({"case": "*", "reason": f"combined build failed: {e}"})
                doc["targets"][target] = res
                continue
            plan = json.loads((out / f"{prog.prefix}.plan.json").read_text())
            feeds = {k: v for c, _ in accepted for k, v in c.feeds().items()}
            got, stats, err, code, _ = check.run_runner(exe, plan, feeds, out)
            if tc.family == "sunway":
                from swbuild.backends.sunway.report import emulator_findings
                res["emulator"] = emulator_findings(plan, stats)
                res["stitched"] = len((plan.get("grouping") or {}).get("stitched", []))
            if code != 0:
                res["wrong"].append({"case": "*", "reason": f"runner exit {code}: {err.strip()[-300:]}"})
            else:
                g = iter(got)
                for c, ref in accepted:
                    ok = all([same(next(g), r) for r in ref])
                    res["passed"] += ok
                    if not ok:
                        res["wrong"].append({"case": c.name, "ops": sorted(c.ops), "special": c.special})
        doc["targets"][target] = res
    return doc
