"""Graph → Program: run each node's lowering in topological order."""
from __future__ import annotations

import numpy as np

from ..support.errors import UnsupportedError
from ..ir.graph import Tensor
from ..ir.program import Program
from ..support.names import c_part, c_prefix
from ..ops import LOWERINGS, supported_ops

# data types kernels compute in (booleans too: float32 0/1, optimizer/dtypes.py); float64 in
# double and int32/int64 in C's integer types where the target has them: Sunway; DianNao
# refuses them by node (diannao/pipeline.py)
DTYPES = ("float32", "float64", "int32", "int64")
INDEX_DTYPES = ("int64", "int32")   # run-time integers are allowed as Gather indices and sequence lengths
INDEX_INPUTS = {"Gather": 1, "RNN": 4, "GRU": 4, "LSTM": 4,   # op -> input position of those integers
                "GatherND": 1, "ScatterND": 1}     # (these two refuse run-time indices by name, ops/indexing.py)
# dtypes a graph input or output may have in the public API; Cast kernels convert them
BOUNDARY_DTYPES = ("float32", "float16", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "bool")
TYPED_OPS = ("Cast", "CastLike") + ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")   # read any dtype


class LowerCtx:
    def __init__(self, graph, prefix):
        self.graph, self.prefix = graph, prefix
        self.kernels, self.aliases = [], {}
        self.loops, self.loop_slices = {}, {}   # static loops (ops/control.py)
        self.notes = {}     # node -> how it computes, for `swbuild ops` (the dtype path of ops/quant.py)
        self._n = 0

    def kernel_name(self, op):
        return f"{self.prefix}_k{len(self.kernels)}_{c_part(op.split('.')[0]).lower()}"

    def add(self, kernel):
        if kernel.points == 0:   # an empty output: nothing to compute or move
            return
        kernel.name = self.kernel_name(kernel.op)
        self.kernels.append(kernel)

    def alias(self, out, src):
        self.aliases[out] = src

    def _fresh(self, hint):
        self._n += 1
        name = f"%swtmp{self._n}:{hint}"
        while name in self.graph.tensors:
            self._n += 1
            name = f"%swtmp{self._n}:{hint}"
        return name

    def new_temp(self, shape, dtype, hint):
        name = self._fresh(hint)
        self.graph.tensors[name] = Tensor(name, tuple(int(d) for d in shape), dtype)
        return name

    def new_const(self, array, hint):
        name = self._fresh(hint)
        a = np.asarray(array)
        self.graph.tensors[name] = Tensor(name, tuple(a.shape), a.dtype.name, a)
        return name


def lower(graph, model_name, supported=None):
    """Lower every node; unsupported ops and dtypes are one clear error each."""
    graph, ctx = prepare(graph, model_name)
    for node in graph.nodes:
        why = node_problem(graph, node, supported)
        if why:
            raise UnsupportedError(why)
        LOWERINGS[node.op](ctx, node)
    why = boundary_problem(graph)
    if why:
        raise UnsupportedError(why)
    return finish(ctx, model_name)


def prepare(graph, model_name):
    """The graph as lowering sees it and a fresh LowerCtx (`swbuild ops` lowers node by node)."""
    from ..optimizer.dtypes import booleans_as_float
    from ..optimizer.exact_ints import exact_ints_as_float
    from ..optimizer.graph import simplify
    from ..optimizer.halves import halves_as_float
    from ..optimizer.qdq_fuse import fuse_qdq
    from ..optimizer.requantize_identity import drop_requantize
    from ..optimizer.uint8_as_int8 import uint8_as_int8
    graph = exact_ints_as_float(booleans_as_float(halves_as_float(uint8_as_int8(fuse_qdq(drop_requantize(simplify(graph)))))))
    return graph, LowerCtx(graph, c_prefix(model_name))


def finish(ctx, model_name):
    _materialize_outputs(ctx, ctx.graph)
    g = ctx.graph
    return Program(model_name, ctx.prefix, g, ctx.kernels, ctx.aliases, list(g.inputs), list(g.outputs),
                   loops=ctx.loops, loop_slices=ctx.loop_slices)


