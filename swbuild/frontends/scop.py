"""C SCoP frontend: the `#pragma scop` regions of an ordinary C file as a polyhedral model.

Extraction only (PPCG's first step): preprocess with the target's own preprocessor, parse
with pycparser, find the regions, and describe every statement by an iteration domain,
access relations and a 2d+1 source schedule (isl syntax). Dependences, mapping, tiling and
copies live in swbuild.optimizer.polyhedral; printing in swbuild.backends.sunway.scop_printer.

Names inside isl strings carry a prefix (`i_` iterators, `p_` parameters, `a_` arrays) so a
C name can never collide with an isl keyword such as `and`, `min` or `mod`.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field

import pycparser
from pycparser import c_ast, c_generator

from ..errors import ToolchainError, UnsupportedError

# gcc -E keeps GNU syntax that pycparser cannot read; these turn it into plain C99.
GNU_DEFINES = ["__attribute__(x)=", "__extension__=", "__restrict=", "__restrict__=",
               "__asm__(x)=", "__asm(x)=", "__inline=inline", "__inline__=inline",
               "__volatile__=volatile", "__const=const", "__signed__=signed",
               "_Noreturn=", "__thread="]
# gcc builtin type names that glibc headers use in typedefs.
_PRELUDE = "typedef int __builtin_va_list;" + "".join(f"typedef {t} {n};" for t, n in [
    ("double", "_Float128"), ("double", "_Float64"), ("float", "_Float32"),
    ("double", "_Float64x"), ("double", "_Float32x"), ("float", "_Float16")]) + "\n"

# Calls a statement may make: pure, and available on the CPEs (libm_slave).
MATH_FUNCS = frozenset("""sqrt sqrtf exp expf exp2 log logf log2 log10 pow powf fabs fabsf
    sin sinf cos cosf tan tanf asin acos atan atan2 sinh cosh tanh floor floorf ceil ceilf
    fmin fminf fmax fmaxf fmod fmodf round trunc cbrt hypot erf abs labs""".split())

ELEM_SIZES = {"double": 8, "float": 4, "int": 4, "unsigned int": 4, "unsigned": 4,
              "long": 8, "long int": 8, "unsigned long": 8, "long long": 8,
              "long long int": 8, "unsigned long long": 8, "short": 2, "unsigned short": 2,
              "char": 1, "signed char": 1, "unsigned char": 1, "long double": 16,
              "int64_t": 8, "int32_t": 4, "uint64_t": 8, "uint32_t": 4}
INT_TYPES = {t for t in ELEM_SIZES if t not in ("double", "float", "long double")} | {"size_t", "ssize_t"}

_CGEN = c_generator.CGenerator()


class ScopError(UnsupportedError):
    """A region outside the polyhedral model; names file, line and construct."""

    def __init__(self, path, line, construct, why):
        self.path, self.line, self.construct = path, line, construct
        super().__init__(f"{path}:{line}: {construct}: {why}")


# ---------------------------------------------------------------------------- model

@dataclass
class Array:
    name: str
    ctype: str                 # element type, e.g. "double"
    esize: int                 # bytes per element
    const_dims: list           # per dimension: int extent, or None (symbolic / unknown)


@dataclass
class Access:
    array: str
    index: list                # one linear form per subscript: {name: coeff, "": const}
    write: bool
    read: bool


@dataclass
class Stmt:
    name: str                  # S0, S1, ... in textual order
    line: int
    iters: list                # C names of the enclosing loop iterators, outer first
    domain: str                # isl set text
    sched: list                # 2d+1 source schedule: ints and ("it", name, sign)
    node: c_ast.Node           # the assignment
    refs: list                 # Access per array reference, in the order _walk_refs visits them


@dataclass
class Region:
    path: str
    index: int                 # 0-based among the file's regions
    func: str
    start_line: int            # line of `#pragma scop` in the original file
    end_line: int              # line of `#pragma endscop`
    params: list = field(default_factory=list)      # integer symbols in bounds/subscripts
    scalars: dict = field(default_factory=dict)     # name -> C type of read-only values
    arrays: dict = field(default_factory=dict)      # name -> Array
    stmts: list = field(default_factory=list)
    error: ScopError = None    # set when the region is outside the model
    outer_iters: set = field(default_factory=set)   # iterators declared outside the region

    @property
    def isl_params(self):
        return "[" + ", ".join("p_" + p for p in self.params) + "]"


# ---------------------------------------------------------------------- preprocess

def preprocess(path, tc=None, includes=(), defines=()):
    """The file through the target's C preprocessor (gcc -E for emulated targets)."""
    argv = (tc.argv("host_cc") if tc is not None else ["gcc"]) + ["-E"]
    argv += [f"-D{d}" for d in GNU_DEFINES]
    argv += [f"-I{i}" for i in includes] + [f"-D{d}" for d in defines] + [str(path)]
    try:
        p = subprocess.run(argv, capture_output=True, text=True)
    except FileNotFoundError:
        raise ToolchainError(f"preprocessor '{argv[0]}' not found") from None
    if p.returncode != 0:
        raise ToolchainError(f"preprocessing {path} failed:\n{p.stderr.strip()}")
    return p.stdout


_MARKER = re.compile(r'^#\s*(\d+)\s+"((?:[^"\\]|\\.)*)"((?:\s+\d+)*)\s*$')
_IDENT = re.compile(r"[A-Za-z_]\w*")
_PUNCT = re.compile(r"[;{}()\[\]]")
_KEYWORDS = frozenset("""typedef struct union enum const volatile unsigned signed int long short char
    float double void extern static inline restrict _Bool""".split())


