"""ONNX import: load (external data too), fix input shapes, infer shapes, fold constants.

Shape inference is onnx's own; folding runs onnx's ReferenceEvaluator one node at a time,
so every op the reference implements folds without code here (layout-only ops fold in numpy,
layout_fold.py: the same arrays without the evaluator's import and per-node model). Large
constants are kept out of the protos handed to shape inference (they enter as typed inputs),
which keeps it fast on models with hundreds of MB of weights; ConstantOfShape becomes a
zero-stride numpy view so splat weights (the light model zoo is made of them) cost no memory
until emitted.
"""
from __future__ import annotations

import os
import warnings

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from ..support.errors import ModelError, UnknownInputs, UnsupportedError
from ..ir.graph import Graph, Node, Tensor
from ..zoo.array_model import ArrayModel
from . import contrib, layout_fold
from .outer_scope import bind_outer_constants
from .validate import check_graph, check_proto

SMALL_CONST = 4096      # constants up to this many elements go to shape inference as values
FOLD_LIMIT = 1 << 26    # do not fold nodes whose result would exceed this many elements
# ops the reference evaluator implements only from a later opset whose meaning is a superset
# of the earlier ones' (DequantizeLinear 10 and 13: int8/uint8/int32 per tensor or per axis)
SINCE = {"DequantizeLinear": 19}


class Handover:
    """A ModelProto given to the compiler for good: load_model takes it out of the box, so the
    importer holds the only reference and frees it once its weights are numpy arrays."""

    def __init__(self, model):
        self.model = model


def load_model(source):
    """Read an ONNX file (with external data) or accept a ModelProto or an ArrayModel; errors
    name the file."""
    if isinstance(source, Handover):
        model, source.model = source.model, None
        if model is None:
            raise ModelError("internal: a handed-over model was loaded twice")
        return model
    if isinstance(source, (onnx.ModelProto, ArrayModel)):
        return source
    path = os.fspath(source)
    if not os.path.isfile(path):
        raise ModelError(f"{path}: no such ONNX file")
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as e:  # protobuf raises DecodeError and friends
        raise ModelError(f"{path}: not a readable ONNX model (corrupt or truncated?): {e}") from None
    if not model.graph.node and not model.graph.output:
        raise ModelError(f"{path}: not a readable ONNX model (empty graph; corrupt or truncated?)")
    try:
        from onnx.external_data_helper import load_external_data_for_model
        load_external_data_for_model(model, os.path.dirname(os.path.abspath(path)))
    except Exception as e:
        raise ModelError(f"{path}: cannot load external data: {e}") from None
    return model


def np_dtype(elem_type: int) -> str:
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except Exception:
        return f"onnx-type-{elem_type}"


def _static_shape(vi):
    dims = []
    for i, d in enumerate(vi.type.tensor_type.shape.dim):
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(int(d.dim_value))
        elif d.HasField("dim_value") and d.dim_value == 0 and not d.dim_param:
            dims.append(0)
        else:
            dims.append(d.dim_param or "?")
    return dims


SUBGRAPH_OPS = ("Scan", "Loop")   # ops whose body graph is lowered (ops/control.py); others are refused


