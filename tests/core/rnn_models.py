"""Small GRU / LSTM / RNN models (built in memory) and a check of one on an emulated target
against onnxruntime, with the emulator's findings (DMA predicted == measured, conflicts,
races, BANG rule violations) judged by swbuild's own check."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from core_models import build_runner, node_tests
from swbuild.driver import check

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def rnn_node_model(cell, T=5, B=2, I=3, H=4, direction="forward", layout=0, attrs=None, h0=False, c0=False,
                   lens=None, peep=False, outputs=("Y", "Y_h", "Y_c"), bias=True, seed=0, runtime_lens=False):
    """One recurrent node; W, R, B (and P) are initializers, X (and h0, c0) run-time inputs."""
    rng = np.random.default_rng(seed)
    G = GATES[cell]
    D = 2 if direction == "bidirectional" else 1
    xs = [T, B, I] if layout == 0 else [B, T, I]
    st = [D, B, H] if layout == 0 else [B, D, H]
    inits = [("W", (rng.standard_normal((D, G * H, I)) * 0.5).astype(np.float32)),
             ("R", (rng.standard_normal((D, G * H, H)) * 0.5).astype(np.float32))]
    names = ["X", "W", "R"]
    if bias:
        inits.append(("B", (rng.standard_normal((D, 2 * G * H)) * 0.3).astype(np.float32)))
    names.append("B" if bias else "")
    ins = [helper.make_tensor_value_info("X", TensorProto.FLOAT, xs)]
    if lens is not None:
        if runtime_lens:
            ins.append(helper.make_tensor_value_info("lens", TensorProto.INT32, [B]))
        else:
            inits.append(("lens", np.asarray(lens, dtype=np.int32)))
    names.append("lens" if lens is not None else "")
    if h0:
        ins.append(helper.make_tensor_value_info("h0", TensorProto.FLOAT, st))
    names.append("h0" if h0 else "")
    if cell == "LSTM":
        if c0:
            ins.append(helper.make_tensor_value_info("c0", TensorProto.FLOAT, st))
        names.append("c0" if c0 else "")
        if peep:
            inits.append(("P", (rng.standard_normal((D, 3 * H)) * 0.5).astype(np.float32)))
        names.append("P" if peep else "")
    while names and not names[-1]:
        names.pop()
    ys = {"Y": [T, D, B, H] if layout == 0 else [B, T, D, H], "Y_h": st, "Y_c": st}
    outs = [o if o in outputs and (o != "Y_c" or cell == "LSTM") else "" for o in ("Y", "Y_h", "Y_c")]
    while outs and not outs[-1]:
        outs.pop()
    node = helper.make_node(cell, names, outs, name=f"{cell.lower()}0", hidden_size=H, direction=direction,
                            **({"layout": layout} if layout else {}), **(attrs or {}))
    g = helper.make_graph([node], "rnn", ins, [helper.make_tensor_value_info(o, TensorProto.FLOAT, ys[o]) for o in outs if o],
                          initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    feed = {"X": rng.standard_normal(xs).astype(np.float32)}
    if h0:
        feed["h0"] = rng.standard_normal(st).astype(np.float32)
    if c0:
        feed["c0"] = rng.standard_normal(st).astype(np.float32)
    if lens is not None and runtime_lens:
        feed["lens"] = np.asarray(lens, dtype=np.int32)
    return m, feed


def reference(m, feed):
    """onnxruntime's outputs; a batch-major node (layout=1, which onnxruntime refuses) runs
    as its time-major twin on transposed inputs, its outputs transposed back."""
    node = m.graph.node[0]
    if not any(a.name == "layout" and a.i == 1 for a in node.attribute):
        return check.onnxruntime_reference(m, feed)
    twin = onnx.ModelProto.FromString(m.SerializeToString())
    n = twin.graph.node[0]
    keep = [a for a in n.attribute if a.name != "layout"]
    del n.attribute[:]
    n.attribute.extend(keep)
    io = {"X": (1, 0, 2), "h0": (1, 0, 2), "c0": (1, 0, 2), "Y": (1, 2, 0, 3), "Y_h": (1, 0, 2), "Y_c": (1, 0, 2)}
    for vi in list(twin.graph.input) + list(twin.graph.output):
        if vi.name in io:
            dims = vi.type.tensor_type.shape.dim
            shape = [d.dim_value for d in dims]
            for d, v in zip(dims, [shape[i] for i in io[vi.name]]):
                d.dim_value = v
    f = {k: (np.ascontiguousarray(v.transpose(io[k])) if k in io else v) for k, v in feed.items()}
    outs = check.onnxruntime_reference(twin, f)
    back = {"Y": (2, 0, 1, 3), "Y_h": (1, 0, 2), "Y_c": (1, 0, 2)}
    return [np.ascontiguousarray(o.transpose(back[vi.name])) for o, vi in zip(outs, twin.graph.output)]


def _prefix_outer_refs(g, prefix):
    """onnx.compose.add_prefix leaves a body's references to outer-scope values unprefixed."""
    outer = {t.name for t in g.initializer} | {i.name for i in g.input} | {o for n in g.node for o in n.output}
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                for b in a.g.node:
                    for k, x in enumerate(b.input):
                        if x and prefix + x in outer:
                            b.input[k] = prefix + x


def combine(models):
    """One model holding every (model, feed) pair's nodes, names prefixed m0_, m1_, ...; the
    reference of each part is computed on its own (reference())."""
    from onnx import compose
    nodes, inits, ins, outs, feed, refs = [], [], [], [], {}, []
    for i, (m, f) in enumerate(models):
        pm = compose.add_prefix(m, f"m{i}_")
        _prefix_outer_refs(pm.graph, f"m{i}_")
        nodes += pm.graph.node
        inits += pm.graph.initializer
        ins += pm.graph.input
        outs += pm.graph.output
        feed.update({f"m{i}_{k}": v for k, v in f.items()})
        refs += reference(m, f)
    g = helper.make_graph(nodes, "rnns", ins, outs, initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), feed, refs


