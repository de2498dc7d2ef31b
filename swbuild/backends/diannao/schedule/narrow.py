"""Which int8 activations DianNao keeps as int8 in GDRAM (issue 36).

A quantized tensor lives in the program as float32 values (optimizer/exact_ints.py): 4 bytes
per element cross GDRAM where the MLU's fixed-point convolution reads one. An int8 tensor is
stored as bytes when its one writer ends in a requantization (an integer convolution, a
quantized MaxPool, an element-wise kernel ending in QuantizeLinear: its lanes are integers
of int8's range) and its readers are integer convolutions that run __bang_conv on int8
(schedule/integer.py fixed_point 1) or element-wise kernels. The writer converts its lanes
in NRAM (__bang_float2int8_rn, exact on such integers) and stores a byte each; a
convolution copies the bytes straight into the tile __bang_conv reads (schedule/conv.py
narrow_ends), an element-wise kernel widens its tile in NRAM (__bang_int82float, exact).
Nothing else may see it: not a graph input or output, no view or slice of another storage.

`candidates` is what the graph allows; the kernels are then scheduled, and `unfulfilled`
names the tensors some kernel did not schedule that way (a fallback to the float convolution
or the scalar class, a hoisted or scalar read, a tile that did not fit): those go back to
float32 and the kernels are scheduled again, so a wrong element size never reaches a kernel
that does not expect it.
"""
from __future__ import annotations

from .integer import INTEGER_OPS

POOLS = ("MaxPool",)     # a quantized MaxPool's epilogue requantizes: its result may be bytes


def _integer_conv(k):
    return INTEGER_OPS.get(k.op) == "Conv" and k.combine == "sum" and k.kind == "compute"


def candidates(program):
    """Roots of the int8 tensors the graph lets live as bytes (module docstring)."""
    g = program.graph
    shared = set(program.aliases) | set(program.aliases.values()) | set(program.slices) \
        | {s.container for s in program.loop_slices.values()} | set(program.loop_slices)
    io = {program.root(t) for t in list(program.inputs) + list(program.outputs)}
    writers, readers, other = {}, {}, set()
    for k in program.kernels:
        out = k.buffers[k.out].tensor
        for name, b in k.buffers.items():
            t = b.tensor
            if name == k.out:
                writers.setdefault(t, []).append(k)
            elif (_integer_conv(k) and _input_buffer(k) == name) or _pointwise(k):
                readers.setdefault(t, []).append(k)
            else:
                other.add(t)
        if getattr(k, "loop", None) is not None:
            other.add(out)
    out = set()
    for t, ws in writers.items():
        if g.exact_ints.get(t) != "int8" or t in shared or t in io or t in other or g.tensors[t].data is not None:
            continue
        if len(ws) == 1 and (_integer_conv(ws[0]) or _pointwise(ws[0]) or ws[0].op in POOLS) and readers.get(t):
            out.add(t)
    return frozenset(out)


def _pointwise(k):
    """An element-wise kernel (schedule/elementwise.py converts its byte tiles in NRAM)."""
    return not k.combine and k.kind == "compute" and k.op not in INTEGER_OPS


def _input_buffer(k):
    """The buffer of an integer convolution's input (the product's left factor)."""
    from .integer import _centered
    try:
        xl, _, _ = _centered(k.body)
    except Exception:       # an unusual product: integer_as_conv refuses it too
        return None
    return xl.buf


def unfulfilled(dev, narrow):
    """Tensors of `narrow` that a scheduled kernel reads or writes other than as int8 bytes."""
    bad = set()
    for dk in dev:
        k = dk.kernel
        if k is None:
            continue
        for name, b in k.buffers.items():
            if b.tensor not in narrow:
                continue
            if dk.cls == "pool":
                ok = name == k.out and dk.info.get("narrow_out")
            elif dk.cls == "conv":
                ok = dk.info.get("narrow_out") if name == k.out else dk.info.get("narrow_in") and name == _input_buffer(k)
            elif dk.cls == "elementwise":
                ok = dk.info.get("narrow_out") if name == k.out else name in dk.info.get("narrow_bufs", ())
            else:
                ok = False
            if not ok:
                bad.add(b.tensor)
    return bad
