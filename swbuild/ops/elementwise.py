"""Element-wise ops with numpy broadcasting: one kernel, no reduction."""
from __future__ import annotations

import numpy as np

from ..support.errors import UnsupportedError
from ..ir.loopnest import Bin, Const, Select, Un, iconst
from .base import KernelBuilder, axes_for, broadcast_index, register

_F = lambda v: Const(float(v))  # noqa: E731

def _gelu(x, n):
    approx = n.attrs.get("approximate", b"none")
    if approx in (b"tanh", "tanh"):
        inner = Bin("*", _F(0.7978845608028654), Bin("+", x, Bin("*", _F(0.044715), Bin("*", x, Bin("*", x, x)))))
        return Bin("*", Bin("*", _F(0.5), x), Bin("+", _F(1), Un("tanh", inner)))
    return Bin("*", Bin("*", _F(0.5), x), Bin("+", _F(1), Un("erf", Bin("*", x, _F(0.7071067811865476)))))


UNARY = {
    "Relu": lambda x, n: Bin("max", x, _F(0)),
    "Sigmoid": lambda x, n: Un("sigmoid", x),
    "Tanh": lambda x, n: Un("tanh", x),
    "Exp": lambda x, n: Un("exp", x),
    "Log": lambda x, n: Un("log", x),
    "Sqrt": lambda x, n: Un("sqrt", x),
    "Neg": lambda x, n: Un("neg", x),
    "Abs": lambda x, n: Un("abs", x),
    "Floor": lambda x, n: Un("floor", x),
    "Ceil": lambda x, n: Un("ceil", x),
    "Erf": lambda x, n: Un("erf", x),
    "Sin": lambda x, n: Un("sin", x),
    "Cos": lambda x, n: Un("cos", x),
    "Reciprocal": lambda x, n: Bin("/", _F(1), x),
    "Identity": lambda x, n: x,
    "LeakyRelu": lambda x, n: Select(Bin("<", x, _F(0)), Bin("*", _F(n.attrs.get("alpha", 0.01)), x), x),
    "Elu": lambda x, n: Select(Bin("<", x, _F(0)), Bin("*", _F(n.attrs.get("alpha", 1.0)), Bin("-", Un("exp", x), _F(1))), x),
    "Selu": lambda x, n: Bin("*", _F(n.attrs.get("gamma", 1.0507009873554805)),
                             Select(Bin("<=", x, _F(0)), Bin("*", _F(n.attrs.get("alpha", 1.6732632423543772)),
                                                             Bin("-", Un("exp", x), _F(1))), x)),
    "Softplus": lambda x, n: Un("log", Bin("+", Un("exp", x), _F(1))),
    "Softsign": lambda x, n: Bin("/", x, Bin("+", Un("abs", x), _F(1))),
    "HardSigmoid": lambda x, n: Bin("max", _F(0), Bin("min", _F(1), Bin("+", Bin("*", _F(n.attrs.get("alpha", 0.2)), x),
                                                                        _F(n.attrs.get("beta", 0.5))))),
    "HardSwish": lambda x, n: Bin("*", x, Bin("max", _F(0), Bin("min", _F(1), Bin("+", Bin("*", _F(1 / 6), x), _F(0.5))))),
    "Gelu": lambda x, n: _gelu(x, n),
    "Round": lambda x, n: Un("round", x),
    "Sign": lambda x, n: Un("sign", x),
    "Tan": lambda x, n: Un("tan", x),
    "Asin": lambda x, n: Un("asin", x),
    "Acos": lambda x, n: Un("acos", x),
    "Atan": lambda x, n: Un("atan", x),
    "Sinh": lambda x, n: Un("sinh", x),
    "Cosh": lambda x, n: Un("cosh", x),
    "Asinh": lambda x, n: Un("asinh", x),
    "Acosh": lambda x, n: Un("acosh", x),
    "Atanh": lambda x, n: Un("atanh", x),
    "Mish": lambda x, n: Bin("*", x, Un("tanh", Un("log", Bin("+", Un("exp", x), _F(1))))),
    "ThresholdedRelu": lambda x, n: Select(Bin(">", x, _F(n.attrs.get("alpha", 1.0))), x, _F(0)),
    "Shrink": lambda x, n: Select(Bin("<", x, _F(-n.attrs.get("lambd", 0.5))), Bin("+", x, _F(n.attrs.get("bias", 0.0))),
                                  Select(Bin(">", x, _F(n.attrs.get("lambd", 0.5))),
                                         Bin("-", x, _F(n.attrs.get("bias", 0.0))), _F(0))),
}

BINARY = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "Pow": "pow"}


@register("PRelu")
def lower_prelu(ctx, node):
    out = _out(ctx, node)
    kb = KernelBuilder(ctx, node)
    axes = axes_for(out.shape)
    x, slope = _loads(ctx, kb, node.inputs[:2], axes)
    ctx.add(kb.kernel(out.name, axes, Select(Bin("<", x, _F(0)), Bin("*", slope, x), x)))
