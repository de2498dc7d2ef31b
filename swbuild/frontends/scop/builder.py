"""A region's statements as polyhedral statements: domains, accesses, 2d+1 schedules."""
from __future__ import annotations

import re

from pycparser import c_ast, c_generator

from . import scalars
from .cparse import STMT_EXPR
from .model import ELEM_SIZES, INT_TYPES, MATH_FUNCS, Access, Array, ScopError, Stmt

_CGEN = c_generator.CGenerator()

def type_info(node, typedefs):
    """(element C type, dims list, is_pointer) of a declaration's type."""
    dims = []
    while True:
        if isinstance(node, c_ast.ArrayDecl):
            dims.append(node.dim)
            node = node.type
        elif isinstance(node, c_ast.PtrDecl):
            dims.append("*")
            node = node.type
        elif isinstance(node, c_ast.TypeDecl):
            node = node.type
        elif isinstance(node, c_ast.IdentifierType):
            name = " ".join(n for n in node.names if n not in ("const", "volatile", "signed") or len(node.names) == 1)
            if name in typedefs:
                base, more = typedefs[name]
                return base, dims + more
            return name, dims
        else:
            return None, dims


_EXPANDED = re.compile(r"swk_x_(\w+)(?:\[[^\]]*\])+")


def _text(node):
    """C text of a node for messages, expanded scalars (scalars.py) shown as written."""
    return _EXPANDED.sub(r"\1", _CGEN.visit(node))


