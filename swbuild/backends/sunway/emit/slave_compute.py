"""The compute of one step of a CPE kernel: scalar loops, or the SIMD register-blocked
micro-kernel of the vector plan (schedule/simd.py), and the epilogue of a finished tile."""
from __future__ import annotations


from ....ir.loopnest import Acc, Const, substitute_acc
from ...cexpr import COMBINE, COMBINE_D, COMBINE_I, ctype_of, float_literal, render, rules_of


def _gvar(local):
    return lambda n: f"(T0_{n} + {local(n)})"


def _load_text(K, ctx, ld, local):
    i, b, vs = K.ids[(ctx, ld)]
    idx = " + ".join([f"o{i}"] + [f"s{i}_{v} * {local(v)}" for v in sorted(vs)])
    return f"B_{b.name}[{idx}]"


def _acc_off(K, local):
    return " + ".join(f"sa_{n} * {local(n)}" for n in K.sp) or "0"


def _scalar_point(w, K, local):
    """One output point's reduction over this step, in a register."""
    k = K.k
    w("{")
    w.depth += 1
    ft, rules = ctype_of(k), rules_of(k)
    combine = {"double": COMBINE_D, "int": COMBINE_I}.get(rules["mode"], COMBINE)
    w(f"{ft}* const ap = acc + {_acc_off(K, local)};")
    w(f"{ft} a = *ap;")
    for n in K.red:
        w.open(f"for (int l_{n} = 0; l_{n} < TN_{n}; l_{n}++)")
    v = render(k.body, _gvar(local), lambda ld: _load_text(K, "body", ld, local), **rules)
    w(combine[k.combine].format(a="a", v=v))
    for _ in K.red:
        w.close()
    w("*ap = a;")
    w.depth -= 1
    w("}")


def scalar_reduce(w, K):
    for n in K.sp:
        w.open(f"for (int l_{n} = 0; l_{n} < TN_{n}; l_{n}++)")
    _scalar_point(w, K, lambda n: f"l_{n}")
    for _ in K.sp:
        w.close()


def vector_compute(w, K):
    vp = K.s.vector
    v, r = vp.v, vp.r
    outer = [n for n in K.sp if n not in (v, r)]
    for n in outer:
        w.open(f"for (int l_{n} = 0; l_{n} < TN_{n}; l_{n}++)")
    if r:
        w(f"int l_{r} = 0;")
        w.open(f"for (; l_{r} + {vp.R} <= TN_{r}; l_{r} += {vp.R})")
        _vector_row(w, K, vp.R)
        w.close()
        w.open(f"for (; l_{r} < TN_{r}; l_{r}++)")
        _vector_row(w, K, 1)
        w.close()
    else:
        _vector_row(w, K, 1)
    for _ in outer:
        w.close()


def _vector_row(w, K, R):
    vp = K.s.vector
    L, v, r = vp.lanes, vp.v, vp.r
    w("{")
    w.depth += 1
    w(f"int l_{v} = 0;")
    if vp.U > 1:
        w.open(f"for (; l_{v} + {vp.U * L} <= TN_{v}; l_{v} += {vp.U * L})")
        _micro(w, K, R, vp.U)
        w.close()
    w.open(f"for (; l_{v} + {L} <= TN_{v}; l_{v} += {L})")
    _micro(w, K, R, 1)
    w.close()
    w.open(f"if (l_{v} < TN_{v} && TN_{v} >= {L})")
    w(f"const int keep = TN_{v} - l_{v};")
    w("{")
    w.depth += 1
    w(f"const int l_{v} = TN_{v} - {L};")
    _micro(w, K, R, 1, tail=True)
    w.close()
    w.close("} else {")
    w.depth += 1
    w.open(f"for (; l_{v} < TN_{v}; l_{v}++)")
    for i in range(R):
        _scalar_point(w, K, (lambda i: lambda n: f"(l_{n} + {i})" if n == r and i else f"l_{n}")(i))
    w.close()
    w.close()
    w.depth -= 1
    w("}")


def _acc_vec(K, vp, i, u):
    """The accumulator address of row i, vector u of a micro-kernel block (lanes 1 apart, or
    sa_v apart when the vector axis is not the innermost)."""
    roff = f" + {i} * sa_{vp.r}" if vp.r and i else ""
    uoff = (f" + {u * vp.lanes} * sa_{vp.v}" if u else "") if vp.acc_strided else f" + {u * vp.lanes}"
    return f"acc + {_acc_off(K, lambda n: f'l_{n}')}{roff}{uoff}"


