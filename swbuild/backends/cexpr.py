"""Expression → C text, as a table of pattern → text rules (tinygrad's cstyle renderer).

Index arithmetic is integer; data arithmetic is float32 with the <math.h> f-functions.
Loads and variables are rendered by callbacks, so the same rules serve every backend.
"""
from __future__ import annotations

import math
import re

from ..ir.loopnest import Acc, Bin, Const, Load, Select, Un, Var

FLOAT_BIN = {
    "+": "({a} + {b})", "-": "({a} - {b})", "*": "({a} * {b})", "/": "({a} / {b})",
    "min": "sw_fminf({a}, {b})", "max": "sw_fmaxf({a}, {b})", "pow": "powf({a}, {b})", "fmod": "fmodf({a}, {b})",
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
CTYPE = {"float32": "float", "float16": "unsigned short", "float64": "double", "int8": "signed char", "int16": "short", "int32": "int",
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
static inline float sw_pow34f(float a) { float r = sqrtf(a); return a == (-INFINITY) ? INFINITY : r * sqrtf(r); }
"""
# pow(a, 0.75) (LRN's beta) as two square roots and a product: sqrt is an instruction where
# powf is a library call (exp and log); equal to powf within an ulp or two, the same at
# +-0, +-inf and NaN (pow(-inf, 0.75) = +inf, where sqrtf(-inf) is NaN)
POW_HELPERS = {0.75: "sw_pow34f({a})"}
# IEEE binary16 <-> binary32 in integer C (float16 buffers are `unsigned short`; no compiler of
# either chip is assumed to have _Float16): exact widening, and narrowing that rounds to
# nearest even, overflows to infinity and keeps NaN quiet, as numpy's astype(float16) does.
# Printed only in files of programs with a float16 buffer (optimizer/halves.py).
HALF_HELPERS = """static inline float sw_h2f(unsigned short h)
{
    unsigned int s = (unsigned int)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    union { unsigned int u; float f; } v;
    if (e == 0x1fu) u = s | 0x7f800000u | (m << 13);            /* inf, NaN */
    else if (e) u = s | ((e + 112u) << 23) | (m << 13);         /* normal: exponent bias 15 -> 127 */
    else if (!m) u = s;                                         /* +-0 */
    else {                                                      /* subnormal: normalise */
        e = 113u;
        while (!(m & 0x400u)) { m <<= 1; e--; }
        u = s | (e << 23) | ((m & 0x3ffu) << 13);
    }
    v.u = u;
    return v.f;
}
static inline unsigned short sw_f2h(float f)
{
    union { float f; unsigned int u; } v;
    unsigned int s, a, e, m, sh, r, rem, half;
    v.f = f;
    s = (v.u >> 16) & 0x8000u, a = v.u & 0x7fffffffu;
    if (a >= 0x7f800000u)                                       /* inf, NaN (made quiet) */
        return (unsigned short)(s | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0u));
    if (a >= 0x477ff000u) return (unsigned short)(s | 0x7c00u); /* rounds to 65520 or more: inf */
    if (a >= 0x38800000u) {                                     /* normal: drop 13 bits, ties to even */
        r = a - 0x38000000u;
        return (unsigned short)(s | ((r + 0x0fffu + ((r >> 13) & 1u)) >> 13));
    }
    if (a < 0x33000000u) return (unsigned short)s;              /* below 2^-25: +-0 */
    e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, sh = 126u - e; /* subnormal: units of 2^-24 */
    r = m >> sh, rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1u);
    r += (rem > half || (rem == half && (r & 1u)));
    return (unsigned short)(s | r);
}
/* double -> half without double rounding: the float in between rounds to odd (exact when
 * inexact, the odd neighbour on d's side), which float's 24 bits make correct for 11 */
