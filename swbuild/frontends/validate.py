"""Validation before code generation: nothing invalid reaches C.

Two stages. `check_proto` runs on the model as read (before any shape is fixed or array
allocated): graph inputs typed and shaped, declared sizes bounded, onnx.checker (attribute
types, SSA, op schemas). `check_graph` runs after shape inference and folding, when every
shape is static: the facts shape inference does not check but the kernels rely on (element
counts of reshapes, channel counts of convolutions, constant indices in range). Each error
is one line naming the node, its op, the tensor and the cause.
"""
from __future__ import annotations

import math

import numpy as np
import onnx

from ..support.errors import ModelError, UnsupportedError

# Largest tensor the generated C indexes (32-bit signed offsets in the kernels and runtimes).
MAX_ELEMENTS = (1 << 31) - 1


def check_elements(what, shape):
    """Refuse a shape whose element count the C code cannot index (before anything allocates it)."""
    n = math.prod(int(d) for d in shape) if shape else 1
    if n > MAX_ELEMENTS:
        raise ModelError(f"{what} has shape {list(shape)}: {n} elements, more than the {MAX_ELEMENTS} "
                         f"a generated kernel can index")


def check_proto(model: onnx.ModelProto, input_shapes: dict):
    g = model.graph
    consts = {t.name for t in g.initializer}
    seen = set()
    for o in g.output:
        if o.name in seen:
            raise ModelError(f"graph output '{o.name}' is listed twice")
        seen.add(o.name)
    for vi in g.input:
        if vi.name in consts:
            continue
        if not vi.type.HasField("tensor_type"):
            raise UnsupportedError(f"graph input '{vi.name}' is not a tensor (sequences, maps and optionals are "
                                   "not supported)")
        tt = vi.type.tensor_type
        if tt.elem_type == 0:
            raise ModelError(f"graph input '{vi.name}' has no element type")
        if not tt.HasField("shape") and vi.name not in input_shapes:
            raise ModelError(f"graph input '{vi.name}' has no shape; give it in the recipe's inputs "
                             f"or with --input {vi.name}=D0xD1x...")
        given = input_shapes.get(vi.name)
        if given is not None and tt.HasField("shape") and len(given) != len(tt.shape.dim):
            raise ModelError(f"graph input '{vi.name}' has rank {len(tt.shape.dim)} in the model; the shape given "
                             f"for it, {'x'.join(map(str, given))}, has rank {len(given)}")
        dims = given or [d.dim_value for d in tt.shape.dim if d.HasField("dim_value")]
        check_elements(f"graph input '{vi.name}'", dims)
    for t in g.initializer:
        check_elements(f"initializer '{t.name}'", t.dims)
        _check_initializer_size(t)
    names = {o.name for o in g.output}
    produced = {o for n in g.node for o in n.output if o} | consts | {i.name for i in g.input}
    for o in names - produced:
        raise ModelError(f"graph output '{o}' is not produced by any node")
    _run_checker(model)


def _check_initializer_size(t):
    """The data an initializer carries must match its dims (a short raw_data reads past its end)."""
    if t.data_location == onnx.TensorProto.EXTERNAL or not t.HasField("raw_data"):
        return
    try:
        item = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
    except Exception:
        raise ModelError(f"initializer '{t.name}' has unknown data type {t.data_type}") from None
    want = math.prod(t.dims) * item
    if len(t.raw_data) != want:
        raise ModelError(f"initializer '{t.name}' has {len(t.raw_data)} bytes of data; its dims "
                         f"{list(t.dims)} need {want}")


def _run_checker(model):
    """onnx.checker node by node (op schemas, attribute types, input/output counts), and the
    graph's SSA rules: every tensor produced once, every input defined before it is used.
    Node by node, because the whole-model checker wants shapes on every graph output and
    copies the model (hundreds of MB of weights)."""
    from onnx import checker
    g = model.graph
    ctx = checker.C.CheckerContext()
    ctx.ir_version = max(model.ir_version, 3)
    ctx.opset_imports = {o.domain: o.version for o in model.opset_import}
    defined = {t.name for t in g.initializer} | {i.name for i in g.input} | {""}
    producer = {}
    for k, n in enumerate(g.node):
        name = n.name or f"{n.op_type}_{k}"
        try:
            checker.check_node(n, ctx)
        except checker.ValidationError as e:
            # a body that reads outer-scope values is legal; the node checker has no outer scope
            # here (ops/control.py validates the body on its own, the outer values declared)
            if not (any(a.type == a.GRAPH for a in n.attribute) and "topologically sorted" in str(e)):
                raise ModelError(_checker_line(str(e), name, n.op_type)) from None
        except Exception:
            continue   # a schema onnx does not know (custom domain): refused later by op
        for i in n.input:
            if i not in defined:
                raise ModelError(f"node '{name}' ({n.op_type}): input '{i}' is not produced by an earlier node, "
                                 "a graph input or an initializer")
        for o in n.output:
            if o in producer or (o and o in defined):
                first = producer.get(o, "a graph input or initializer")
                raise ModelError(f"node '{name}' ({n.op_type}): output '{o}' is already produced by {first}")
            if o:
                producer[o] = f"node '{name}'"
                defined.add(o)


