"""Scalars written in a region (temporaries, reductions) become expanded arrays.

A scalar `t` written by the region's statements is renamed `swk_x_t` and given one
subscript per loop that encloses every statement using it (symm's `temp2` becomes
`swk_x_temp2[i][j]`; a scalar used outside every loop becomes `swk_x_t[0]`). The rest of
the pipeline then sees ordinary array accesses: dependences keep each instance's uses in
order, different iterations of the common loops no longer conflict, and tiles copy the
expanded cells like any array. Whether the expansion keeps the program's meaning (every
read of an expanded cell follows a write in the same iterations) is checked with isl in
swbuild.optimizer.polyhedral.dependences; the host allocates the array around the region.
"""
from __future__ import annotations

from pycparser import c_ast

from .model import ELEM_SIZES, Private


def statements(items, loops=()):
    """(assignment node, enclosing For nodes outer first) of a region's statements."""
    for n in items:
        if isinstance(n, c_ast.Compound):
            yield from statements(n.block_items or [], loops)
        elif isinstance(n, c_ast.For):
            yield from statements([n.stmt], loops + (n,))
        elif isinstance(n, c_ast.If):
            yield from statements([m for m in (n.iftrue, n.iffalse) if m is not None], loops)
        elif isinstance(n, c_ast.Assignment):
            yield n, loops


def expand(builder, items):
    """Rewrite the region's written scalars into expanded array references (in place)."""
    stmts = list(statements(items))
    written = {}
    for node, _ in stmts:
        if isinstance(node.lvalue, c_ast.ID):
            written.setdefault(node.lvalue.name, node)
    for name, node in written.items():
        if name in builder.loop_vars:
            builder.fail(node, f"'{name}' is the iterator of a loop in this region and is assigned "
                         "in a loop body", f"loop variable '{name}'")
        base, dims = builder.symbol(name, node.lvalue)
        if dims or base not in ELEM_SIZES:
            builder.fail(node, f"assignment to '{name}' of type {base}{'[]' * len(dims)} (only "
                         "array elements and arithmetic scalars may be written)", f"scalar write '{name}'")
        users = [(n, loops) for n, loops in stmts if any(_uses(n, name))]
        common = list(users[0][1])
        for _, loops in users[1:]:
            k = 0
            while k < min(len(common), len(loops)) and common[k] is loops[k]:
                k += 1
            common = common[:k]
        iters = [f.init.lvalue.name for f in common
                 if isinstance(f.init, c_ast.Assignment) and isinstance(f.init.lvalue, c_ast.ID)]
        if len(iters) != len(common):
            builder.fail(node, "a loop that encloses every use of the scalar declares its own iterator",
                         f"scalar write '{name}'")
        arr = f"swk_x_{name}"
        builder.r.privates[arr] = Private(name, arr, base, iters)
        for n, _ in users:
            _rename(n, name, lambda c, a=arr, its=iters: _ref(a, its, c))
    builder.written = set(written)


def _uses(node, name):
    if isinstance(node, c_ast.ID) and node.name == name:
        yield node
    for _, ch in node.children():
        yield from _uses(ch, name)


def _ref(arr, iters, coord):
    node = c_ast.ID(arr, coord=coord)
    for it in iters or [None]:
        sub = c_ast.ID(it, coord=coord) if it else c_ast.Constant("int", "0", coord=coord)
        node = c_ast.ArrayRef(node, sub, coord=coord)
    return node


def _rename(node, name, make):
    """Replace every ID `name` below node by make(coord)."""
    for slot in node.__slots__:
        if slot in ("coord", "__weakref__"):
            continue
        v = getattr(node, slot, None)
        if isinstance(v, c_ast.ID) and v.name == name:
            setattr(node, slot, make(v.coord))
        elif isinstance(v, c_ast.Node):
            _rename(v, name, make)
        elif isinstance(v, list):
            for k, x in enumerate(v):
                if isinstance(x, c_ast.ID) and x.name == name:
                    v[k] = make(x.coord)
                elif isinstance(x, c_ast.Node):
                    _rename(x, name, make)
