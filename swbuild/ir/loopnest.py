"""Loop-nest IR: a kernel is one TVM-style compute stage.

    out[axes + offset] = epilogue(combine_{reduce_axes}(body))

Expressions are frozen dataclasses; index expressions are affine in the axes (plus
floor-division / modulo by constants, which footprint analysis treats as monotone). A
`Load` may carry a pad value: out-of-bounds indices read it (convolution halos, pooling),
which is how one kernel describes padding without a padded copy of the tensor.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace


class Expr:
    def __add__(self, o): return Bin("+", self, wrap(o))
    def __radd__(self, o): return Bin("+", wrap(o), self)
    def __sub__(self, o): return Bin("-", self, wrap(o))
    def __rsub__(self, o): return Bin("-", wrap(o), self)
    def __mul__(self, o): return Bin("*", self, wrap(o))
    def __rmul__(self, o): return Bin("*", wrap(o), self)
    def __truediv__(self, o): return Bin("/", self, wrap(o))
    def __floordiv__(self, o): return Bin("//", self, wrap(o))
    def __mod__(self, o): return Bin("%", self, wrap(o))
    def __neg__(self): return Un("neg", self)


@dataclass(frozen=True)
class Var(Expr):
    name: str

    def __str__(self): return self.name


@dataclass(frozen=True)
class Const(Expr):
    value: float
    dtype: str = "float32"   # float32 for data, int for indices

    def __str__(self):
        return str(int(self.value)) if self.dtype == "int" else repr(float(self.value))


@dataclass(frozen=True)
class Load(Expr):
    buf: str
    index: tuple
    pad: float | None = None   # value read outside the tensor; None: always in bounds

    def __str__(self):
        s = f"{self.buf}[{', '.join(map(str, self.index))}]"
        return s if self.pad is None else f"{s}|pad {self.pad}"


@dataclass(frozen=True)
class Bin(Expr):
    op: str     # + - * / // % min max pow  < <= > >= == != and or
    a: Expr
    b: Expr

    def __str__(self):
        if self.op in ("min", "max", "pow"):
            return f"{self.op}({self.a}, {self.b})"
        return f"({self.a} {self.op} {self.b})"


@dataclass(frozen=True)
class Un(Expr):
    op: str     # neg exp log sqrt tanh erf abs floor ceil sigmoid relu not round
    a: Expr

    def __str__(self): return f"{self.op}({self.a})"


@dataclass(frozen=True)
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr

    def __str__(self): return f"({self.cond} ? {self.a} : {self.b})"


@dataclass(frozen=True)
class Acc(Expr):
    """The reduced value, inside an epilogue."""

    def __str__(self): return "acc"


def wrap(x):
    if isinstance(x, Expr):
        return x
    return Const(x, "int" if isinstance(x, int) else "float32")


def iconst(v):
    return Const(int(v), "int")


@dataclass(frozen=True)
class Axis:
    name: str
    extent: int

    @property
    def var(self):
        return Var(self.name)


@dataclass(frozen=True)
class Buffer:
    """A view of a tensor: the kernel indexes `shape`, memory is the tensor's, row-major."""
    name: str        # C-safe buffer name inside the kernel (a para struct field)
    tensor: str      # graph tensor it views
    shape: tuple
    dtype: str = "float32"


@dataclass(frozen=True, eq=False)
class Stage:
    """Buffer stitching: the consumer's loads of `buf` read its producer recomputed in LDM
    from boxes of the producer's inputs, not a tensor in main memory
    (backends/sunway/passes/stitch_producers.py)."""
    buf: str              # the buffer name the consumer's loads use (no tensor behind it)
    shape: tuple          # their view shape: the producer's output
    producer: "Kernel"
    inputs: tuple         # (producer's buffer, consumer's buffer of the same view): the activation first, then constants

    @property
    def window(self) -> int:
        return self.producer.reduce_points

    @property
    def key(self) -> str:
        """What the stage computes, names of kernels aside (repeated layers share tile searches)."""
        p = self.producer
        return (f"{self.buf}{list(self.shape)} {[(a.name, a.extent) for a in p.axes]} "
                f"{[(a.name, a.extent) for a in p.reduce_axes]} {p.combine} {p.init} {p.body} {p.epilogue} "
                f"{list(self.inputs)} {sorted((n, tuple(b.shape)) for n, b in p.buffers.items())}")

    def __str__(self):
        p = self.producer
        how = f"{p.combine}(init {p.init}) over {', '.join(f'{a.name}<{a.extent}' for a in p.reduce_axes)} of " \
            if p.combine else ""
        ins = ", ".join(f"{a} is {b}" for a, b in self.inputs)
        return f"stage {self.buf}{list(self.shape)} = {p.op} {p.name}: {how}{p.body} -> {p.epilogue} ({ins})"