VARIADIC = {"Sum": "+", "Max": "max", "Min": "min", "Mean": "+"}


def _out(ctx, node):
    return ctx.graph.tensors[node.outputs[0]]


@register(*UNARY)
def lower_unary(ctx, node):
    out = _out(ctx, node)
    kb = KernelBuilder(ctx, node)
    axes = axes_for(out.shape)
    x = kb.load(node.inputs[0], broadcast_index(ctx.graph.tensors[node.inputs[0]].shape, axes))
    ctx.add(kb.kernel(out.name, axes, UNARY[node.op](x, node)))


@register("Clip")
def lower_clip(ctx, node):
    out = _out(ctx, node)
    kb = KernelBuilder(ctx, node)
    axes = axes_for(out.shape)
    x = kb.load(node.inputs[0], broadcast_index(ctx.graph.tensors[node.inputs[0]].shape, axes))
    e = x
    for k, (key, op) in enumerate((("min", "max"), ("max", "min")), start=1):
        if key in node.attrs:                                   # opset < 11
            e = Bin(op, e, _F(node.attrs[key]))
        elif len(node.inputs) > k and node.inputs[k]:
            t = ctx.graph.tensors[node.inputs[k]]
            bound = _F(np.asarray(t.data).item()) if t.data is not None else kb.load(t.name, [iconst(0)] * len(t.shape))
            e = Bin(op, e, bound)
    ctx.add(kb.kernel(out.name, axes, e))


def _loads(ctx, kb, names, axes):
    return [kb.load(n, broadcast_index(ctx.graph.tensors[n].shape, axes)) for n in names]


@register(*BINARY)
def lower_binary(ctx, node):
    out = _out(ctx, node)
    kb = KernelBuilder(ctx, node)
    axes = axes_for(out.shape)
    a, b = _loads(ctx, kb, node.inputs[:2], axes)
    ctx.add(kb.kernel(out.name, axes, Bin(BINARY[node.op], a, b)))


@register("Mod")
def lower_mod(ctx, node):
    """fmod=1: C's fmod (the dividend's sign), exact in float; fmod=0 (integers only, the
    divisor's sign as Python's %): SW_MOD in an integer kernel (Sunway; cexpr's integer rules)."""
    out = _out(ctx, node)
    fmod = int(node.attrs.get("fmod", 0))
    if not fmod and out.dtype not in ("int32", "int64"):
        raise UnsupportedError(f"node '{node.name}' (Mod): fmod=0 of dtype {out.dtype}: the spec defines it for "
                               "integers only (int32/int64 here; floats need fmod=1)")
    kb = KernelBuilder(ctx, node)
    axes = axes_for(out.shape)
    a, b = _loads(ctx, kb, node.inputs[:2], axes)
    ctx.add(kb.kernel(out.name, axes, Bin("fmod" if fmod else "%", a, b)))


@register(*VARIADIC)
def lower_variadic(ctx, node):
    out = _out(ctx, node)
    kb = KernelBuilder(ctx, node)
    axes = axes_for(out.shape)
    xs = _loads(ctx, kb, [i for i in node.inputs if i], axes)
    e = xs[0]
    for x in xs[1:]:
        e = Bin(VARIADIC[node.op], e, x)
    if node.op == "Mean":
        e = Bin("/", e, _F(len(xs)))
    ctx.add(kb.kernel(out.name, axes, e))


@register("BatchNormalization")
def lower_batchnorm(ctx, node):
    """Inference form: y = x * a[c] + b[c]; a and b folded at compile time when the
    statistics are constants, else computed per element from the loaded statistics."""
    out = _out(ctx, node)
    if len([o for o in node.outputs if o]) > 1 or int(node.attrs.get("training_mode", 0)):
        raise UnsupportedError(f"node '{node.name}' (BatchNormalization): training mode is not supported")
    eps = float(node.attrs.get("epsilon", 1e-5))
    kb = KernelBuilder(ctx, node)
    axes = axes_for(out.shape)
    x = kb.load(node.inputs[0], [ax.var for ax in axes])
    c = [axes[1].var if len(axes) > 1 else axes[0].var]
    params = [ctx.graph.tensors[node.inputs[k]] for k in (1, 2, 3, 4)]
    if all(t.data is not None for t in params):
        scale, bias, mean, var = (np.asarray(t.data, np.float64) for t in params)
        a = (scale / np.sqrt(var + eps)).astype(np.float32)
        b = (bias - mean * a).astype(np.float32)
        y = Bin("+", Bin("*", x, kb.load(ctx.new_const(a, node.name + "_a"), c)),
                kb.load(ctx.new_const(b, node.name + "_b"), c))
    else:
        scale, bias, mean, var = (kb.load(t.name, c) for t in params)
        y = Bin("+", Bin("*", Bin("-", x, mean), Bin("/", scale, Un("sqrt", Bin("+", var, _F(eps))))), bias)
    ctx.add(kb.kernel(out.name, axes, y))