static inline unsigned short sw_d2h(double d)
{
    union { float f; unsigned int u; } v;
    v.f = (float)d;
    if (d == d && (double)v.f != d && !(v.u & 1u) && (v.u & 0x7fffffffu) < 0x7f800000u)
        v.u += (v.f < 0.0f ? -(double)v.f > -d : (double)v.f > d) ? 0xffffffffu : 1u;
    return sw_f2h(v.f);
}
"""


def has_halves(program):
    """Whether a kernel of `program` reads or writes a float16 buffer (its files print HALF_HELPERS)."""
    return any(b.dtype == "float16" for k in program.kernels for b in k.buffers.values())


def to_float(dtype, text):
    """C text reading element `text` of a `dtype` buffer as float (halves need HALF_HELPERS)."""
    return f"sw_h2f({text})" if dtype == "float16" else text


def from_float(dtype, text, src="float32"):
    """C text storing float `text` (of dtype `src`) into a `dtype` buffer (a C conversion, or
    the half rounding: from a double without rounding twice)."""
    if dtype == "float16":
        return f"sw_d2h({text})" if src == "float64" else f"sw_f2h({text})"
    return f"({CTYPE[dtype]})({text})"


def _to_double(text):
    """A float32 rule as its double twin: expf -> exp, sw_fmaxf -> sw_fmax, 1.0f -> 1.0."""
    return re.sub(r"(\d)f\b", r"\1", re.sub(r"\b(\w+)f\(", r"\1(", text))


# the same rule tables for kernels that compute in double (a float64 model on Sunway)
FLOAT_BIN_D = {k: _to_double(v) for k, v in FLOAT_BIN.items()}
UNARY_D = {k: _to_double(v) for k, v in UNARY.items()}
COMBINE_D = {k: _to_double(v) for k, v in COMBINE.items()}
DOUBLE_HELPERS = _to_double(FLOAT_HELPERS).replace("float", "double")


# integer data arithmetic (an int32 / int64 kernel on Sunway): C's own integer operators, as
# onnxruntime's integer kernels compute (Div truncates toward zero); no rule, no kernel
FLOAT_BIN_I = {k: v for k, v in FLOAT_BIN.items() if k not in ("min", "max", "pow", "fmod")} | {
    "min": "SW_MIN({a}, {b})", "max": "SW_MAX({a}, {b})", "%": "SW_MOD({a}, {b})",
    "fmod": "({a} % {b})"}      # Mod fmod=1: C's % keeps the dividend's sign, as fmod does
UNARY_I = {"neg": "(-{a})", "abs": "SW_MAX({a}, -{a})", "not": "(!{a})", "relu": "SW_MAX(0, {a})",
           "sign": "(({a} > 0) - ({a} < 0))", "floor": "{a}", "ceil": "{a}", "round": "{a}"}
COMBINE_I = {"sum": "{a} += {v};", "prod": "{a} *= {v};", "max": "{a} = SW_MAX({a}, {v});",
             "min": "{a} = SW_MIN({a}, {v});"}
INT_LIMITS = {"int32": ("(-2147483647 - 1)", "2147483647"),
              "int64": ("(-9223372036854775807LL - 1)", "9223372036854775807LL")}


def int_literal(v):
    """An integral constant in an expression over integers (exact where a float literal is not)."""
    v = int(v)
    return f"{v}LL" if v >= 0 else f"({v}LL)"


def is_integral(v):
    return math.isfinite(v) and float(v) == int(v) and abs(v) < 2 ** 62


def rules_of(k):
    """render()'s mode for kernel k: "int" (an int32/int64 output), "double" (float64) or "float";
    with int_consts when it reads an integer buffer (integral constants as integer literals)."""
    out = k.out_dtype
    mode = "int" if out in ("int32", "int64") else "double" if out == "float64" else "float"
    return {"mode": mode, "int_consts": any(b.dtype in ("int32", "int64") for b in k.buffers.values())}


def int_problem(e):
    """Why an integer kernel's expression has no exact C (a float-only op or a fractional
    constant), or None."""
    if isinstance(e, Un) and e.op not in UNARY_I:
        return f"{e.op} of an integer"
    if isinstance(e, Bin) and not is_int(e) and e.op not in FLOAT_BIN_I:
        return f"{e.op} of integers"
    if isinstance(e, Const) and e.dtype != "int" and not is_integral(e.value):
        return f"the non-integer constant {e.value!r}"
    for c in (getattr(e, "a", None), getattr(e, "b", None), getattr(e, "cond", None)):
        if c is not None and not isinstance(c, Load):
            why = int_problem(c)
            if why:
                return why
    return None


def has_doubles(program):
    """Whether a compute kernel of `program` holds a float64 / int32 / int64 buffer in local
    memory (its files print DOUBLE_HELPERS and the typed sw_expand)."""
    return any(k.kind == "compute" and b.dtype in ("float64", "int32", "int64")
               for k in program.kernels for b in k.buffers.values())


def ctype_of(k, buf=None):
    """The C type of a kernel's accumulator (its output's), or of buffer `buf` in local memory."""
    b = k.buffers.get(k.out if buf is None else buf)
    return CTYPE[b.dtype] if b is not None and b.dtype in ("float64", "int32", "int64") else "float"


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


def float_literal(v: float, double=False) -> str:
    if double:
        return _to_double(float_literal(v))     # repr is exact for a double too
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


def render(e, var, load, acc="acc", double=False, mode=None, int_consts=False) -> str:
    """C text of `e`; `var(name)` and `load(Load)` render the leaves. `double` (or mode
    "double"): the double rules; mode "int": integer arithmetic (int_problem() found none
    missing); int_consts: integral constants as integer literals (rules_of)."""
    mode = mode or ("double" if double else "float")
    double = mode == "double"
    fbin, unary = {"double": (FLOAT_BIN_D, UNARY_D), "int": (FLOAT_BIN_I, UNARY_I)}.get(mode, (FLOAT_BIN, UNARY))
    int_consts = int_consts or mode == "int"

    def r(x):
        if isinstance(x, Var):
            return var(x.name)
        if isinstance(x, Const):
            if x.dtype == "int":
                return str(int(x.value))
            return int_literal(x.value) if int_consts and is_integral(x.value) else float_literal(x.value, double)
        if isinstance(x, Acc):
            return acc
        if isinstance(x, Load):
            return load(x)
        if isinstance(x, Bin):
            table = INT_BIN if is_int(x) else fbin
            if x.op not in table:
                raise ValueError(f"no C rule for {x.op}")
            if table is fbin and x.op == "max" and isinstance(x.b, Const) and x.b.value == 0:
                return unary["relu"].format(a=r(x.a))    # Relu keeps x on a tie: Relu(-0) = -0
            if mode != "int" and x.op == "pow" and isinstance(x.b, Const) and x.b.value in POW_HELPERS:
                rule = POW_HELPERS[x.b.value]
                return (_to_double(rule) if double else rule).format(a=r(x.a))
            return table[x.op].format(a=r(x.a), b=r(x.b))
        if isinstance(x, Un):
            return unary[x.op].format(a=r(x.a))
        if isinstance(x, Select):
            return f"({r(x.cond)} ? {r(x.a)} : {r(x.b)})"
        raise TypeError(x)
    return r(e)
