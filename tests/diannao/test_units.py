"""Unit tests of the DianNao backend passes: layouts, partitioning (checked against isl),
the ISA mapper and its descriptions, guard resolution, toolchain and build wiring."""
import random

from swbuild.driver import build
from swbuild.config import toolchain
from swbuild.backends.diannao import isa
from swbuild.backends.diannao.devir import DBuf, DevKernel, For, SLoop, Stmt, simp, stmts
from swbuild.backends.diannao.layout import NHWC, view_strides
from swbuild.backends.diannao.mapper import fuse_loops, map_stmt
from swbuild.backends.diannao.partition import partition_kernel, thresholds
from swbuild.backends.diannao.preprocess import resolve_guards, staged_copy
from swbuild.ir.loopnest import Bin, Const, Load, Un, Var, iconst

HW = toolchain.load("diannao-emu").hardware
v = Var


def kernel(bufs, body):
    return DevKernel("k", "Test", "n", (), "elementwise", [], {b.name: b for b in bufs}, body, {})


NRAM = [DBuf("a", "NRAM", 4096, 0), DBuf("b", "NRAM", 4096, 16384), DBuf("d", "NRAM", 4096, 32768),
        DBuf("g", "GDRAM", 1 << 20), DBuf("s", "SRAM", 4096), DBuf("w", "WRAM", 64 * 9 * 32, 0, ("conv_bank", 64, 9 * 32))]


def stmt(kind, dst, expr, loops, red=(), combine=None):
    return Stmt(kind, dst, expr, [SLoop(n, iconst(0), iconst(e)) for n, e in loops],
                [SLoop(n, iconst(0), iconst(e)) for n, e in red], combine)


# ---- toolchain and build wiring ------------------------------------------------------------

def test_toolchain_numbers_for_diannao():
    tc = toolchain.load("diannao-emu")
    assert tc.cores == 16 and toolchain.load("sunway").cores == 64
    assert tc.nram_budget == HW["nram_bytes"] - HW["nram_reserve_bytes"]
    d = tc.runtime_defines()
    assert "BANGEMU_ARCH=372" in d and f"BANGEMU_NRAM_BYTES={HW['nram_bytes']}" in d
    assert toolchain.load("diannao").runtime_defines() == []      # a real target gets no emulator


def test_generated_files_and_device_steps(tmp_path):
    tc = toolchain.load("diannao-emu")
    f = build.generated_files("m", "diannao")
    assert f["device"] == "m_device.mlu" and f["host"] == "m_host.cpp"
    steps, lib, exe = build.model_steps(tc, "m", tmp_path, tmp_path)
    dev = next(s for s in steps if s.label.startswith("CC-DEVICE"))
    assert dev.argv[:3] == ["g++", "-x", "c++"] and str(tmp_path / "m_device.mlu") in dev.argv
    assert any(a.startswith("-DBANGEMU_") for a in dev.argv)
    real = build.model_steps(toolchain.load("diannao"), "m", tmp_path, tmp_path)[0]
    assert next(s for s in real if s.label.startswith("CC-DEVICE")).argv[:2] == ["cncc", "--bang-mlu-arch=mtp_372"]


# ---- layouts -------------------------------------------------------------------------------

def test_view_strides_nhwc_and_grouped_views():
    assert view_strides((1, 8, 5, 6), (1, 8, 5, 6), NHWC) == [240, 1, 48, 8]
    # a grouped convolution's [N, G, C/G, H, W] view of an NHWC tensor
    assert view_strides((1, 2, 4, 5, 6), (1, 8, 5, 6), NHWC) == [240, 4, 1, 48, 8]
    assert view_strides((1, 240), (1, 8, 5, 6), NHWC) is None     # a flatten needs NCHW
    assert view_strides((1, 240), (1, 8, 5, 6)) == [240, 1]


# ---- partitioning --------------------------------------------------------------------------

