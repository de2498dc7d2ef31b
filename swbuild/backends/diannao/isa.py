"""The DianNao/BANG instructions the mapper may select, each written declaratively in the
loop-nest IR of the programs it matches (the ISA Mapper idea).

A description is: its loops (spatial, then reduce) with symbolic extents, the statement it
performs over operands that are `Load(operand, flat index)` in those loops and symbolic
parameters (strides, sizes), where each operand must live, and its rules (alignment,
size multiples, layout, architecture) — the numbers come from the toolchain's [hardware]
table. The mapper (mapper.py) finds the correspondence between a program statement and a
description, solves the parameters and checks the rules. Adding an instruction is adding
an entry to `DESCRIPTIONS`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...ir.loopnest import Bin, Const, Load, Select, Un, Var

i, s, ho, wo, co, y, x, ci, c = (Var(n) for n in ("i", "s", "ho", "wo", "co", "y", "x", "ci", "c"))
j, height, width = Var("j"), Var("height"), Var("width")
n, segs, ds, ss = (Var(n) for n in ("n", "segs", "ds", "ss"))
cyc = Var("cyc")
Ho, Wo, Co, Ci, C, W, kh, kw, sh, sw = (Var(n) for n in ("Ho", "Wo", "Co", "Ci", "C", "W", "kh", "kw", "sh", "sw"))
value = Var("value")

DIRECTIONS = ("GDRAM2NRAM", "NRAM2GDRAM", "GDRAM2WRAM", "WRAM2GDRAM", "GDRAM2SRAM", "SRAM2GDRAM",
              "NRAM2NRAM", "NRAM2WRAM", "WRAM2NRAM", "NRAM2SRAM", "SRAM2NRAM", "SRAM2WRAM",
              "WRAM2SRAM", "SRAM2SRAM", "GDRAM2GDRAM")


@dataclass
class Desc:
    name: str                 # the intrinsic (instruction counts use it)
    kind: str                 # compute | copy | fill
    loops: tuple              # ((var, extent param), ...) spatial
    dst: Load
    body: object
    red: tuple = ()           # reduce loops
    combine: str | None = None
    space: dict = field(default_factory=dict)    # operand -> required space (None: any)
    bank: tuple = ()          # operands in the convolution WRAM bank layout
    rules: tuple = ()         # (text, fn(ctx) -> bool)
    derived: dict = field(default_factory=dict)  # param -> fn(params)
    emit: object = None       # fn(ctx) -> C text
    elem_bytes: int = 4


# ---- rules (ctx: mapper.Ctx; every number from the toolchain) -------------------------

def _vec(*ops):
    return (("operands 64-B aligned in NRAM", lambda m: all(m.aligned(o, m.hw["vector_align_bytes"]) for o in ops)),
            ("n * sizeof(T) a multiple of the vector size",
             lambda m: m.const("n") is not None and m.const("n") > 0
             and m.const("n") * 4 % m.hw["vector_size_multiple_bytes"] == 0))


def _copy_rules(m):
    """The direction's rules (docs/diannao.md): WRAM side 8-B aligned and sizes a multiple of
    64 B; NRAM2NRAM 64-B aligned, sizes a multiple of 128 B; segnum in range; strides."""
    d = m.direction
    if d not in DIRECTIONS or m.elem_bytes("dst") != m.elem_bytes("src"):    # a copy moves bytes, never converts
        return False
    nb = m.const("n")
    eb = m.elem_bytes("dst")
    if "WRAM" in d:
        side = "dst" if d.endswith("WRAM") else "src"
        if not m.aligned(side, m.hw["wram_align_bytes"]) or nb is None or nb * eb % m.hw["wram_size_multiple_bytes"]:
            return False
    if d == "NRAM2NRAM":
        a = m.hw["nram2nram_align_bytes"]
        if not (m.aligned("dst", a) and m.aligned("src", a)) or nb is None or nb * eb % m.hw["nram2nram_size_multiple_bytes"]:
            return False
    if "segs" in m.params:
        hi = m.upper("segs")
        if hi is None or hi - 1 > m.hw["memcpy_max_segnum"]:
            return False
        dsv, ssv, nmax = m.const("ds"), m.const("ss"), m.upper("n")
        if dsv is None or ssv is None or ssv < 0 or nmax is None or dsv < nmax:
            return False
    return True


COPY_RULES = (("direction, WRAM/NRAM2NRAM sizes and alignment, segnum, strides", _copy_rules),)


def _conv_rules(m):
    p = m.const
    if None in (p("Ci"), p("Co"), p("W"), p("Wo"), p("Ho"), p("sh"), p("sw"), p("kh"), p("kw")):
        return False
    if p("Ci") * m.elem_bytes("src") % m.hw["conv_ci_multiple_bytes"] or p("Co") % m.hw["conv_co_multiple"]:
        return False
    fixed = m.elem_bytes("src") < 4 and m.elem_bytes("kernel") < 4          # int8/int16 inputs and weights
    if not fixed and int(str(m.hw["arch"]).rsplit("_", 1)[1]) < 300:   # float convolution needs mtp_3xx
        return False
    if (p("W") - p("kw")) // p("sw") + 1 != p("Wo") or p("W") < p("kw"):
        return False
    lay = m.layout("kernel")
    if not lay or lay[0] != "conv_bank" or lay[1] != p("Co") or lay[2] != p("kh") * p("kw") * p("Ci"):
        return False
    a = m.hw["vector_align_bytes"]
    return m.aligned("dst", a) and m.aligned("src", a) and m.aligned("kernel", m.hw["wram_align_bytes"])


def _pool_rules(m):
    p = m.const
    if None in (p("C"), p("W"), p("Wo"), p("Ho"), p("sh"), p("sw"), p("kh"), p("kw")):
        return False
    if p("C") * 4 % m.hw["pool_c_multiple_bytes"] or (p("W") - p("kw")) // p("sw") + 1 != p("Wo"):
        return False
    a = m.hw["vector_align_bytes"]
    return m.aligned("dst", a) and m.aligned("src", a)


def _transpose_rules(m):
    """NRAM, 64-B aligned, both sides' bytes multiples of transpose_multiple_bytes, src and
    dst distinct buffers (bangemu/transpose.h)."""
    p, eb, mult = m.const, m.elem_bytes("dst"), m.hw["transpose_multiple_bytes"]
    if None in (p("height"), p("width")) or eb != m.elem_bytes("src") or m.ops["dst"][0] == m.ops["src"][0]:
        return False
    if p("height") * eb % mult or p("width") * eb % mult:
        return False
    a = m.hw["vector_align_bytes"]
    return m.aligned("dst", a) and m.aligned("src", a)


def _H(p):
    return (p["Ho"] - 1) * p["sh"] + p["kh"]


# ---- descriptions ---------------------------------------------------------------------

def _binary(name, op):
    return Desc(name, "compute", ((i, n),), Load("dst", (i,)), Bin(op, Load("a", (i,)), Load("b", (i,))),
                space={"dst": "NRAM", "a": "NRAM", "b": "NRAM"}, rules=_vec("dst", "a", "b"),
                emit=lambda m, f=name: f"{f}({m.ptr('dst')}, {m.ptr('a')}, {m.ptr('b')}, {m.val('n')});")


def _cycle(name, op):
    """dst[s·cyc + i] = a[s·cyc + i] op b[i]: b's cyc elements repeated over segs of them (a
    per-channel operand over an HWC tile, schedule/cycle_ops.py). The signature as Cambricon's
    mlu-ops calls it, __bang_cycle_mul(dst, src, cycle_src, elem_count, cycle_count); the
    rules bangemu/vector.h checks: both counts whole vectors, 64-B aligned NRAM."""
    return Desc(name, "compute", ((s, segs), (i, cyc)), Load("dst", (s * cyc + i,)),
                Bin(op, Load("a", (s * cyc + i,)), Load("b", (i,))),
                space={"dst": "NRAM", "a": "NRAM", "b": "NRAM"},
                rules=_vec("dst", "a", "b") + (("cycle_count * sizeof(T) a multiple of the vector size", lambda m: m.const(
                    "cyc") is not None and m.const("cyc") * 4 % m.hw["vector_size_multiple_bytes"] == 0),),
                derived={"n": lambda p: p["segs"] * p["cyc"] if isinstance(p["segs"], int) else None},
                emit=lambda m, f=name: f"{f}({m.ptr('dst')}, {m.ptr('a')}, {m.ptr('b')}, {m.val('n')}, {m.val('cyc')});")


def _scalar(name, op):
    return Desc(name, "compute", ((i, n),), Load("dst", (i,)), Bin(op, Load("a", (i,)), value),
                space={"dst": "NRAM", "a": "NRAM"}, rules=_vec("dst", "a"),
                emit=lambda m, f=name: f"{f}({m.ptr('dst')}, {m.ptr('a')}, {m.scalar('value')}, {m.val('n')});")


def _arch(m):
    return int(str(m.hw["arch"]).rsplit("_", 1)[1])


def _clamp(name, op):
    """max / min against a scalar with a NaN element giving the scalar: the select form a
    saturation needs (QuantizeLinear sends NaN to its low end); mtp_322 and later
    (bangemu/vector.h states the NaN rule taken)."""
    return Desc(name, "compute", ((i, n),), Load("dst", (i,)), Select(Bin(op, a_i, value), a_i, value),
                space={"dst": "NRAM", "a": "NRAM"},
                rules=_vec("dst", "a") + (("needs mtp_322 or later", lambda m: _arch(m) >= 322),),
                emit=lambda m, f=name: f"{f}({m.ptr('dst')}, {m.ptr('a')}, {m.scalar('value')}, {m.val('n')});")


def _unary(name, body):
    return Desc(name, "compute", ((i, n),), Load("dst", (i,)), body,
                space={"dst": "NRAM", "a": "NRAM"}, rules=_vec("dst", "a"),
                emit=lambda m, f=name: f"{f}({m.ptr('dst')}, {m.ptr('a')}, {m.val('n')});")


def _fix(name, op):
    """Exact float integers to int8/int16 (position 0): __bang_conv's fixed-point input."""
    return Desc(name, "compute", ((i, n),), Load("dst", (i,)), Un(op, a_i),
                space={"dst": "NRAM", "a": "NRAM"}, rules=_vec("dst", "a"),
                emit=lambda m, f=name: f"{f}({m.ptr('dst')}, {m.ptr('a')}, {m.val('n')}, 0);")


