"""CPE (slave) C for one scheduled kernel.

Shape of every kernel, as swTVM lays it out:

    DMA the parameter struct into LDM; allocate LDM buffers
    for each spatial tile dealt to this CPE (round-robin):
        acc = init
        [body boxes not depending on reduce tiles: DMA in]
        for each reduce tile:  [body boxes: DMA in] compute into acc
        [epilogue boxes: DMA in] epilogue in place; DMA the output tile out

Main memory is touched only by DMA. Every DMA is counted at compile time by
`swbuild.perf.dma_predict`, which mirrors the arithmetic printed here.
"""
from __future__ import annotations

import math

from ...ir.loopnest import affine, index_range, substitute_acc
from ...names import c_comment
from ..cexpr import float_literal, render

COMBINE = {"sum": "{a} += {v};", "max": "{a} = fmaxf({a}, {v});", "min": "{a} = fminf({a}, {v});",
           "prod": "{a} *= {v};"}


class _W:
    def __init__(self):
        self.lines, self.depth = [], 1

    def __call__(self, s=""):
        self.lines.append("    " * self.depth + s if s else "")

    def open(self, s):
        self(s + " {")
        self.depth += 1

    def close(self, s="}"):
        self.depth -= 1
        self(s)


def box_id(b):
    return f"{b.context}_{b.buf}"


def dma_api(api):
    """static inline helpers mapping one get/put shape onto the chip's API."""
    if api == "crts":
        return """static inline void sw_get(void *ldm, const void *mem, int len, int bsize, int gap, crts_rply_t *rp)
{
    if (gap) CRTS_dma_iget_stride(ldm, (void *)mem, len, bsize, gap, rp);
    else CRTS_dma_iget(ldm, (void *)mem, len, rp);
}
static inline void sw_put(void *mem, const void *ldm, int len, int bsize, int gap, crts_rply_t *rp)
{
    if (gap) CRTS_dma_iput_stride(mem, (void *)ldm, len, bsize, gap, rp);
    else CRTS_dma_iput(mem, (void *)ldm, len, rp);
}
#define SW_WAIT(rp, n) CRTS_dma_wait_value(&(rp), (n))
#define SW_CPE_ID() CRTS_tid
#define SW_REPLY crts_rply_t
"""
    return """static inline void sw_get(void *ldm, const void *mem, int len, int bsize, int gap, volatile int *rp)
{
    athread_get(PE_MODE, (void *)mem, ldm, len, (void *)rp, 0, gap, gap ? bsize : 0);
}
static inline void sw_put(void *mem, const void *ldm, int len, int bsize, int gap, volatile int *rp)
{
    athread_put(PE_MODE, (void *)ldm, mem, len, (void *)rp, gap, gap ? bsize : 0);
}
#define SW_WAIT(rp, n) while ((rp) != (n))
#define SW_CPE_ID() athread_get_id(-1)
#define SW_REPLY volatile int
"""


def _horner(terms):
    """((i0 * e1 + i1) * e2 + i2)... from [(index text, extent text)]."""
    s = None
    for idx, ext in terms:
        s = idx if s is None else f"({s}) * {ext} + {idx}"
    return s or "0"


