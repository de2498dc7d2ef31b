"""isl AST nodes and expressions as C (the SCoP printer's loop nests and bounds)."""
from __future__ import annotations

import re

import islpy as isl
from pycparser import c_ast, c_generator

_CGEN = c_generator.CGenerator()
ET, OT, NT = isl.ast_expr_type, isl.ast_expr_op_type, isl.ast_node_type


def sanitize(s):
    s = re.sub(r"[^A-Za-z0-9_]", "_", s)
    return "_" + s if not s or s[0].isdigit() else s


class CWriter:
    """isl AST nodes and expressions as C; user statements through `user(name, args)`."""

    def __init__(self, names, user, iter_prefix="swk_c"):
        self.names, self.user, self.prefix = names, user, iter_prefix

    def ident(self, name):
        if name in self.names:
            return self.names[name]
        if name.startswith("p_"):
            return name[2:]
        if re.fullmatch(r"c\d+", name):
            return self.prefix + name[1:]
        return name

    def expr(self, e):
        t = e.get_type()
        if t == ET.int:
            v = e.get_val().to_python()
            return str(v) if v >= 0 else f"({v})"
        if t == ET.id:
            return self.ident(e.get_id().get_name())
        op = e.get_op_type()
        a = [self.expr(e.get_op_arg(i)) for i in range(e.get_op_n_arg())]
        if op in (OT.min, OT.max):
            f = "swk_min" if op == OT.min else "swk_max"
            out = a[0]
            for x in a[1:]:
                out = f"{f}({out}, {x})"
            return out
        if op == OT.minus:
            return f"(-{a[0]})"
        if op == OT.fdiv_q:
            return f"swk_floord({a[0]}, {a[1]})"
        if op in (OT.cond, OT.select):
            return f"({a[0]} ? {a[1]} : {a[2]})"
        if op == OT.call:
            return f"{a[0]}({', '.join(a[1:])})"
        sym = {OT.and_: "&&", OT.and_then: "&&", OT.or_: "||", OT.or_else: "||",
               OT.add: "+", OT.sub: "-", OT.mul: "*", OT.div: "/", OT.pdiv_q: "/",
               OT.pdiv_r: "%", OT.zdiv_r: "%", OT.eq: "==", OT.le: "<=", OT.lt: "<",
               OT.ge: ">=", OT.gt: ">"}[op]
        return f"({a[0]} {sym} {a[1]})"

    def node(self, n, ind, out):
        t = n.get_type()
        pad = "    " * ind
        if t == NT.block:
            ch = n.block_get_children()
            for i in range(ch.n_ast_node()):
                self.node(ch.get_at(i), ind, out)
        elif t == NT.for_:
            it = self.expr(n.for_get_iterator())
            out.append(f"{pad}for (long {it} = {self.expr(n.for_get_init())}; "
                       f"{self.expr(n.for_get_cond())}; {it} += {self.expr(n.for_get_inc())}) {{")
            self.node(n.for_get_body(), ind + 1, out)
            out.append(pad + "}")
        elif t == NT.if_:
            out.append(f"{pad}if {paren(self.expr(n.if_get_cond()))} {{")
            self.node(n.if_get_then_node(), ind + 1, out)
            if n.if_has_else_node():
                out.append(pad + "} else {")
                self.node(n.if_get_else_node(), ind + 1, out)
            out.append(pad + "}")
        elif t == NT.user:
            e = n.user_get_expr()
            name = e.get_op_arg(0).get_id().get_name()
            args = [self.expr(e.get_op_arg(i)) for i in range(1, e.get_op_n_arg())]
            out.extend(pad + line for line in self.user(name, args))
        elif t == NT.mark:
            self.node(n.mark_get_node(), ind, out)
        else:
            raise AssertionError(f"unexpected isl AST node {t}")


def paren(s):
    return s if s.startswith("(") and s.endswith(")") and _balanced(s[1:-1]) else f"({s})"


def _balanced(s):
    d = 0
    for c in s:
        d += c == "("
        d -= c == ")"
        if d < 0:
            return False
    return d == 0


def build_ast(sched, context):
    """isl's AST for a flat schedule, after dropping the parameters it does not use (every
    extra parameter makes isl's bound computations markedly slower)."""
    sched = sched.intersect_params(context).drop_unused_params()
    used = {sched.get_space().get_dim_name(isl.dim_type.param, i)
            for i in range(sched.get_space().dim(isl.dim_type.param))}
    ctx = context
    for i in reversed(range(ctx.dim(isl.dim_type.param))):
        if ctx.get_dim_name(isl.dim_type.param, i) not in used:
            ctx = ctx.project_out(isl.dim_type.param, i, 1)
    return isl.AstBuild.from_context(ctx).node_from_schedule_map(sched)


def pw_expr(pa, context, names, build=None):
    """C text of a PwAff over parameters (copy bounds)."""
    b = build or isl.AstBuild.from_context(context)
    return CWriter(names, None).expr(b.expr_from_pw_aff(pa.gist_params(context)))


def set_expr(s, context, names, build=None):
    b = build or isl.AstBuild.from_context(context)
    return CWriter(names, None).expr(b.expr_from_set(s.gist_params(context)))


# ------------------------------------------------------------- statement bodies

def body_c(stmt, ref_c):
    """C text of a statement; ref_c(k, subscripts C text) prints its k-th array reference.
    Visits references in the frontend's order: left-hand side, then the value left to right."""
    its = set(stmt.iters)
    count = [0]

    def ref(n):
        subs = []
        base = n
        while isinstance(base, c_ast.ArrayRef):
            subs.append(ex(base.subscript))
            base = base.name
        k = count[0]
        count[0] += 1
        return ref_c(k, list(reversed(subs)))

    def ex(n):
        if isinstance(n, c_ast.Constant):
            return n.value
        if isinstance(n, c_ast.ID):
            return f"({n.name})" if n.name in its else n.name
        if isinstance(n, c_ast.ArrayRef):
            return ref(n)
        if isinstance(n, c_ast.BinaryOp):
            left = ex(n.left)
            return f"({left} {n.op} {ex(n.right)})"
        if isinstance(n, c_ast.UnaryOp):
            return f"({n.op}{ex(n.expr)})"
        if isinstance(n, c_ast.TernaryOp):
            c = ex(n.cond)
            a = ex(n.iftrue)
            return f"({c} ? {a} : {ex(n.iffalse)})"
        if isinstance(n, c_ast.Cast):
            return f"(({_CGEN.visit(n.to_type)}) {ex(n.expr)})"
        if isinstance(n, c_ast.FuncCall):
            args = [ex(a) for a in (n.args.exprs if n.args else [])]
            return f"{_CGEN.visit(n.name)}({', '.join(args)})"
        raise AssertionError(type(n).__name__)

    node = stmt.node
    lhs = ref(node.lvalue)
    return f"({lhs} {node.op} {ex(node.rvalue)})"


def stmt_macro(name, stmt, text):
    return f"#define {name}({', '.join(stmt.iters)}) {text}"


# ------------------------------------------------------------------ the printer