def test_thresholds_are_exact_against_isl():
    import islpy as isl
    rnd = random.Random(7)
    for _ in range(60):
        names = ["x", "y", "z"]
        ranges = {n: (rnd.randint(-3, 2), rnd.randint(3, 9)) for n in names}
        coefs = {n: rnd.choice([-3, -2, -1, 1, 2, 4]) for n in names}
        const = rnd.randint(-20, 20)
        e = simp(sum((Bin("*", v(n), iconst(c)) for n, c in coefs.items()), iconst(const)))
        lo, hi = ranges["x"]
        pts = sorted({lo, hi + 1} | {t for t in thresholds(e, "x", ranges) if lo < t <= hi})
        dom = " and ".join(f"{a} <= {n} <= {b}" for n, (a, b) in ranges.items())
        ex = f"{const}" + "".join(f" {'+' if c >= 0 else '-'} {abs(c)}{n}" for n, c in coefs.items())
        holds = isl.Set(f"{{ [x, y, z] : {dom} and {ex} >= 0 }}").project_out(isl.dim_type.set, 1, 2)
        fails = isl.Set(f"{{ [x, y, z] : {dom} and {ex} < 0 }}").project_out(isl.dim_type.set, 1, 2)
        for a, b in zip(pts, pts[1:]):
            seg = isl.Set(f"{{ [x] : {a} <= x < {b} }}")
            # inside each interval the guard is always true, always false, or it is the one
            # mixed region (a single value for tiling guards); never true somewhere and false
            # elsewhere without a cut in between
            t = seg.is_subset(holds.subtract(fails))
            f = seg.is_subset(fails.subtract(holds))
            mixed = seg.is_subset(holds.intersect(fails))
            assert t or f or mixed, (e, ranges, a, b)


def test_partition_removes_tail_guards_and_empty_tasks():
    # 16 tasks x chunk 100 over N = 1530 elements, tiles of 64: task 15 has 30, tails of 36
    t = Bin("+", Bin("*", v("tc"), iconst(4)), v("tk"))
    base = Bin("+", Bin("*", t, iconst(100)), Bin("*", v("s"), iconst(64)))
    g1 = simp(Bin("-", Bin("-", iconst(99), Bin("*", v("s"), iconst(64))), v("l")))
    g2 = simp(Bin("-", Bin("-", iconst(1529), base), v("l")))
    s = Stmt("copy", Load("a", (v("l"),)), Load("g", (simp(Bin("+", base, v("l"))),)),
             [SLoop("l", iconst(0), iconst(64))], guard=(g1, g2), sid="c")
    body = [For("tc", iconst(0), iconst(4), [For("tk", iconst(0), iconst(4), [For("s", iconst(0), iconst(2), [s])], "core")],
                "cluster")]
    dk = partition_kernel(kernel(NRAM, body))
    out = stmts(dk.body)
    assert all(not x.guard for x in out)
    assert sorted({int(x.loops[0].ext.value) for x in out}) == [30, 36, 64]
    dk = resolve_guards(dk.body)   # nothing left to resolve
    assert all(not x.guard for x in stmts(dk))


def test_off_mode_folds_copy_bounds_and_overcomputes():
    g = simp(Bin("-", Bin("-", iconst(99), Bin("*", v("s"), iconst(64))), v("l")))
    cp = Stmt("copy", Load("a", (v("l"),)), Load("g", (v("l"),)), [SLoop("l", iconst(0), iconst(64))], guard=(g,))
    cm = Stmt("compute", Load("d", (v("l"),)), Bin("+", Load("a", (v("l"),)), Load("b", (v("l"),))),
              [SLoop("l", iconst(0), iconst(64))], guard=(g,), over=True)
    out = stmts(resolve_guards([For("s", iconst(0), iconst(2), [cp, cm])]))
    assert not out[0].guard and "min" in str(out[0].loops[0].ext)       # clamped at run time
    assert not out[1].guard and out[1].loops[0].ext == iconst(64)        # extra computation


def test_staged_copy_is_fill_plus_guarded_copy():
    fill, copy = staged_copy("x", "a", v("r"), Load("g", (v("r"),)), [SLoop("r", iconst(0), iconst(8))],
                             halo=(simp(Bin("-", v("r"), iconst(1))),), fill=0.0)
    assert fill.kind == "fill" and fill.guard_any and copy.kind == "copy" and copy.guard


# ---- the mapper ----------------------------------------------------------------------------

def _map(s, bufs=NRAM):
    return map_stmt(s, kernel(bufs, [s]), HW, {})


def test_vector_ops_and_commuted_relu():
    i = v("i")
    m = _map(stmt("compute", Load("d", (i,)), Bin("+", Load("a", (i,)), Load("b", (i,))), [("i", 256)]))
    assert m.name == "__bang_add" and m.params["n"] == 256
    m = _map(stmt("compute", Load("d", (i,)), Bin("max", Const(0.0), Load("a", (i,))), [("i", 256)]))
    assert m.name == "__bang_active_relu"
    m = _map(stmt("compute", Load("d", (i,)), Bin("*", Const(2.5), Load("a", (i,))), [("i", 256)]))
    assert m.name == "__bang_mul_scalar" and m.scalars["value"] == Const(2.5)
    # 100 floats are 400 B: not a multiple of 128 B -> no vector instruction
    assert _map(stmt("compute", Load("d", (i,)), Bin("+", Load("a", (i,)), Load("b", (i,))), [("i", 100)])) is None
    assert _map(stmt("compute", Load("d", (i,)), Un("erf", Load("a", (i,))), [("i", 256)])) is None


