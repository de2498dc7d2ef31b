"""Scan and Loop with a trip count known at compile time: the body graph is lowered ONCE into
kernels marked with the loop's id (Kernel.loop), and the host runs those kernels `trips`
times (program.loops). Never one kernel copy per iteration.

    before the loop   copy each initial state into the body's state input
    each iteration    the body's kernels; scan inputs are slices of their container
                      (program.loop_slices: iteration i's bytes, the host offsets the pointer);
                      copy each state output into the state input, each scan output into its
                      slice of the outer output
    after the loop    the final states are the state inputs (aliases)

Refused with the reason: a trip count or condition computed at run time, a body that reads
the iteration counter, scan axes other than 0, Scan-8's batch axis, nested loops, dtypes
other than float32 inside the body.
"""
from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from ..support.errors import UnsupportedError
from ..ir.graph import Node, Tensor
from ..ir.loopnest import Axis
from ..ir.program import LoopSlice, StaticLoop
from .base import LOWERINGS, KernelBuilder, const_input, register

ONNX_TYPES = {"float32": 1, "int64": 7, "int32": 6, "bool": 9}


def _refuse(node, why):
    raise UnsupportedError(f"node '{node.name}' ({node.op}): {why}")


def _copy(ctx, node, src, dst):
    n = ctx.graph.tensors[dst].size
    kb = KernelBuilder(ctx, node)
    i = Axis("i", n)
    ctx.add(kb.kernel(dst, [i], kb.load(src, [i.var], shape=[n]), out_shape=[n]))


def _import_body(ctx, node, body, shapes):
    """The body GraphProto as a Graph (static shapes, constants folded), its tensors renamed
    into the outer graph; returns (renamed nodes, renamed body inputs, renamed body outputs)."""
    from ..frontends.onnx import import_model
    from ..frontends.outer_scope import body_reads
    g = ctx.graph
    for n in body.node:
        if n.op_type in ("Scan", "Loop", "If"):
            _refuse(node, f"a nested {n.op_type} in the body is not supported")
    outer = sorted(body_reads(body))
    ins = [helper.make_tensor_value_info(vi.name, ONNX_TYPES[dt], list(sh)) for vi, (sh, dt) in zip(body.input, shapes)]
    inits = list(body.initializer)
    for name in outer:
        if name not in g.tensors:
            _refuse(node, f"the body reads '{name}', which is not a value of the outer graph")
        t = g.tensors[name]
        if t.data is not None:
            inits.append(numpy_helper.from_array(np.asarray(t.data), name))
        else:
            ins.append(helper.make_tensor_value_info(name, ONNX_TYPES.get(t.dtype, 1), list(t.shape)))
    pg = helper.make_graph(list(body.node), "body", ins, list(body.output), initializer=inits)
    pm = helper.make_model(pg, opset_imports=[helper.make_opsetid("", g.opset)], ir_version=8)
    sub = import_model(pm, name="body")
    ren = {name: name for name in outer}

    def r(name):
        if not name:
            return name
        if name not in ren:
            ren[name] = ctx._fresh(f"{node.name}/{name}")
        return ren[name]
    for name, t in sub.tensors.items():
        if name in outer:
            continue
        g.tensors[r(name)] = Tensor(r(name), t.shape, t.dtype, t.data)
    nodes = [Node(n.op, f"{node.name}/{n.name}", [r(i) for i in n.inputs], [r(o) for o in n.outputs], n.attrs)
             for n in sub.nodes]
    return nodes, [r(vi.name) for vi in body.input], [r(o) for o in sub.outputs]


def _lower_loop(ctx, node, trips, nodes, states, slices_in, scan_outs, finals):
    """states: [(initial, body state input, body state output)]; slices_in: [(body input,
    container, reverse)]; scan_outs: [(body output, outer output, reverse)]; finals: outer
    final-state outputs (or '')."""
    g = ctx.graph
    if trips <= 0:
        _refuse(node, f"a trip count of {trips} is not supported")
    ins = {s for _, s, _ in states}
    for _, s_in, s_out in states:
        if ctx.aliases.get(s_out, s_out) in ins - {s_in}:
            _refuse(node, "a state output that is another state's input (states swapped each iteration) is not supported")
    lid = len(ctx.loops)
    for init, s_in, _ in states:
        _copy(ctx, node, init, s_in)
    carried = [s for _, s, _ in states]
    for b_in, container, reverse in slices_in:
        if g.tensors[container].data is not None:      # a constant: the host offsets pointers into memory it owns
            t = ctx.new_temp(g.tensors[container].shape, "float32", f"{node.name}:scan_in")
            _copy(ctx, node, container, t)
            container = t
        ctx.loop_slices[b_in] = LoopSlice(container, g.tensors[b_in].nbytes, lid, reverse)
        carried.append(container)
    for n in nodes:
        for t in n.inputs + n.outputs:
            if t and g.tensors[t].data is None and g.tensors[t].dtype != "float32":
                _refuse(node, f"body tensor '{t}' has dtype {g.tensors[t].dtype}; loop bodies compute in float32")
    start = len(ctx.kernels)
    for n in nodes:
        fn = LOWERINGS.get(n.op)
        if fn is None:
            _refuse(node, f"operator {n.op} in the body is not supported")
        fn(ctx, n)

    def root(t):
        while t in ctx.aliases:
            t = ctx.aliases[t]
        return t
    for _, s_in, s_out in states:
        if root(s_out) != s_in:
            _copy(ctx, node, s_out, s_in)
    for b_out, outer, reverse in scan_outs:
        if not outer:
            continue
        sl = ctx.new_temp(g.tensors[b_out].shape, "float32", f"{node.name}:scan_out")
        ctx.loop_slices[sl] = LoopSlice(outer, g.tensors[sl].nbytes, lid, reverse)
        carried.append(outer)
        _copy(ctx, node, b_out, sl)
    for k in ctx.kernels[start:]:
        k.loop = lid
    ctx.loops[lid] = StaticLoop(trips, node.name, carried)
    for (_, s_in, _), out in zip(states, finals):
        if out:
            ctx.alias(out, s_in)