def _checker_line(text, name, op):
    """The checker's message is several lines; keep the cause."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("==>")]
    return f"node '{name}' ({op}): {lines[0] if lines else 'invalid node'}"


# -- after shape inference: facts the kernels rely on -------------------------------------------

def check_graph(graph):
    for name in graph.inputs:
        check_elements(f"graph input '{name}'", graph.tensors[name].shape)
    for n in graph.nodes:
        for o in n.outputs:
            t = graph.tensors.get(o)
            if t is not None and all(isinstance(d, int) for d in t.shape):
                check_elements(f"node '{n.name}' ({n.op}): output '{o}'", t.shape)
        fn = _CHECKS.get(n.op)
        if fn is not None:
            fn(graph, n)


def _t(graph, name):
    return graph.tensors[name]


def _fail(n, tensor, cause):
    raise ModelError(f"node '{n.name}' ({n.op}): tensor '{tensor}': {cause}")


def _reshape(graph, n):
    x, y = _t(graph, n.inputs[0]), _t(graph, n.outputs[0])
    if x.size != y.size:
        _fail(n, n.outputs[0], f"reshapes {x.size} elements {list(x.shape)} into {y.size} {list(y.shape)}")


def _gather(graph, n):
    data, idx = _t(graph, n.inputs[0]), _t(graph, n.inputs[1])
    if not data.shape:
        _fail(n, n.inputs[0], "gathers from a scalar")
    axis = int(n.attrs.get("axis", 0))
    if not -len(data.shape) <= axis < len(data.shape):
        _fail(n, n.inputs[0], f"axis {axis} is outside its rank {len(data.shape)}")
    if idx.data is None:
        return
    d = data.shape[axis]
    v = np.asarray(idx.data).reshape(-1)
    bad = v[(v < -d) | (v >= d)]
    if bad.size:
        _fail(n, n.inputs[1], f"constant index {int(bad[0])} is outside axis {axis % len(data.shape)} "
                              f"of size {d} (valid: {-d}..{d - 1})")


def _conv(graph, n):
    x, w = _t(graph, n.inputs[0]), _t(graph, n.inputs[1])
    group = int(n.attrs.get("group", 1))
    if len(x.shape) != len(w.shape) or len(x.shape) < 3:
        _fail(n, n.inputs[1], f"weight rank {len(w.shape)} does not match input rank {len(x.shape)}")
    if group < 1 or x.shape[1] % group:
        _fail(n, n.inputs[0], f"{x.shape[1]} channels do not split into group={group}")
    if n.op == "Conv":
        cin, cout = w.shape[1] * group, w.shape[0]
        if w.shape[0] % group:
            _fail(n, n.inputs[1], f"{w.shape[0]} output channels do not split into group={group}")
    else:   # ConvTranspose: W is [C_in, C_out/group, k...]
        cin, cout = w.shape[0], w.shape[1] * group
    if x.shape[1] != cin:
        _fail(n, n.inputs[1], f"weights {list(w.shape)} expect {cin} input channels (group={group}); "
                              f"input '{n.inputs[0]}' has {x.shape[1]}")
    ks = n.attrs.get("kernel_shape")
    if ks is not None and list(ks) != list(w.shape[2:]):
        _fail(n, n.inputs[1], f"kernel_shape {list(ks)} disagrees with weights {list(w.shape)}")
    if len(n.inputs) > 2 and n.inputs[2] and _t(graph, n.inputs[2]).shape != (cout,):
        _fail(n, n.inputs[2], f"bias shape {list(_t(graph, n.inputs[2]).shape)} is not [{cout}]")


def _per_channel(first, count):
    def check(graph, n):
        x = _t(graph, n.inputs[0])
        c = x.shape[1] if len(x.shape) > 1 else 1
        for k in range(first, min(first + count, len(n.inputs))):
            if n.inputs[k] and _t(graph, n.inputs[k]).size != c:
                _fail(n, n.inputs[k], f"has {_t(graph, n.inputs[k]).size} values for {c} channels")
    return check


_CHECKS = {
    "Reshape": _reshape, "Gather": _gather, "Conv": _conv, "ConvTranspose": _conv,
    "BatchNormalization": _per_channel(1, 4), "InstanceNormalization": _per_channel(1, 2),
}
