"""Device-level IR of the DianNao backend: what one BANG C kernel does, before and after
loop partitioning and instruction mapping.

A kernel body is a tree of `For` loops (the two outermost are the cluster and core ids,
treated as loops so that Algorithm 2 can partition them), `Barrier`s, `ScalarLoad`s and
`Stmt`s. A `Stmt` is one loop-nest statement over on-chip or off-chip buffers,

    for loops (and reduce loops): dst[index] = expr        (if all guards hold)

with the tile-local loops inside the statement and every boundary condition (tile tails,
convolution halos, channel padding, tasks without work) kept as a guard `e >= 0` instead
of a clamped loop bound. Partitioning (partition.py) splits loops where guards change
value; what is left is resolved by extra computation (preprocess.py); the mapper
(mapper.py) then turns each guard-free statement into one BANG intrinsic inside loops.

Index and size expressions reuse the loop-nest IR (`Var`, `Const`, `Bin`); accesses are
`Load(buffer, (flat element offset,))`, or `Load(buffer, (co, k))` for a WRAM buffer in
the convolution bank layout.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ...ir.loopnest import Bin, Const, Load, Select, Un, Var, affine, children, iconst

# ---- expressions ---------------------------------------------------------------------


def E(x):
    return x if not isinstance(x, int) else iconst(x)


def from_aff(aff):
    """Canonical expression of {var: coef, None: const}: vars sorted, no `* 1`, no `+ 0`."""
    pos, negs = [], []
    for v in sorted(k for k in aff if k is not None):
        c = aff[v]
        if c:
            t = Var(v) if abs(c) == 1 else Bin("*", Var(v), iconst(abs(c)))
            (pos if c > 0 else negs).append(t)
    c = aff.get(None, 0)
    e = None
    for t in pos:
        e = t if e is None else Bin("+", e, t)
    if e is None:
        e, c = iconst(c), 0
    elif c > 0:
        e, c = Bin("+", e, iconst(c)), 0
    for t in negs:
        e = Bin("-", e, t)
    if c < 0:
        e = Bin("-", e, iconst(-c))
    if isinstance(e, Bin) and e.op == "-" and isinstance(e.a, Const) and e.a.value == 0 and len(negs) == 1 and not pos:
        e = Bin("*", negs[0], iconst(-1)) if not isinstance(negs[0], Bin) else Bin("-", iconst(0), negs[0])
    return e


def lin(e):
    """{var: coef, None: const} of an integer affine expression, else None."""
    a = affine(E(e))
    if a is None:
        return None
    a.setdefault(None, 0)
    return {k: v for k, v in a.items() if v != 0 or k is None}


def simp(e):
    """Fold constants and normalise affine parts (deterministic text for the printer)."""
    e = E(e)
    a = lin(e)
    if a is not None:
        return from_aff(a)
    if isinstance(e, Bin):
        x, y = simp(e.a), simp(e.b)
        cx, cy = const(x) if isinstance(x, Const) else None, const(y) if isinstance(y, Const) else None
        if e.op in ("+", "-") and cy == 0:
            return x
        if e.op == "+" and cx == 0:
            return y
        if e.op == "*" and (cy == 1 or cx == 1):
            return x if cy == 1 else y
        if isinstance(x, Const) and isinstance(y, Const) and x.dtype == y.dtype == "int":
            u, v = int(x.value), int(y.value)
            f = {"min": min, "max": max, "//": lambda p, q: p // q, "%": lambda p, q: p % q,
                 "+": lambda p, q: p + q, "-": lambda p, q: p - q, "*": lambda p, q: p * q}.get(e.op)
            if f is not None:
                return iconst(f(u, v))
        return Bin(e.op, x, y)
    if isinstance(e, Un):
        return Un(e.op, simp(e.a))
    if isinstance(e, Select):
        return Select(simp(e.cond), simp(e.a), simp(e.b))
    if isinstance(e, Load):
        return replace(e, index=tuple(simp(i) for i in e.index))
    return e


def const(e):
    """int value of a constant expression, else None."""
    e = simp(e)
    if isinstance(e, Const) and e.dtype == "int":
        return int(e.value)
    return None


def subst(e, env):
    """Replace Vars by expressions (env: name -> Expr or int)."""
    if isinstance(e, int):
        return e
    if isinstance(e, Var):
        return E(env[e.name]) if e.name in env else e
    if isinstance(e, Bin):
        return Bin(e.op, subst(e.a, env), subst(e.b, env))
    if isinstance(e, Un):
        return Un(e.op, subst(e.a, env))
    if isinstance(e, Select):
        return Select(subst(e.cond, env), subst(e.a, env), subst(e.b, env))
    if isinstance(e, Load):
        return replace(e, index=tuple(subst(i, env) for i in e.index))
    return e


def free_vars(e, out=None):
    out = set() if out is None else out
    if isinstance(e, Var):
        out.add(e.name)
    for c in children(e):
        free_vars(c, out)
    return out


def loop_ranges(loop, ranges):
    """{var: (lo, hi)} inside `loop`: the outer ranges plus the loop variable's, when its
    bounds are analysable."""
    r = dict(ranges)
    lo, hi = bounds(loop.lo, r), bounds(loop.hi, r)
    if lo and hi:
        r[loop.var] = (lo[0], hi[1] - 1)
    return r


def bounds(e, ranges):
    """Inclusive integer bounds of an integer expression over {var: (lo, hi)}; None if a
    variable has no range or the expression is not analysable."""
    e = E(e)
    if isinstance(e, Var):
        return ranges.get(e.name)
    if isinstance(e, Const):
        return (int(e.value), int(e.value)) if e.dtype == "int" else None
    if isinstance(e, Bin):
        a, b = bounds(e.a, ranges), bounds(e.b, ranges)
        if a is None or b is None:
            return None
        (alo, ahi), (blo, bhi) = a, b
        if e.op == "+":
            return alo + blo, ahi + bhi
        if e.op == "-":
            return alo - bhi, ahi - blo
        if e.op == "*":
            c = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
            return min(c), max(c)
        if e.op == "min":
            return min(alo, blo), min(ahi, bhi)
        if e.op == "max":
            return max(alo, blo), max(ahi, bhi)
        if e.op == "//" and blo == bhi and blo > 0:
            return alo // blo, ahi // blo
        if e.op == "%" and blo == bhi and blo > 0:
            return (alo % blo, ahi % blo) if alo // blo == ahi // blo else (0, blo - 1)
    return None


def neg(c):
    """not (c >= 0)  ==  -c - 1 >= 0."""
    return simp(Bin("-", iconst(-1), c))


def pow2_floor(n):
    return 1 << (max(1, int(n)).bit_length() - 1)


# ---- buffers, statements, tree -------------------------------------------------------


@dataclass
class DBuf:
    name: str
    space: str               # GDRAM | NRAM | WRAM | SRAM
    elems: int
    offset: int = 0          # on chip: byte offset in the kernel's arena of that space
    layout: tuple = ()       # ("conv_bank", Co, K): element (co, k) at slot(co) * K + k
    tensor: str = ""         # GDRAM: the tensor (messages only)
    ctype: str = "float"     # element type; on chip an int8_t/int16_t view feeds __bang_conv's fixed point
    elem_bytes: int = 4


@dataclass
class SLoop:
    var: str
    lo: object               # Expr
    ext: object              # Expr (a constant unless bounds were folded at run time)


@dataclass
class Stmt:
    kind: str                # "copy" | "fill" | "compute"
    dst: Load
    expr: object
    loops: list
    red: list = field(default_factory=list)
    combine: str | None = None   # "sum" | "max" | "avg" (sum / window size)
    guard: tuple = ()        # all of: e >= 0
    guard_any: tuple = ()    # one of: e >= 0 (fills of halo and padding regions)
    over: bool = False       # lanes outside the guard are don't-care: may be computed anyway
    sid: str = ""            # source statement (tensorized-fraction bookkeeping)
    mapped: object = None    # mapper.Mapped once selected
    note: str = ""
    asynchronous: bool = False   # a copy issued with __memcpy_async (pingpong.py)
    dst_cluster: object = None   # SRAM2SRAM into this cluster's SRAM (Expr; schedule/weight_broadcast.py)
    whole_guard: tuple = ()      # a halo fill's guards its whole-tile form keeps (what lies outside is don't-care)

    def vars(self):
        return [lp.var for lp in self.loops] + [lp.var for lp in self.red]


@dataclass
class For:
    var: str
    lo: object
    hi: object
    body: list
    task: str = ""           # "cluster" | "core": this loop is the task id


@dataclass
class Barrier:
    kind: str = "cluster"    # cluster | all


@dataclass
class Sync:
    """Queue barrier of one core (pingpong.py, schedule/conv.py's weight prefetch): io = __sync_io(),
    move = __sync_move() (on-chip copies), compute = __sync_compute(), all = __sync_io_move_compute()."""
    kind: str


@dataclass
class ScalarLoad:
    name: str
    src: Load
    guard: tuple = ()


@dataclass
class When:
    """A guard left to run time (no partitioning): if (all conds) body."""
    conds: tuple
    body: list


@dataclass
class DevKernel:
    name: str
    op: str
    node: str
    fused: tuple
    cls: str                 # elementwise | conv | pool | gemm | scalar
    params: list             # [(C name, root tensor)] GDRAM pointer arguments, in order
    bufs: dict
    body: list
    stmts: dict              # sid -> kind
    flops: int = 0
    kernel: object = None    # the loop-nest Kernel (scalar class prints from it)
    gview: dict = field(default_factory=dict)   # scalar class: buffer -> (param, strides, shape)
    notes: list = field(default_factory=list)
    info: dict = field(default_factory=dict)

    def buf(self, name):
        return self.bufs[name]


def scoped(body):
    """A body inlined into its parent keeps its own C scope when it declares scalars."""
    return [When((), body)] if any(isinstance(n, ScalarLoad) for n in body) else body


def walk(nodes):
    """Every node of a tree, depth first."""
    for n in nodes:
        yield n
        if isinstance(n, (For, When)):
            yield from walk(n.body)


def stmts(nodes):
    return [n for n in walk(nodes) if isinstance(n, Stmt)]


def subst_node(n, env):
    """Deep copy of a node with Vars replaced."""
    if isinstance(n, For):
        return For(n.var, simp(subst(n.lo, env)), simp(subst(n.hi, env)), [subst_node(c, env) for c in n.body], n.task)
    if isinstance(n, When):
        return When(tuple(simp(subst(c, env)) for c in n.conds), [subst_node(c, env) for c in n.body])
    if isinstance(n, ScalarLoad):
        return ScalarLoad(n.name, simp(subst(n.src, env)), tuple(simp(subst(c, env)) for c in n.guard))
    if isinstance(n, Stmt):
        return replace(n, dst=simp(subst(n.dst, env)), expr=simp(subst(n.expr, env)),
                       loops=[SLoop(lp.var, simp(subst(lp.lo, env)), simp(subst(lp.ext, env))) for lp in n.loops],
                       red=[SLoop(lp.var, simp(subst(lp.lo, env)), simp(subst(lp.ext, env))) for lp in n.red],
                       guard=tuple(simp(subst(c, env)) for c in n.guard),
                       guard_any=tuple(simp(subst(c, env)) for c in n.guard_any))
    return n


def stmt_ranges(s, ranges):
    """ranges extended with the statement's own loops (constant bounds only)."""
    r = dict(ranges)
    for lp in s.loops + s.red:
        lo, ext = bounds(lp.lo, r), bounds(lp.ext, r)
        if lo is not None and ext is not None:
            r[lp.var] = (lo[0], lo[1] + max(ext[1], 1) - 1)
    return r


def prod(xs):
    return math.prod(xs)
