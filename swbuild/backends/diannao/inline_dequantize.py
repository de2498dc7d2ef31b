"""A standalone DequantizeLinear of an int8 tensor computed where it is read (a pass of the
DianNao backend, issue 36).

PyTorch's QDQ export gives a ResNet block's shortcut a DequantizeLinear of its own, read by the
residual Add alone, which fuse.py has put into the second convolution's epilogue: a kernel
that writes (q - z) * s as float32 (four bytes per element to GDRAM) for the convolution to
read back. Here the convolution's epilogue loads q itself (an int8 tensor, stored as bytes:
schedule/narrow.py, widened in NRAM by schedule/conv.py) and computes (q - z) * s: the same
float32 operations on the same values, bit for bit, and the kernel is gone.

Only where the kernel is point-wise with one leaf, an int8 tensor (graph.exact_ints) read at
its own output index with the output's shape, no constant, and its output is read only by
integer convolutions in their epilogues, without pads, and is no graph input or output,
alias, slice or loop state.
"""
from __future__ import annotations

from dataclasses import replace

from ...ir.loopnest import Acc, Load, Var, substitute_acc, transform
from .defer_dequantize import _epilogue_reader, _pointwise


def _single_int8_leaf(p, g, root):
    """The kernel's one leaf, a Load of an int8 tensor at p's own output index and shape, else None."""
    value = substitute_acc(p.epilogue, p.body)
    leaves = []
    transform(value, lambda e: leaves.append(e) if isinstance(e, (Load, Acc)) and e not in leaves else None)
    if len(leaves) != 1 or not isinstance(leaves[0], Load) or leaves[0].pad is not None:
        return None
    ld = leaves[0]
    b, out = p.buffers[ld.buf], p.buffers[p.out]
    x = b.tensor
    if g.exact_ints.get(root(x), g.exact_ints.get(x)) != "int8" or g.tensors[x].data is not None:
        return None
    if ld.index != tuple(Var(a.name) for a in p.axes) or tuple(b.shape) != tuple(out.shape) \
            or tuple(g.tensors[x].shape) != tuple(g.tensors[out.tensor].shape) or any(p.out_offset):
        return None
    return value, ld


def inline_dequantize(program, target, options):
    """A standalone DequantizeLinear of int8 bytes computed in the convolution epilogues reading it."""
    if int(target.hardware.get("conv_int8_macs_per_cycle", 0)) <= 0:
        return program
    g = program.graph
    shared = program.viewed_tensors()
    io = set(program.inputs) | set(program.outputs)
    kernels = list(program.kernels)
    gone = set()
    for i, p in enumerate(kernels):
        if not _pointwise(p) or p.out_offset and any(p.out_offset):
            continue
        t = p.buffers[p.out].tensor
        if t in shared or t in io or g.tensors[t].data is not None or t in g.exact_ints:
            continue
        found = _single_int8_leaf(p, g, program.root)
        if found is None:
            continue
        value, leaf = found
        readers = []
        for j, k in enumerate(kernels):
            names = {n for n, b in k.buffers.items() if b.tensor == t}
            if j == i or not names:
                continue
            pads = []
            transform(k.epilogue, lambda e, n=names: pads.append(e) if isinstance(e, Load) and e.buf in n
                      and e.pad is not None else None)
            if j in gone or k.buffers[k.out].tensor == t or not _epilogue_reader(k, names) or pads:
                readers = None
                break
            readers.append((j, names))
        if not readers:
            continue
        for j, names in readers:
            k = kernels[j]
            buffers = dict(k.buffers)
            for n in names:     # the reader's view of t, now of the int8 tensor (same shape, same layout)
                buffers[n] = replace(p.buffers[leaf.buf], name=n, shape=k.buffers[n].shape)

            def fn(e, names=names):
                if isinstance(e, Load) and e.buf in names:
                    return transform(value, lambda x, at=e: replace(leaf, buf=at.buf, index=at.index) if x == leaf
                                     else None)
                return None
            kernels[j] = replace(k, buffers=buffers, epilogue=transform(k.epilogue, fn))
        gone.add(i)
        program.notes.append(f"{p.name}: DequantizeLinear computed in the epilogues that read {t} (int8 in GDRAM)")
    program.kernels = [k for i, k in enumerate(kernels) if i not in gone]
    return program
