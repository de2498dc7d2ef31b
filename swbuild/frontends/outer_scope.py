"""Subgraph bodies (Scan, Loop) that read constants of the outer graph.

onnx shape inference and the reference evaluator see a body on its own: an outer value the
body reads has no known value there, so a Reshape by an outer shape constant leaves the
body's outputs unshaped and a fold of the node cannot run.  `bind_outer_constants` copies
the attributes with every outer constant the body reads (nested bodies too) defined by a
Constant node at the top of the body; names are kept, so nothing else changes."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper


def body_reads(body: onnx.GraphProto) -> set:
    """Names a body (and the bodies inside it) reads but does not define."""
    defined = {i.name for i in body.input} | {t.name for t in body.initializer}
    reads = set()
    for n in body.node:
        reads.update(i for i in n.input if i)
        for a in n.attribute:
            for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                reads |= body_reads(g)
        defined.update(o for o in n.output if o)
    return reads - defined


def bind_outer_constants(attrs: dict, value_of) -> tuple[dict, bool]:
    """`attrs` with each GraphProto's outer constants bound (value_of(name) -> array or None),
    and whether every outer value the bodies read was a constant."""
    out, complete = dict(attrs), True
    for k, v in attrs.items():
        if not isinstance(v, onnx.GraphProto):
            continue
        consts = []
        for name in sorted(body_reads(v)):
            data = value_of(name)
            if data is None:
                complete = False
                continue
            consts.append(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(data), name)))
        if consts:
            g = onnx.GraphProto()
            g.CopyFrom(v)
            del g.node[:]
            g.node.extend(consts + list(v.node))
            out[k] = g
    return out, complete
