"""Host-side code around a planned SCoP region that is not kernel launches: the run-time
check of the parameter values the plan assumes, the original region for valid values the
plan does not cover, and the storage of the region's expanded scalars.

    if (!(valid)) { report file:line and the condition; abort(); }   /* out of bounds */
    if (!(context)) { original region } else { generated code }      /* plan's convex part */
"""
from __future__ import annotations

import islpy as isl

from .isl_c import paren, pw_expr, set_expr


def _c(s, kind="set"):
    ctx = isl.Set.universe(s.get_space() if kind == "set" else s.domain().get_space())
    return (set_expr if kind == "set" else pw_expr)(s, ctx, {})


def _c_string(s):
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")


def guard(p, source):
    """Abort with file:line and the condition when the parameters make an access leave its
    array (dependences._assume_in_bounds): never a silently empty or wrong region."""
    m, r = p.model, p.region
    if m.valid is None:
        return []
    cond = paren(_c(m.valid))
    return [f'    if (!{cond}) {{ fprintf(stderr, "{source}:{r.start_line}: #pragma scop region accesses '
            f'an array out of bounds for these parameter values (needs {_c_string(cond)})\\n"); abort(); }}']


def partial(p):
    m = p.model
    return m.context is not None and not m.context.is_equal(m.valid)


def fallback(p, source, lines, generated):
    """The original region (its own lines, #line-mapped) where the plan's context fails."""
    r = p.region
    return ([f"    if (!{paren(_c(p.model.context))}) {{", f'#line {r.start_line + 1} "{source}"']
            + lines[r.start_line:r.end_line - 1]
            + ["    } else {", f'#line {r.start_line} "{source}"'] + generated + ["    }"])


def expanded_scalars(p, source):
    """(declarations before, statements after) for the region's expanded scalars
    (frontends/scop/scalars.py): a heap array over the common loops, or a one-element array
    that carries the scalar in and out."""
    pre, post = [], []
    for name, pv in sorted(p.region.privates.items()):
        exts = [paren(_c(pa, "pw")) + " + 1" for pa in p.model.expanded[name]]
        t = pv.ctype
        if not exts:
            pre += [f"    {t} {name}[1];", f"    {name}[0] = {pv.scalar};"]
            post.insert(0, f"    {pv.scalar} = {name}[0];")
            continue
        rows = "".join(f"[{e}]" for e in exts[1:])
        size = " * ".join(f"({e})" for e in exts)
        pre += [f"    {t} (*{name}){rows} = ({t} (*){rows})malloc(sizeof({t}) * {size});",
                f'    if (!{name}) {{ fprintf(stderr, "{source}:{p.region.start_line}: '
                f'out of memory for the expanded scalar {pv.scalar}\\n"); abort(); }}']
        post.insert(0, f"    free({name});")
    return pre, post