def kernel_c(k, cores, itemsize=4):
    s = k.schedule
    t = s.tiles
    w = _W()
    sp = list(k.axes)
    red = list(k.reduce_axes)
    gvar = lambda n: f"(t_{n}0 + l_{n})"  # noqa: E731  global value of axis n in the compute nest
    full_ranges = {a.name: (0, a.extent - 1) for a in sp + red}
    body_boxes = [b for b in s.boxes if b.context == "body"]
    epi_boxes = [b for b in s.boxes if b.context == "epi"]
    out_box = next(b for b in s.boxes if b.context == "out")
    if k.combine is None:      # an element-wise kernel computes in its epilogue pass
        epi_boxes, body_boxes = body_boxes + epi_boxes, []

    lines = [f"/* {c_comment(k.op + (' + ' + ' + '.join(k.fused) if k.fused else ''))} (node {c_comment(k.node)}) */",
             f"void {k.name}(void *arg)", "{"]
    w(f"struct {k.name}_para p;")
    w("SW_REPLY rp = 0;")
    w("int ng = 1;")
    w("sw_get(&p, arg, (int)sizeof(p), 0, 0, &rp);")
    w("SW_WAIT(rp, ng);")
    w("const int cpe = SW_CPE_ID();")
    acc_elems = math.prod(t[a.name] for a in sp)
    allocs = [("acc", acc_elems)] + [(f"l_{box_id(b)}", b.elems(t)) for b in body_boxes + epi_boxes]
    for name, n in allocs:
        w(f"float *{name} = (float *)ldm_malloc({_al(n * itemsize)});")
    for b in body_boxes + epi_boxes:
        dims = len(b.shape)
        w("int " + ", ".join(f"lo_{box_id(b)}_{d} = 0, ex_{box_id(b)}_{d} = 0" for d in range(dims)) + ";")
        if b.pad:
            w(f"int in_{box_id(b)} = 0;")
    counts = [math.ceil(a.extent / t[a.name]) for a in sp]
    w(f"for (long tt = cpe; tt < {math.prod(counts)}L; tt += {cores}) {{")
    w.depth += 1
    w("long rem = tt;")
    for a, c in reversed(list(zip(sp, counts))):
        w(f"const int t_{a.name}0 = (int)(rem % {c}) * {t[a.name]}; rem /= {c};")
    for a in sp:
        w(f"const int t_{a.name}n = SW_MIN({t[a.name]}, {a.extent} - t_{a.name}0);")
    if k.combine:
        w(f"for (int i = 0; i < {' * '.join(f't_{a.name}n' for a in sp)}; i++) acc[i] = {float_literal(k.init)};")
    # body boxes that do not move with the reduce tiles
    _load_boxes(w, k, [b for b in body_boxes if b.level < 0], itemsize)
    for i, a in enumerate(red):
        w.open(f"for (int t_{a.name}0 = 0; t_{a.name}0 < {a.extent}; t_{a.name}0 += {t[a.name]})")
        w(f"const int t_{a.name}n = SW_MIN({t[a.name]}, {a.extent} - t_{a.name}0);")
        _load_boxes(w, k, [b for b in body_boxes if b.level == i], itemsize)
    if k.combine:
        _compute(w, k, body_boxes, gvar, full_ranges, reduce=True)
    for _ in red:
        w.close()
    _load_boxes(w, k, epi_boxes, itemsize)
    _compute(w, k, epi_boxes, gvar, full_ranges, reduce=False)
    _store_out(w, k, out_box, itemsize)
    w.depth -= 1
    w("}")
    for name, n in reversed(allocs):
        w(f"ldm_free({name}, {_al(n * itemsize)});")
    return "\n".join(lines + w.lines + ["}", ""])


def _al(n):
    return (n + 63) // 64 * 64


def _lo_hi(b, d):
    """C text of the unclamped low and high index of box b in dim d for the current tile."""
    los, his = [], []
    for e in b.index[d]:
        aff = affine(e)
        lo, hi = [str(aff.get(None, 0))], [str(aff.get(None, 0))]
        for v, c in sorted((v, c) for v, c in aff.items() if v):
            if b.tiles[v] >= b.axis_extents[v]:   # one tile: constant range, in scope anywhere
                start, last = "0", str(b.axis_extents[v] - 1)
            else:
                start, last = f"t_{v}0", f"(t_{v}0 + t_{v}n - 1)"
            lo.append(f"{c} * {start if c > 0 else last}")
            hi.append(f"{c} * {last if c > 0 else start}")
        los.append(" + ".join(lo))
        his.append(" + ".join(hi))
    lo, hi = los[0], his[0]
    for x in los[1:]:
        lo = f"SW_MIN({lo}, {x})"
    for x in his[1:]:
        hi = f"SW_MAX({hi}, {x})"
    return lo, hi


def _pitches(shape):
    return [math.prod(shape[d + 1:]) for d in range(len(shape))]


def _load_boxes(w, k, boxes, itemsize):
    if not boxes:
        return
    for b in boxes:
        bid = box_id(b)
        dims = len(b.shape)
        conds = []
        if b.pad:  # 1 when no load of this box can fall outside the tensor in this tile
            w(f"in_{bid} = 1;")
        for d in range(dims):
            lo, hi = _lo_hi(b, d)
            w(f"{{ const int lo = {lo}, hi = {hi};")
            w(f"  lo_{bid}_{d} = SW_MAX(lo, 0); ex_{bid}_{d} = SW_MIN(hi, {b.shape[d] - 1}) - lo_{bid}_{d} + 1;")
            if b.pad:
                w(f"  if (lo < 0 || hi > {b.shape[d] - 1}) in_{bid} = 0; }}")
            else:
                w("}")
            conds.append(f"ex_{bid}_{d} > 0")
        _dma(w, b, conds, "get", f"l_{bid}", itemsize)
    w("SW_WAIT(rp, ng);")


