"""The transfers of a box's fetch in a kernel's slave code (emit/slave.py): its DMA calls, and on
SW26010-Pro, where a row (array) shares a box without broadcast DMA, the RMA broadcast of what
one CPE fetched (cpe_api.CpeApi.rma; the helpers are slave_file.dma_helpers')."""
from __future__ import annotations

import math


def horner(terms):
    """((i0 * e1 + i1) * e2 + i2)... from [(index text, extent text)]."""
    s = None
    for idx, ext in terms:
        s = idx if s is None else f"({s}) * {ext} + {idx}"
    return s or "0"


def _pitches(shape):
    return [math.prod(shape[d + 1:]) for d in range(len(shape))]


def box_dma(w, b, conds, direction, ldm, ptr, ext, lo, reply, counter, itemsize):
    """The DMA(s) of one box footprint: contiguous tail merged, one strided call per 2-D slab
    (mirrored by schedule/dma.py: transfers)."""
    m = b.merge
    shape = b.shape
    pitch = _pitches(shape)
    inner = math.prod(shape[m:])
    if conds:
        w.open(f"if ({' && '.join(conds)})")
    else:
        w("{")
        w.depth += 1
    if m == 0:
        w(call(direction, ldm, ptr, str(math.prod(shape) * itemsize), "0", "0", reply))
        w(f"{counter}++;")
    else:
        c = m - 1
        run = f"{ext[c]} * {inner}"
        if c == 0:
            w(call(direction, ldm, f"{ptr} + (long){lo[0]} * {pitch[0]}", f"{run} * {itemsize}", "0", "0", reply))
            w(f"{counter}++;")
        else:
            outer = list(range(c - 1))
            for d in outer:
                w.open(f"for (int j{d} = 0; j{d} < {ext[d]}; j{d}++)")
            moff = " + ".join([f"(long)({lo[d]} + j{d}) * {pitch[d]}" for d in outer]
                              + [f"(long){lo[c - 1]} * {pitch[c - 1]}", f"(long){lo[c]} * {pitch[c]}"])
            slab = f"{ext[c - 1]} * {run}"
            loff = horner([(f"j{d}", ext[d]) for d in outer]) if outer else "0"
            w(f"const int bs = {run} * {itemsize}, gap = ({shape[c]} - {ext[c]}) * {inner} * {itemsize};")
            w(call(direction, f"{ldm} + (long)({loff}) * {slab}", f"{ptr} + {moff}", f"{ext[c - 1]} * bs", "bs", "gap",
                    reply))
            w(f"{counter}++;")
            for _ in outer:
                w.close()
    w.close()


def call(direction, ldm, mem, length, bsize, gap, reply):
    if direction == "get":
        return f"sw_get({ldm}, {mem}, {length}, {bsize}, {gap}, &{reply});"
    if direction == "bget":
        return f"sw_bget({ldm}, {mem}, {length}, {bsize}, {gap}, &{reply}, bmask);"
    return f"sw_put({mem}, {ldm}, {length}, {bsize}, {gap}, &{reply});"


def nonempty(b):
    """C condition: the footprint flo*/fhi* of box b holds bytes inside the tensor (_transfer's
    clipping), so its fetch moves some."""
    if b.blocked is not None or not b.shape:
        return "1"
    return " && ".join(f"SW_MIN(fhi{d}, {b.shape[d] - 1}) >= SW_MAX(flo{d}, 0)" for d in range(len(b.shape))) or "1"


# 2-D sharing (schedule/grid.py): a box's form -> (who issues its k-th fetch, how it is broadcast)
_FORMS = {"row": ("nb_{n}++ % 8 == col", "sw_rbcast({x}, {len}, 8)"),
          "col": ("nb_{n}++ % 8 == row", "sw_cbcast({x}, {len})"),
          "array": ("nb_{n}++ % 64 == cpe", "sw_rbcast({x}, {len}, 64)")}


def issuer(K, b):
    """C condition: this CPE issues the next fetch of shared box b (the fetches dealt in turn
    over the row or the array, or under 2-D sharing over the box's row, column or array)."""
    if b.share_form:
        return _FORMS[b.share_form][0].format(n=b.name)
    return f"nb_{b.name}++ % {K.s.share_width} == col"


def rma_share(w, K, b, half):
    """Half `half` of shared box b is consumed: its issuer (whose DMA was waited for) broadcasts
    it, and every member waits for its copy to land."""
    n = b.name
    x, ln = f"X_{n} + {half} * {b.cap(K.t)}", f"bl_{n}[{half}]"
    cast = _FORMS[b.share_form][1].format(x=x, len=ln) if b.share_form else f"sw_rbcast({x}, {ln}, {K.s.share_width})"
    w.open(f"if (pb_{n}[{half}])")
    w(f"if (bi_{n}[{half}]) {{ {cast}; bi_{n}[{half}] = 0; }}")
    w("SW_RMA_WAIT();")
    w(f"pb_{n}[{half}] = 0;")
    w.close()