def check_on(m, feed, target, tmp_path, name="rnn", rtol=1e-4, atol=1e-5, ref=None):
    """Compile, build, run and judge `m` on `target`; returns (check document, plan)."""
    plan, exe = build_runner(m, target, tmp_path, name)
    ref = reference(m, feed) if ref is None else ref
    doc = check.check_build(plan, exe, ref, feed, rtol, atol, workdir=tmp_path)
    return doc, plan


PARAMS = {"GRU": {1, 2, 3}, "LSTM": {1, 2, 3, 7}, "RNN": {1, 2, 3},    # as tests/conformance binds them
          "Resize": {1, 2, 3}, "Upsample": {1}, "Gather": {1}, "GatherND": {1}, "ScatterND": {1}}


def node_test_models(ops=("GRU", "LSTM", "RNN")):
    """The onnx package's backend node tests made of `ops` alone, as (name, model, feed,
    expected outputs), the weights, biases and peepholes bound as initializers."""
    return node_tests(lambda c: {n.op_type for n in c.model.graph.node} <= set(ops), PARAMS)


def combine_expected(cases):
    """One model of every node test (names prefixed), its feed and its expected outputs."""
    from onnx import compose
    nodes, inits, ins, outs, feed, refs = [], [], [], [], {}, []
    opset = max(o.version for _, m, _, _ in cases for o in m.opset_import if o.domain in ("", "ai.onnx"))
    for i, (_, m, f, expected) in enumerate(cases):
        pm = compose.add_prefix(m, f"m{i}_")
        nodes += pm.graph.node
        inits += pm.graph.initializer
        ins += pm.graph.input
        outs += pm.graph.output
        feed.update({f"m{i}_{k}": v for k, v in f.items()})
        refs += expected
    g = helper.make_graph(nodes, "node_tests", ins, outs, initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8), feed, refs


def torch_export_pattern(cell, layers=2, bidirectional=False, T=6, B=2, I=8, H=16, seed=0):
    """The node pattern torch.onnx.export (TorchScript exporter, opset 14) writes for
    nn.GRU / nn.LSTM(num_layers=layers, bidirectional=...) returning the output sequence:
    per layer, zero initial states Expand-ed to Concat([D], Unsqueeze(Gather(Shape(x), 1)),
    [H]); GRU with linear_before_reset=1; a [T, D, B, H] output Squeeze-d (one direction) or
    Transpose-d to [T, B, D, H] and Reshape-d to [T, B, D*H]. Weights are initializers in
    ONNX gate order (the exporter reorders PyTorch's)."""
    rng = np.random.default_rng(seed)
    G, D = GATES[cell], 2 if bidirectional else 1
    nodes, inits = [], []
    scale = 1.0 / np.sqrt(H)                  # PyTorch's uniform(-1/sqrt(H), 1/sqrt(H)) init

    def const(name, arr):
        nodes.append(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(arr), name)))
        return name

    def w(name, shape):
        inits.append(numpy_helper.from_array(rng.uniform(-scale, scale, shape).astype(np.float32), name))
        return name
    x, inp = "x", I
    for layer in range(layers):
        p = f"/rnn/l{layer}_"
        states = []
        for s in range(2 if cell == "LSTM" else 1):
            zeros = const(f"{p}zeros{s}", np.zeros((D, B, H), np.float32))
            nodes.append(helper.make_node("Shape", [x], [f"{p}shape{s}"]))
            nodes.append(helper.make_node("Gather", [f"{p}shape{s}", const(f"{p}one{s}", np.int64(1))], [f"{p}batch{s}"]))
            nodes.append(helper.make_node("Unsqueeze", [f"{p}batch{s}", const(f"{p}ax{s}", np.array([0], np.int64))],
                                          [f"{p}b1{s}"]))
            nodes.append(helper.make_node("Concat", [const(f"{p}d{s}", np.array([D], np.int64)), f"{p}b1{s}",
                                                     const(f"{p}h{s}", np.array([H], np.int64))], [f"{p}st{s}"], axis=0))
            nodes.append(helper.make_node("Expand", [zeros, f"{p}st{s}"], [f"{p}init{s}"]))
            states.append(f"{p}init{s}")
        ins = [x, w(f"{p}W", (D, G * H, inp)), w(f"{p}R", (D, G * H, H)), w(f"{p}B", (D, 2 * G * H)), ""] + states
        outs = [f"{p}Y", f"{p}Yh"] + ([f"{p}Yc"] if cell == "LSTM" else [])
        attrs = {"hidden_size": H}
        if cell == "GRU":
            attrs["linear_before_reset"] = 1
        if bidirectional:
            attrs["direction"] = "bidirectional"
        nodes.append(helper.make_node(cell, ins, outs, name=f"{p}{cell}", **attrs))
        last = layer == layers - 1
        y = "y" if last else f"{p}out"
        if D == 1:
            nodes.append(helper.make_node("Squeeze", [f"{p}Y", const(f"{p}sq", np.array([1], np.int64))], [y]))
        else:
            nodes.append(helper.make_node("Transpose", [f"{p}Y"], [f"{p}t"], perm=[0, 2, 1, 3]))
            nodes.append(helper.make_node("Reshape", [f"{p}t", const(f"{p}rs", np.array([0, 0, -1], np.int64))], [y]))
        x, inp = y, D * H
    g = helper.make_graph(nodes, "torch_rnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, B, I])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [T, B, D * H])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    return m, {"x": rng.standard_normal((T, B, I)).astype(np.float32)}