def _words(name):
    """CamelCase words, lower case: QLinearConv -> [q, linear, conv]."""
    import re
    return [w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", name)]


def nearest_ops(op, n=3):
    """The supported operators closest to `op` (for an unsupported one): near spellings
    (Celu -> Selu, Relu, Gelu) and operators that are its first or last CamelCase words
    (QLinearConv -> Conv, GatherND -> Gather); never a name that merely shares letters
    (QLinearConv is not IsNaN)."""
    import difflib
    ops = supported_ops()
    close = difflib.get_close_matches(op, ops, n=n, cutoff=0.75)
    low = {o.lower(): o for o in ops}
    close += [low[o] for o in difflib.get_close_matches(op.lower(), list(low), n=n, cutoff=0.75) if low[o] not in close]
    words = _words(op)
    parts = [o for o in ops if o not in close and len(_words(o)) < len(words)
             and _words(o) in (words[:len(_words(o))], words[-len(_words(o)):])]
    # QLinearMatMul: MatMul, not also its part Mul
    close += [o for o in parts if not any(o != c and o.lower() in c.lower() for c in close + parts)]
    return close[:n]


def node_problem(graph, node, supported=None):
    """Why `node` cannot be lowered before its lowering runs (operator, dtypes), or None."""
    if node.op not in LOWERINGS or (supported is not None and node.op not in supported):
        near = [o for o in nearest_ops(node.op) if supported is None or o in supported]
        hint = f"; nearest supported: {', '.join(near)}" if near else ""
        return (f"node '{node.name}': operator {node.op} is not supported{hint} "
                f"(`swbuild ops --target T` lists all {len(supported or LOWERINGS)})")
    for k, t in enumerate(list(node.inputs) + list(node.outputs)):
        if t and INDEX_INPUTS.get(node.op) == k and graph.tensors[t].dtype in INDEX_DTYPES:
            continue   # run-time indices of a lookup, lengths of sequences
        if node.op in TYPED_OPS and graph.tensors[t].dtype in BOUNDARY_DTYPES:
            continue   # aliases carry any dtype; Cast converts (or refuses, naming both dtypes)
        if t and graph.tensors.get(t) is not None and graph.tensors[t].data is None \
                and graph.tensors[t].dtype not in DTYPES:
            return (f"node '{node.name}' ({node.op}): tensor '{t}' has dtype "
                    f"{graph.tensors[t].dtype}; kernels compute in {', '.join(DTYPES)} "
                    f"(booleans as 0/1; typed graph inputs and outputs through Cast)")
    return None


def boundary_problem(graph):
    for t in graph.inputs + graph.outputs:
        if graph.tensors[t].dtype not in BOUNDARY_DTYPES:
            return (f"graph input/output '{t}' has dtype {graph.tensors[t].dtype}; "
                    f"supported: {', '.join(BOUNDARY_DTYPES)}")
    return None


def _materialize_outputs(ctx, graph):
    """A graph output must own its buffer: when it would alias a graph input, a constant or
    another output (Identity, Reshape of an input...), copy into it instead."""
    from ..ir.loopnest import Axis, Kernel, Load

    def root(t):
        while t in ctx.aliases:
            t = ctx.aliases[t]
        return t

    owners = {}
    for o in graph.outputs:
        r = root(o)
        shared = r in graph.inputs or graph.tensors[r].data is not None or r in owners
        owners.setdefault(r, o)
        if not shared and owners[r] == o:
            continue
        ctx.aliases.pop(o, None)
        t = graph.tensors[o]
        if r == o:   # the output is itself a folded constant: its data moves to a tensor of its own
            r = ctx.new_const(t.data, o)
            graph.tensors[o] = type(t)(o, t.shape, t.dtype)
        axes = [Axis(f"i{d}", n) for d, n in enumerate(t.shape)] or [Axis("i0", 1)]
        src = graph.tensors[r]
        shape = tuple(a.extent for a in axes)
        from ..ir.loopnest import Buffer
        bufs = {"b0": Buffer("b0", r, shape, src.dtype), "b1": Buffer("b1", o, shape, t.dtype)}
        k = Kernel(name="", op="Copy", node=o, out="b1", axes=tuple(axes),
                   body=Load("b0", tuple(a.var for a in axes)), buffers=bufs)
        if t.dtype != "float32":        # a typed output: the backends' conversion kernel copies it
            flat = (t.size,)
            k = Kernel(name="", op="Copy", node=o, out="b1", axes=(Axis("i", t.size),), body=Load("b0", (Axis("i", 1).var,)),
                       buffers={"b0": Buffer("b0", r, flat, src.dtype), "b1": Buffer("b1", o, flat, t.dtype)},
                       kind="convert", extra={"src": "b0", "to_bool": False})
        ctx.add(k)
