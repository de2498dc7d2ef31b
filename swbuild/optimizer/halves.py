"""Graph pass before lowering: a float16 model computes in float32 inside the program.

Neither chip computes in half precision where we generate code: SW26010 and SW26010-Pro's
CPEs have no fp16 arithmetic (docs/sunway.md), and the MLU kernels here compute in float32
(BANG has `half` vector instructions, but every kernel builder and the emulator's counters are
float32; docs/diannao.md). So float16 lives at the model's boundary only: a float16 graph
input is read into float32 by a Cast (the targets' `convert` kernels, whose C stores halves as
`unsigned short` and converts with cexpr.HALF_HELPERS), float16 constants widen to float32 at
compile time (exact: every half is a float), every run-time float16 tensor inside becomes
float32, and a float16 graph output gets a Cast that rounds to nearest even. A Cast between
float16 and float32 inside the program is then an identity: the value keeps float32 precision,
which is closer to the float32 model than onnxruntime's fp16 kernels; `swbuild check` judges
float16 outputs with the fp16 tolerances (check.fp16_rtol / check.fp16_atol).

The original dtype of each widened tensor is kept in `graph.widened` (name -> "float16") for
`swbuild ops`.
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from ..ir.graph import Node, Tensor, is_splat

HALF = "float16"
CASTS = ("Cast", "CastLike")


def _widen(a):
    if is_splat(a):
        return np.broadcast_to(np.float32(a.reshape(-1)[0]), a.shape)
    return np.asarray(a, np.float32)


def halves_as_float(graph):
    """Rewrite float16 tensors into float32 (see the module docstring)."""
    if not any(t.dtype == HALF for t in graph.tensors.values()):
        return graph
    widened = {}
    # a float16 graph input read by a kernel: one Cast at the front reads it into float32
    for x in graph.inputs:
        t = graph.tensors[x]
        if t.dtype != HALF or all(n.op in CASTS for n in graph.nodes if x in n.inputs):
            continue
        twin = f"{x}:as_float"
        for n in graph.nodes:
            n.inputs = [twin if i == x else i for i in n.inputs]
        graph.tensors[twin] = Tensor(twin, t.shape, HALF)
        graph.nodes.insert(0, Node("Cast", f"{x}:to_float", [x], [twin], {"to": TensorProto.FLOAT}))
    # a float16 graph output computed at run time: its producer writes a float32 twin, a Cast
    # rounds it into the output's own buffer
    for o in graph.outputs:
        t = graph.tensors[o]
        if t.dtype != HALF or t.data is not None or o in graph.inputs:
            continue
        twin = f"{o}:as_float"
        for n in graph.nodes:
            n.outputs = [twin if x == o else x for x in n.outputs]
            n.inputs = [twin if x == o else x for x in n.inputs]
        graph.tensors[twin] = Tensor(twin, t.shape, HALF)
        graph.nodes.append(Node("Cast", f"{o}:to_{HALF}", [twin], [o], {"to": TensorProto.FLOAT16}))
    boundary = set(graph.inputs) | set(graph.outputs)
    for name, t in list(graph.tensors.items()):
        if t.dtype != HALF or name in boundary:
            continue
        graph.tensors[name] = Tensor(name, t.shape, "float32", None if t.data is None else _widen(t.data))
        widened[name] = HALF
    for n in graph.nodes:
        # a Cast into float16 inside the program stays in float32 (an identity, see above)
        if n.op == "Cast" and n.attrs.get("to") == TensorProto.FLOAT16 and n.outputs[0] not in boundary:
            n.attrs = {**n.attrs, "to": TensorProto.FLOAT}
        elif n.attrs.get("dtype") == TensorProto.FLOAT16:      # RandomNormal, EyeLike...: made in float32
            n.attrs = {**n.attrs, "dtype": TensorProto.FLOAT}
    graph.widened.update(widened)
    return graph
