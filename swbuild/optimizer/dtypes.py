"""Graph pass before lowering: run-time booleans become float32 0/1 inside the program.

Kernels compute in float32. A boolean is exactly 0.0 or 1.0 in float32, and every op that
makes one (comparisons, And/Or/Xor/Not, IsNaN, Cast to bool) writes exactly those values,
so carrying it as float32 loses nothing. Constant booleans that feed run-time nodes become
float32 0/1 constants the same way. Graph inputs and outputs keep their dtypes in the public
API: a Cast converts at the boundary (a bool output gets a Cast from its float32 0/1).
Integer tensors are not rewritten: exactness would need |v| < 2**24, which nothing proves.
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from ..support.errors import UnsupportedError
from ..ir.graph import Node, Tensor, is_splat


def booleans_as_float(graph):
    for n in graph.nodes:   # max over no booleans is false, but over no 0/1 floats -inf (true)
        x = graph.tensors.get(n.inputs[0]) if n.inputs else None
        if n.op.startswith("Reduce") and x is not None and x.dtype == "bool" and x.size == 0:
            raise UnsupportedError(f"node '{n.name}' ({n.op}): a reduction of the empty bool tensor "
                                   f"'{x.name}' is not supported (dtype bool, no elements)")
    # a bool graph input read by a kernel: one Cast at the front reads it into float32 0/1
    for x in graph.inputs:
        t = graph.tensors[x]
        if t.dtype != "bool" or all(n.op in ("Cast", "CastLike") for n in graph.nodes if x in n.inputs):
            continue
        twin = f"{x}:as_float"
        for n in graph.nodes:
            n.inputs = [twin if i == x else i for i in n.inputs]
        graph.tensors[twin] = Tensor(twin, t.shape, "float32")
        graph.nodes.insert(0, Node("Cast", f"{x}:to_float", [x], [twin], {"to": TensorProto.FLOAT}))
    consumed = {i for n in graph.nodes for i in n.inputs if i}
    # a bool graph output computed at run time: its producer writes a float32 twin, a Cast
    # converts into the output's own buffer
    for k, o in enumerate(graph.outputs):
        t = graph.tensors[o]
        if t.dtype != "bool" or t.data is not None or o in graph.inputs:
            continue
        twin = f"{o}:as_float"
        for n in graph.nodes:
            n.outputs = [twin if x == o else x for x in n.outputs]
            n.inputs = [twin if x == o else x for x in n.inputs]
        graph.tensors[twin] = Tensor(twin, t.shape, "float32")
        graph.nodes.append(Node("Cast", f"{o}:to_bool", [twin], [o], {"to": TensorProto.BOOL}))
    outputs = set(graph.outputs)
    for name, t in list(graph.tensors.items()):
        if t.dtype != "bool" or name in graph.inputs or name in outputs:
            continue
        if t.data is None:
            graph.tensors[name] = Tensor(name, t.shape, "float32")
        elif name in consumed:
            a = t.data
            v = np.broadcast_to(np.float32(a.reshape(-1)[0]), a.shape) if is_splat(a) else np.asarray(a, np.float32)
            graph.tensors[name] = Tensor(name, t.shape, "float32", v)
    return graph