# element bytes of the dtypes a compute kernel's buffers may have (float16, bool and the small
# integers never reach one: they are float32 inside the program, optimizer/halves.py, dtypes.py,
# exact_ints.py)
ITEMSIZE = {"float32": 4, "float64": 8, "int32": 4, "int64": 8}


@dataclass
class Kernel:
    name: str
    op: str                    # ONNX op type of the anchor node (reports use it)
    node: str                  # anchor node name (for messages)
    out: str                   # output buffer name
    axes: tuple                # spatial Axis per output-view dim
    body: Expr
    buffers: dict              # name -> Buffer
    reduce_axes: tuple = ()
    combine: str | None = None  # None | "sum" | "max" | "min" | "prod"
    init: float = 0.0
    epilogue: Expr = field(default_factory=Acc)
    out_offset: tuple = ()     # per axis, where the output view starts (Concat writes slices)
    fused: tuple = ()          # names of nodes fused into this kernel
    schedule: object = None    # set by the optimizer (tiling, DMA plan)
    kind: str = "compute"      # "compute", or a special kernel the backend prints by itself ("gather")
    extra: dict = field(default_factory=dict)   # what a special kernel needs (buffer roles)
    loop: int | None = None    # the static loop (program.loops) whose body this kernel is part of
    stages: tuple = ()         # Stage: producers recomputed in LDM, read through their `buf`

    def __post_init__(self):
        if not self.out_offset:
            self.out_offset = (0,) * len(self.axes)

    @property
    def points(self) -> int:
        return math.prod(a.extent for a in self.axes)

    @property
    def elem_bytes(self) -> int:
        """Bytes of one element of the kernel's accumulator and output tile: its output's
        dtype (8 for float64 / int64), 4 for float32 and what is held as float32."""
        return self.buf_bytes(self.out)

    def buf_bytes(self, name) -> int:
        """Bytes of one element of buffer `name` in local memory and in its DMA."""
        b = self.buffers.get(name)
        return ITEMSIZE.get(b.dtype, 4) if b is not None and self.kind == "compute" else 4

    @property
    def out_dtype(self) -> str:
        b = self.buffers.get(self.out)
        return b.dtype if b is not None else "float32"

    @property
    def reduce_points(self) -> int:
        return math.prod(a.extent for a in self.reduce_axes)

    def flops(self) -> int:
        """Arithmetic operations executed (a multiply-add counts 2), as swTVM reports."""
        return (self.points * (self.reduce_points * (count_ops(self.body) + (1 if self.combine else 0))
                               + count_ops(self.epilogue))
                + sum(st.producer.flops() for st in self.stages))

    def loads(self, where="body"):
        return list(iter_loads(self.body if where == "body" else self.epilogue))

    def __str__(self):
        out = self.buffers[self.out]
        idx = ", ".join(f"{a.name}+{o}" if o else a.name for a, o in zip(self.axes, self.out_offset))
        dom = ", ".join(f"{a.name}<{a.extent}" for a in self.axes)
        lines = [f"kernel {self.name} ({self.op}{', fused ' + '+'.join(self.fused) if self.fused else ''}) over {dom}:"]
        if self.combine:
            red = ", ".join(f"{a.name}<{a.extent}" for a in self.reduce_axes)
            lines.append(f"  acc = {self.combine}(init {self.init}) over {red} of {self.body}")
            lines.append(f"  {out.name}[{idx}] = {self.epilogue}")
        else:
            lines.append(f"  {out.name}[{idx}] = {substitute_acc(self.epilogue, self.body)}")
        for b in self.buffers.values():
            lines.append(f"  buffer {b.name}: {b.dtype}{list(b.shape)} view of %{b.tensor}")
        lines += [f"  {st}" for st in self.stages]
        if self.schedule is not None:
            lines.append("  " + str(self.schedule).replace("\n", "\n  "))
        return "\n".join(lines)


