"""What every op lowering uses: the registry of lowerings, the kernel builder, index helpers."""
from __future__ import annotations

import math

import numpy as np

from ..support.errors import UnsupportedError
from ..ir.loopnest import Axis, Buffer, Kernel, Load, Var, iconst

LOWERINGS = {}


def register(*ops):
    def deco(fn):
        for op in ops:
            LOWERINGS[op] = fn
        return fn
    return deco


class KernelBuilder:
    """Collects the buffers (tensor views) of one kernel and hands out axes and loads."""

    def __init__(self, ctx, node, op=None):
        self.ctx, self.node, self.op = ctx, node, op or node.op
        self.buffers = {}
        self._by_view = {}

    def buf(self, tensor, shape=None):
        t = self.ctx.graph.tensors[tensor]
        shape = tuple(int(d) for d in (t.shape if shape is None else shape))
        if math.prod(shape) != t.size:
            raise ValueError(f"view {shape} of {tensor}{t.shape}")
        key = (tensor, shape)
        if key not in self._by_view:
            name = f"b{len(self.buffers)}"
            self.buffers[name] = Buffer(name, tensor, shape, t.dtype)
            self._by_view[key] = name
        return self._by_view[key]

    def load(self, tensor, index, pad=None, shape=None):
        return Load(self.buf(tensor, shape), tuple(index), pad)

    def kernel(self, out_tensor, axes, body, out_shape=None, **kw):
        out = self.buf(out_tensor, out_shape)
        return Kernel(name=self.ctx.kernel_name(self.op), op=self.op, node=self.node.name, out=out,
                      axes=tuple(axes), body=body, buffers=dict(self.buffers), **kw)


def axes_for(shape, prefix="i"):
    return [Axis(f"{prefix}{k}", int(d)) for k, d in enumerate(shape)]


def broadcast_index(in_shape, out_axes):
    """Index of an input broadcast (numpy rules) to the output's axes."""
    r, q = len(out_axes), len(in_shape)
    idx = []
    for j, d in enumerate(in_shape):
        a = out_axes[r - q + j]
        idx.append(iconst(0) if d == 1 and a.extent != 1 else a.var)
    return idx


def attr_ints(node, name, default):
    v = node.attrs.get(name)
    return list(default) if v is None else [int(x) for x in v]


def const_input(ctx, node, k, default=None):
    """Value of the k-th input, which must be a compile-time constant."""
    if k >= len(node.inputs) or not node.inputs[k]:
        return default
    t = ctx.graph.tensors[node.inputs[k]]
    if t.data is None:
        raise UnsupportedError(f"node '{node.name}' ({node.op}): input {k} ('{t.name}') must be a constant")
    return np.asarray(t.data)


__all__ = ["LOWERINGS", "register", "supported_ops", "KernelBuilder", "axes_for", "broadcast_index",
           "attr_ints", "const_input", "Var"]