def _ints(node, name, n, default=0):
    v = node.attrs.get(name)
    return [default] * n if v is None else [int(x) for x in v]


@register("Scan")
def lower_scan(ctx, node):
    g = ctx.graph
    if g.opset < 9:
        _refuse(node, "Scan-8 (a batch axis and sequence_lens) is not supported; Scan-9 and later are")
    body = node.attrs["body"]
    M = int(node.attrs["num_scan_inputs"])
    N = len(node.inputs) - M
    xs = [g.tensors[t] for t in node.inputs[N:]]
    K = len(node.outputs) - N
    for nm, axes in (("scan_input_axes", _ints(node, "scan_input_axes", M)), ("scan_output_axes", _ints(node, "scan_output_axes", K))):
        if any(a != 0 for a in axes):
            _refuse(node, f"{nm} {axes}: only axis 0 is supported (each iteration's slice must be contiguous)")
    T = xs[0].shape[0] if xs else 0
    if any(x.shape[0] != T for x in xs):
        _refuse(node, "scan inputs of different lengths")
    shapes = [(g.tensors[t].shape, g.tensors[t].dtype) for t in node.inputs[:N]] + [(x.shape[1:], x.dtype) for x in xs]
    nodes, b_in, b_out = _import_body(ctx, node, body, shapes)
    in_dir = _ints(node, "scan_input_directions", M)
    out_dir = _ints(node, "scan_output_directions", K)
    _lower_loop(ctx, node, T, nodes, [(node.inputs[i], b_in[i], b_out[i]) for i in range(N)],
                [(b_in[N + j], node.inputs[N + j], bool(in_dir[j])) for j in range(M)],
                [(b_out[N + j], node.outputs[N + j], bool(out_dir[j])) for j in range(K)], node.outputs[:N])


@register("Loop")
def lower_loop(ctx, node):
    g = ctx.graph
    body = node.attrs["body"]
    if not node.inputs[0]:
        _refuse(node, "a loop without a trip count (until a condition computed at run time) is not supported")
    try:
        trips = int(np.asarray(const_input(ctx, node, 0)).reshape(-1)[0])
    except UnsupportedError:
        _refuse(node, "the trip count is computed at run time; only a compile-time trip count is supported")
    if len(node.inputs) > 1 and node.inputs[1]:
        cond = g.tensors[node.inputs[1]]
        if cond.data is None:
            _refuse(node, "the initial condition is computed at run time")
        if not bool(np.asarray(cond.data).reshape(-1)[0]):
            _refuse(node, "a loop whose initial condition is false (zero iterations) is not supported")
    states = list(node.inputs[2:])
    N = len(states)
    shapes = [((), "int64"), ((), "bool")] + [(g.tensors[t].shape, g.tensors[t].dtype) for t in states]
    nodes, b_in, b_out = _import_body(ctx, node, body, shapes)
    used = {i for n in nodes for i in n.inputs}
    if b_in[0] in used:
        _refuse(node, "the body reads the iteration counter (its kernels would differ per iteration)")
    # the condition must stay true: passed through, or a constant true
    cond_out = b_out[0]
    prod = next((n for n in nodes if cond_out in n.outputs), None)
    t = g.tensors.get(cond_out)
    through = prod is not None and prod.op == "Identity" and prod.inputs[0] == b_in[1]
    const_true = t is not None and t.data is not None and bool(np.asarray(t.data).reshape(-1)[0])
    if not (through or const_true or cond_out == b_in[1]):
        _refuse(node, "the loop's condition is computed at run time; only a static trip count is supported")
    nodes = [n for n in nodes if n is not prod or not through]
    if any(b_in[1] in n.inputs for n in nodes):
        _refuse(node, "the body reads the loop condition")
    K = len(b_out) - 1 - N
    _lower_loop(ctx, node, trips, nodes, [(states[i], b_in[2 + i], b_out[1 + i]) for i in range(N)], [],
                [(b_out[1 + N + j], node.outputs[N + j], False) for j in range(K)], node.outputs[:N])
