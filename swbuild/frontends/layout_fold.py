"""Constant folding of the layout-only ops in numpy: Reshape, Unsqueeze, Squeeze, Flatten,
Identity and GatherElements compute no value (they move them), so their folded result is the
reference's bit for bit.

onnx's ReferenceEvaluator folds everything else (frontends/onnx.py), but importing it costs
about 0.25 s of CPU and running it 0.7 ms a node: light_inception_v1 paid that for one
Reshape, densenet121 for 240 Unsqueezes of its batch-norm parameters. A case these rules do
not take (malformed, or an attribute they do not know) returns None and goes to the
reference, which also words the error.
"""
from __future__ import annotations

import numpy as np


def _axes(values, attrs, opset):
    """The `axes` of Unsqueeze/Squeeze: the second input from opset 13, an attribute before."""
    if opset >= 13:
        return None if len(values) < 2 or values[1] is None else [int(a) for a in values[1].reshape(-1)]
    return None if attrs.get("axes") is None else [int(a) for a in attrs["axes"]]


def _reshape(values, attrs, opset):
    data, shape = values[0], [int(s) for s in np.asarray(values[1]).reshape(-1)]
    if not attrs.get("allowzero", 0):
        if any(s == 0 and i >= data.ndim for i, s in enumerate(shape)):
            return None
        shape = [data.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    if shape.count(-1) > 1 or any(s < -1 for s in shape):
        return None
    return data.reshape(shape)


def _sequential_safe(axes, opset):
    """Before opset 13 the reference inserts (removes) the axes one at a time in their given
    (reversed) order: the same as the spec's all-at-once only for ascending non-negative axes."""
    return opset >= 13 or (all(a >= 0 for a in axes) and axes == sorted(axes))


def _unsqueeze(values, attrs, opset):
    axes = _axes(values, attrs, opset)
    if not axes or not _sequential_safe(axes, opset):
        return None
    rank = values[0].ndim + len(axes)
    norm = [a + rank if a < 0 else a for a in axes]
    if len(set(norm)) != len(norm) or not all(0 <= a < rank for a in norm):
        return None
    return np.expand_dims(values[0], tuple(sorted(norm)))


def _squeeze(values, attrs, opset):
    data, axes = values[0], _axes(values, attrs, opset)
    if axes == [] and opset < 13:       # the reference reads an empty attribute as none given
        axes = None
    if axes is None:
        return data.reshape([d for d in data.shape if d != 1])
    if not _sequential_safe(axes, opset):
        return None
    norm = [a + data.ndim if a < 0 else a for a in axes]
    if len(set(norm)) != len(norm) or not all(0 <= a < data.ndim and data.shape[a] == 1 for a in norm):
        return None
    return data.reshape([d for i, d in enumerate(data.shape) if i not in norm])


def _flatten(values, attrs, opset):
    data = values[0]
    axis = int(attrs.get("axis", 1))
    axis = axis + data.ndim if axis < 0 else axis
    if not 0 <= axis <= data.ndim:
        return None
    outer = int(np.prod(data.shape[:axis], dtype=np.int64))
    return data.reshape(outer, int(np.prod(data.shape[axis:], dtype=np.int64)))


def _identity(values, attrs, opset):
    return values[0]


def _gather_elements(values, attrs, opset):
    """Here and not in the reference: onnx's GatherElements (1.23) goes through np.choose, which
    takes at most 64 choices, and its fallback returns one element (BERT's position ids, a
    [1, 32] gather from [1, 64], failed folding with "cannot reshape array of size 1")."""
    data, idx = values[0], values[1]
    axis = int(attrs.get("axis", 0))
    axis = axis + data.ndim if axis < 0 else axis
    if idx.dtype.kind not in "iu" or idx.ndim != data.ndim or not 0 <= axis < data.ndim \
            or any(i > d for k, (i, d) in enumerate(zip(idx.shape, data.shape)) if k != axis):
        return None
    n = data.shape[axis]
    idx = idx.astype(np.int64)
    if idx.size and (idx.min() < -n or idx.max() >= n):
        return None     # out of range: the reference words the error
    # output shape = the indices' shape: the other axes read the data's leading part
    part = data[tuple(slice(None) if k == axis else slice(0, i) for k, i in enumerate(idx.shape))]
    return np.take_along_axis(part, np.where(idx < 0, idx + n, idx), axis)


# op -> (fold, inputs it needs at least, the attributes it knows)
RULES = {"Reshape": (_reshape, 2, {"allowzero"}), "Unsqueeze": (_unsqueeze, 1, {"axes"}),
         "Squeeze": (_squeeze, 1, {"axes"}), "Flatten": (_flatten, 1, {"axis"}), "Identity": (_identity, 1, set()),
         "GatherElements": (_gather_elements, 2, {"axis"})}


def fold(op, values, attrs, opset):
    """The node's output as an array (a new one: never a view of an input), or None when
    these rules do not take it."""
    if op not in RULES:
        return None
    rule, needs, known = RULES[op]
    if len(values) < needs or any(v is None for v in values[:needs]) or set(attrs) - known:
        return None
    values = [None if v is None else np.asarray(v) for v in values]
    try:
        out = rule(values, attrs, opset)
    except (ValueError, TypeError, IndexError):      # e.g. a Reshape to another size: the reference says so
        return None
    return None if out is None else np.array(out)
