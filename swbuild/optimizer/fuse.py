"""Fuse an element-wise kernel into the epilogue of the kernel that produces its input.

Conv → (BatchNorm) → Relu becomes one kernel, so the intermediate never touches main
memory. Legal when the producer's output is read by that consumer alone, at the same
index, with the same view, and the consumer has no reduction.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.loopnest import Bin, Load, Var, iconst, iter_loads, substitute_acc, transform


def _readers(program):
    out = {}
    for k in program.kernels:
        for b in {b.tensor for b in k.buffers.values() if b.name != k.out}:
            out.setdefault(program.root(b), []).append(k)
    return out


def fuse_epilogues(program, target=None, options=None):
    """Fuse element-wise consumers into their producer's epilogue (one kernel, one pass)."""
    keep_out = {program.root(t) for t in program.outputs}
    changed = True
    while changed:
        changed = False
        readers = _readers(program)
        for prod in program.kernels:
            t = program.root(prod.buffers[prod.out].tensor)
            rs = readers.get(t, [])
            if t in keep_out or len(rs) != 1 or t in program.aliases.values() and _aliased_elsewhere(program, t):
                continue
            cons = rs[0]
            if "compute" != prod.kind or "compute" != cons.kind:   # special kernels print themselves
                continue
            if prod.loop is not None or cons.loop is not None:   # a static loop's body: its kernels stay as lowered
                continue
            if cons.combine or cons is prod or any(o for o in prod.out_offset):
                continue
            fused = _try_fuse(prod, cons, t, program)
            if fused:
                # The fused kernel runs where the consumer ran: the consumer's other inputs
                # may be computed after the producer (resnet's downsample branch), and the
                # producer's own inputs are ready earlier still.
                ks = program.kernels
                ks[next(i for i, k in enumerate(ks) if k is cons)] = fused
                del ks[next(i for i, k in enumerate(ks) if k is prod)]
                changed = True
                break
    return program


def _aliased_elsewhere(program, t):
    return any(program.root(a) == t for a in program.aliases)


def view_map(cons_shape, prod_axes):
    """Express each consumer axis through the producer's axes when the consumer's view
    merges consecutive producer dims (e.g. [N, C, H, W] over a grouped conv's
    [N, G, C/G, H, W]): c = g * (C/G) + co. None when the views do not line up so."""
    out, j = [], 0
    for d in cons_shape:
        group, size = [], 1
        while j < len(prod_axes) and (size < d or (prod_axes[j].extent == 1 and size == d and d != 1)):
            group.append(prod_axes[j])
            size *= prod_axes[j].extent
            j += 1
        if size != d:
            return None
        e, pitch = None, 1
        for a in reversed(group):
            term = a.var if pitch == 1 else Bin("*", a.var, iconst(pitch))
            e = term if e is None else Bin("+", term, e)
            pitch *= a.extent
        out.append(e if e is not None else iconst(0))
    while j < len(prod_axes) and prod_axes[j].extent == 1:
        j += 1
    return out if j == len(prod_axes) else None


def _try_fuse(prod, cons, t, program):
    value = substitute_acc(cons.epilogue, cons.body)   # the consumer's whole element-wise value
    loads = [ld for ld in iter_loads(value) if program.root(cons.buffers[ld.buf].tensor) == t]
    if not loads:
        return None
    want = tuple(Var(a.name) for a in cons.axes)
    for ld in loads:
        if ld.index != want or tuple(cons.buffers[ld.buf].shape) != tuple(a.extent for a in cons.axes):
            return None
    # the consumer must write its whole output view (a Concat part writes a slice of a
    # larger tensor even when its offset is zero)
    if any(cons.out_offset) or tuple(cons.buffers[cons.out].shape) != tuple(a.extent for a in cons.axes):
        return None
    mapped = view_map([a.extent for a in cons.axes], list(prod.axes))
    if mapped is None:
        return None
    # express the consumer's axes through the producer's; its buffers join the producer's table
    amap = {c.name: e for c, e in zip(cons.axes, mapped)}
    buffers = dict(prod.buffers)
    del buffers[prod.out]
    bmap = {}
    for name, b in cons.buffers.items():
        if program.root(b.tensor) == t:
            continue
        existing = next((n for n, x in buffers.items() if x.tensor == b.tensor and x.shape == b.shape), None)
        if existing is None:
            existing = next(f"b{i}" for i in range(len(buffers) + len(cons.buffers) + 1) if f"b{i}" not in buffers)
            buffers[existing] = replace(b, name=existing)
        bmap[name] = existing

    def sub(e):
        if isinstance(e, Load) and e.buf in cons.buffers and program.root(cons.buffers[e.buf].tensor) == t:
            return prod.epilogue
        if isinstance(e, Load):
            return replace(e, buf=bmap[e.buf], index=tuple(transform(i, sub) for i in e.index))
        if isinstance(e, Var) and e.name in amap:
            return amap[e.name]
        return None

    epi = transform(value, sub)
    out_name = bmap[cons.out]
    # the consumer's output is written through the producer's view of it
    buffers[out_name] = replace(buffers[out_name], shape=prod.buffers[prod.out].shape)
    return replace(prod, epilogue=epi, out=out_name, buffers=buffers,
                   fused=prod.fused + (cons.op,), schedule=None)