class Builder:
    """Walks a region's statements and fills Region.stmts, params, scalars and arrays."""

    def __init__(self, region, syms, typedefs):
        self.r, self.syms, self.typedefs = region, syms, typedefs

    # -- errors and symbols
    def fail(self, node, why, construct=None):
        line = node.coord.line if node is not None and node.coord else self.r.start_line
        raise ScopError(self.r.path, line, construct or f"'{_text(node)}'", why)

    def symbol(self, name, node):
        d = self.syms.get(name)
        if d is None:
            self.fail(node, "unknown identifier (enum constants and macros are fine; other symbols must be declared)")
        base, dims = type_info(d.type, self.typedefs)
        if isinstance(d.type, c_ast.FuncDecl) or base is None:
            self.fail(node, f"'{name}' is not a scalar or array variable")
        return base, dims

    def array(self, name, node):
        a = self.r.arrays.get(name)
        pv = self.r.privates.get(name)
        if a is None and pv is not None:
            a = self.r.arrays[name] = Array(name, pv.ctype, ELEM_SIZES[pv.ctype], [None] * len(pv.iters) or [1])
        if a is None:
            base, dims = self.symbol(name, node)
            if not dims:
                return None
            if base not in ELEM_SIZES:
                self.fail(node, f"array element type '{base}' is not a plain arithmetic type")
            if "*" in dims[1:]:
                self.fail(node, f"'{name}' is an array of pointers: its rows are not contiguous, "
                          "so tiles cannot be copied by DMA", f"array '{name}'")
            cdims = [_const(dm) if dm != "*" else None for dm in dims]
            a = self.r.arrays[name] = Array(name, base, ELEM_SIZES[base], cdims)
        return a

    def param(self, name, node):
        base, dims = self.symbol(name, node)
        if dims or base not in INT_TYPES:
            self.fail(node, f"'{name}' in an affine expression must be an integer scalar (got {base}{'[]' * len(dims)})",
                      "non-affine expression")
        if name not in self.r.params:
            self.r.params.append(name)
            self.r.scalars.setdefault(name, base)

    # -- affine expressions: {name: coeff, "": const}
    def affine(self, node, iters, what="expression"):
        def go(n):
            if isinstance(n, c_ast.Constant) and n.type in ("int", "long int", "unsigned int", "long long int"):
                return {"": _int(n.value)}
            if isinstance(n, c_ast.ID):
                self.not_loop_var(n, iters)
                if n.name in self.written:
                    self.fail(n, f"'{n.name}' is written in the region, so it has no single value "
                              f"in this {what}", f"{what} '{_text(node)}'")
                if n.name not in iters:
                    self.param(n.name, n)
                return {n.name: 1}
            if isinstance(n, c_ast.Cast):
                return go(n.expr)
            if isinstance(n, c_ast.UnaryOp) and n.op in ("-", "+"):
                f = go(n.expr)
                return {k: -v for k, v in f.items()} if n.op == "-" else f
            if isinstance(n, c_ast.BinaryOp) and n.op in ("+", "-"):
                a, b = go(n.left), go(n.right)
                s = 1 if n.op == "+" else -1
                out = dict(a)
                for k, v in b.items():
                    out[k] = out.get(k, 0) + s * v
                return out
            if isinstance(n, c_ast.BinaryOp) and n.op == "*":
                a, b = go(n.left), go(n.right)
                if set(a) <= {""}:
                    a, b = b, a
                if set(b) <= {""}:
                    c = b.get("", 0)
                    return {k: v * c for k, v in a.items()}
            self.fail(node, f"non-affine {what} (array elements, products of variables, division "
                      "and calls are outside the polyhedral model)", f"{what} '{_text(node)}'")
        f = go(node)
        return {k: v for k, v in f.items() if v or k == ""}

    # -- conditions as isl text
    def cond(self, node, iters, what="condition"):
        if isinstance(node, c_ast.BinaryOp) and node.op in ("&&", "||"):
            op = " and " if node.op == "&&" else " or "
            return "(" + self.cond(node.left, iters, what) + op + self.cond(node.right, iters, what) + ")"
        if isinstance(node, c_ast.UnaryOp) and node.op == "!":
            return "(not " + self.cond(node.expr, iters, what) + ")"
        if isinstance(node, c_ast.BinaryOp) and node.op in ("<", "<=", ">", ">=", "==", "!="):
            # MIN/MAX macros: `i < (c ? x : y)` is (c and i < x) or (!c and i < y)
            for side in ("left", "right"):
                t = getattr(node, side)
                if isinstance(t, c_ast.TernaryOp):
                    c = self.cond(t.cond, iters, what)
                    alt = [c_ast.BinaryOp(node.op, *((v, node.right) if side == "left" else (node.left, v)),
                                          coord=node.coord) for v in (t.iftrue, t.iffalse)]
                    return (f"(({c} and {self.cond(alt[0], iters, what)}) or "
                            f"((not {c}) and {self.cond(alt[1], iters, what)}))")
            a = _isl_lin(self.affine(node.left, iters, what), iters)
            b = _isl_lin(self.affine(node.right, iters, what), iters)
            if node.op == "!=":
                return f"({a} < {b} or {a} > {b})"
            return f"({a} {'=' if node.op == '==' else node.op} {b})"
        self.fail(node, f"{what} is not an affine comparison (data-dependent control flow is "
                  "outside the polyhedral model)", f"{what} '{_text(node)}'")

    def reserved(self, node):
        """The generated code owns the swk_/SWK_ names (kernels, buffers, iterators)."""
        names = [node.name] if isinstance(node, c_ast.ID) else \
            [d.name for d in getattr(node, "decls", None) or [] if isinstance(d, c_ast.Decl)]
        for name in names:
            if name and name.lower().startswith("swk_"):
                self.fail(node, "names starting with swk_ are reserved for the generated code",
                          f"identifier '{name}'")
        for _, ch in node.children():
            self.reserved(ch)

    # -- the walk
    def build(self, items):
        self.loop_vars, self.written = set(), set()
        for n in items:
            self.reserved(n)
            self._loop_vars(n)
        scalars.expand(self, items)
        self.count = 0
        self.walk(items, [], [], [])
        if not self.r.stmts:
            raise ScopError(self.r.path, self.r.start_line, "#pragma scop", "the region has no statements")

    def _loop_vars(self, n):
        if isinstance(n, c_ast.For) and isinstance(n.init, c_ast.Assignment) and isinstance(n.init.lvalue, c_ast.ID):
            self.loop_vars.add(n.init.lvalue.name)
        for _, ch in n.children():
            self._loop_vars(ch)

    def not_loop_var(self, n, iters):
        """A variable some loop of the region iterates over has no single value outside
        that loop (it changes as the region runs): refuse to read it there."""
        if n.name in self.loop_vars and n.name not in iters:
            self.fail(n, f"'{n.name}' is the iterator of a loop in this region and is read outside "
                      "that loop (its value there changes while the region runs)", f"loop variable '{n.name}'")

    def walk(self, items, iters, conds, sched):
        pos = 0
        for n in items:
            pos = self.item(n, iters, conds, sched, pos)

    def item(self, n, iters, conds, sched, pos):
        if isinstance(n, c_ast.Compound):
            for m in n.block_items or []:
                pos = self.item(m, iters, conds, sched, pos)
            return pos
        if isinstance(n, (c_ast.Pragma, c_ast.EmptyStatement)):
            return pos
        if isinstance(n, c_ast.For):
            v, lo, step, bound = self.loop(n, iters)
            it = iters + [v]
            lo_s = _isl_lin(lo, iters)
            c = [f"{lo_s} <= i_{v}" if step > 0 else f"i_{v} <= {lo_s}", bound]
            if abs(step) != 1:
                c.append(f"(i_{v} - {lo_s}) mod {abs(step)} = 0")
            body = (n.stmt.block_items or []) if isinstance(n.stmt, c_ast.Compound) else [n.stmt]
            self.walk(body, it, conds + c, sched + [pos, ("it", v, 1 if step > 0 else -1)])
            return pos + 1
        if isinstance(n, c_ast.If):
            c = self.cond(n.cond, iters)
            pos = self.item(n.iftrue, iters, conds + [c], sched, pos)
            if n.iffalse is not None:
                pos = self.item(n.iffalse, iters, conds + [f"(not {c})"], sched, pos)
            return pos
        if isinstance(n, c_ast.Assignment):
            self.statement(n, iters, conds, sched + [pos])
            return pos + 1
        what = {c_ast.While: "while loop", c_ast.DoWhile: "do-while loop", c_ast.Decl: "declaration",
                c_ast.FuncCall: "function call statement", c_ast.Return: "return",
                c_ast.Break: "break", c_ast.Continue: "continue", c_ast.Goto: "goto",
                c_ast.Switch: "switch", c_ast.UnaryOp: "increment statement"}.get(type(n), type(n).__name__)
        first = _text(n).strip().split("\n")[0].rstrip("{ ")
        self.fail(n, f"a {what} is outside the polyhedral model (loops must be `for` with affine "
                  "bounds, statements assignments)", f"{what} '{first}'")

    def loop(self, n, iters):
        init, cond, nxt = n.init, n.cond, n.next
        if isinstance(init, c_ast.DeclList) and len(init.decls) == 1 and init.decls[0].init is not None:
            v, lo_node = init.decls[0].name, init.decls[0].init
        elif isinstance(init, c_ast.Assignment) and init.op == "=" and isinstance(init.lvalue, c_ast.ID):
            v, lo_node = init.lvalue.name, init.rvalue
            self.r.outer_iters.add(v)
        else:
            self.fail(n, "loop initialisation must be `i = <affine>`", f"for-loop '{_text(init) if init else ''}'")
        if v in iters:
            self.fail(n, f"iterator '{v}' is reused by an inner loop")
        step = _step(nxt, v)
        if step is None or step == 0:
            self.fail(n, "loop increment must be i++, i--, or i += <constant>",
                      f"for-loop increment '{_text(nxt) if nxt else ''}'")
        lo = self.affine(lo_node, iters, "loop bound")
        if cond is None:
            self.fail(n, "loop without a bound", "for-loop")
        return v, lo, step, self.bound(cond, iters + [v])

    def bound(self, cond, iters):
        if isinstance(cond, c_ast.BinaryOp) and cond.op == "&&":
            return f"({self.bound(cond.left, iters)} and {self.bound(cond.right, iters)})"
        if not (isinstance(cond, c_ast.BinaryOp) and cond.op in ("<", "<=", ">", ">=")):
            self.fail(cond, "loop condition must compare the iterator with an affine bound", "for-loop condition")
        return self.cond(cond, iters, "loop bound")

    def statement(self, n, iters, conds, sched):
        name = f"S{self.count}"
        self.count += 1
        refs = []
        if isinstance(n.lvalue, c_ast.ID):
            self.fail(n, f"assignment to scalar '{n.lvalue.name}' (only array elements may be written "
                      "in a SCoP; use a one-element array)", f"scalar write '{_text(n).strip()}'")
        if isinstance(n.lvalue, c_ast.UnaryOp) and n.lvalue.op == "*":
            self.fail(n, "pointer dereference is outside the polyhedral model (index arrays instead)",
                      f"pointer arithmetic '{_text(n.lvalue)}'")
        if not isinstance(n.lvalue, c_ast.ArrayRef):
            self.fail(n, "the left-hand side must be an array element", f"assignment '{_text(n)}'")
        if n.op not in ("=", "+=", "-=", "*=", "/="):
            self.fail(n, f"assignment operator '{n.op}' is not supported")
        self.ref(n.lvalue, iters, refs, write=True, read=n.op != "=")
        self.value(n.rvalue, iters, refs)
        dom = " and ".join(conds) if conds else ""
        its = ", ".join("i_" + i for i in iters)
        text = f"{self.r.isl_params} -> {{ {name}[{its}]" + (f" : {dom} }}" if dom else " }")
        self.r.stmts.append(Stmt(name, n.coord.line, list(iters), text, sched, n, refs))

    def ref(self, node, iters, refs, write=False, read=True):
        subs = []
        base = node
        while isinstance(base, c_ast.ArrayRef):
            subs.append(base.subscript)
            base = base.name
        if not isinstance(base, c_ast.ID):
            self.fail(node, "array base must be a variable (no pointer arithmetic or struct members)",
                      f"array reference '{_text(node)}'")
        a = self.array(base.name, base)
        if a is None:
            self.fail(node, f"'{base.name}' is not an array", f"array reference '{_text(node)}'")
        subs.reverse()
        if len(subs) != len(a.const_dims):
            self.fail(node, f"'{base.name}' has {len(a.const_dims)} dimensions but {len(subs)} subscripts "
                      "(pointer arithmetic / partial indexing is outside the model)", f"array reference '{_text(node)}'")
        idx = []
        for s in subs:
            for n in _ids(s):
                self.not_loop_var(n, iters)
            try:
                idx.append(self.affine(s, iters))
            except ScopError:
                self.fail(node, "non-affine subscript (subscripts must be affine in the loop "
                          "iterators and integer parameters)", f"array reference '{_text(node)}'")
        refs.append(Access(base.name, idx, write, read))

    def value(self, n, iters, refs):
        if isinstance(n, c_ast.Constant):
            return
        if isinstance(n, c_ast.ID):
            if n.name in iters:
                return
            self.not_loop_var(n, iters)
            base, dims = self.symbol(n.name, n)
            if dims:
                self.fail(n, f"array '{n.name}' used without subscripts (pointer arithmetic)",
                          f"pointer use '{n.name}'")
            self.r.scalars.setdefault(n.name, base)
            return
        if isinstance(n, c_ast.ArrayRef):
            return self.ref(n, iters, refs)
        if isinstance(n, c_ast.BinaryOp):
            self.value(n.left, iters, refs)
            return self.value(n.right, iters, refs)
        if isinstance(n, c_ast.UnaryOp) and n.op in ("-", "+", "!", "~"):
            return self.value(n.expr, iters, refs)
        if isinstance(n, c_ast.TernaryOp):
            for m in (n.cond, n.iftrue, n.iffalse):
                self.value(m, iters, refs)
            return
        if isinstance(n, c_ast.Cast):
            return self.value(n.expr, iters, refs)
        if isinstance(n, c_ast.FuncCall):
            fname = n.name.name if isinstance(n.name, c_ast.ID) else _text(n.name)
            if fname == STMT_EXPR:
                self.fail(n, "a GNU statement expression is outside the polyhedral model",
                          "statement expression '({ ... })'")
            if fname not in MATH_FUNCS:
                self.fail(n, "calls other than pure math functions are outside the polyhedral model",
                          f"call to '{fname}'")
            for a in (n.args.exprs if n.args else []):
                self.value(a, iters, refs)
            return
        if isinstance(n, c_ast.UnaryOp) and n.op in ("*", "&"):
            self.fail(n, "pointer dereference / address-of is outside the polyhedral model",
                      f"pointer arithmetic '{_text(n)}'")
        if isinstance(n, c_ast.Assignment):
            self.fail(n, "an assignment inside an expression (`a = b = e`) is outside the polyhedral "
                      "model; write one statement per assignment", f"assignment '{_text(n)}'")
        self.fail(n, "expression is outside the polyhedral model", f"expression '{_text(n)}'")


