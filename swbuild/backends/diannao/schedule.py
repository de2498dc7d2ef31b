"""Work split and staging: a loop-nest Kernel → a device kernel (devir.DevKernel).

Every kernel runs as 16 tasks (UNION1: 4 clusters × 4 cores); the cluster and core ids
are the two outermost loops. Data moves GDRAM → NRAM in tiles (and convolution weights
GDRAM → SRAM → WRAM, each cluster's four cores loading a quarter into the shared SRAM and
then copying the whole block into their WRAM). Tiles have constant full extents; tails,
halos, channel padding and tasks without work are guards on the statements (partition.py
removes them, preprocess.py resolves the rest).

Kernel classes:
  elementwise  no reduction, affine accesses: flat tiles, three-address statements
  conv         Conv / ConvTranspose (and Gemm / 2-D MatMul as a 1×1 convolution over
               rows): HWC input tiles with halo, WRAM weights in the bank layout,
               rows split over tasks (weights shared through SRAM) or output-channel
               blocks split over tasks (each task its own weights)
  pool         MaxPool / AveragePool with a constant window count: HWC tiles with halo
  scalar       anything else: scalar C on GDRAM, counted as not tensorized
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...ir.loopnest import Acc, Bin, Const, Load, Select, Un, Var, affine, iconst, substitute_acc
from .devir import (Barrier, DBuf, DevKernel, For, ScalarLoad, SLoop, Stmt, E, ceil_div, const, lin, pow2_floor,
                    round_up, simp, subst)
from .layout import view_strides
from .preprocess import conv_ci_elems, pool_c_elems, staged_copy, vector_elems

ALIGN = 64


class Unschedulable(Exception):
    """The kernel goes to the scalar class."""


def _al(nbytes):
    return (nbytes + ALIGN - 1) // ALIGN * ALIGN


class Store:
    """Program-wide GDRAM placement of constants: the device weights image."""

    def __init__(self):
        self.entries = []          # (key, offset elems, nelems, spec)
        self.by_key = {}
        self.elems = 0

    def add(self, key, nelems, spec):
        if key not in self.by_key:
            off = self.elems
            self.entries.append((key, off, nelems, spec))
            self.by_key[key] = off
            self.elems = round_up(off + max(nelems, 1), 16)
        return self.by_key[key]


class KB:
    """Buffers, parameters and statement ids of one device kernel under construction."""

    def __init__(self, k, program, tc, layouts, store):
        self.k, self.p, self.tc, self.hw = k, program, tc, tc.hardware
        self.layouts, self.store = layouts, store
        self.g = program.graph
        self.bufs, self.params, self.sids = {}, [], {}
        self.top = {"NRAM": 0, "WRAM": 0, "SRAM": 0}

    # GDRAM: one pointer argument per storage (tensor root or weights-image region)
    def gparam(self, tensor):
        r = self.p.root(tensor)
        t = self.g.tensors[r]
        if t.data is not None:
            key = ("raw", r)     # in 4-byte words: an int64 constant takes two
            off = self.store.add(key, t.nbytes // 4, ("raw", r))
            ref = ("image", off)
        else:
            ref = ("tensor", r)
        return self._param(ref, t.size, r)

    def image(self, key, nelems, spec, label):
        off = self.store.add(key, nelems, spec)
        return self._param(("image", off), nelems, label)

    def _param(self, ref, size, label):
        for name, r in self.params:
            if r == ref:
                return name
        name = f"g{len(self.params)}"
        self.params.append((name, ref))
        self.bufs[name] = DBuf(name, "GDRAM", size, tensor=label)
        return name

    def alloc(self, space, name, elems, layout=()):
        elems = round_up(max(elems, 1), vector_elems(self.hw))
        off = self.top[space]
        self.bufs[name] = DBuf(name, space, elems, off, layout)
        self.top[space] = _al(off + elems * 4)
        return name

    def sid(self, kind, label):
        s = f"{label}{len(self.sids)}"
        self.sids[s] = kind
        return s

    def offset(self, load, env=None):
        """GDRAM element offset of a kernel Load (its buffer's view of the tensor's storage)."""
        b = self.k.buffers[load.buf]
        st = view_strides(b.shape, self.g.tensors[b.tensor].shape, self.layouts.get(b.tensor))
        if st is None:
            raise Unschedulable(f"view {b.shape} of {b.tensor} is incompatible with its layout")
        e = iconst(0)
        for ix, s in zip(load.index, st):
            if affine(ix) is None:
                raise Unschedulable(f"index {ix} is not affine")
            e = Bin("+", e, Bin("*", ix, iconst(s)))
        return simp(subst(e, env or {}))

    def out_offset(self, env=None):
        b = self.k.buffers[self.k.out]
        idx = [Var(a.name) if not o else Var(a.name) + o for a, o in zip(self.k.axes, self.k.out_offset)]
        return self.offset(Load(b.name, tuple(idx)), env)

    def strides(self, bufname):
        b = self.k.buffers[bufname]
        st = view_strides(b.shape, self.g.tensors[b.tensor].shape, self.layouts.get(b.tensor))
        if st is None:
            raise Unschedulable("incompatible view")
        return st

    def nram_budget(self):
        return self.tc.nram_budget

    def finish(self, cls, body, **info):
        k = self.k
        dk = DevKernel(k.name, k.op, k.node, tuple(k.fused), cls, list(self.params), dict(self.bufs), body,
                       dict(self.sids), flops=k.flops(), kernel=k)
        dk.info.update(info)
        dk.info["nram_bytes"], dk.info["wram_bytes"], dk.info["sram_bytes"] = (self.top["NRAM"], self.top["WRAM"],
                                                                                 self.top["SRAM"])
        return dk


def tasks(body_fn):
    """The cluster and core loops (task id = 4 * cluster + core)."""
    t = Bin("+", Bin("*", Var("tc"), iconst(4)), Var("tk"))
    return [For("tc", iconst(0), iconst(4), [For("tk", iconst(0), iconst(4), body_fn(t), "core")], "cluster")]


def loop(var, ext, body_fn):
    """A serial loop; one iteration is substituted instead."""
    if ext == 1:
        return body_fn(iconst(0))
    return [For(var, iconst(0), iconst(ext), body_fn(Var(var)))]


def ge(e):
    """The guard `e >= 0`, simplified (None when it always holds for constants)."""
    e = simp(e)
    c = const(e)
    if c is not None and c >= 0:
        return None
    return e


def guards(*cs):
    return tuple(c for c in cs if c is not None)


# ---- three-address form of an element-wise expression --------------------------------

@dataclass
class Operand:
    kind: str          # "buf" | "scalar"
    ref: object        # buffer name | Expr


class ThreeAddress:
    """expr over tile operands → compute statements over lanes `ln`, each one instruction
    candidate; temporaries are reused, and an operand whose last use this is is overwritten
    in place (so `relu(x)` runs in place on x's tile)."""

    def __init__(self, kb, sid_label, lanes_fn, readonly=()):
        self.kb, self.label, self.lanes_fn = kb, sid_label, lanes_fn
        self.readonly = set(readonly)
        self.stmts, self.free, self.ntemps, self.uses = [], [], 0, {}
        self.temps = set()
        self.peak = 0

    def run(self, expr, leaf, guard):
        self.guard = guard
        self._count(expr, leaf)
        return self._go(expr, leaf)

    def _count(self, e, leaf):
        if isinstance(e, (Load, Acc)):
            o = leaf(e)
            if o.kind == "buf":
                self.uses[o.ref] = self.uses.get(o.ref, 0) + 1
            return
        for c in _kids(e):
            self._count(c, leaf)

    def _temp(self):
        if self.free:
            return self.free.pop()
        self.ntemps += 1
        name = f"t{self.ntemps - 1}_{self.label}"
        self.temps.add(name)
        self.peak = max(self.peak, self.ntemps)
        return name

    def _release(self, o):
        if o.kind == "buf" and o.ref in self.uses:
            self.uses[o.ref] -= 1

    def _dst(self, ops):
        for o in ops:
            if o.kind == "buf" and self.uses.get(o.ref, 0) <= 0 and o.ref not in self.readonly:
                return o.ref       # last use: write in place
        return self._temp()

    def _val(self, o):
        return Load(o.ref, (Var("ln"),)) if o.kind == "buf" else o.ref

    def _emit(self, dst, expr):
        sid = self.kb.sid("compute", f"s{self.label}_")
        self.stmts.append(Stmt("compute", Load(dst, (Var("ln"),)), expr, [SLoop("ln", iconst(0), self.lanes_fn())],
                               guard=self.guard, over=True, sid=sid))

    def _go(self, e, leaf):
        if isinstance(e, (Load, Acc)):
            return leaf(e)
        if isinstance(e, Const):
            return Operand("scalar", e)
        if isinstance(e, Bin):
            a, b = self._go(e.a, leaf), self._go(e.b, leaf)
            if a.kind == b.kind == "scalar":
                return Operand("scalar", Bin(e.op, a.ref, b.ref))
            if e.op == "/" and b.kind == "scalar":          # x / s -> x * (1 / s)
                e, b = Bin("*", e.a, e.b), Operand("scalar", simp(Bin("/", Const(1.0), b.ref)))
            if e.op in ("min", "max") and a.kind == "scalar":
                a, b = b, a
            rewrite = None
            if e.op == "-" and a.kind == "scalar":          # s - x = (x * -1) + s
                a, b = b, a
                rewrite = [("*", Const(-1.0)), ("+", "s")]
            elif e.op == "max" and b.kind == "scalar" and not (isinstance(b.ref, Const) and b.ref.value == 0):
                rewrite = [("-", "s"), ("relu",), ("+", "s")]              # max(x, s) = relu(x - s) + s
            elif e.op == "min" and b.kind == "scalar":                    # min(x, s) = s - relu(s - x)
                rewrite = [("*", Const(-1.0)), ("+", "s"), ("relu",), ("*", Const(-1.0)), ("+", "s")]
            if rewrite:
                self._release(a)
                t = self._dst([a])
                src = self._val(a)
                for step in rewrite:
                    if step[0] == "relu":
                        self._emit(t, Bin("max", src, Const(0.0)))
                    else:
                        self._emit(t, Bin(step[0], src, b.ref if step[1] == "s" else step[1]))
                    src = Load(t, (Var("ln"),))
                self._retire([a], t)
                return Operand("buf", t)
            self._release(a)
            self._release(b)
            t = self._dst([a, b])
            self._emit(t, Bin(e.op, self._val(a), self._val(b)))
            self._retire([a, b], t)
            return Operand("buf", t)
        if isinstance(e, Un):
            a = self._go(e.a, leaf)
            if a.kind == "scalar":
                return Operand("scalar", Un(e.op, a.ref))
            self._release(a)
            t = self._dst([a])
            self._emit(t, Un(e.op, self._val(a)))
            self._retire([a], t)
            return Operand("buf", t)
        if isinstance(e, Select):
            xs = [self._go(x, leaf) for x in (e.cond, e.a, e.b)]
            if all(x.kind == "scalar" for x in xs):
                return Operand("scalar", Select(*(x.ref for x in xs)))
            for x in xs:
                self._release(x)
            t = self._dst(xs)
            self._emit(t, Select(*(self._val(x) for x in xs)))
            self._retire(xs, t)
            return Operand("buf", t)
        raise Unschedulable(f"expression {e}")

    def _retire(self, ops, dst):
        for o in ops:
            if o.kind == "buf" and o.ref in self.temps and o.ref != dst and self.uses.get(o.ref, 0) == 0 \
                    and o.ref not in self.free:
                self.free.append(o.ref)


def _kids(e):
    if isinstance(e, Bin):
        return (e.a, e.b)
    if isinstance(e, Un):
        return (e.a,)
    if isinstance(e, Select):
        return (e.cond, e.a, e.b)
    return ()


def _loads(e, out):
    if isinstance(e, Load):
        if e not in out:
            out.append(e)
        return out
    for c in _kids(e):
        _loads(c, out)
    return out


# ---- element-wise kernels -------------------------------------------------------------

def sched_elementwise(kb):
    k = kb.k
    if k.combine:
        raise Unschedulable("reduction")
    value = substitute_acc(k.epilogue, k.body)
    loads = _loads(value, [])
    if any(ld.pad is not None for ld in loads):
        raise Unschedulable("padded load")
    axes = [(a.name, a.extent) for a in k.axes]
    acc = {}
    for key in ["out"] + list(range(len(loads))):
        off = kb.out_offset() if key == "out" else kb.offset(loads[key])
        a = lin(off)
        if a is None:
            raise Unschedulable("non-affine access")
        acc[key] = a
    # fuse axes that are contiguous in every access; drop unit axes
    ax = [(n, e) for n, e in axes if e != 1] or [(axes[0][0], 1)]
    for n, e in axes:
        if e == 1 and (n, e) not in ax:
            for a in acc.values():
                a.pop(n, None)
    changed = True
    while changed:
        changed = False
        for i in range(len(ax) - 2, -1, -1):
            (n0, e0), (n1, e1) = ax[i], ax[i + 1]
            if all(a.get(n0, 0) == e1 * a.get(n1, 0) for a in acc.values()):
                for a in acc.values():
                    a.pop(n0, None)
                ax[i:i + 2] = [(n1, e0 * e1)]
                changed = True
                break
    names = [n for n, _ in ax]
    ext = [e for _, e in ax]
    m = len(ax)
    ve = vector_elems(kb.hw)
    nb = len(loads) + 1
    for _ in range(4):
        tmax = max(ve, (kb.nram_budget() // max(nb, 1) // 4) // ve * ve)
        j = 0
        while j < m - 1 and math.prod(ext[j + 1:]) > tmax:
            j += 1
        inner = math.prod(ext[j + 1:])
        if j == 0:
            C0 = ceil_div(ext[0], 16)
            if inner == 1:
                C0 = round_up(C0, ve)
            T = pow2_floor(min(C0, max(1, tmax // inner)))
        else:
            C0 = ceil_div(ext[0], 16)
            T = pow2_floor(min(ext[j], max(1, tmax // inner)))
        tile_axes = list(range(j, m))
        invariant = [all(acc[i].get(names[g], 0) == 0 for g in tile_axes if (T if g == j else ext[g]) > 1)
                     for i in range(len(loads))]
        staged = [i for i in range(len(loads)) if not invariant[i]]
        probe = peak_temps(value, lambda ld, inv=invariant: Operand("scalar", Var("v")) if inv[loads.index(ld)]
                           else Operand("buf", f"x{loads.index(ld)}"))
        need = len(staged) + probe
        if need <= nb:
            break
        nb = need
    lanes = T * inner
    kb.info_tile = dict(axes=ext, split_axis=j, tile=T, chunk=C0, lanes=lanes)

    def body(t):
        def tile(outer_env, outer_conds, base_j, tail_conds_l, lane_conds, tile_exists):
            """Statements of one tile: axis values = outer_env + base_j + l."""
            lv = {g: Var(f"l{g}") for g in tile_axes}
            env = dict(outer_env)
            for g in tile_axes:
                env[names[g]] = Bin("+", base_j, lv[g]) if g == j else lv[g]
            pitch = {g: math.prod((T if h == j else ext[h]) for h in tile_axes if h > g) for g in tile_axes}
            lane_ix = simp(sum((Bin("*", lv[g], iconst(pitch[g])) for g in tile_axes), iconst(0)))
            loops = [SLoop(f"l{g}", iconst(0), iconst(T if g == j else ext[g])) for g in tile_axes]

            def goff(key):
                a = acc[key]
                e = iconst(a.get(None, 0))
                for n, c in a.items():
                    if n is not None:
                        e = Bin("+", e, Bin("*", E(env[n]), iconst(c)))
                return simp(e)

            stm = []
            leafmap = {}
            for i, ld in enumerate(loads):
                g = kb.gparam(k.buffers[ld.buf].tensor)
                if invariant[i]:
                    name = f"v{i}"
                    at0 = simp(subst(goff(i), {f"l{h}": 0 for h in tile_axes}))
                    stm.append(ScalarLoad(name, Load(g, (at0,)), guard=outer_conds + tile_exists))
                    leafmap[ld] = Operand("scalar", Var(name))
                else:
                    buf = f"x{i}"
                    if buf not in kb.bufs:
                        kb.alloc("NRAM", buf, lanes)
                    stm += staged_copy(kb.sid("copy", "in"), buf, lane_ix, Load(g, (goff(i),)), loops,
                                       bound=tail_conds_l, common=outer_conds)
                    leafmap[ld] = Operand("buf", buf)
            ta = ThreeAddress(kb, "e", lambda: iconst(lanes))
            res = ta.run(value, lambda ld: leafmap[ld], outer_conds + lane_conds)
            for name in sorted(ta.temps):
                if name not in kb.bufs:
                    kb.alloc("NRAM", name, lanes)
            stm += ta.stmts
            if res.kind == "scalar":
                if "r" not in kb.bufs:
                    kb.alloc("NRAM", "r", lanes)
                stm.append(Stmt("fill", Load("r", (Var("ln"),)), res.ref, [SLoop("ln", iconst(0), iconst(lanes))],
                                guard=outer_conds + lane_conds, over=True, sid=kb.sid("fill", "f")))
                src = "r"
            else:
                src = res.ref
            go = kb.gparam(k.buffers[k.out].tensor)
            stm.append(Stmt("copy", Load(go, (goff("out"),)), Load(src, (lane_ix,)), loops,
                            guard=outer_conds + tail_conds_l, sid=kb.sid("copy", "out")))
            return stm

        if j == 0:
            S = ceil_div(C0, T)

            def per_s(s):
                base = simp(Bin("+", Bin("*", t, iconst(C0)), Bin("*", s, iconst(T))))
                l0 = Var(f"l{j}")
                c_chunk = ge(Bin("-", Bin("-", iconst(C0 - 1), Bin("*", s, iconst(T))), l0)) if C0 % T else None
                c_end = ge(Bin("-", Bin("-", iconst(ext[0] - 1), base), l0)) if 16 * C0 > ext[0] else None
                lanes_left = lambda lim: ge(Bin("-", Bin("*", lim, iconst(inner)), Bin("+", Var("ln"), iconst(1))))  # noqa: E731
                lc = guards(lanes_left(Bin("-", iconst(C0), Bin("*", s, iconst(T)))) if c_chunk is not None else None,
                            lanes_left(Bin("-", iconst(ext[0]), base)) if c_end is not None else None)
                exists = guards(*(subst(c, {f"l{j}": 0}) for c in guards(c_chunk, c_end)))
                return tile({}, (), base, guards(c_chunk, c_end), lc, exists)
            return loop("s", S, per_s)

        def rows(i0):
            v0 = simp(Bin("+", Bin("*", t, iconst(C0)), i0))
            oc = guards(ge(Bin("-", iconst(ext[0] - 1), v0))) if 16 * C0 > ext[0] else ()

            def level(g, env):
                if g == j:
                    Sj = ceil_div(ext[j], T)

                    def per_s(s):
                        base = simp(Bin("*", s, iconst(T)))
                        lj = Var(f"l{j}")
                        tc_ = ge(Bin("-", Bin("-", iconst(ext[j] - 1), base), lj)) if ext[j] % T else None
                        lc = guards(ge(Bin("-", Bin("*", Bin("-", iconst(ext[j]), base), iconst(inner)),
                                           Bin("+", Var("ln"), iconst(1))))) if tc_ is not None else ()
                        return tile(env, oc, base, guards(tc_), lc, ())
                    return loop(f"s{g}", Sj, per_s)
                return loop(f"r{g}", ext[g], lambda v: level(g + 1, {**env, names[g]: v}))
            return level(1, {names[0]: v0})
        return loop("r0", C0, rows)

    b = tasks(body)
    return kb.finish("elementwise", b, tile=kb.info_tile)


def peak_temps(expr, leaf, readonly=()):
    """Peak number of temporaries the three-address form of `expr` needs (dry run)."""
    class _KB:
        def sid(self, kind, label):
            return "probe"
    ta = ThreeAddress(_KB(), "p", lambda: iconst(1), readonly)
    ta.run(expr, leaf, ())
    return ta.peak


# ---- convolution-like kernels ---------------------------------------------------------

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
    if k.op in ("Conv", "ConvTranspose"):
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
                    ex[o0], ex[o1], xl.buf, role_x, role_o, wb.tensor, role_w, env, k.epilogue)
    if k.op in ("Gemm", "MatMul"):
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
        if not (isinstance(epi, Bin) and epi.op == "/" and isinstance(epi.a, Acc)):
            raise Unschedulable("sum pooling")
        counts = set()
        for a0 in range(ex[o0]):
            for a1 in range(ex[o1]):
                counts.add(const(subst(epi.b, {n_: 0, c_: 0, o0: a0, o1: a1})))
        if counts != {ex[k0] * ex[k1]}:
            raise Unschedulable("window count varies (padding excluded from averages)")
        epi, combine = Acc(), "avg"
    xs, osd = kb.strides(xl.buf), kb.strides(k.out)
    if any(k.out_offset):
        raise Unschedulable("output offset")
    xb = k.buffers[xl.buf]
    return Geom(ex[n_], 1, ex[c_], ex[c_], xb.shape[2], xb.shape[3], ex[k0], ex[k1], h.get(o0, 0), w.get(o1, 0),
                -h.get(None, 0), -w.get(None, 0), ex[o0], ex[o1], xl.buf,
                {"n": xs[0], "g": 0, "c": xs[1], "h": xs[2], "w": xs[3]},
                {"n": osd[0], "g": 0, "c": osd[1], "h": osd[2], "w": osd[3]}, "", {},
                lambda n, g, c, hh, ww: {n_: n, c_: c, o0: hh, o1: ww}, epi, combine)


def _xoff(G, n, g, c, h, w):
    return simp(Bin("+", Bin("+", Bin("+", Bin("*", E(n), iconst(G.xst["n"])), Bin("*", E(g), iconst(G.xst["g"]))),
                             Bin("*", E(c), iconst(G.xst["c"]))),
                    Bin("+", Bin("*", E(h), iconst(G.xst["h"])), Bin("*", E(w), iconst(G.xst["w"])))))


def _ooff(G, n, g, c, h, w):
    return simp(Bin("+", Bin("+", Bin("+", Bin("*", E(n), iconst(G.ost["n"])), Bin("*", E(g), iconst(G.ost["g"]))),
                             Bin("*", E(c), iconst(G.ost["c"]))),
                    Bin("+", Bin("*", E(h), iconst(G.ost["h"])), Bin("*", E(w), iconst(G.ost["w"])))))


def _epi_classes(kb, G, epi):
    """Epilogue loads → per-channel (depend on the output channel only), per-pixel, invariant."""
    loads = _loads(epi, [])
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


def sched_conv(kb, pool=False):
    hw = kb.hw
    G = pool_geometry(kb) if pool else conv_geometry(kb)
    ve = vector_elems(hw)
    K1 = G.kh * G.kw
    W_in = (G.Wo - 1) * G.sw + G.kw
    loads, kinds = _epi_classes(kb, G, G.epilogue)
    staged = [ld for ld in loads if kinds[ld] != "scalar"]
    chan = {f"q{i}" for i, ld in enumerate(loads) if kinds[ld] == "channel"}
    ta_peak = peak_temps(G.epilogue, lambda e: Operand("buf", "acc") if isinstance(e, Acc) else
                         Operand("scalar", Var("v")) if kinds[e] == "scalar" else Operand("buf", f"q{loads.index(e)}"),
                         chan)
    n_lane_bufs = 1 + len(staged) + ta_peak            # acc + staged epilogue operands + temps
    budget = kb.nram_budget()

    def nram(R, Cib, Cob, NIB):
        lanes = R * G.Wo * Cob
        rin = (R - 1) * G.sh + G.kh
        return (_al(round_up(rin * W_in * Cib, ve) * 4) + (NIB > 1) * _al(round_up(lanes, ve) * 4)
                + n_lane_bufs * _al(round_up(lanes, ve) * 4))

    if pool:
        Cp = round_up(G.Cog, pool_c_elems(hw))
        cands = [(c, c, 1) for c in range(Cp, 0, -pool_c_elems(hw))]
    else:
        ci_al, co_al = conv_ci_elems(hw), int(hw["conv_co_multiple"])
        Cin_p, Co_p = round_up(G.Cig, ci_al), round_up(G.Cog, co_al)
        welems = kb.tc.wram_budget // 4
        cands = []
        for Cob in range(Co_p, 0, -co_al):
            cib_max = welems // (Cob * K1) // ci_al * ci_al
            if cib_max < ci_al:
                continue
            NIB = ceil_div(Cin_p, min(Cin_p, cib_max))
            Cib = round_up(ceil_div(Cin_p, NIB), ci_al)
            cands.append((Cob, Cib, NIB))

    def best_rows(cand, R_target):
        Cob, Cib, NIB = cand
        for R in range(max(1, R_target), 0, -1):
            if nram(R, Cib, Cob, NIB) <= budget:
                return R
        return None

    def estimate(mode, cand, R):
        Cob, Cib, NIB = cand
        gran = hw["gdram_cycles_per_granule"] / hw["gdram_granule_bytes"]
        if pool:   # per task: its row tiles of every channel block, window + input copy
            rin = (R - 1) * G.sh + G.kh
            per = ceil_div(ceil_div(G.Ho, R), 16)
            return G.N * ceil_div(G.Cog, Cob) * per * (R * G.Wo * K1 * ceil_div(Cob * 4, hw["vector_bytes_per_cycle"])
                                                       + rin * W_in * Cob * 4 * gran + hw["memcpy_startup_cycles"] * 3)
        NCB = ceil_div(round_up(G.Cog, ve if pool else int(hw.get("conv_co_multiple", 64))), Cob)
        NRT = ceil_div(G.Ho, R)
        macs_tile = R * G.Wo * Cob * K1 * Cib
        rate = max(1, int(hw.get("conv_float_macs_per_cycle", 512)))
        gran = hw["gdram_cycles_per_granule"] / hw["gdram_granule_bytes"]
        in_tile = ((R - 1) * G.sh + G.kh) * W_in * Cib * 4 * gran
        blk = Cob * K1 * Cib * 4
        if mode == "rows":
            per = ceil_div(NRT, 16)
            t = G.N * G.G * NCB * (per * NIB * (macs_tile / rate + in_tile) + NIB * (blk * gran / 4 + blk / hw["sram_bytes_per_cycle"]))
        else:
            per = ceil_div(NCB, 16)
            t = G.N * G.G * per * (NRT * NIB * (macs_tile / rate + in_tile) + (NIB if NIB == 1 else NRT * NIB) * blk * gran)
        return t

    options = []
    for cand in cands:
        for mode in ("rows", "channels"):
            if pool and mode == "channels":
                continue
            R = best_rows(cand, ceil_div(G.Ho, 16) if mode == "rows" else G.Ho)
            if R is None:
                continue
            options.append((estimate(mode, cand, R), mode != "rows", -cand[0], cand, mode, R))
    if not options:
        raise Unschedulable("no tile fits the on-chip memories")
    _, _, _, (Cob, Cib, NIB), mode, R = min(options)
    return _emit_conv(kb, G, pool, mode, Cob, Cib, NIB, R, W_in, loads, kinds)


def _emit_conv(kb, G, pool, mode, Cob, Cib, NIB, R, W_in, loads, kinds):
    hw = kb.hw
    K1 = G.kh * G.kw
    rin = (R - 1) * G.sh + G.kh
    lanes = R * G.Wo * Cob
    NRT = ceil_div(G.Ho, R)
    NCB = ceil_div(round_up(G.Cog, pool_c_elems(hw) if pool else int(hw["conv_co_multiple"])), Cob)
    if pool:
        NCB = ceil_div(G.Cog, Cob)
    BS = Cob * K1 * Cib
    gx = kb.gparam(kb.k.buffers[G.xbuf].tensor)
    go = kb.gparam(kb.k.buffers[kb.k.out].tensor)
    xin = kb.alloc("NRAM", "xin", rin * W_in * Cib)
    accb = kb.alloc("NRAM", "acc", lanes)
    cv = kb.alloc("NRAM", "cv", lanes) if NIB > 1 else None
    if not pool:
        wk = kb.alloc("WRAM", "wk", BS, layout=("conv_bank", Cob, K1 * Cib))
        spec = ("conv", kb.p.root(G.wtensor), dict(G=G.G, Cog=G.Cog, Cig=G.Cig, kh=G.kh, kw=G.kw, NCB=NCB, NIB=NIB,
                                                    Cob=Cob, Cib=Cib, st=dict(G.wst)))
        gw = kb.image(("conv", kb.p.root(G.wtensor), NCB, NIB, Cob, Cib), G.G * NCB * NIB * BS, spec,
                      f"{G.wtensor} (bank layout)")
        if mode == "rows":
            Q = round_up(ceil_div(BS, 4), 16)
            sw_ = kb.alloc("SRAM", "wsh", 4 * Q)
    reps = {}
    for i, ld in enumerate(loads):
        if kinds[ld] != "scalar":
            reps[ld] = kb.alloc("NRAM", f"{'c' if kinds[ld] == 'channel' else 'p'}{i}", lanes)
    ro, xo, cc = Var("ro"), Var("xo"), Var("cc")
    lane_ix = simp(Bin("+", Bin("*", Bin("+", Bin("*", ro, iconst(G.Wo)), xo), iconst(Cob)), cc))
    out_loops = [SLoop("ro", iconst(0), iconst(R)), SLoop("xo", iconst(0), iconst(G.Wo)), SLoop("cc", iconst(0), iconst(Cob))]

    def chan_bound(cb):
        return ge(Bin("-", Bin("-", iconst(G.Cog - 1), Bin("*", cb, iconst(Cob))), cc))

    def weights(n, g, cb, ib, tk, exists):
        """Load one weight block into WRAM: through SRAM (rows mode) or directly."""
        blk = simp(Bin("*", Bin("+", Bin("*", Bin("+", Bin("*", g, iconst(NCB)), cb), iconst(NIB)), ib), iconst(BS)))
        if mode == "rows":
            q = Var("q")
            part = simp(Bin("*", tk, iconst(Q)))
            return [Barrier("cluster"),
                    Stmt("copy", Load(sw_, (simp(Bin("+", part, q)),)), Load(gw, (simp(Bin("+", Bin("+", blk, part), q)),)),
                         [SLoop("q", iconst(0), iconst(Q))],
                         guard=guards(ge(Bin("-", Bin("-", iconst(BS - 1), part), q))), sid=kb.sid("copy", "w")),
                    Barrier("cluster"),
                    Stmt("copy", Load(wk, (Var("i"),)), Load(sw_, (Var("i"),)), [SLoop("i", iconst(0), iconst(BS))],
                         sid=kb.sid("copy", "w"))]
        return [Stmt("copy", Load(wk, (Var("i"),)), Load(gw, (simp(Bin("+", blk, Var("i"))),)),
                     [SLoop("i", iconst(0), iconst(BS))], guard=exists, sid=kb.sid("copy", "w"))]

    def channel_reps(n, g, cb, exists):
        out = []
        for ld, buf in reps.items():
            if kinds[ld] != "channel":
                continue
            env = G.axes_env(n, g, simp(Bin("+", Bin("*", cb, iconst(Cob)), cc)), ro, xo)
            src = Load(kb.gparam(kb.k.buffers[ld.buf].tensor), (kb.offset(ld, env),))
            out += staged_copy(kb.sid("copy", "rep"), buf, lane_ix, src, out_loops,
                               bound=guards(chan_bound(cb)), common=exists)
        return out

    def tile(n, g, cb, row0, exists, tk):
        rowtail = ge(Bin("-", Bin("-", iconst(G.Ho - 1), row0), ro))
        lanetail = ge(Bin("-", Bin("*", Bin("-", iconst(G.Ho), row0), iconst(G.Wo * Cob)), Bin("+", Var("ln"), iconst(1))))
        stm = []
        r, x, c = Var("r"), Var("x"), Var("c")
        hrow = simp(Bin("+", Bin("-", Bin("*", row0, iconst(G.sh)), iconst(G.pt)), r))
        wcol = simp(Bin("-", x, iconst(G.pl)))
        halo = guards(ge(hrow), ge(Bin("-", iconst(G.H - 1), hrow)), ge(wcol), ge(Bin("-", iconst(G.W - 1), wcol)))
        needed = ge(Bin("-", Bin("+", Bin("*", Bin("-", iconst(G.Ho - 1), row0), iconst(G.sh)), iconst(G.kh - 1)), r))
        in_loops = [SLoop("r", iconst(0), iconst(rin)), SLoop("x", iconst(0), iconst(W_in)), SLoop("c", iconst(0), iconst(Cib))]
        in_ix = simp(Bin("+", Bin("*", Bin("+", Bin("*", r, iconst(W_in)), x), iconst(Cib)), c))

        def stage_input(ib):
            ch = simp(Bin("+", Bin("*", ib, iconst(Cib)), c)) if not pool else simp(Bin("+", Bin("*", cb, iconst(Cob)), c))
            src = Load(gx, (_xoff(G, n, g, ch, hrow, wcol),))
            bound = guards(ge(Bin("-", iconst(G.Cig - 1), ch)))
            fill = (-math.inf if G.combine == "max" else 0.0)
            return staged_copy(kb.sid("copy", "x"), xin, in_ix, src, in_loops, halo=halo, bound=bound,
                               common=exists + guards(needed), fill=fill, need_fill_bound=not pool)

        ky, kx, kc = Var("ky"), Var("kx"), Var("kc")
        src_ix = simp(Bin("+", Bin("*", Bin("+", Bin("*", Bin("+", Bin("*", ro, iconst(G.sh)), ky), iconst(W_in)),
                                                Bin("+", Bin("*", xo, iconst(G.sw)), kx)), iconst(Cib)), cc if pool else kc))
        red = [SLoop("ky", iconst(0), iconst(G.kh)), SLoop("kx", iconst(0), iconst(G.kw))]

        def compute(dst):
            if pool:
                return Stmt("compute", Load(dst, (lane_ix,)), Load(xin, (src_ix,)), list(out_loops), red,
                            G.combine, guard=exists + guards(rowtail), over=True, sid=kb.sid("compute", "pool"))
            wv = Load(wk, (cc, simp(Bin("+", Bin("*", Bin("+", Bin("*", ky, iconst(G.kw)), kx), iconst(Cib)), kc))))
            return Stmt("compute", Load(dst, (lane_ix,)), Bin("*", Load(xin, (src_ix,)), wv), list(out_loops),
                        red + [SLoop("kc", iconst(0), iconst(Cib))], "sum", guard=exists + guards(rowtail),
                        over=True, sid=csid)

        ln = Var("ln")
        lane_loop = [SLoop("ln", iconst(0), iconst(lanes))]
        if pool or NIB == 1:       # weights (if any) were loaded once per output-channel block
            stm += stage_input(iconst(0))
            stm.append(compute(accb))
        else:                      # input-channel blocks: the weights of each block, then accumulate
            # rows mode: every task takes part in the cooperative loads (barriers stay uniform)
            wguard = () if mode == "rows" else exists
            stm += weights(n, g, cb, iconst(0), tk, wguard)
            stm += stage_input(iconst(0))
            stm.append(compute(accb))

            def more(ib):
                s2 = weights(n, g, cb, ib, tk, wguard)
                s2 += stage_input(ib)
                s2.append(compute(cv))
                s2.append(Stmt("compute", Load(accb, (ln,)), Bin("+", Load(accb, (ln,)), Load(cv, (ln,))), lane_loop,
                               guard=exists + guards(lanetail), over=True, sid=asid))
                return s2
            stm += [For("ib", iconst(1), iconst(NIB), more(Var("ib")))]
        # epilogue: per-pixel operands staged, then three-address statements over lanes
        leaf = {}
        for i, ld in enumerate(loads):
            if kinds[ld] == "pixel":
                env = G.axes_env(n, g, simp(Bin("+", Bin("*", cb, iconst(Cob)), cc)), simp(Bin("+", row0, ro)), xo)
                src = Load(kb.gparam(kb.k.buffers[ld.buf].tensor), (kb.offset(ld, env),))
                stm += staged_copy(kb.sid("copy", "p"), reps[ld], lane_ix, src, out_loops,
                                   bound=guards(rowtail, chan_bound(cb)), common=exists)
            if kinds[ld] in ("pixel", "channel"):
                leaf[ld] = Operand("buf", reps[ld])
            else:
                env = G.axes_env(n, g, iconst(0), iconst(0), iconst(0))
                name = f"v{i}"
                stm.append(ScalarLoad(name, Load(kb.gparam(kb.k.buffers[ld.buf].tensor), (kb.offset(ld, env),)),
                                      guard=exists))
                leaf[ld] = Operand("scalar", Var(name))
        ta = ThreeAddress(kb, "c", lambda: iconst(lanes), [reps[ld] for ld in loads if kinds[ld] == "channel"])
        res = ta.run(G.epilogue, lambda e: Operand("buf", accb) if isinstance(e, Acc) else leaf[e], exists + guards(lanetail))
        for name in sorted(ta.temps):
            if name not in kb.bufs:
                kb.alloc("NRAM", name, lanes)
        stm += ta.stmts
        resb = res.ref if res.kind == "buf" else accb
        oc = simp(Bin("+", Bin("*", g, iconst(G.Cog)), Bin("+", Bin("*", cb, iconst(Cob)), cc))) if not pool else \
            simp(Bin("+", Bin("*", cb, iconst(Cob)), cc))
        stm.append(Stmt("copy", Load(go, (_ooff(G, n, iconst(0), oc, simp(Bin("+", row0, ro)), xo),)),
                        Load(resb, (lane_ix,)), list(out_loops),
                        guard=exists + guards(rowtail, chan_bound(cb)), sid=kb.sid("copy", "out")))
        return stm

    csid = kb.sid("compute", "conv") if not pool else None
    asid = kb.sid("compute", "acc") if NIB > 1 else None

    def body(t):
        tk = Var("tk")

        def per_ng(n, g):
            if mode == "rows":
                S = ceil_div(NRT, 16)

                def per_cb(cb):
                    pre = channel_reps(n, g, cb, ())
                    if not pool and NIB == 1:
                        pre += weights(n, g, cb, iconst(0), tk, ())

                    def per_s(s):
                        rt = simp(Bin("+", Bin("*", t, iconst(S)), s))
                        exists = guards(ge(Bin("-", iconst(NRT - 1), rt)))
                        return tile(n, g, cb, simp(Bin("*", rt, iconst(R))), exists, tk)
                    return pre + loop("s", S, per_s)
                return loop("cb", NCB, per_cb)
            SC = ceil_div(NCB, 16)

            def per_j(jj):
                cb = simp(Bin("+", Bin("*", t, iconst(SC)), jj))
                exists = guards(ge(Bin("-", iconst(NCB - 1), cb)))
                pre = channel_reps(n, g, cb, exists)
                if NIB == 1:
                    pre += weights(n, g, cb, iconst(0), tk, exists)
                return pre + loop("rt", NRT, lambda rt: tile(n, g, cb, simp(Bin("*", rt, iconst(R))), exists, tk))
            return loop("j", SC, per_j)
        return loop("bn", G.N, lambda n: loop("bg", G.G, lambda g: per_ng(n, g)))

    b = tasks(body)
    return kb.finish("pool" if pool else ("gemm" if kb.k.op in ("Gemm", "MatMul") else "conv"), b,
                     mode=mode, R=R, Cob=Cob, Cib=Cib, NIB=NIB, NRT=NRT, NCB=NCB, W_in=W_in)


# ---- dispatch -------------------------------------------------------------------------

def schedule_kernel(k, program, tc, layouts, store):
    """DevKernel of one loop-nest kernel; the scalar class when nothing else applies."""
    attempts = []
    if any(b.dtype != "float32" for b in k.buffers.values()):    # index tensors (Gather): scalar C
        return sched_scalar(KB(k, program, tc, layouts, store), ["integer buffers"])
    if k.op in ("Conv", "ConvTranspose", "Gemm", "MatMul") and k.combine == "sum":
        attempts.append(lambda kb: sched_conv(kb))
    if k.op in ("MaxPool", "AveragePool"):
        attempts.append(lambda kb: sched_conv(kb, pool=True))
    if not k.combine:
        attempts.append(sched_elementwise)
    why = []
    for fn in attempts:
        kb = KB(k, program, tc, layouts, store)
        try:
            dk = fn(kb)
            if dk.info["nram_bytes"] > tc.nram_budget or dk.info["wram_bytes"] > tc.wram_budget \
                    or dk.info["sram_bytes"] > tc.sram_budget:
                raise Unschedulable("on-chip memory")
            return dk
        except Unschedulable as e:
            why.append(str(e))
    return sched_scalar(KB(k, program, tc, layouts, store), why)


def sched_scalar(kb, why=()):
    """The whole kernel in scalar C on GDRAM (one compute statement, not tensorized)."""
    k = kb.k
    views = {}
    for name, b in k.buffers.items():
        st = view_strides(b.shape, kb.g.tensors[b.tensor].shape, kb.layouts.get(b.tensor))
        if st is None:
            raise Unschedulable(f"kernel {k.name}: view {b.shape} of {b.tensor} is incompatible with its layout")
        views[name] = (kb.gparam(b.tensor), st, tuple(b.shape), b.dtype)
    sid = kb.sid("compute", "scalar")
    dk = kb.finish("scalar", [], why="; ".join(why))
    dk.gview = views
    dk.info["scalar_sid"] = sid
    return dk
