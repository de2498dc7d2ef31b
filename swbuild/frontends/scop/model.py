"""The model a C SCoP region is extracted into: arrays, accesses, statements, regions.

Names inside isl strings carry a prefix (`i_` iterators, `p_` parameters, `a_` arrays) so a
C name can never collide with an isl keyword such as `and`, `min` or `mod`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pycparser import c_ast

from ...support.errors import UnsupportedError

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
class Private:
    """A scalar written in the region, expanded to an array over the loops that enclose all
    its uses (none: a one-element array); the host allocates it around the region."""
    scalar: str                # the C variable
    array: str                 # the expanded array's name (swk_x_<scalar>)
    ctype: str
    iters: list                # subscripts: iterators of the common loops, outer first


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
    privates: dict = field(default_factory=dict)    # expanded array name -> Private

    @property
    def isl_params(self):
        return "[" + ", ".join("p_" + p for p in self.params) + "]"