def _dma(w, b, conds, direction, ldm, itemsize, ext=None, lo=None):
    """Issue the DMA(s) of one box: contiguous tail merged, one strided call per 2-D slab."""
    bid = box_id(b)
    dims = len(b.shape)
    ext = ext or [f"ex_{bid}_{d}" for d in range(dims)]
    lo = lo or [f"lo_{bid}_{d}" for d in range(dims)]
    m = b.merge_dim(b.extents(b.tiles), b.tiles)
    pitch = _pitches(b.shape)
    inner = math.prod(b.shape[m:])
    ptr = f"p.{b.buf}"
    if conds:
        w.open(f"if ({' && '.join(conds)})")
    else:
        w("{")
        w.depth += 1
    if m == 0:
        n = math.prod(b.shape) * itemsize
        w(_call(direction, ldm, ptr, str(n), "0", "0"))
        w("ng++;")
    else:
        c = m - 1
        run = f"{ext[c]} * {inner}"
        if c == 0:
            w(_call(direction, ldm, f"{ptr} + (long){lo[0]} * {pitch[0]}", f"{run} * {itemsize}", "0", "0"))
            w("ng++;")
        else:
            outer = list(range(c - 1))
            for d in outer:
                w.open(f"for (int j{d} = 0; j{d} < {ext[d]}; j{d}++)")
            moff = " + ".join([f"(long)({lo[d]} + j{d}) * {pitch[d]}" for d in outer]
                              + [f"(long){lo[c - 1]} * {pitch[c - 1]}", f"(long){lo[c]} * {pitch[c]}"])
            slab = f"{ext[c - 1]} * {run}"
            loff = _horner([(f"j{d}", ext[d]) for d in outer]) if outer else "0"
            w(f"const int bs = {run} * {itemsize}, gap = ({b.shape[c]} - {ext[c]}) * {inner} * {itemsize};")
            w(_call(direction, f"{ldm} + (long)({loff}) * {slab}", f"{ptr} + {moff}", f"{ext[c - 1]} * bs", "bs", "gap"))
            w("ng++;")
            for _ in outer:
                w.close()
    w.close()


def _call(direction, ldm, mem, length, bsize, gap):
    if direction == "get":
        return f"sw_get({ldm}, {mem}, {length}, {bsize}, {gap}, &rp);"
    return f"sw_put({mem}, {ldm}, {length}, {bsize}, {gap}, &rp);"


def _compute(w, k, boxes, gvar, full_ranges, reduce):
    sp = [a.name for a in k.axes]
    order = [n for n in k.schedule.order if reduce or n in sp]
    acc_idx = _horner([(f"l_{n}", f"t_{n}n") for n in sp])
    by_buf = {b.buf: b for b in boxes}
    pads = [b for b in boxes if b.pad]

    def nest(guarded):
        def load(ld):
            b = by_buf[ld.buf]
            bid = box_id(b)
            idx = [render(e, gvar, None) for e in ld.index]
            lidx = _horner([(f"({i} - lo_{bid}_{d})", f"ex_{bid}_{d}") for d, i in enumerate(idx)])
            text = f"l_{bid}[{lidx}]"
            if ld.pad is None or not guarded:
                return text
            conds = []
            for d, e in enumerate(ld.index):
                lo, hi = index_range(e, full_ranges)
                if lo < 0:
                    conds.append(f"{idx[d]} >= 0")
                if hi > b.shape[d] - 1:
                    conds.append(f"{idx[d]} < {b.shape[d]}")
            return f"(({' && '.join(conds) or '1'}) ? {text} : {float_literal(ld.pad)})" if conds else text

        for n in order:
            w.open(f"for (int l_{n} = 0; l_{n} < t_{n}n; l_{n}++)")
        if reduce:
            w(COMBINE[k.combine].format(a=f"acc[{acc_idx}]", v=render(k.body, gvar, load)))
        else:
            e = substitute_acc(k.epilogue, k.body) if k.combine is None else k.epilogue
            w(f"acc[{acc_idx}] = {render(e, gvar, load, acc=f'acc[{acc_idx}]')};")
        for _ in order:
            w.close()

    if pads:
        w.open(f"if ({' && '.join(f'in_{box_id(b)}' for b in pads)})")
        nest(False)
        w.close("} else {")
        w.depth += 1
        nest(True)
        w.close()
    else:
        nest(False)


def _store_out(w, k, b, itemsize):
    ext = [f"t_{a.name}n" for a in k.axes]
    lo = [f"(t_{a.name}0 + {o})" if o else f"t_{a.name}0" for a, o in zip(k.axes, k.out_offset)]
    _dma(w, b, [], "put", "acc", itemsize, ext=ext, lo=lo)
    w("SW_WAIT(rp, ng);")