def _micro(w, K, R, U, tail=False):
    """R x U register block: R rows along r, U vectors along v, reduction of the step inside.
    tail: start from zero and add only the last `keep` lanes to the accumulator."""
    vp = K.s.vector
    L, v, r, vt = vp.lanes, vp.v, vp.r, vp.vtype
    bc = f"sw_bcast{L}"
    ld_acc = "simd_load" if vp.acc_aligned else "simd_loadu"
    st_acc = "simd_store" if vp.acc_aligned else "simd_storeu"
    w("{")
    w.depth += 1
    for i in range(R):
        for u in range(U):
            if tail:
                w(f"{vt} a{i}_{u} = {bc}(0.0f);")
            elif vp.acc_strided:      # lanes sa_v apart: gathered here, scattered after
                dst = _acc_vec(K, vp, i, u)
                lanes = ", ".join(f"({dst})[{x} * sa_{v}]" for x in range(L))
                w(f"{vt} a{i}_{u} = simd_set_{vt}({lanes});")
            else:
                w(f"{vt} a{i}_{u}; {ld_acc}(a{i}_{u}, {_acc_vec(K, vp, i, u)});")
    # base pointers at the block's outer coordinates
    fl = []
    for j, f in enumerate(vp.factors):
        if isinstance(f, Const):
            w(f"const {vt} c{j} = {bc}({float_literal(f.value)});")
            fl.append(None)
            continue
        i_, b, vs = K.ids[("body", f)]
        sp_terms = [f"s{i_}_{x} * l_{x}" for x in sorted(vs) if x in K.sp]
        w(f"const float *f{j} = B_{b.name} + o{i_}{''.join(' + ' + x for x in sp_terms)};")
        fl.append((i_, vs))
    for n in K.red:
        w.open(f"for (int l_{n} = 0; l_{n} < TN_{n}; l_{n}++)")
    for j, f in enumerate(vp.factors):
        if fl[j] is None:
            continue
        i_, vs = fl[j]
        rt = [f"s{i_}_{x} * l_{x}" for x in sorted(vs) if x in K.red]
        w(f"const float *q{j} = f{j}{''.join(' + ' + x for x in rt)};")
    # factor values
    val = {}
    for j, (f, kind, dr) in enumerate(zip(vp.factors, vp.kinds, vp.dep_r)):
        if kind == "const":
            for i in range(R):
                for u in range(U):
                    val[(j, i, u)] = f"c{j}"
            continue
        i_, vs = fl[j]
        rows = range(R) if dr else range(1)
        for i in rows:
            ro = f" + {i} * s{i_}_{r}" if dr and i else ""
            if kind == "bcast":
                w(f"const {vt} v{j}_{i} = {bc}(q{j}[0{ro}]);")
                for u in range(U):
                    for ii in (range(R) if not dr else [i]):
                        val[(j, ii, u)] = f"v{j}_{i}"
            else:
                for u in range(U):
                    if kind == "vec":
                        w(f"{vt} v{j}_{i}_{u}; simd_loadu(v{j}_{i}_{u}, q{j}{ro} + {u * L});")
                    else:
                        lanes = ", ".join(f"q{j}[{ro.strip(' +') or '0'} + {u * L + x} * s{i_}_{v}]" for x in range(L))
                        w(f"const {vt} v{j}_{i}_{u} = simd_set_{vt}({lanes});")
                    for ii in (range(R) if not dr else [i]):
                        val[(j, ii, u)] = f"v{j}_{i}_{u}"
    nf = len(vp.factors)
    for i in range(R):
        for u in range(U):
            fs = [val[(j, i, u)] for j in range(nf)]
            if nf == 1:
                w(f"a{i}_{u} = simd_vadds(a{i}_{u}, {fs[0]});")
            else:
                prod = fs[0]
                for x in fs[1:-1]:
                    prod = f"simd_vmuls({prod}, {x})"
                w(f"a{i}_{u} = simd_vmas({prod}, {fs[-1]}, a{i}_{u});")
    for _ in K.red:
        w.close()
    if tail:
        w(f"float tv[{L}];")
    if vp.acc_strided and not tail:
        w(f"float tv[{L}];")
    for i in range(R):
        for u in range(U):
            dst = _acc_vec(K, vp, i, u)
            lane = f" * sa_{v}" if vp.acc_strided else ""
            if tail:
                w(f"simd_storeu(a{i}_{u}, tv);")
                w(f"for (int j = {L} - keep; j < {L}; j++) ({dst})[j{lane}] += tv[j];")
            elif vp.acc_strided:
                w(f"simd_storeu(a{i}_{u}, tv);")
                w(f"for (int j = 0; j < {L}; j++) ({dst})[j * sa_{v}] = tv[j];")
            else:
                w(f"{st_acc}(a{i}_{u}, {dst});")
    w.depth -= 1
    w("}")


def epilogue(w, K):
    k = K.k
    if k.combine and isinstance(k.epilogue, Acc):
        return
    for n in K.sp:
        w.open(f"for (int l_{n} = 0; l_{n} < TN_{n}; l_{n}++)")
    local = lambda n: f"l_{n}"  # noqa: E731
    off = _acc_off(K, local)
    if k.combine:
        e = render(k.epilogue, _gvar(local), lambda ld: _load_text(K, "epi", ld, local), acc=f"acc[{off}]",
                   **rules_of(k))
    else:
        e = render(substitute_acc(k.epilogue, k.body), _gvar(local), lambda ld: _load_text(K, "epi", ld, local),
                   **rules_of(k))
    w(f"acc[{off}] = {e};")
    for _ in K.sp:
        w.close()