def children(e):
    if isinstance(e, Load):
        return e.index
    if isinstance(e, Bin):
        return (e.a, e.b)
    if isinstance(e, Un):
        return (e.a,)
    if isinstance(e, Select):
        return (e.cond, e.a, e.b)
    return ()


def iter_loads(e):
    if isinstance(e, Load):
        yield e
    for c in children(e):
        yield from iter_loads(c)


def data_loads(e):
    """The loads whose values enter the arithmetic of `e` (not those inside an index)."""
    if isinstance(e, Load):
        yield e
        return
    for c in children(e):
        yield from data_loads(c)


def count_ops(e) -> int:
    """Arithmetic on data (not index arithmetic, not loads)."""
    if isinstance(e, Load):
        return 0
    n = sum(count_ops(c) for c in children(e))
    if isinstance(e, (Bin, Un)):
        n += 1
    elif isinstance(e, Select):
        n += 1
    return n


def transform(e, fn):
    """Rebuild `e`, replacing each node for which fn(node) returns an expression (fn
    returns None to keep the node and look inside it). Every rewrite of expressions goes
    through here."""
    r = fn(e)
    if r is not None:
        return r
    if isinstance(e, Load):
        return replace(e, index=tuple(transform(i, fn) for i in e.index))
    if isinstance(e, Bin):
        return Bin(e.op, transform(e.a, fn), transform(e.b, fn))
    if isinstance(e, Un):
        return Un(e.op, transform(e.a, fn))
    if isinstance(e, Select):
        return Select(*(transform(x, fn) for x in (e.cond, e.a, e.b)))
    return e


def substitute_acc(e, value):
    return transform(e, lambda x: value if isinstance(x, Acc) else None)


def affine(e):
    """{var: coef, None: const} if `e` is affine in Vars, else None."""
    if isinstance(e, Var):
        return {e.name: 1, None: 0}
    if isinstance(e, Const):
        return {None: int(e.value)} if e.dtype == "int" else None
    if isinstance(e, Bin) and e.op in "+-":
        a, b = affine(e.a), affine(e.b)
        if a is None or b is None:
            return None
        s = 1 if e.op == "+" else -1
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + s * v
        return out
    if isinstance(e, Bin) and e.op == "*":
        a, b = affine(e.a), affine(e.b)
        if a is None or b is None:
            return None
        if set(a) == {None}:
            a, b = b, a
        if set(b) != {None}:
            return None
        return {k: v * b[None] for k, v in a.items()}
    return None


def index_range(e, ranges):
    """Inclusive integer bounds of an index expression given {var: (lo, hi)}."""
    if isinstance(e, Var):
        return ranges[e.name]
    if isinstance(e, Const):
        v = int(e.value)
        return v, v
    if isinstance(e, Bin):
        alo, ahi = index_range(e.a, ranges)
        blo, bhi = index_range(e.b, ranges)
        if e.op == "+":
            return alo + blo, ahi + bhi
        if e.op == "-":
            return alo - bhi, ahi - blo
        if e.op == "*":
            c = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
            return min(c), max(c)
        if e.op == "//" and blo == bhi and blo > 0:
            return alo // blo, ahi // blo
        if e.op == "%" and blo == bhi and blo > 0:
            if alo // blo == ahi // blo:
                return alo % blo, ahi % blo
            return 0, blo - 1
        if e.op in ("min", "max"):
            f = min if e.op == "min" else max
            return f(alo, blo), f(ahi, bhi)
    raise ValueError(f"index expression {e} is not analysable")
