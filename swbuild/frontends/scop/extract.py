"""Find the `#pragma scop` regions of a parsed translation unit and build each one."""
from __future__ import annotations

from pycparser import c_ast

from .builder import Builder, type_info
from .cparse import parse, preprocess, reduce_system_headers
from .model import Region, ScopError

def _collect_typedefs(ast):
    tds = {}
    for ext in ast.ext:
        if isinstance(ext, c_ast.Typedef):
            base, dims = type_info(ext.type, tds)
            if base is not None:
                tds[ext.name] = (base, dims)
    return tds


def _decls_in(node, out):
    """Every declaration nested in a function body, by name (innermost/last wins)."""
    if isinstance(node, c_ast.Decl) and node.name:
        out[node.name] = node
    for _, ch in node.children():
        _decls_in(ch, out)


# ------------------------------------------------------------------------- regions

def extract(path, tc=None, includes=(), defines=(), text=None):
    """All `#pragma scop` regions of `path` as Region objects (errors recorded per region)."""
    path = str(path)
    full = None
    if text is None:
        full = preprocess(path, tc, includes, defines)
        text = reduce_system_headers(full)
    ast = parse(text, path, full)
    typedefs = _collect_typedefs(ast)
    globals_ = {e.name: e for e in ast.ext if isinstance(e, c_ast.Decl) and e.name}
    regions = []
    for ext in ast.ext:
        if not isinstance(ext, c_ast.FuncDef):
            continue
        syms = dict(globals_)
        if ext.decl.type.args is not None:
            for prm in ext.decl.type.args.params:
                if isinstance(prm, c_ast.Decl) and prm.name:
                    syms[prm.name] = prm
        _decls_in(ext.body, syms)
        for items, loop in _blocks(ext.body, None):
            for lo, hi in _pragma_spans(items, path):
                start = items[lo].coord
                r = Region(path, len(regions), ext.decl.name, start.line, items[hi].coord.line)
                regions.append(r)
                if start.file != path:
                    r.error = ScopError(start.file, start.line, "#pragma scop",
                                        f"region in an included file (only {path}'s own regions are transformed)")
                    continue
                try:
                    Builder(r, syms, typedefs).build(items[lo + 1:hi])
                    _check_not_live_after(r, ext.body, loop)
                except ScopError as e:
                    r.error = e
                except (AttributeError, TypeError, ValueError, KeyError, IndexError) as e:
                    # a bug here must not print a traceback: the region is refused instead
                    r.error = ScopError(path, start.line, "#pragma scop", "internal error while extracting "
                                        f"the region ({type(e).__name__}: {e}); please report it")
    return regions


def _check_not_live_after(r, body, loop):
    """The generated code leaves neither loop variables nor expanded scalars at their final values:
    refuse a region whose function reads one of them afterwards (or, inside a loop, before
    the region in the next iteration)."""
    kept = {pv.scalar for pv in r.privates.values() if not pv.iters}    # copied back by the host
    for v in sorted(r.outer_iters | {pv.scalar for pv in r.privates.values()} - kept):
        occ = []
        _occurrences(body, v, occ)
        after = sorted(o for o in occ if o[0] > r.end_line)
        before = sorted(o for o in occ if loop is not None and o[0] < r.start_line
                        and _inside(loop, o[0]))
        for seq, when in ((after, "after the region of line {} ends"),
                          (before, "before the region of line {} in the enclosing loop")):
            if seq and seq[0][2] == "read":
                what = "loop variable" if v in r.outer_iters else "scalar"
                raise ScopError(r.path, seq[0][0], f"{what} '{v}'",
                                f"read {when.format(r.start_line)}: the generated code does not keep "
                                f"the final value of a {what} the region's loops write")


def _occurrences(node, v, out):
    """(line, column, 'read'|'write') of every use of identifier v, in evaluation order."""
    if isinstance(node, c_ast.Assignment) and node.op == "=" and \
            isinstance(node.lvalue, c_ast.ID) and node.lvalue.name == v:
        _occurrences(node.rvalue, v, out)
        c = node.lvalue.coord
        out.append((c.line, c.column or 0, "write"))
        return
    if isinstance(node, c_ast.ID) and node.name == v and node.coord is not None:
        out.append((node.coord.line, node.coord.column or 0, "read"))
    for _, ch in node.children():
        _occurrences(ch, v, out)


def _inside(loop, line):
    lines = [n.coord.line for n in _walk(loop) if n.coord is not None]
    return min(lines) <= line <= max(lines)


def _walk(node):
    yield node
    for _, ch in node.children():
        yield from _walk(ch)


def _blocks(node, loop):
    """(block items, innermost enclosing loop or None) of every compound statement."""
    if isinstance(node, c_ast.Compound):
        yield node.block_items or [], loop
    inner = node if isinstance(node, (c_ast.For, c_ast.While, c_ast.DoWhile)) else loop
    for _, ch in node.children():
        yield from _blocks(ch, inner)
def _pragma_spans(items, path):
    start = None
    for k, it in enumerate(items):
        if isinstance(it, c_ast.Pragma):
            word = it.string.strip()
            if word == "scop":
                if start is not None:
                    raise ScopError(path, it.coord.line, "#pragma scop", "nested #pragma scop")
                start = k
            elif word == "endscop":
                if start is None:
                    raise ScopError(path, it.coord.line, "#pragma endscop", "no matching #pragma scop in this block")
                yield start, k
                start = None
    if start is not None:
        raise ScopError(path, items[start].coord.line, "#pragma scop",
                        "no #pragma endscop in the same block")


