"""Dependences, mapping, tiling and copies, checked against isl without running code."""
import dataclasses

import islpy as isl
import pytest

from scop_helpers import KERNELS, KERNELS_DIR, SIZES
from swbuild.config import toolchain
from swbuild.support.errors import LdmError
from swbuild.frontends import scop
from swbuild.optimizer.polyhedral import dependences, plan_region, verify

TC = toolchain.load("sunway-emu")


def plans(name, defines=(), tc=TC, **kw):
    return [plan_region(r, tc, **kw) for r in scop.extract(KERNELS_DIR / f"{name}.c", tc, [str(KERNELS_DIR)], list(defines))]


@pytest.mark.parametrize("variant", ["default", "symbolic", "odd"])
def test_every_plan_is_legal_and_fits(variant):
    """No dependence crosses CPEs, each CPE's tiled order keeps the others, copy boxes fit
    their buffers, and the buffers fit the LDM budget."""
    defines = {"default": [], "symbolic": ["SYMBOLIC"],
               "odd": ["SYMBOLIC"] + [f"{k}={v}" for k, v in SIZES["odd"].items()]}[variant]
    for name in KERNELS + ["features"]:
        for p in plans(name, defines):
            verify(p)
            for kp in p.kernels:
                assert kp.tiling.ldm_bytes <= TC.ldm_budget, (name, kp.tiling)


def test_dependence_kinds_gemm():
    r = scop.extract(KERNELS_DIR / "gemm.c", TC, [str(KERNELS_DIR)])[0]
    m = dependences.build_model(r)
    d = dependences.dependences(m)
    # C[i][j] *= beta then += over k: flow, anti and output all on C, none across (i, j)
    for rel in (d.flow, d.anti, d.output):
        assert not rel.is_empty()
        deltas = rel.intersect_domain(isl.UnionSet(m.domains["S1"])).intersect_range(
            isl.UnionSet(m.domains["S1"])).deltas()
        assert deltas.is_subset(isl.UnionSet("{ S1[0, k, 0] : k > 0 }")), deltas


def test_gemm_maps_on_the_mesh_and_keeps_k_sequential():
    kp = plans("gemm")[0].kernels[0]
    assert kp.tiling.grid == (8, 8) and kp.tiling.members == (0, 1)
    assert not kp.kernel.coincident[2]           # the reduction over k stays on one CPE
    one_d = plans("gemm", force="1d")[0].kernels[0]
    assert one_d.tiling.grid == (64,)


def test_stencil_time_loop_stays_on_the_host():
    p = plans("jacobi-2d")[0]
    assert len(p.kernels) == 2 and all(kp.kernel.prefix_len == 2 for kp in p.kernels)
    assert "K0" in str(p.host.schedule) and "K1" in str(p.host.schedule)


def test_triangular_footprints_are_boxes_within_budget():
    for name in ("syrk", "symm", "trmm"):
        for kp in plans(name, ["SYMBOLIC"])[0].kernels:
            assert all(g.extents and all(e > 0 for e in g.extents) for g in kp.groups)


def test_trmm_reads_of_later_rows_get_their_own_buffer():
    """B[k][j] (k > i) is never fed by this kernel's writes: it is read from main memory
    into a separate buffer instead of widening the read-write box of B[i][j]."""
    kp = plans("trmm")[0].kernels[0]
    groups = [g for g in kp.groups if g.array == "B"]
    assert sorted(g.rw for g in groups) == [False, True]


def test_write_only_boxes_are_not_copied_in():
    kp = plans("jacobi-2d")[0].kernels[0]            # B[i][j] = f(A)
    (b,) = [c for lv in kp.levels for c in lv.copies if c.group.array == "B"]
    assert b.group.rw and not b.copy_in


def test_no_fit_is_an_ldm_error_with_bytes():
    tiny = dataclasses.replace(TC, hardware=dict(TC.hardware, ldm_bytes=128, ldm_reserve_bytes=0))
    with pytest.raises(LdmError, match=r"needs at least \d+ bytes .* budget is 128 bytes"):
        plans("gemm", tc=tiny)
    fallback = plans("gemm", tc=tiny, serial_fallback=True, warn=lambda m: None)[0]
    assert fallback.serial and "budget" in fallback.reason


def test_interleaved_write_sets_never_share_a_write_back_box(tmp_path):
    """A[2j + i]: CPEs mapped over i would own interleaved elements whose bounding boxes
    overlap (a stale write-back could win); the mapping over j owns disjoint intervals."""
    def region(bound):
        src = tmp_path / f"w{bound}.c"
        src.write_text(f"#define N 500\ndouble A[3 * N], B[N];\nvoid f(void) {{ int i, j;\n#pragma scop\n"
                       f"for (i = 0; i < {bound}; i++) for (j = 0; j < N; j++) A[2 * j + i] = B[j];\n"
                       "#pragma endscop\n}\n")
        return scop.extract(src, TC)[0]
    kp = plan_region(region(2), TC).kernels[0]
    assert kp.tiling.members == (1,), kp.tiling
    from swbuild.support.errors import UnsupportedError
    with pytest.raises(UnsupportedError, match=r"w3.c:4: .*may overlap other CPEs' writes"):
        plan_region(region(3), TC)