# --------------------------------------------------------------------------- helpers

def _ids(node):
    if isinstance(node, c_ast.ID):
        yield node
    for _, ch in node.children():
        yield from _ids(ch)


def _int(s):
    return int(s.rstrip("uUlL"), 0)


def _const(node):
    """The value of an integer constant expression (`200 + 0`: PolyBench pads every extent
    with POLYBENCH_PADDING_FACTOR), else None."""
    if isinstance(node, c_ast.Constant):
        return _int(node.value) if node.type.endswith("int") else None
    if isinstance(node, c_ast.Cast):
        return _const(node.expr)
    if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+"):
        v = _const(node.expr)
        return None if v is None else (-v if node.op == "-" else v)
    if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-", "*", "/"):
        a, b = _const(node.left), _const(node.right)
        if a is None or b is None or (node.op == "/" and (b == 0 or a < 0 or b < 0)):
            return None
        return {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b else None}[node.op]
    return None


def _step(nxt, v):
    if isinstance(nxt, c_ast.UnaryOp) and isinstance(nxt.expr, c_ast.ID) and nxt.expr.name == v:
        return {"p++": 1, "++": 1, "p--": -1, "--": -1}.get(nxt.op)
    if isinstance(nxt, c_ast.Assignment) and isinstance(nxt.lvalue, c_ast.ID) and nxt.lvalue.name == v:
        c = _const(nxt.rvalue) if nxt.op in ("+=", "-=") else None
        if c is not None:
            return c if nxt.op == "+=" else -c
        r = nxt.rvalue
        if nxt.op == "=" and isinstance(r, c_ast.BinaryOp) and r.op in ("+", "-") \
                and isinstance(r.left, c_ast.ID) and r.left.name == v and _const(r.right) is not None:
            return _const(r.right) * (1 if r.op == "+" else -1)
    return None


def _isl_lin(f, iters):
    """A linear form in isl syntax (iterators i_, parameters p_)."""
    parts = []
    for k, v in f.items():
        if k == "":
            continue
        name = ("i_" if k in iters else "p_") + k
        parts.append(f"{v}*{name}")
    parts.append(str(f.get("", 0)))
    return "(" + " + ".join(parts) + ")"
