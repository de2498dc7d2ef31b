"""The stage of a stitched box (buffer stitching, stitch_producers.py): when the box of the
producer's input has landed, the CPE computes the intermediate the consumer reads over its
footprint at this step, into the box's one LDM buffer `Y_<box>`, laid out as a fetched box
would be (row-major over the footprint), so the consumer's compute reads it unchanged.

The footprint of the input box is a function of the intermediate's (every output axis of
the producer moves one input dimension), so the stage runs exactly when the intermediate's
footprint changes, which is when the input box was fetched anew.
"""
from __future__ import annotations

from ....ir.loopnest import substitute_acc
from ...cexpr import COMBINE, float_literal, render


def stage_state(w, b):
    """The footprint the stage last computed (none yet)."""
    nd = max(len(b.stage.box.shape), 1)
    w(f"int pv_{b.name} = 0, plo_{b.name}[{nd}], phi_{b.name}[{nd}];")


def stage_c(w, K, b, los, his):
    """Recompute the intermediate when this step's footprint (C text per dim: los, his)
    differs from the last one."""
    n, st, pb = b.name, b.stage.stage, b.stage.box
    prod = st.producer
    nd = len(pb.shape)
    w("{")
    w.depth += 1
    for d in range(nd):
        w(f"const int flo{d} = {los[d]}, fhi{d} = {his[d]};")
    diff = [f"!pv_{n}"] + [f"flo{d} != plo_{n}[{d}] || fhi{d} != phi_{n}[{d}]" for d in range(nd)]
    w.open(f"if ({' || '.join(diff)})")
    w(f"/* stage: {prod.op} {prod.name} recomputed in LDM from box {n} (buffer stitching) */")
    w(f"pv_{n} = 1;")
    for d in range(nd):
        w(f"plo_{n}[{d}] = flo{d}; phi_{n}[{d}] = fhi{d};")
    w(f"const float *S = X_{n} + cur_{n} * {b.cap(K.t)};")
    sd = len(b.shape)
    for j in range(sd):
        w(f"const int se{j} = hi_{n}[cur_{n}][{j}] - lo_{n}[cur_{n}][{j}] + 1;")
    for j in range(sd):
        tail = [f"se{x}" for x in range(j + 1, sd)]
        w(f"const long sp{j} = {' * '.join(tail) if tail else '1'};")
    w("long q = 0;")
    for d, a in enumerate(prod.axes):
        w.open(f"for (int q{d} = 0; q{d} < fhi{d} - flo{d} + 1; q{d}++)")
    at = {a.name: f"(flo{d} + q{d})" for d, a in enumerate(prod.axes)}
    at.update({a.name: f"w_{a.name}" for a in prod.reduce_axes})

    def load(ld):
        m = b.stage.inputs[ld.buf]
        if m != n:          # a constant's box (per-element parameters): its own layout
            ext = [f"(hi_{m}[cur_{m}][{j}] - lo_{m}[cur_{m}][{j}] + 1)" for j in range(len(ld.index))]
            terms = [f"(long)(({render(x, at.get, None)}) - lo_{m}[cur_{m}][{j}])"
                     + "".join(f" * {e}" for e in ext[j + 1:]) for j, x in enumerate(ld.index)]
            return f"X_{m}[cur_{m} * {K.box[m].cap(K.t)} + {' + '.join(terms) or '0'}]"
        terms = [f"(long)(({render(x, at.get, None)}) - lo_{n}[cur_{n}][{j}]) * sp{j}" for j, x in enumerate(ld.index)]
        return f"S[{' + '.join(terms) or '0'}]"
    if prod.combine:
        w(f"float a = {float_literal(prod.init)};")
        for r in prod.reduce_axes:
            w.open(f"for (int w_{r.name} = 0; w_{r.name} < {r.extent}; w_{r.name}++)")
        w(COMBINE[prod.combine].format(a="a", v=render(prod.body, at.get, load)))
        for _ in prod.reduce_axes:
            w.close()
        w(f"Y_{n}[q++] = {render(prod.epilogue, at.get, load, acc='a')};")
    else:
        w(f"Y_{n}[q++] = {render(substitute_acc(prod.epilogue, prod.body), at.get, load)};")
    for _ in prod.axes:
        w.close()
    w.close()
    w.depth -= 1
    w("}")


def stage_setup(w, K, b):
    """The consumer's view of the intermediate: origin, pitches and footprint of `Y_<box>`."""
    n, pn, nd = b.name, b.stage.box.name, len(b.stage.box.shape)
    w(f"const float *B_{pn} = Y_{n};")
    for d in range(nd):
        tail = [f"(phi_{n}[{x}] - plo_{n}[{x}] + 1)" for x in range(d + 1, nd)]
        w(f"const long P_{pn}_{d} = {' * '.join(tail) if tail else '1'};")
        w(f"const int O_{pn}_{d} = plo_{n}[{d}];")