def import_model(model, input_shapes: dict | None = None, batch: int | None = None,
                 name: str | None = None) -> Graph:
    """ModelProto (or ArrayModel) → Graph with static shapes and constants folded. The proto is
    dropped once read: when the caller holds no other reference (a file, a Handover) its
    weights are not held twice."""
    arrays = {}
    if isinstance(model, ArrayModel):
        arrays, model = model.arrays, _with_placeholders(model)
    g = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    for o in model.opset_import:
        if o.domain not in ("", "ai.onnx", contrib.DOMAIN):
            used = any(n.domain == o.domain for n in g.node)
            if used:
                raise UnsupportedError(f"operator domain '{o.domain}' is not supported (only the default ONNX domain "
                                       f"and some {contrib.DOMAIN} operators)")
    input_shapes = dict(input_shapes or {})
    check_proto(model, input_shapes)
    consts = {t.name: arrays[t.name] if t.name in arrays else numpy_helper.to_array(t) for t in g.initializer}
    del arrays
    for sp in g.sparse_initializer:
        raise UnsupportedError(f"sparse initializer '{sp.values.name}' is not supported")

    # Graph inputs with fixed shapes: the recipe's/CLI's, else the model's (batch override on dim 0).
    tensors, inputs = {}, []
    unknown = set(input_shapes) - {i.name for i in g.input}
    if unknown:
        raise UnknownInputs(unknown, [i.name for i in g.input if i.name not in consts])
    for vi in g.input:
        if vi.name in consts:
            continue
        if not vi.type.HasField("tensor_type"):
            raise UnsupportedError(f"input '{vi.name}' is not a tensor")
        shape = list(input_shapes.get(vi.name) or _static_shape(vi))
        if batch is not None and shape and vi.name not in input_shapes:
            shape[0] = batch
        for k, d in enumerate(shape):
            if not isinstance(d, int):
                raise ModelError(f"input '{vi.name}' has dynamic dimension {k} ('{d}'); "
                                 f"give its shape in the recipe's inputs or with --input {vi.name}=D0xD1x...")
        tensors[vi.name] = Tensor(vi.name, tuple(shape), np_dtype(vi.type.tensor_type.elem_type))
        inputs.append(vi.name)
    for n, a in consts.items():
        tensors[n] = Tensor(n, tuple(a.shape), a.dtype.name, a)

    nodes = []
    for k, n in enumerate(g.node):
        op = contrib.graph_op(n.domain, n.op_type, n.name or k)
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        for a in n.attribute:
            if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) and n.op_type not in SUBGRAPH_OPS:
                raise UnsupportedError(f"node '{n.name or k}': {n.op_type} with subgraphs is not supported")
        nodes.append(Node(op, n.name or f"{n.op_type}_{k}", list(n.input), list(n.output), attrs))
    outputs = [o.name for o in g.output]
    for k, o in enumerate(outputs):   # a pass-through output gets a buffer of its own
        if o in tensors and tensors[o].data is None:
            outputs[k] = f"{o}:output"
            nodes.append(Node("Identity", f"{o}:output", [o], [outputs[k]]))
    graph = Graph(name or g.name or "model", tensors, nodes, inputs, outputs)
    model = _header(model)      # (a upb proto frees memory only as a whole)
    del g


    _fold_to_fixpoint(graph, model, opset)
    _require_static_shapes(graph, set(outputs))
    for o in outputs:
        if o not in graph.tensors:
            raise ModelError(f"graph output '{o}' is not produced by any node")
    check_graph(graph)
    graph.opset = opset
    return graph


def _fold_to_fixpoint(graph, model, opset):
    """Shape inference and folding, alternately, until a round folds nothing. Shapes enable
    folding (Shape of a static tensor) and folded values enable shapes (a Reshape's target):
    a chain of k such stages (Swin's window partitions) needs k rounds. Every round that
    changes something removes a node, so rounds never exceed the node count + 1: the bound is
    a guard against a folding bug, not a limit on models."""
    bound = len(graph.nodes) + 2
    for _ in range(bound):
        shaped = _infer_shapes(graph, model, opset)
        if not _fold(graph, opset) and not shaped:
            return      # nothing folded: the shapes just inferred are the graph's
    raise ModelError(f"internal: constant folding and shape inference did not reach a fixpoint in {bound} rounds "
                     f"({len(graph.nodes)} nodes left, next '{graph.nodes[0].name}' ({graph.nodes[0].op})); "
                     "please report this model")


def _require_static_shapes(graph, outputs):
    """At the fixpoint, a node whose output is used and has no static shape depends on the
    value of a tensor computed at run time: name that tensor and where it comes from."""
    used = {i for n in graph.nodes for i in n.inputs} | outputs
    producer = {o: n for n in graph.nodes for o in n.outputs if o}
    for n in graph.nodes:
        for o in n.outputs:
            if o and o in used and not _has_static_shape(graph, o):
                raise UnsupportedError(f"node '{n.name}' ({n.op}): cannot determine a static shape for output '{o}': "
                                       f"{_runtime_cause(graph, n, producer)}; swbuild compiles static shapes")


# ops whose output shape depends on the values of float (or bool) data, not only on shapes
VALUE_SHAPED_OPS = ("NonZero", "Unique", "Compress", "NonMaxSuppression", "If", "Loop")


def _runtime_cause(graph, n, producer):
    """Why `n`'s output shape is unknown after folding to a fixpoint (the first such node in
    topological order, so its inputs' shapes are known: their values are not)."""
    unshaped = [i for i in n.inputs if i and not _has_static_shape(graph, i)]
    if unshaped:        # only an unknown-shaped graph input or a bug leaves this
        return f"the shape of input '{unshaped[0]}' is unknown"
    runtime = [i for i in n.inputs if i and graph.tensors[i].data is None]
    if not runtime:
        return "onnx shape inference gives none for it although every input is a constant"
    # integer inputs are where shapes, sizes and counts come from (Reshape's, Expand's, TopK's k)
    ints = [i for i in runtime if graph.tensors[i].dtype.startswith(("int", "uint"))]
    if not ints and n.op not in VALUE_SHAPED_OPS:
        out = next((o for o in n.outputs if o and o in graph.tensors), None)
        got = f" (it gives {list(graph.tensors[out].shape)})" if out else ""
        return (f"onnx shape inference leaves it unknown{got} although the inputs' shapes are known and only "
                f"data ({', '.join(repr(i) for i in runtime)}) is computed at run time")
    runtime = ints or runtime
    why = []
    for i in runtime:
        src = producer.get(i)
        why.append(f"'{i}' (graph input)" if src is None else f"'{i}' (computed at run time by node '{src.name}' ({src.op}))")
    return "it depends on the value of " + ", ".join(why)