def _reduce(name, combine):
    """dst[0] = max / sum of a[0 .. n) (bangemu: dst holds one 128-B vector)."""
    return Desc(name, "compute", (), Load("dst", (Const(0, "int"),)), a_i, red=((i, n),), combine=combine,
                space={"dst": "NRAM", "a": "NRAM"}, rules=_vec("dst", "a"),
                emit=lambda m, f=name: f"{f}({m.ptr('dst')}, {m.ptr('a')}, {m.val('n')});")


def _pool(name, combine):
    return Desc(name, "compute", ((ho, Ho), (wo, Wo), (c, C)), Load("dst", ((ho * Wo + wo) * C + c,)),
                Load("src", (((ho * sh + y) * W + wo * sw + x) * C + c,)), red=((y, kh), (x, kw)),
                combine=combine, space={"dst": "NRAM", "src": "NRAM"},
                rules=(("C * sizeof(T) a multiple of 128 B, HWC, 64-B aligned", _pool_rules),),
                derived={"H": _H},
                emit=lambda m, f=name: (f"{f}({m.ptr('dst')}, {m.ptr('src')}, {m.val('C')}, {m.val('H')}, {m.val('W')}, "
                                        f"{m.val('kh')}, {m.val('kw')}, {m.val('sw')}, {m.val('sh')});"))


