"""Reference interpreter for small kernels: numpy over the whole iteration space.

Tests use it to check an op's lowering against onnxruntime without any C in between, so a
wrong loop nest and a wrong backend are told apart.
"""
from __future__ import annotations

import math

import numpy as np

from .loopnest import Acc, Bin, Const, Load, Select, Un, Var

_BIN = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide,
    "min": np.minimum, "max": np.maximum, "pow": np.power,
    "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
    "==": np.equal, "!=": np.not_equal, "and": np.logical_and, "or": np.logical_or,
    "//": np.floor_divide, "%": np.mod, "fmod": np.fmod,
}


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


_UN = {
    "neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh,
    "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "not": np.logical_not, "erf": _erf,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "relu": lambda x: np.maximum(x, 0),
    "round": np.rint, "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh,
    "atanh": np.arctanh, "sign": np.sign,
}
_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}


def run_kernel(k, arrays: dict):
    """Evaluate kernel `k` reading/writing `arrays` (tensor name → ndarray, modified in place)."""
    axes = list(k.axes) + list(k.reduce_axes)
    nd = len(axes)
    env = {}
    for i, a in enumerate(axes):
        shape = [1] * nd
        shape[i] = a.extent
        env[a.name] = np.arange(a.extent).reshape(shape)

    def ev(e, acc=None):
        if isinstance(e, Var):
            return env[e.name]
        if isinstance(e, Const):
            return np.int64(e.value) if e.dtype == "int" else np.float64(e.value)
        if isinstance(e, Acc):
            return acc
        if isinstance(e, Load):
            buf = k.buffers[e.buf]
            data = arrays[buf.tensor].reshape(buf.shape)
            idx = [np.asarray(ev(i, acc)).astype(np.int64) for i in e.index]
            idx = np.broadcast_arrays(*idx) if idx else []
            ok = np.ones(idx[0].shape if idx else (), bool)
            clipped = []
            for d, ix in enumerate(idx):
                ok &= (ix >= 0) & (ix < buf.shape[d])
                clipped.append(np.clip(ix, 0, buf.shape[d] - 1))
            v = data[tuple(clipped)].astype(np.float64) if idx else data.astype(np.float64)
            if e.pad is not None:
                v = np.where(ok, v, e.pad)
            return v
        if isinstance(e, Bin):
            return _BIN[e.op](ev(e.a, acc), ev(e.b, acc))
        if isinstance(e, Un):
            return _UN[e.op](ev(e.a, acc))
        if isinstance(e, Select):
            return np.where(ev(e.cond, acc), ev(e.a, acc), ev(e.b, acc))
        raise TypeError(e)

    full = tuple(a.extent for a in axes)
    body = np.broadcast_to(ev(k.body), full)
    ns = len(k.axes)
    if k.combine:
        acc = _REDUCE[k.combine](body, axis=tuple(range(ns, nd))) if nd > ns else body
        acc = np.broadcast_to(acc, full[:ns])
    else:
        acc = body
    # epilogue vars live in the spatial space only
    for a in k.reduce_axes:
        env.pop(a.name)
    for i, a in enumerate(k.axes):
        env[a.name] = np.arange(a.extent).reshape([a.extent if j == i else 1 for j in range(ns)])
    res = np.broadcast_to(ev(k.epilogue, acc), full[:ns])
    out = k.buffers[k.out]
    dst = arrays[out.tensor].reshape(out.shape)
    sl = tuple(slice(o, o + a.extent) for o, a in zip(k.out_offset, k.axes))
    dst[sl] = res.astype(dst.dtype)


def run_program(program, feeds: dict):
    """Evaluate a whole lowered Program with the interpreter; returns the outputs in order."""
    g = program.graph
    flat = {}
    for name, t in g.tensors.items():
        if name != program.root(name):
            continue
        if t.data is not None:
            flat[name] = np.array(t.data, dtype=t.dtype).reshape(-1)
        elif name in feeds:
            flat[name] = np.asarray(feeds[name], dtype=t.dtype).reshape(-1).copy()
        else:
            flat[name] = np.zeros(t.size, dtype=t.dtype)
    arrays = {name: flat[program.root(name)] for name in g.tensors}
    for k in program.kernels:
        run_kernel(k, arrays)
    return [arrays[o].reshape(g.tensors[o].shape) for o in program.outputs]
