"""What a convolution-like kernel is made of: shapes, strides by role, epilogue classes."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ....ir.loopnest import Acc, Axis, Bin, Buffer, Const, Load, Var, affine, iconst, transform
from ..devir import E, const, lin, simp, subst
from .builder import Unschedulable
from .integer import INTEGER_OPS
from .three_address import loads_of


@dataclass
class Geom:
    N: int
    G: int
    Cig: int
    Cog: int
    H: int
    W: int
    kh: int
    kw: int
    sh: int
    sw: int
    pt: int
    pl: int
    Ho: int
    Wo: int
    xbuf: str                  # kernel buffer of the input
    xst: dict                  # input strides by role n g c h w
    ost: dict                  # output strides by role n g c h w
    wtensor: str               # raw weights (constant) tensor
    wst: dict                  # weight strides by role g co ci y x
    axes_env: object           # fn(n, g, co, h, w) -> {kernel axis: Expr}
    epilogue: object
    combine: str = "sum"
    fill: float = 0.0          # what the input's pads read (an integer input: its zero point)


def _aff_of(ix):
    a = affine(ix)
    if a is None:
        raise Unschedulable("non-affine index")
    return a


def conv_geometry(kb):
    k = kb.k
    if k.combine != "sum" or not isinstance(k.body, Bin) or k.body.op != "*":
        raise Unschedulable("not a product reduction")
    ld = [k.body.a, k.body.b]
    if not all(isinstance(x, Load) for x in ld):
        raise Unschedulable("operands")
    consts = [kb.g.tensors[k.buffers[x.buf].tensor].data is not None for x in ld]
    op = INTEGER_OPS.get(k.op, k.op)
    if op in ("Conv", "ConvTranspose"):
        xl, wl = ld
        if consts[0] or not consts[1]:
            raise Unschedulable("weights must be constant")
        sp = [a.name for a in k.axes]
        grouped = len(sp) == 5
        if len(sp) not in (4, 5) or len(k.reduce_axes) != 3:
            raise Unschedulable("not a 2-D convolution")
        n_, g_, co_, o0, o1 = (sp[0], sp[1], sp[2], sp[3], sp[4]) if grouped else (sp[0], None, sp[1], sp[2], sp[3])
        ci_, k0, k1 = (a.name for a in k.reduce_axes)
        xb, wb = k.buffers[xl.buf], k.buffers[wl.buf]
        xs = kb.strides(xl.buf)
        idx = list(xl.index)
        want_pre = [Var(n_)] + ([Var(g_)] if grouped else []) + [Var(ci_)]
        if idx[:len(want_pre)] != want_pre:
            raise Unschedulable("conv input index")
        h, w = _aff_of(idx[-2]), _aff_of(idx[-1])
        if h.get(k0, 0) != 1 or w.get(k1, 0) != 1 or set(h) - {o0, k0, None} or set(w) - {o1, k1, None}:
            raise Unschedulable("dilated or unusual window")
        sh_, sw_ = h.get(o0, 0), w.get(o1, 0)
        if sh_ <= 0 or sw_ <= 0:
            raise Unschedulable("stride")
        want_w = ([Var(g_)] if grouped else []) + [Var(co_), Var(ci_), Var(k0), Var(k1)]
        if list(wl.index) != want_w:
            raise Unschedulable("conv weight index")
        G = k.axes[1].extent if grouped else 1
        Cig = xb.shape[-3]
        H, W = xb.shape[-2], xb.shape[-1]
        ws = kb.strides(wl.buf)
        osd = kb.strides(k.out)
        if any(k.out_offset):
            raise Unschedulable("output offset")
        role_x = {"n": xs[0], "g": xs[1] if grouped else 0, "c": xs[-3], "h": xs[-2], "w": xs[-1]}
        role_o = {"n": osd[0], "g": osd[1] if grouped else 0, "c": osd[-3], "h": osd[-2], "w": osd[-1]}
        role_w = {"g": ws[0] if grouped else 0, "co": ws[-4], "ci": ws[-3], "y": ws[-2], "x": ws[-1]}
        ex = {a.name: a.extent for a in list(k.axes) + list(k.reduce_axes)}

        def env(n, g, co, hh, ww):
            d = {n_: n, co_: co, o0: hh, o1: ww}
            if grouped:
                d[g_] = g
            return d
        return Geom(ex[n_], G, Cig, ex[co_], H, W, ex[k0], ex[k1], sh_, sw_, -h.get(None, 0), -w.get(None, 0),
                    ex[o0], ex[o1], xl.buf, role_x, role_o, wb.tensor, role_w, env, k.epilogue,
                    fill=float(xl.pad or 0.0))
    if op in ("Gemm", "MatMul"):
        unit = [a.name for a in k.axes[:-2] if a.extent == 1]       # batch dims of extent 1
        if len(k.axes) - len(unit) != 2 or len(k.reduce_axes) != 1 or any(k.out_offset):
            raise Unschedulable("batched matmul")
        m_, n_ = (a.name for a in k.axes[-2:])
        kk = k.reduce_axes[0].name
        if consts[0] and not consts[1]:
            ld, consts = ld[::-1], consts[::-1]
        al, bl = ld
        if not consts[1] or consts[0]:
            raise Unschedulable("weights must be constant")
        sa, sb, so = kb.strides(al.buf), kb.strides(bl.buf), kb.strides(k.out)

        def role(load, st):
            out = {}
            for ix, s in zip(load.index, st):
                a = _aff_of(ix)
                for v, c in a.items():
                    if v is not None and v not in unit:
                        out[v] = out.get(v, 0) + c * s
                if a.get(None, 0):
                    raise Unschedulable("offset index")
            return out
        ra, rb = role(al, sa), role(bl, sb)
        if set(ra) - {m_, kk} or set(rb) - {n_, kk}:
            raise Unschedulable("gemm indices")
        ex = {a.name: a.extent for a in list(k.axes) + list(k.reduce_axes)}
        M, Nn, K = ex[m_], ex[n_], ex[kk]
        return Geom(1, 1, K, Nn, M, 1, 1, 1, 1, 1, 0, 0, M, 1, al.buf,
                    {"n": 0, "g": 0, "c": ra.get(kk, 0), "h": ra.get(m_, 0), "w": 0},
                    {"n": 0, "g": 0, "c": so[-1], "h": so[-2], "w": 0},
                    kb.k.buffers[bl.buf].tensor, {"g": 0, "co": rb.get(n_, 0), "ci": rb.get(kk, 0), "y": 0, "x": 0},
                    lambda n, g, co, hh, ww: {m_: hh, n_: co, **{u: iconst(0) for u in unit}}, k.epilogue)
    raise Unschedulable("not convolution-like")


def pool_geometry(kb):
    k = kb.k
    if k.combine not in ("max", "sum") or not isinstance(k.body, Load) or len(k.axes) != 4 or len(k.reduce_axes) != 2:
        raise Unschedulable("not a 2-D pooling")
    n_, c_, o0, o1 = (a.name for a in k.axes)
    k0, k1 = (a.name for a in k.reduce_axes)
    xl = k.body
    if list(xl.index[:2]) != [Var(n_), Var(c_)]:
        raise Unschedulable("pool index")
    h, w = _aff_of(xl.index[2]), _aff_of(xl.index[3])
    if h.get(k0, 0) != 1 or w.get(k1, 0) != 1 or set(h) - {o0, k0, None} or set(w) - {o1, k1, None}:
        raise Unschedulable("dilated window")
    ex = {a.name: a.extent for a in list(k.axes) + list(k.reduce_axes)}
    epi, combine = k.epilogue, k.combine
    if combine == "sum":
        # the window mean acc / count, wherever the epilogue uses it (a fused QuantizeLinear
        # after it): __bang_avgpool's result, the rest of the epilogue applied to it after
        divisors = []

        def mean(e):
            if isinstance(e, Bin) and e.op == "/" and isinstance(e.a, Acc):
                divisors.append(e.b)
                return Acc()
            return None
        rest = transform(epi, mean)
        if not divisors or _accs(epi) != len(divisors):
            raise Unschedulable("sum pooling")
        counts = set()
        for b in divisors:
            for a0 in range(ex[o0]):
                for a1 in range(ex[o1]):
                    counts.add(_count(subst(b, {n_: 0, c_: 0, o0: a0, o1: a1})))
        if counts != {ex[k0] * ex[k1]}:
            raise Unschedulable("window count varies (padding excluded from averages)")
        epi, combine = rest, "avg"
    # one output row or column: its stride is never used; the window's own (__bang_avgpool's
    # 7-argument form) keeps (H - kh) / sh defined
    sh = h.get(o0, 0) if ex[o0] > 1 else ex[k0]
    sw = w.get(o1, 0) if ex[o1] > 1 else ex[k1]
    xs, osd = kb.strides(xl.buf), kb.strides(k.out)
    if any(k.out_offset):
        raise Unschedulable("output offset")
    xb = k.buffers[xl.buf]
    return Geom(ex[n_], 1, ex[c_], ex[c_], xb.shape[2], xb.shape[3], ex[k0], ex[k1], sh, sw,
                -h.get(None, 0), -w.get(None, 0), ex[o0], ex[o1], xl.buf,
                {"n": xs[0], "g": 0, "c": xs[1], "h": xs[2], "w": xs[3]},
                {"n": osd[0], "g": 0, "c": osd[1], "h": osd[2], "w": osd[3]}, "", {},
                lambda n, g, c, hh, ww: {n_: n, c_: c, o0: hh, o1: ww}, epi, combine)


def _count(e):
    """A window count: an int constant, or a float one holding an integer (GlobalAveragePool's
    acc / float(H * W)); else None."""
    v = const(e)
    if v is None and isinstance(simp(e), Const) and float(simp(e).value).is_integer():
        v = int(simp(e).value)
    return v


def _accs(e):
    n = [0]

    def count(x):
        if isinstance(x, Acc):
            n[0] += 1
            return x
        return None
    transform(e, count)
    return n[0]


def global_pool_window(k):
    """A GlobalAveragePool over an H x W image (ops/reduce.py: axes n, c, reduced r0, r1) as
    the pool of one H x W window, output (N, C, 1, 1): __bang_avgpool adds the window in the
    scalar loop's order (rows, then columns, from 0) and divides by H * W once, as acc / (H * W)
    does; None when the kernel is not of that shape."""
    if k.op != "GlobalAveragePool" or k.combine != "sum" or len(k.axes) != 2 or len(k.reduce_axes) != 2 \
            or not isinstance(k.body, Load) or any(k.out_offset):
        return None
    (n, c), (r0, r1) = k.axes, k.reduce_axes
    if list(k.body.index) != [n.var, c.var, r0.var, r1.var]:
        return None
    ob = k.buffers[k.out]
    bufs = {**k.buffers, k.out: Buffer(ob.name, ob.tensor, tuple(ob.shape) + (1, 1), ob.dtype)}
    return replace(k, axes=(n, c, Axis("gh", 1), Axis("gw", 1)), buffers=bufs, out_offset=(0, 0, 0, 0))


def input_offset(G, n, g, c, h, w):
    return simp(Bin("+", Bin("+", Bin("+", Bin("*", E(n), iconst(G.xst["n"])), Bin("*", E(g), iconst(G.xst["g"]))),
                             Bin("*", E(c), iconst(G.xst["c"]))),
                    Bin("+", Bin("*", E(h), iconst(G.xst["h"])), Bin("*", E(w), iconst(G.xst["w"])))))


def output_offset(G, n, g, c, h, w):
    return simp(Bin("+", Bin("+", Bin("+", Bin("*", E(n), iconst(G.ost["n"])), Bin("*", E(g), iconst(G.ost["g"]))),
                             Bin("*", E(c), iconst(G.ost["c"]))),
                    Bin("+", Bin("*", E(h), iconst(G.ost["h"])), Bin("*", E(w), iconst(G.ost["w"])))))


def epilogue_classes(kb, G, epi):
    """Epilogue loads → per-channel (depend on the output channel only), per-pixel, invariant."""
    loads = loads_of(epi, [])
    probe = G.axes_env(Var("PN"), Var("PG"), Var("PC"), Var("PH"), Var("PW"))
    kinds = {}
    for ld in loads:
        if ld.pad is not None:
            raise Unschedulable("padded epilogue load")
        off = kb.offset(ld, probe)
        a = lin(off)
        if a is None:
            raise Unschedulable("epilogue access")
        if a.get("PH") or a.get("PW"):
            kinds[ld] = "pixel"
        elif a.get("PC"):
            kinds[ld] = "channel"
        else:
            kinds[ld] = "scalar"
    return loads, kinds
