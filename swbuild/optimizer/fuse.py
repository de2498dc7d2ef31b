"""Fuse an element-wise kernel into the epilogue of the kernel that produces its input.

Conv → (BatchNorm) → Relu becomes one kernel, so the intermediate never touches main
memory. Legal when the producer's output is read by that consumer alone, at the same
index, with the same view, and the consumer has no reduction.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.loopnest import Bin, Load, Select, Un, Var, iter_loads


def _subst(e, fn):
    r = fn(e)
    if r is not None:
        return r
    if isinstance(e, Load):
        return replace(e, index=tuple(_subst(i, fn) for i in e.index))
    if isinstance(e, Bin):
        return Bin(e.op, _subst(e.a, fn), _subst(e.b, fn))
    if isinstance(e, Un):
        return Un(e.op, _subst(e.a, fn))
    if isinstance(e, Select):
        return Select(_subst(e.cond, fn), _subst(e.a, fn), _subst(e.b, fn))
    return e


def _readers(program):
    out = {}
    for k in program.kernels:
        for b in {b.tensor for b in k.buffers.values() if b.name != k.out}:
            out.setdefault(program.root(b), []).append(k)
    return out


def fuse_epilogues(program):
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
            if cons.combine or cons is prod or any(o for o in prod.out_offset):
                continue
            fused = _try_fuse(prod, cons, t, program)
            if fused:
                program.kernels[program.kernels.index(prod)] = fused
                program.kernels.remove(cons)
                changed = True
                break
    return program


def _aliased_elsewhere(program, t):
    return any(program.root(a) == t for a in program.aliases)


def _try_fuse(prod, cons, t, program):
    pout = prod.buffers[prod.out]
    loads = [ld for ld in iter_loads(cons.body) if program.root(cons.buffers[ld.buf].tensor) == t]
    if not loads:
        return None
    want = tuple(Var(a.name) for a in cons.axes)
    for ld in loads:
        if cons.buffers[ld.buf].shape != pout.shape or ld.index != want or len(cons.axes) != len(prod.axes):
            return None
    if [a.extent for a in cons.axes] != [a.extent for a in prod.axes]:
        return None
    if cons.out_offset and any(cons.out_offset):
        return None
    # rename the consumer's axes to the producer's and its buffers into the producer's table
    amap = {c.name: Var(p.name) for c, p in zip(cons.axes, prod.axes)}
    buffers = dict(prod.buffers)
    del buffers[prod.out]
    bmap = {}
    for name, b in cons.buffers.items():
        if program.root(b.tensor) == t:
            continue
        existing = next((n for n, x in buffers.items() if x.tensor == b.tensor and x.shape == b.shape), None)
        if existing is None:
            existing = f"b{len(buffers) + len(bmap) + 1}"
            while existing in buffers:
                existing += "x"
            buffers[existing] = replace(b, name=existing)
        bmap[name] = existing

    def sub(e):
        if isinstance(e, Load) and e.buf in cons.buffers and program.root(cons.buffers[e.buf].tensor) == t:
            return prod.epilogue
        if isinstance(e, Load):
            return replace(e, buf=bmap[e.buf], index=tuple(_subst(i, sub) for i in e.index))
        if isinstance(e, Var) and e.name in amap:
            return amap[e.name]
        return None

    epi = _subst(cons.body, sub)
    out_name = bmap[cons.out]
    return replace(prod, epilogue=epi, out=out_name, buffers=buffers,
                   fused=prod.fused + (cons.op,), schedule=None)
