"""An integer convolution's fused DequantizeLinear moved into its element-wise readers (a pass
of the DianNao backend, issue 36).

A QDQ ResNet block's second convolution ends in DequantizeLinear, (q - z) * s, because the
residual Add reads it as float: its result crosses GDRAM as float32, four bytes per element,
written once and read back. Its readers are element-wise kernels (the Add, requantized), so
the convolution can stop at the requantized integer q (int8's range) and each reader compute
(q - z) * s where it loaded the float: the same float32 operations on the same values, bit
for bit. The tensor then holds int8 integers (graph.exact_ints) and schedule/narrow.py stores
it as bytes (or, where a kernel cannot, as float32 integers: still exact).

Only where the convolution is the tensor's one writer, every reader is an element-wise kernel
reading it in bounds, a MaxPool of it (the maximum of q, dequantized after: (q - z) * s is
non-decreasing) or an integer convolution reading it in its epilogue only (a residual Add fused
there), and the tensor is no graph input or output, alias, slice or loop state. A reader's
QuantizeLinear of such values then has a small domain (schedule/quantize.py).
"""
from __future__ import annotations

from dataclasses import replace

from ...ir.loopnest import Acc, Bin, Const, Load, Select, Un, substitute_acc, transform
from .schedule.integer import INTEGER_OPS


def _requantized_int8(q):
    """q is ops/quant.py's saturate(round(..) + z, lo, hi) with [lo, hi] inside int8's range."""
    if not (isinstance(q, Select) and isinstance(q.cond, Bin) and q.cond.op == ">=" and isinstance(q.cond.b, Const)
            and isinstance(q.a, Select) and isinstance(q.a.cond, Bin) and q.a.cond.op == "<="
            and isinstance(q.a.cond.b, Const)):
        return False
    lo, hi = float(q.cond.b.value), float(q.a.cond.b.value)
    found = []
    transform(q, lambda e: found.append(e) if isinstance(e, Un) and e.op == "round" else None)
    return bool(found) and -128 <= lo <= hi <= 127 and lo.is_integer() and hi.is_integer()


def _dequantize(epi):
    """(q, z, s) of an epilogue (q - z) * s (q * s: z = 0), q an int8 requantization; None otherwise."""
    if isinstance(epi, Bin) and epi.op == "*" and isinstance(epi.b, Const) and _requantized_int8(epi.a):
        return epi.a, 0.0, float(epi.b.value)
    if isinstance(epi, Bin) and epi.op == "*" and isinstance(epi.b, Const) and isinstance(epi.a, Bin) \
            and epi.a.op == "-" and isinstance(epi.a.b, Const) and _requantized_int8(epi.a.a):
        z, s = float(epi.a.b.value), float(epi.b.value)
        if z.is_integer() and -128 <= z <= 127:
            return epi.a.a, z, s
    return None


def _pointwise(k):
    return not k.combine and k.kind == "compute" and k.op not in INTEGER_OPS and getattr(k, "loop", None) is None \
        and not k.stages


def _plain(k):
    return k.kind == "compute" and getattr(k, "loop", None) is None and not k.stages


def _max_pool(k, names):
    """A max reduction of the tensor itself (a MaxPool): (q - z) * s is non-decreasing in q
    (s > 0), so the maximum of the dequantized values is the dequantized maximum, bit for bit,
    and a pad of -inf stays -inf."""
    return _plain(k) and k.combine == "max" and isinstance(k.body, Load) and k.body.buf in names \
        and (k.body.pad is None or k.body.pad == float("-inf"))


def _epilogue_reader(k, names):
    """An integer convolution reading the tensor in its epilogue only (a residual Add fused there)."""
    found = []
    transform(k.body, lambda e: found.append(e) if isinstance(e, Load) and e.buf in names else None)
    return _plain(k) and INTEGER_OPS.get(k.op) == "Conv" and k.combine == "sum" and not found


def defer_dequantize(program, target, options):
    """An integer convolution's DequantizeLinear into its element-wise readers (int8 in GDRAM)."""
    if int(target.hardware.get("conv_int8_macs_per_cycle", 0)) <= 0:
        return program
    g = program.graph
    shared = program.viewed_tensors()
    io = set(program.inputs) | set(program.outputs)
    kernels = list(program.kernels)
    for i, p in enumerate(kernels):
        if INTEGER_OPS.get(p.op) != "Conv" or p.combine != "sum" or p.kind != "compute":
            continue
        dq = _dequantize(p.epilogue)
        t = p.buffers[p.out].tensor
        if dq is None or t in shared or t in io or g.tensors[t].data is not None or t in g.exact_ints:
            continue
        q, z, s = dq
        readers, ok = [], True
        for j, k in enumerate(kernels):
            names = [n for n, b in k.buffers.items() if b.tensor == t]
            if j == i or not names:
                continue
            if k.buffers[k.out].tensor == t or not (_pointwise(k) or _max_pool(k, names) or _epilogue_reader(k, names)):
                ok = False
                break
            readers.append((j, set(names)))
        if s <= 0:
            ok = False
        if not ok or not readers:
            continue
        pads = []
        for j, names in readers:
            if not _max_pool(kernels[j], names):
                transform(kernels[j].body, lambda e: pads.append(e) if isinstance(e, Load) and e.buf in names
                          and e.pad is not None else None)
            transform(kernels[j].epilogue, lambda e: pads.append(e) if isinstance(e, Load) and e.buf in names
                      and e.pad is not None else None)
        if pads:
            continue
        for j, names in readers:
            def fn(e, names=names):
                if isinstance(e, Load) and e.buf in names:
                    return Bin("*", Bin("-", e, Const(z)) if z else e, Const(s))
                return None
            if _max_pool(kernels[j], names):     # the pool takes the maximum of q, its epilogue dequantizes it
                epi = substitute_acc(kernels[j].epilogue, Bin("*", Bin("-", Acc(), Const(z)) if z else Acc(), Const(s)))
                kernels[j] = replace(kernels[j], epilogue=epi)
                continue
            kernels[j] = replace(kernels[j], body=transform(kernels[j].body, fn),
                                 epilogue=transform(kernels[j].epilogue, fn))
        kernels[i] = replace(p, epilogue=q)
        g.exact_ints[t] = "int8"
        program.notes.append(f"{p.name}: DequantizeLinear moved into the readers of {t} (int8 in GDRAM)")
    program.kernels = kernels
    return program
