"""Expression → C text, as a table of pattern → text rules (tinygrad's cstyle renderer).

Index arithmetic is integer; data arithmetic is float32 with the <math.h> f-functions.
Loads and variables are rendered by callbacks, so the same rules serve every backend.
"""
from __future__ import annotations

import math

from ..ir.loopnest import Acc, Bin, Const, Load, Select, Un, Var

FLOAT_BIN = {
    "+": "({a} + {b})", "-": "({a} - {b})", "*": "({a} * {b})", "/": "({a} / {b})",
    "min": "sw_fminf({a}, {b})", "max": "sw_fmaxf({a}, {b})", "pow": "powf({a}, {b})",
    "<": "({a} < {b})", "<=": "({a} <= {b})", ">": "({a} > {b})", ">=": "({a} >= {b})",
    "==": "({a} == {b})", "!=": "({a} != {b})", "and": "({a} && {b})", "or": "({a} || {b})",
}
INT_BIN = {
    "+": "({a} + {b})", "-": "({a} - {b})", "*": "({a} * {b})",
    "//": "SW_FLOORDIV({a}, {b})", "%": "SW_MOD({a}, {b})",
    "min": "SW_MIN({a}, {b})", "max": "SW_MAX({a}, {b})",
}
UNARY = {
    "neg": "(-{a})", "exp": "expf({a})", "log": "logf({a})", "sqrt": "sqrtf({a})",
    "tanh": "tanhf({a})", "erf": "erff({a})", "abs": "fabsf({a})", "floor": "floorf({a})",
    "ceil": "ceilf({a})", "sigmoid": "(1.0f / (1.0f + expf(-{a})))", "relu": "sw_fmaxf(0.0f, {a})",
    "not": "(!{a})", "round": "nearbyintf({a})", "sin": "sinf({a})", "cos": "cosf({a})",
    "tan": "tanf({a})", "asin": "asinf({a})", "acos": "acosf({a})", "atan": "atanf({a})",
    "sinh": "sinhf({a})", "cosh": "coshf({a})", "asinh": "asinhf({a})", "acosh": "acoshf({a})",
    "atanh": "atanhf({a})", "sign": "sw_signf({a})",
}
CTYPE = {"float32": "float", "float64": "double", "int8": "signed char", "int16": "short", "int32": "int",
         "int64": "long long", "uint8": "unsigned char", "uint16": "unsigned short",
         "bool": "unsigned char"}   # tensor dtype -> C type
# the reduction step of each combine, over the accumulator {a} and the value {v}
COMBINE = {"sum": "{a} += {v};", "avg": "{a} += {v};", "max": "{a} = sw_fmaxf({a}, {v});",
           "min": "{a} = sw_fminf({a}, {v});", "prod": "{a} *= {v};"}
# The C helper macros of generated files, one set: name -> (parameters, body).
C_MACROS = {
    "min": ("a, b", "((a) < (b) ? (a) : (b))"),
    "max": ("a, b", "((a) > (b) ? (a) : (b))"),
    "floordiv": ("a, b", "(((a) - (((a) % (b) + (b)) % (b))) / (b))"),
    "mod": ("a, b", "((((a) % (b)) + (b)) % (b))"),
    "floord": ("n, d", "(((n) < 0) ? -((-(n) + (d) - 1) / (d)) : (n) / (d))"),   # isl's floord: d > 0
}


def c_macros(prefix, names, upper=False):
    """#define lines of the named helpers, spelled prefix + name (upper-cased if asked)."""
    out = []
    for n in names:
        params, body = C_MACROS[n]
        out.append(f"#define {prefix}{n.upper() if upper else n}({params}) {body}\n")
    return "".join(out)


# helpers every generated file that uses the rules above carries
# Float max/min/sign as onnxruntime computes them: NaN in, NaN out (fmaxf would drop it),
# and on equal operands the second one (max(-0, 0) = 0, max(0, -0) = -0; Relu keeps x).
FLOAT_HELPERS = """static inline float sw_fmaxf(float a, float b) { return a != a ? a : b != b ? b : a > b ? a : b; }
static inline float sw_fminf(float a, float b) { return a != a ? a : b != b ? b : a < b ? a : b; }
static inline float sw_signf(float a) { return a > 0.0f ? 1.0f : a < 0.0f ? -1.0f : a == a ? 0.0f : a; }
"""
PRELUDE = c_macros("SW_", ["min", "max", "floordiv", "mod"], upper=True) + FLOAT_HELPERS


class Writer:
    """Lines of C at an indentation depth: w("x;"), w.open("for (...)"), w.close()."""

    def __init__(self, depth=1):
        self.lines, self.depth = [], depth

    def __call__(self, s=""):
        self.lines.append("    " * self.depth + s if s else "")

    def open(self, s):
        self(s + " {")
        self.depth += 1

    def close(self, s="}"):
        self.depth -= 1
        self(s)


def float_literal(v: float) -> str:
    v = float(v)
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    s = repr(v)
    if "e" not in s and "." not in s:
        s += ".0"
    return f"{s}f" if v >= 0 else f"({s}f)"


def is_int(e) -> bool:
    if isinstance(e, Var):
        return True
    if isinstance(e, Const):
        return e.dtype == "int"
    if isinstance(e, Bin):
        return e.op in INT_BIN and is_int(e.a) and is_int(e.b)
    return False


def render(e, var, load, acc="acc") -> str:
    """C text of `e`; `var(name)` and `load(Load)` render the leaves."""
    def r(x):
        if isinstance(x, Var):
            return var(x.name)
        if isinstance(x, Const):
            return str(int(x.value)) if x.dtype == "int" else float_literal(x.value)
        if isinstance(x, Acc):
            return acc
        if isinstance(x, Load):
            return load(x)
        if isinstance(x, Bin):
            table = INT_BIN if is_int(x) else FLOAT_BIN
            if x.op not in table:
                raise ValueError(f"no C rule for {x.op}")
            if table is FLOAT_BIN and x.op == "max" and isinstance(x.b, Const) and x.b.value == 0:
                return UNARY["relu"].format(a=r(x.a))    # Relu keeps x on a tie: Relu(-0) = -0
            return table[x.op].format(a=r(x.a), b=r(x.b))
        if isinstance(x, Un):
            return UNARY[x.op].format(a=r(x.a))
        if isinstance(x, Select):
            return f"({r(x.cond)} ? {r(x.a)} : {r(x.b)})"
        raise TypeError(x)
    return r(e)
