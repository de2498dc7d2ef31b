"""Einsum as one loop-nest kernel: the output's letters are its axes, the other letters its
reduction, the body the product of the operands' loads.

A batched MatMul written as an equation ('bhid,bhjd->bhij', what MaxViT's attention exports)
is then the same kernel MatMul lowers to, with its indices permuted, so no Transpose copies
are needed; a repeated letter in one operand (a diagonal, 'ii->i') is a load whose index
repeats one axis, which stays affine. Ellipsis dimensions broadcast as numpy's do (an
extent-1 dimension reads index 0).
"""
from __future__ import annotations

from ..ir.loopnest import Axis, Bin, iconst
from ..support.errors import UnsupportedError
from .base import KernelBuilder, register

ELLIPSIS = "..."


def _terms(node, equation, n_inputs):
    """(operand terms, output term or None when implicit), spaces removed."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != n_inputs:
        raise UnsupportedError(f"node '{node.name}' (Einsum): equation '{equation}' has {len(terms)} operand "
                               f"terms for {n_inputs} inputs")
    for t in terms + ([rhs] if arrow else []):
        rest = t.replace(ELLIPSIS, "", 1)
        if not all(c.isascii() and c.isalpha() for c in rest):
            raise UnsupportedError(f"node '{node.name}' (Einsum): term '{t}' of equation '{equation}' is not "
                                   f"letters with at most one '...'")
    return terms, (rhs if arrow else None)


def _split(term):
    """Letters before and after the ellipsis (after is empty when there is none)."""
    if ELLIPSIS in term:
        pre, post = term.split(ELLIPSIS)
        return list(pre), list(post), True
    return list(term), [], False


def parse(node, equation, shapes):
    """(output labels, sizes by label, per operand: its labels) where ellipsis dimensions are the
    labels 0, 1, ... (right-aligned as numpy broadcasts them) and letters are themselves."""
    terms, out_term = _terms(node, equation, len(shapes))
    n_ell = 0
    parts = []
    for t, shape in zip(terms, shapes):
        pre, post, has = _split(t)
        k = len(shape) - len(pre) - len(post)
        if k < 0 or (k > 0 and not has):
            raise UnsupportedError(f"node '{node.name}' (Einsum): term '{t}' of equation '{equation}' does not "
                                   f"match its operand's rank {len(shape)}")
        parts.append((pre, k, post))
        n_ell = max(n_ell, k)
    sizes, labels = {}, []
    for (pre, k, post), shape, t in zip(parts, shapes, terms):
        lab = pre + list(range(n_ell - k, n_ell)) + post
        for L, d in zip(lab, shape):
            d = int(d)
            if isinstance(L, int):      # ellipsis dims broadcast: 1 yields to the other extent
                s = sizes.get(L, 1)
                if s != 1 and d != 1 and s != d:
                    raise UnsupportedError(f"node '{node.name}' (Einsum): the '...' dimensions of equation "
                                           f"'{equation}' do not broadcast ({s} and {d})")
                sizes[L] = d if s == 1 else s
            elif sizes.setdefault(L, d) != d:
                raise UnsupportedError(f"node '{node.name}' (Einsum): label '{L}' of equation '{equation}' has "
                                       f"extents {sizes[L]} and {d}")
        labels.append(lab)
    letters = [L for lab in labels for L in lab if isinstance(L, str)]
    if out_term is None:    # implicit: the ellipsis, then the letters seen once, in alphabetical order
        out = list(range(n_ell)) + sorted(L for L in set(letters) if letters.count(L) == 1)
    else:
        pre, post, has = _split(out_term)
        if n_ell and not has:
            raise UnsupportedError(f"node '{node.name}' (Einsum): equation '{equation}': the inputs' '...' "
                                   f"dimensions are missing from the output (onnxruntime and numpy refuse it too)")
        out = pre + (list(range(n_ell)) if has else []) + post
        bad = [L for L in out if isinstance(L, str) and (L not in sizes or out.count(L) > 1)]
        if bad:
            raise UnsupportedError(f"node '{node.name}' (Einsum): output label '{bad[0]}' of equation '{equation}' "
                                   f"is repeated or appears in no input")
    return out, sizes, labels


@register("Einsum")
def lower_einsum(ctx, node):
    g = ctx.graph
    eq = node.attrs["equation"]
    eq = eq.decode() if isinstance(eq, bytes) else eq
    xs = [g.tensors[i] for i in node.inputs]
    out_t = g.tensors[node.outputs[0]]
    out, sizes, labels = parse(node, eq, [x.shape for x in xs])
    name = lambda L: f"e{L}" if isinstance(L, int) else f"l{L}"    # noqa: E731  (axis names: C identifiers)
    axes = {L: Axis(name(L), sizes[L]) for L in sizes}
    kb = KernelBuilder(ctx, node)
    body = None
    for x, lab in zip(xs, labels):
        if lab:
            idx = [iconst(0) if isinstance(L, int) and d == 1 and sizes[L] != 1 else axes[L].var
                   for L, d in zip(lab, x.shape)]
            ld = kb.load(x.name, idx)
        else:   # a scalar operand: a one-element view
            ld = kb.load(x.name, [iconst(0)], shape=[1])
        body = ld if body is None else Bin("*", body, ld)
    red = tuple(axes[L] for L in sizes if L not in out)
    oax = [axes[L] for L in out] or [Axis("z", 1)]
    kw = {"reduce_axes": red, "combine": "sum", "init": 0.0} if red else {}
    ctx.add(kb.kernel(out_t.name, oax, body, out_shape=[a.extent for a in oax], **kw))