def test_conv_parameters_are_solved():
    ro, xo, cc, ky, kx, kc = (v(n) for n in ("ro", "xo", "cc", "ky", "kx", "kc"))
    src = Load("a", (simp(((ro * 2 + ky) * 9 + xo * 2 + kx) * 32 + kc),))
    s = stmt("compute", Load("d", (simp((ro * 4 + xo) * 64 + cc),)),
             Bin("*", src, Load("w", (cc, simp((ky * 3 + kx) * 32 + kc)))),
             [("ro", 2), ("xo", 4), ("cc", 64)], [("ky", 3), ("kx", 3), ("kc", 32)], "sum")
    m = _map(s)
    assert m.name == "__bang_conv"
    assert {k: m.params[k] for k in ("Ci", "H", "W", "kh", "kw", "sh", "sw", "Co")} == \
        dict(Ci=32, H=5, W=9, kh=3, kw=3, sh=2, sw=2, Co=64)


def test_copies_fuse_loops_and_keep_outer_ones():
    r, x, c = v("r"), v("x"), v("c")
    # rows of 8 x 16 contiguous in GDRAM (pitch 256), packed in NRAM: one strided memcpy
    s = stmt("copy", Load("a", (simp((r * 8 + x) * 16 + c),)), Load("g", (simp(r * 256 + x * 16 + c + 5),)),
             [("r", 6), ("x", 8), ("c", 16)])
    m = _map(s)
    assert m.name == "__memcpy" and m.params["segs"] == 6 and m.params["n"] == 128 and m.direction == "GDRAM2NRAM"
    assert m.params["ds"] == 128 and m.params["ss"] == 256 and not m.outer
    assert len(fuse_loops(s).loops) == 2
    # a transpose: element gathers (len = one float), rows left as an outer loop
    s = stmt("copy", Load("a", (simp(r * 8 + x),)), Load("g", (simp(x * 6 + r),)), [("r", 6), ("x", 8)])
    m = _map(s)
    assert m.name == "__memcpy" and m.params["n"] == 1 and len(m.outer) == 1
    # a broadcast along rows: source stride 0
    s = stmt("copy", Load("a", (simp(r * 16 + c),)), Load("g", (c,)), [("r", 6), ("c", 16)])
    assert _map(s).params["ss"] == 0
    # SRAM -> WRAM needs sizes in multiples of 64 B
    i = v("i")
    assert _map(stmt("copy", Load("w", (i,)), Load("s", (i,)), [("i", 64)])).direction == "SRAM2WRAM"
    assert _map(stmt("copy", Load("w", (i,)), Load("s", (i,)), [("i", 10)])) is None


def test_contiguous_segments_are_one_copy():
    """Pixels of 64 lanes packed on both sides (a conv's output row tile stored to NHWC with all
    its channels): one contiguous __memcpy, not 112 segments of 64 lanes at strides 64 (the
    same work and calls; each segment after the first costs strided_segment_cycles)."""
    p, c = v("p"), v("c")
    s = stmt("copy", Load("g", (simp(p * 64 + c + 7168),)), Load("a", (simp(p * 64 + c),)), [("p", 112), ("c", 64)])
    m = _map(s)
    assert m.name == "__memcpy" and "segs" not in m.params and m.params["n"] == 112 * 64 and not m.outer
    # a real stride (the tile's channels a block of a wider tensor) stays a strided copy
    s = stmt("copy", Load("g", (simp(p * 128 + c),)), Load("a", (simp(p * 64 + c),)), [("p", 112), ("c", 64)])
    m = _map(s)
    assert m.params["segs"] == 112 and m.params["n"] == 64 and m.params["ds"] == 128


def test_adding_an_instruction_is_adding_a_description(monkeypatch):
    i = v("i")
    s = stmt("compute", Load("d", (i,)), Bin("min", Load("a", (i,)), Load("b", (i,))), [("i", 64)])
    assert _map(s) is None
    desc = isa.Desc("__bang_minequal", "compute", ((isa.i, isa.n),), Load("dst", (isa.i,)),
                    Bin("min", Load("a", (isa.i,)), Load("b", (isa.i,))),
                    space={"dst": "NRAM", "a": "NRAM", "b": "NRAM"}, rules=isa._vec("dst", "a", "b"),
                    emit=lambda m: f"__bang_minequal({m.ptr('dst')}, {m.ptr('a')}, {m.ptr('b')}, {m.val('n')});")
    monkeypatch.setattr(isa, "DESCRIPTIONS", isa.DESCRIPTIONS + [desc])
    m = _map(s)
    assert m.name == "__bang_minequal" and m.params["n"] == 64