def reduce_system_headers(text):
    """Drop what system headers contribute except the typedefs the user's code needs.

    pycparser only needs typedef names to parse the user's code; libc's thousands of
    prototypes cost most of the parse time (the budget is 0.3 s per kernel) and carry GNU
    syntax. Line markers stay, so coordinates still name the original file and line.
    """
    out, sysparts, in_sys, system_files = [], [], False, set()
    for line in text.split("\n"):
        if line.startswith("#"):
            m = _MARKER.match(line)
            if m:
                # a marker without flags can re-enter a system header (macro expansions)
                if "3" in m.group(3).split():
                    system_files.add(m.group(2))
                in_sys = m.group(2) in system_files
                if in_sys:
                    continue
            elif in_sys:
                continue
            out.append(line)
        elif in_sys:
            sysparts.append(line)
        else:
            out.append(line)
    chunks = _typedef_chunks("\n".join(sysparts))
    # keep the typedefs the user's code names, and those they are built from
    need = set(_IDENT.findall("\n".join(l for l in out if not l.startswith("#"))))
    keep = []
    for name, chunk in reversed(chunks):
        if name is None or name in need:
            keep.append(chunk)
            need.update(_IDENT.findall(chunk))
    keep.reverse()
    # the typedefs go first, before the first line marker of the main file
    return "\n".join(keep + out)


def _typedef_chunks(text):
    """Top-level `typedef ...;` declarations of system-header text as (name, one-line text)."""
    chunks, depth, start = [], 0, 0
    for m in _PUNCT.finditer(text):
        c, i = m.group(), m.start()
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
            # end of a function body at file scope: `... ) { ... }` has no `;`
            if c == "}" and depth == 0 and not re.match(r"\s*(typedef|struct|union|enum)\b", text[start:i]):
                start = i + 1
        elif depth == 0:                                   # ';' at file scope
            chunk = text[start:i + 1].strip()
            if chunk.startswith("typedef") and "typeof" not in chunk:
                chunks.append((_typedef_name(chunk), " ".join(chunk.split())))
            start = i + 1
    return chunks


def _typedef_name(chunk):
    m = re.search(r"\(\s*\*\s*([A-Za-z_]\w*)\s*\)", chunk)     # function pointer
    if m:
        return m.group(1)
    body = re.sub(r"\[[^\]]*\]", "", re.sub(r"\{.*\}", "{}", chunk, flags=re.S))
    names = [n for n in _IDENT.findall(body) if n not in _KEYWORDS]
    return names[-1] if names and "," not in body else None


def parse(text, path):
    try:
        return pycparser.CParser().parse(_PRELUDE + text, str(path))
    except pycparser.c_parser.ParseError as e:
        raise ScopError(*_split_coord(str(e), path), "C syntax pycparser cannot parse",
                        "see the message above; GNU extensions beyond __attribute__/__asm__ are not supported") from None


def _split_coord(msg, path):
    m = re.match(r"(.*?):(\d+):(?:\d+:)?\s*(.*)", msg)
    return (m.group(1), int(m.group(2))) if m else (str(path), 0)


# -------------------------------------------------------------------- declarations

def _type_info(node, typedefs):
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


def _collect_typedefs(ast):
    tds = {}
    for ext in ast.ext:
        if isinstance(ext, c_ast.Typedef):
            base, dims = _type_info(ext.type, tds)
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
    if text is None:
        text = reduce_system_headers(preprocess(path, tc, includes, defines))
    ast = parse(text, path)
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
        for items in _blocks(ext.body):
            for lo, hi in _pragma_spans(items, path):
                r = Region(path, len(regions), ext.decl.name,
                           items[lo].coord.line, items[hi].coord.line)
                try:
                    _Builder(r, syms, typedefs).build(items[lo + 1:hi])
                except ScopError as e:
                    r.error = e
                regions.append(r)
    return regions


def _blocks(node):
    if isinstance(node, c_ast.Compound):
        yield node.block_items or []
    for _, ch in node.children():
        yield from _blocks(ch)


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


# ------------------------------------------------------------------------- builder

def _text(node):
    return _CGEN.visit(node)


class _Builder:
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
        base, dims = _type_info(d.type, self.typedefs)
        if isinstance(d.type, c_ast.FuncDecl) or base is None:
            self.fail(node, f"'{name}' is not a scalar or array variable")
        return base, dims

    def array(self, name, node):
        a = self.r.arrays.get(name)
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
        for n in items:
            self.reserved(n)
        self.count = 0
        self.walk(items, [], [], [])
        if not self.r.stmts:
            raise ScopError(self.r.path, self.r.start_line, "#pragma scop", "the region has no statements")

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
            if fname not in MATH_FUNCS:
                self.fail(n, "calls other than pure math functions are outside the polyhedral model",
                          f"call to '{fname}'")
            for a in (n.args.exprs if n.args else []):
                self.value(a, iters, refs)
            return
        if isinstance(n, c_ast.UnaryOp) and n.op in ("*", "&"):
            self.fail(n, "pointer dereference / address-of is outside the polyhedral model",
                      f"pointer arithmetic '{_text(n)}'")
        self.fail(n, "expression is outside the polyhedral model", f"expression '{_text(n)}'")


# --------------------------------------------------------------------------- helpers

def _int(s):
    return int(s.rstrip("uUlL"), 0)


def _const(node):
    if isinstance(node, c_ast.Constant) and node.type.endswith("int"):
        return _int(node.value)
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
