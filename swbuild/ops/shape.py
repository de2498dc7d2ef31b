"""Data-movement ops: reshapes are aliases (free), Transpose/Concat/Split are copies."""
from __future__ import annotations

from ..support.errors import UnsupportedError
from .base import KernelBuilder, axes_for, register

ALIASES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Dropout", "Identity")


@register(*ALIASES)
def lower_alias(ctx, node):
    # Row-major data is unchanged by these ops; the output names the same storage.
    if node.op == "Dropout":
        _inference_dropout(ctx, node)
    ctx.alias(node.outputs[0], node.inputs[0])


def _inference_dropout(ctx, node):
    """Dropout is the identity only in inference mode, and its mask is not computed."""
    if len(node.inputs) > 2 and node.inputs[2]:
        t = ctx.graph.tensors[node.inputs[2]]
        if t.data is None or bool(t.data.reshape(-1)[0]):
            raise UnsupportedError(f"node '{node.name}' (Dropout): training_mode (random dropping) is not supported; "
                                   "input 'training_mode' must be a constant false")
    if int(node.attrs.get("training_mode", 0)):     # opset < 12 spelled it as an attribute ('is_test')
        raise UnsupportedError(f"node '{node.name}' (Dropout): attribute training_mode is not supported")
    used = {i for n in ctx.graph.nodes for i in n.inputs} | set(ctx.graph.outputs)
    if len(node.outputs) > 1 and node.outputs[1] in used:     # an unused mask (VGG's exports) costs nothing
        mask = node.outputs[1].removesuffix(":as_float")   # the name in the model (optimizer/dtypes.py)
        raise UnsupportedError(f"node '{node.name}' (Dropout): the mask output '{mask}' is not supported")


@register("Transpose")
def lower_transpose(ctx, node):
    x = ctx.graph.tensors[node.inputs[0]]
    out = ctx.graph.tensors[node.outputs[0]]
    perm = node.attrs.get("perm") or list(reversed(range(len(x.shape))))
    axes = axes_for(out.shape)
    idx = [None] * len(perm)
    for j, p in enumerate(perm):
        idx[p] = axes[j].var
    kb = KernelBuilder(ctx, node)
    ctx.add(kb.kernel(out.name, axes, kb.load(x.name, idx)))


@register("Concat")
def lower_concat(ctx, node):
    out = ctx.graph.tensors[node.outputs[0]]
    axis = int(node.attrs["axis"]) % len(out.shape)
    off = 0
    for name in node.inputs:
        if not name:
            continue
        x = ctx.graph.tensors[name]
        if x.shape[axis] == 0:
            continue
        kb = KernelBuilder(ctx, node)
        axes = axes_for(x.shape)
        offset = tuple(off if d == axis else 0 for d in range(len(x.shape)))
        ctx.add(kb.kernel(out.name, axes, kb.load(name, [a.var for a in axes]), out_offset=offset))
        off += x.shape[axis]


@register("Split")
def lower_split(ctx, node):
    x = ctx.graph.tensors[node.inputs[0]]
    axis = int(node.attrs.get("axis", 0)) % len(x.shape)
    off = 0
    for name in node.outputs:
        if not name:
            continue
        o = ctx.graph.tensors[name]
        kb = KernelBuilder(ctx, node)
        axes = axes_for(o.shape)
        idx = [a.var + off if d == axis else a.var for d, a in enumerate(axes)]
        ctx.add(kb.kernel(name, axes, kb.load(x.name, idx)))
        off += o.shape[axis]



FOLDED = ("Constant", "ConstantOfShape", "Shape", "Size", "Range")


@register(*FOLDED)
def lower_folded(ctx, node):
    # The frontend folds these whenever their inputs are known at compile time; reaching
    # here means an input depends on run-time data, which static shapes cannot express.
    raise UnsupportedError(f"node '{node.name}' ({node.op}): evaluated at compile time only, "
                           f"but an input is only known at run time")