a_i = Load("a", (i,))
DESCRIPTIONS = [
    Desc("__bang_conv", "compute", ((ho, Ho), (wo, Wo), (co, Co)), Load("dst", ((ho * Wo + wo) * Co + co,)),
         Bin("*", Load("src", (((ho * sh + y) * W + wo * sw + x) * Ci + ci,)),
             Load("kernel", (co, (y * kw + x) * Ci + ci))),
         red=((y, kh), (x, kw), (ci, Ci)), combine="sum",
         space={"dst": "NRAM", "src": "NRAM", "kernel": "WRAM"}, bank=("kernel",),
         rules=(("Ci * sizeof(T) multiple of 64 B, Co multiple of 64, float needs mtp_3xx, WRAM bank layout", _conv_rules),),
         derived={"H": _H},
         emit=lambda m: (f"__bang_conv({m.ptr('dst')}, {m.ptr('src')}, {m.ptr('kernel')}, {m.val('Ci')}, {m.val('H')}, "
                         f"{m.val('W')}, {m.val('kh')}, {m.val('kw')}, {m.val('sw')}, {m.val('sh')}, {m.val('Co')});")),
    _pool("__bang_maxpool", "max"),
    _pool("__bang_avgpool", "avg"),
    _binary("__bang_add", "+"),
    _binary("__bang_sub", "-"),
    _binary("__bang_mul", "*"),
    _cycle("__bang_cycle_add", "+"),
    _cycle("__bang_cycle_sub", "-"),
    _cycle("__bang_cycle_mul", "*"),
    _scalar("__bang_add_scalar", "+"),
    _scalar("__bang_sub_scalar", "-"),
    _scalar("__bang_mul_scalar", "*"),
    _clamp("__bang_maxeq_scalar", ">="),
    _clamp("__bang_mineq_scalar", "<="),
    _unary("__bang_active_relu", Bin("max", a_i, Const(0.0))),
    _unary("__bang_active_abs", Un("abs", a_i)),
    _unary("__bang_active_sigmoid", Un("sigmoid", a_i)),
    _unary("__bang_active_tanh", Un("tanh", a_i)),
    _unary("__bang_active_exp", Un("exp", a_i)),
    _unary("__bang_active_log", Un("log", a_i)),
    _reduce("__bang_max", "max"),
    _reduce("__bang_sum", "sum"),
    _fix("__bang_float2int8_rn", "to_int8"),
    _fix("__bang_float2int16_rn", "to_int16"),
    _fix("__bang_int82float", "from_int8"),      # a byte-stored int8 activation read as float (schedule/narrow.py)
    # src a height x width matrix, dst its transpose (what re-lays a CHW tile out as HWC on chip)
    Desc("__bang_transpose", "compute", ((j, width), (i, height)), Load("dst", (j * height + i,)),
         Load("src", (i * width + j,)), space={"dst": "NRAM", "src": "NRAM"},
         rules=(("NRAM, 64-B aligned, height and width * sizeof(T) multiples of 64 B, no overlap", _transpose_rules),),
         emit=lambda m: f"__bang_transpose({m.ptr('dst')}, {m.ptr('src')}, {m.val('height')}, {m.val('width')});"),
    Desc("__memset_nram", "fill", ((i, n),), Load("dst", (i,)), value, space={"dst": "NRAM"},
         emit=lambda m: f"__memset_nram({m.ptr('dst')}, {m.val('n')}, ({m.ctype()}){m.scalar('value')});"),
    # data movement between the memory levels: contiguous, strided (segments), gather; a copy
    # into another cluster's SRAM appends id_dst_cluster (Stmt.dst_cluster; clang's BANG header
    # declares both forms for SRAM2SRAM: zhourunyu/llvm-mlu, clang/lib/Headers/__clang_bang_intrinsics.h)
    Desc("__memcpy", "copy", ((s, segs), (i, n)), Load("dst", (s * ds + i,)), Load("src", (s * ss + i,)),
         rules=COPY_RULES,
         emit=lambda m: (f"{m.memcpy}({m.ptr('dst')}, {m.ptr('src')}, {m.bytes('n')}, {m.direction}, "
                         f"{m.bytes('ds')}, {m.bytes('ss')}, {m.val('segs')} - 1{m.to_cluster});")),
    Desc("__memcpy", "copy", ((i, n),), Load("dst", (i,)), Load("src", (i,)), rules=COPY_RULES,
         emit=lambda m: f"{m.memcpy}({m.ptr('dst')}, {m.ptr('src')}, {m.bytes('n')}, {m.direction}{m.to_cluster});"),
    Desc("__memcpy", "copy", ((s, segs),), Load("dst", (s * ds,)), Load("src", (s * ss,)), rules=COPY_RULES,
         derived={"n": lambda p: 1},
         emit=lambda m: (f"{m.memcpy}({m.ptr('dst')}, {m.ptr('src')}, {m.elem_bytes()}, {m.direction}, "
                         f"{m.bytes('ds')}, {m.bytes('ss')}, {m.val('segs')} - 1{m.to_cluster});")),
]


def by_kind(kind, combine=None):
    return [d for d in DESCRIPTIONS if d.kind == kind and d.combine == combine]


def cycles(name, params, hw):
    """Static estimate of one call, in cycles (the toolchain's cost table; used to choose
    between equivalent instruction sequences, never reported as measured)."""
    vb = hw["vector_bytes_per_cycle"]
    if name == "__bang_transpose":      # float elements
        return hw["vector_startup_cycles"] + -(-int(params["height"]) * int(params["width"]) * 4 // vb) * \
            hw["transpose_cycles_per_chunk"]
    if name == "__memset_nram" or (name.startswith("__bang_") and name not in ("__bang_conv", "__bang_maxpool", "__bang_avgpool")):
        nbytes = int(params.get("n", 1)) * 4
        per = hw["transcendental_cycles_per_chunk"] if name in ("__bang_active_sigmoid", "__bang_active_tanh", "__bang_active_exp",
                                                                    "__bang_active_log") else 1
        return hw["vector_startup_cycles"] + -(-nbytes // vb) * per
    return hw["memcpy_startup_cycles"]