def _with_placeholders(am):
    """The ArrayModel's proto with data-less initializers, so the checks see every name and shape."""
    m = onnx.ModelProto()
    m.CopyFrom(am.proto)
    m.graph.initializer.extend(am.initializer_protos())
    return m


def _header(model):
    """What shape inference needs of the model: its IR version and opsets, no graph."""
    head = onnx.ModelProto(ir_version=model.ir_version)
    head.opset_import.extend(model.opset_import)
    return head


def _onnx_type(dtype: str) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _infer_shapes(graph: Graph, model, opset):
    """Run onnx shape inference on the current graph; big constants enter as typed inputs.
    A com.microsoft node (frontends/contrib.py) is shaped by its own rule once its inputs are;
    onnx sees its output as a typed input. True when such a node got its shape this round
    (the nodes after it need another round)."""
    ins, inits = [], []
    domain_out = {o for n in graph.nodes if contrib.is_domain_op(n.op) for o in n.outputs if o}
    # nodes after a domain node not shaped yet wait for a later round (onnx wants typed inputs)
    waiting, later = set(), set()
    for n in graph.nodes:
        if contrib.is_domain_op(n.op):
            later.update(o for o in n.outputs if o and not _has_static_shape(graph, o))
        elif any(i in later for i in n.inputs):
            waiting.add(n.name)
            later.update(o for o in n.outputs if o)
    for t in graph.tensors.values():
        if t.data is not None and t.size <= SMALL_CONST:
            inits.append(numpy_helper.from_array(np.array(t.data), t.name))
        elif t.data is not None or t.name in graph.inputs or (t.name in domain_out and t.name not in later):
            ins.append(helper.make_tensor_value_info(t.name, _onnx_type(t.dtype), list(t.shape)))
    def value_of(name):
        t = graph.tensors.get(name)
        return None if t is None or t.data is None or t.size > SMALL_CONST else t.data
    pnodes = [helper.make_node(n.op, n.inputs, n.outputs, name=n.name, **bind_outer_constants(n.attrs, value_of)[0])
              for n in graph.nodes if not contrib.is_domain_op(n.op) and n.name not in waiting]
    # An output that is also an input or a constant is already typed; name it once.
    defined = {i.name for i in ins} | {t.name for t in inits}
    outs = [helper.make_tensor_value_info(o, 0, None) for o in graph.outputs if o not in defined | domain_out | later]
    pg = helper.make_graph(pnodes, "g", ins, outs, initializer=inits)
    # IR >= 4 lets initializers stand without being graph inputs.
    pm = helper.make_model(pg, opset_imports=list(model.opset_import), ir_version=max(model.ir_version, 4))
    try:
        inferred = shape_inference.infer_shapes(pm, strict_mode=True, data_prop=True)
    except Exception as e:
        raise ModelError(f"shape inference failed: {str(e).splitlines()[0] if str(e) else e}") from None
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not tt.HasField("shape"):
            continue
        if vi.name in graph.tensors and graph.tensors[vi.name].data is not None:
            continue
        graph.tensors[vi.name] = Tensor(vi.name, tuple(_static_shape(vi)), np_dtype(tt.elem_type))
    for n in graph.nodes:   # onnx leaves a Loop's carried values unshaped; they keep their initial shape
        if n.op == "Loop":
            for init, out in zip(n.inputs[2:], n.outputs):
                t = graph.tensors.get(init)
                if out and t is not None and (out not in graph.tensors or not _has_static_shape(graph, out)):
                    graph.tensors[out] = Tensor(out, t.shape, t.dtype)
            m = graph.tensors.get(n.inputs[0]) if n.inputs and n.inputs[0] else None
            for out in n.outputs[len(n.inputs) - 2:]:    # scan outputs: one slice per iteration
                t = graph.tensors.get(out)
                if m is not None and m.data is not None and t is not None and t.shape and \
                        all(isinstance(d, int) for d in t.shape[1:]):
                    graph.tensors[out] = Tensor(out, (int(np.asarray(m.data).reshape(-1)[0]),) + tuple(t.shape[1:]), t.dtype)
    shaped = False
    for n in graph.nodes:
        if contrib.is_domain_op(n.op) and not _has_static_shape(graph, n.outputs[0]):
            got = contrib.infer(n, graph.tensors)
            if got is not None:
                graph.tensors[n.outputs[0]] = Tensor(n.outputs[0], *got)
                shaped = True
    return shaped


