"""The elementwise class: flat tiles of affine accesses, three-address statements."""
from __future__ import annotations

import math

from ....ir.loopnest import Bin, Load, Un, Var, iconst, substitute_acc
from ..devir import ScalarLoad, SLoop, Stmt, E, lin, pow2_floor, simp, subst
from ....ir.sizes import ceil_div, round_up
from ..preprocess import staged_copy, vector_elems
from .builder import Unschedulable, ge, guards, loop, tasks
from .three_address import Operand, ThreeAddress, loads_of, peak_temps


def _memory_order(ax, acc):
    """The axes outermost-stride first when every access agrees on that order: NHWC tensors
    (around convolutions) seen through NCHW views then tile along contiguous channels x
    pixels instead of gathering one element per channel (a loop interchange: legal, no
    reduction). Accesses that disagree (a transpose) keep the kernel's own order."""
    if len(ax) < 2:
        return ax
    orders = {tuple(sorted(range(len(ax)), key=lambda i: -abs(a.get(ax[i][0], 0)))) for a in acc.values()
              if all(a.get(n, 0) for n, _ in ax)}       # broadcast operands (per channel...) do not vote
    if len(orders) != 1:
        return ax
    return [ax[i] for i in orders.pop()]


def sched_elementwise(kb):
    k = kb.k
    if k.combine:
        raise Unschedulable("reduction")
    value = substitute_acc(k.epilogue, k.body)
    loads = loads_of(value, [])
    if any(ld.pad is not None for ld in loads):
        raise Unschedulable("padded load")
    axes = [(a.name, a.extent) for a in k.axes] or [("sw_one", 1)]   # a 0-d tensor: one point
    acc = {}
    for key in ["out"] + list(range(len(loads))):
        off = kb.out_offset() if key == "out" else kb.offset(loads[key])
        a = lin(off)
        if a is None:
            raise Unschedulable("non-affine access")
        acc[key] = a
    # iterate in the output's storage order (an NHWC tensor: channels innermost), so tiles
    # are contiguous there; a point-wise kernel may visit its points in any order
    axes.sort(key=lambda a: -abs(acc["out"].get(a[0], 0)))
    # fuse axes that are contiguous in every access; drop unit axes
    ax = [(n, e) for n, e in axes if e != 1] or [(axes[0][0], 1)]
    ax = _memory_order(ax, acc)
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
    # pingpong.py doubles the loaded and stored tiles: each gets half the room
    budget = kb.nram_budget() // (2 if getattr(kb.p.target_state, "double_buffer", False) else 1)
    # residency_split.py: axis 0's elements per task as the convolutions reading the output split them
    hint = (getattr(kb.p.target_state, "chunk_hints", None) or {}).get(k.name)
    for _ in range(4):
        tmax = max(ve, (budget // max(nb, 1) // 4) // ve * ve)
        j = 0
        while j < m - 1 and math.prod(ext[j + 1:]) > tmax:
            j += 1
        inner = math.prod(ext[j + 1:])
        C0 = ceil_div(ext[0], 16)
        if j == 0 and inner == 1:
            C0 = round_up(C0, ve)
        if hint is not None and 16 * hint >= ext[0] and (j > 0 or inner > 1 or hint % ve == 0):
            C0 = hint
        if j == 0:
            T = pow2_floor(min(C0, max(1, tmax // inner)))
        else:
            T = pow2_floor(min(ext[j], max(1, tmax // inner)))
        tile_axes = list(range(j, m))
        invariant = [all(acc[i].get(names[g], 0) == 0 for g in tile_axes if (T if g == j else ext[g]) > 1)
                     for i in range(len(loads))]
        staged = [i for i in range(len(loads)) if not invariant[i]]
        # a staged operand that varies only along the tile's inner axes (a per-channel
        # scale of an NHWC tile) holds the same lanes in every tile: loaded once per task
        # before the tiles, read-only in them
        hoisted = [i for i in staged if all(acc[i].get(names[g], 0) == 0 for g in range(m)
                                            if g not in tile_axes or g == j)]
        probe = peak_temps(value, lambda ld, inv=invariant: Operand("scalar", Var("v")) if inv[loads.index(ld)]
                           else Operand("buf", f"x{loads.index(ld)}"), readonly=[f"x{i}" for i in hoisted])
        need = len(staged) + probe
        if need <= nb:
            break
        nb = need
    lanes = T * inner
    kb.info_tile = dict(axes=ext, split_axis=j, tile=T, chunk=C0, lanes=lanes)
    # int8 tensors stored as bytes (narrow.py): staged tiles copied as bytes and converted in
    # NRAM (__bang_int82float, exact), the result converted (__bang_float2int8_rn: its lanes
    # are requantized integers) and stored as bytes; invariant or hoisted reads stay float
    narrow = kb.narrow()
    x8 = {i for i in staged if i not in hoisted and kb.p.root(k.buffers[loads[i].buf].tensor) in narrow}
    o8 = kb.p.root(k.buffers[k.out].tensor) in narrow

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
                if i in hoisted:
                    leafmap[ld] = Operand("buf", f"x{i}")
                elif invariant[i]:
                    name = f"v{i}"
                    at0 = simp(subst(goff(i), {f"l{h}": 0 for h in tile_axes}))
                    stm.append(ScalarLoad(name, Load(g, (at0,)), guard=outer_conds + tile_exists))
                    leafmap[ld] = Operand("scalar", Var(name))
                else:
                    buf = f"x{i}"
                    if buf not in kb.bufs:
                        kb.alloc("NRAM", buf, lanes)
                    if i in x8:
                        if f"{buf}b" not in kb.bufs:
                            kb.alloc("NRAM", f"{buf}b", lanes, ctype="int8_t", elem_bytes=1)
                        stm += staged_copy(kb.sid("copy", "in"), f"{buf}b", lane_ix, Load(g, (goff(i),)), loops,
                                           bound=tail_conds_l, common=outer_conds)
                        stm.append(Stmt("compute", Load(buf, (Var("ln"),)), Un("from_int8", Load(f"{buf}b", (Var("ln"),))),
                                        [SLoop("ln", iconst(0), iconst(lanes))], guard=outer_conds + lane_conds,
                                        over=True, sid=kb.sid("compute", "widen")))
                    else:
                        stm += staged_copy(kb.sid("copy", "in"), buf, lane_ix, Load(g, (goff(i),)), loops,
                                           bound=tail_conds_l, common=outer_conds)
                    leafmap[ld] = Operand("buf", buf)
            ta = ThreeAddress(kb, "e", lambda: iconst(lanes), readonly=[f"x{i}" for i in hoisted])
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
            if o8:
                if "o8" not in kb.bufs:
                    kb.alloc("NRAM", "o8", lanes, ctype="int8_t", elem_bytes=1)
                stm.append(Stmt("compute", Load("o8", (Var("ln"),)), Un("to_int8", Load(src, (Var("ln"),))),
                                [SLoop("ln", iconst(0), iconst(lanes))], guard=outer_conds + lane_conds, over=True,
                                sid=kb.sid("compute", "narrow")))
                src = "o8"
            go = kb.gparam(k.buffers[k.out].tensor)
            stm.append(Stmt("copy", Load(go, (goff("out"),)), Load(src, (lane_ix,)), loops,
                            guard=outer_conds + tail_conds_l, sid=kb.sid("copy", "out")))
            return stm

        # a hoisted operand repeats its `inner` lanes T times along the tile's axis j: those
        # come from GDRAM once and are copied on chip to the other T - 1 (one strided
        # NRAM2NRAM, source stride 0, as a convolution's per-channel operands) instead of a
        # GDRAM segment per repeat (DenseNet's BatchNorms read their four operands 128 times
        # per task); when the lanes fit the NRAM2NRAM size and alignment rules
        eb = 4
        on_chip = (T > 1 and m - j == 2 and T - 1 <= kb.hw["memcpy_max_segnum"] + 1
                   and inner * eb % kb.hw["nram2nram_size_multiple_bytes"] == 0
                   and inner * eb % kb.hw["nram2nram_align_bytes"] == 0)

        def hoist():
            """The hoisted operands' copies: every lane of a tile, from offsets no tile changes."""
            lv = {g: Var(f"l{g}") for g in tile_axes}
            pitch = {g: math.prod((T if h == j else ext[h]) for h in tile_axes if h > g) for g in tile_axes}
            lane_ix = simp(sum((Bin("*", lv[g], iconst(pitch[g])) for g in tile_axes), iconst(0)))
            loops = [SLoop(f"l{g}", iconst(0), iconst(T if g == j else ext[g])) for g in tile_axes]
            stm = []
            for i in hoisted:
                a = acc[i]
                off = simp(sum((Bin("*", lv[names.index(n)], iconst(c)) for n, c in a.items() if n is not None and c),
                               iconst(a.get(None, 0))))
                buf = f"x{i}"
                if buf not in kb.bufs:
                    kb.alloc("NRAM", buf, lanes)
                src = Load(kb.gparam(k.buffers[loads[i].buf].tensor), (off,))
                if not on_chip:
                    stm += staged_copy(kb.sid("copy", "in"), buf, lane_ix, src, loops)
                    continue
                first = {f"l{j}": 0}
                stm += staged_copy(kb.sid("copy", "in"), buf, simp(subst(lane_ix, first)), simp(subst(src, first)),
                                   loops[1:])
                inner_ix = Var(f"l{j + 1}")
                stm.append(Stmt("copy", Load(buf, (simp(Bin("+", Bin("*", Bin("+", Var(f"l{j}"), iconst(1)),
                                                                               iconst(inner)), inner_ix)),)),
                                Load(buf, (inner_ix,)), [SLoop(f"l{j}", iconst(0), iconst(T - 1)), loops[1]],
                                sid=kb.sid("copy", "repn")))
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
            return hoist() + loop("s", S, per_s)

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
        return hoist() + loop("r0", C0, rows)

    b = tasks(body)
    return kb.finish("elementwise", b, tile=kb.info_tile, narrow_in=bool(x8), narrow_out=o8,
                     narrow_bufs=frozenset(loads[i].buf for i in x8))