def _fold(graph: Graph, opset) -> bool:
    """Evaluate every node whose inputs are all constant (or whose result only needs shapes)."""
    kept, changed = [], False
    for n in graph.nodes:
        value = None
        ins = [i for i in n.inputs if i]
        if n.op == "Shape" and ins and _has_static_shape(graph, ins[0]):
            shp = np.array(graph.tensors[ins[0]].shape, dtype=np.int64)
            start, end = n.attrs.get("start", 0), n.attrs.get("end", None)
            value = [shp[start:end]]
        elif n.op == "Size" and ins and _has_static_shape(graph, ins[0]):
            value = [np.array(graph.tensors[ins[0]].size, dtype=np.int64)]
        elif contrib.is_domain_op(n.op):
            pass        # computed by its kernel (ops/quant_ms.py), even on constants
        elif all(i in graph.tensors and graph.tensors[i].data is not None for i in ins):
            value = _evaluate(graph, n, opset)
        if value is None:
            kept.append(n)
            continue
        changed = True
        if n.op == "DequantizeLinear":      # the quantized weights stay known (optimizer/qdq_fuse.py)
            graph.dequantized[n.outputs[0]] = n
        for o, v in zip(n.outputs, value):
            if o:
                v = v if isinstance(v, np.ndarray) else np.asarray(v)
                graph.tensors[o] = Tensor(o, tuple(v.shape), v.dtype.name, v)
    graph.nodes = kept
    return changed


def _has_static_shape(graph, name):
    t = graph.tensors.get(name)
    return t is not None and all(isinstance(d, int) for d in t.shape)


def _evaluate(graph, n, opset):
    if n.op == "ConstantOfShape":
        shape = [int(d) for d in graph.tensors[n.inputs[0]].data.reshape(-1)]
        val = n.attrs.get("value")
        v = numpy_helper.to_array(val).reshape(-1)[:1] if val is not None else np.zeros(1, np.float32)
        # A zero-stride view: the weights writer recognises splats and emits a fill.
        return [np.broadcast_to(v.reshape(()), tuple(shape))]
    if n.op == "Constant" and "value" in n.attrs:
        return [numpy_helper.to_array(n.attrs["value"])]
    for o in n.outputs:  # do not materialise huge tensors at compile time
        t = graph.tensors.get(o)
        if t is not None and all(isinstance(d, int) for d in t.shape) and t.size > FOLD_LIMIT:
            return None
    ins = [i for i in n.inputs]
    quick = layout_fold.fold(n.op, [graph.tensors[i].data if i else None for i in ins], n.attrs, opset)
    if quick is not None and len(n.outputs) == 1:
        return [quick]
    feeds, pin = {}, []
    for k, i in enumerate(ins):
        if not i:
            pin.append("")
            continue
        t = graph.tensors[i]
        feeds[f"i{k}"] = np.array(t.data)
        pin.append(f"i{k}")
    pout = [f"o{k}" if o else "" for k, o in enumerate(n.outputs)]
    attrs, complete = bind_outer_constants(n.attrs, lambda name: getattr(graph.tensors.get(name), "data", None))
    if not complete:        # the body reads a run-time value: the node stays
        return None
    node = helper.make_node(n.op, pin, pout, **attrs)
    vis = [helper.make_tensor_value_info(f"i{k}", _onnx_type(graph.tensors[i].dtype), list(graph.tensors[i].shape))
           for k, i in enumerate(ins) if i]
    outs = [helper.make_tensor_value_info(p, 0, None) for p in pout if p]
    m = helper.make_model(helper.make_graph([node], "fold", vis, outs),
                          opset_imports=[helper.make_opsetid("", max(opset, SINCE.get(n.op, 0)))])
    from onnx.reference import ReferenceEvaluator     # here: most models fold nothing it must run
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = ReferenceEvaluator(m).run(None, feeds)
    except Exception as e:
        if "No implementation for operator" in str(e) or "No registered implementation for operator" in str(e):
            # the evaluator lacks this op (at this opset: onnx says either): the node stays, and
            # lowering computes it at run time or refuses it by name
            return None
        raise ModelError(f"node '{n.name}' ({n.op}): constant folding failed: {e}") from None
    it = iter(res)
    return [np.asarray(next(it)) if o else None for o in n.outputs]
