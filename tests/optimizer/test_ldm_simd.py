"""LDM sizing (swTVM Algorithm 1), SIMD / register-blocking plans and the cost model."""
import math

import pytest

from opt_models import conv_model, make, program, rand, schedule, sunway
from onnx import helper
from swbuild.support.errors import LdmError
from swbuild.backends.sunway.cost import model
from swbuild.backends.sunway.schedule import ldm, simd


def test_tile_candidates_are_powers_of_two_the_extent_and_even_splits():
    assert ldm.candidates(56) == [1, 2, 4, 7, 8, 14, 16, 28, 32, 56]
    assert ldm.candidates(3) == [1, 2, 3]
    assert ldm.candidates(1) == [1]


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu"])
def test_schedule_fits_the_budget_and_accounts_every_buffer(target):
    tc = sunway(target)
    p = program(conv_model(c=32, hw=28, co=64))
    k = p.kernels[0]
    schedule(p, tc)
    s = k.schedule
    assert s.ldm_budget == tc.ldm_budget == {"sunway-emu": 65536 - 8192, "sunway-pro-emu": 262144 - 16384}[target]
    acc = math.prod(s.tiles[a.name] for a in k.axes) * 4
    parts = ldm.ldm_align(acc) + sum(ldm.ldm_align(b.cap(s.tiles) * 4) * b.halves for b in s.boxes if b.context != "out")
    assert s.ldm_bytes == parts <= s.ldm_budget
    assert s.iterators["co"].startswith("size") and s.iterators["ci"].startswith("size")
    # a 3x3 convolution gets SIMD along the output row with register blocking over channels
    assert s.vector is not None and s.vector.v == "o1" and s.vector.r == "co"
    assert s.vector.lanes == (4 if target == "sunway-emu" else 8)
    assert s.vector.kinds == ["vec", "bcast"] and s.vector.dep_r == [False, True]


def test_kernel_that_cannot_fit_says_how_many_bytes_it_needs():
    tc = sunway()
    p = program(conv_model(c=8, hw=16, co=8))
    k = p.kernels[0]
    with pytest.raises(LdmError) as e:
        schedule(p, tc, budget=100)
    # all tiles 1: the accumulator, a 1x1x3x3 input window, a 3x3 filter, one bias: 4 x 64 B
    assert e.value.needed == 256 and e.value.budget == 100
    assert "needs at least 256 bytes of local memory per core, budget is 100 bytes" in str(e.value)


def test_algorithm1_starts_at_64_and_halves_until_it_fits():
    tc = sunway()
    p = program(conv_model(c=64, hw=64, co=64))
    k = p.kernels[0]
    s = ldm.Search(k, tc.hardware, tc.ldm_budget, {}, p.graph)
    cands = {a.name: ldm.candidates(a.extent) for a in s.axes}
    start = {a.name: max(c for c in cands[a.name] if c <= ldm.START) for a in s.axes}
    assert start == {"n": 1, "co": 64, "o0": 64, "o1": 64, "ci": 64, "k0": 3, "k1": 3}
    fit = ldm._shrink_to_fit(s, start, cands)
    assert s.ldm(fit, False) <= s.budget < s.ldm(start, False)
    assert all(fit[n] <= start[n] for n in fit)


def test_options_turn_double_buffering_and_simd_off():
    tc = sunway()
    p = program(conv_model(c=32, hw=28, co=64))
    k = p.kernels[0]
    schedule(p, tc, {"double_buffer": "off", "simd": "off"})
    assert not k.schedule.double_buffer and k.schedule.vector is None
    assert all(b.halves == 1 for b in k.schedule.boxes)


def test_strided_convolution_input_is_gathered():
    tc = sunway()
    k = program(conv_model(c=8, hw=32, co=16, stride=2)).kernels[0]
    tiles = {"n": 1, "co": 16, "o0": 4, "o1": 16, "ci": 8, "k0": 3, "k1": 3}
    vp = simd.plan(k, tiles, tc.hardware)
    assert vp is not None and vp.kinds == ["gather", "bcast"]


def test_micro_kernel_cycle_model():
    hw = sunway().hardware
    k = program(conv_model(c=32, hw=28, co=64)).kernels[0]
    vp = simd.plan(k, {"n": 1, "co": 16, "o0": 7, "o1": 28, "ci": 4, "k0": 3, "k1": 3}, hw)
    # one reduction iteration: R*U vector multiply-adds on the float pipe, U unaligned input
    # vectors (2 accesses each) + R broadcasts + 1 cycle of loop overhead on the other pipe
    fp, mem = vp.R * vp.U, vp.U * 2 + vp.R + 1
    assert simd._mk_inner(vp, vp.R, vp.U, hw) == max(fp, mem)
    # a whole step is close to the SIMD peak: 16*7*28 outputs x 36 taps / 4 lanes
    cyc = simd.step_cycles(k, vp, hw, {"n": 1, "co": 16, "o0": 7, "o1": 28}, 4 * 9)
    ideal = 16 * 7 * 28 * 36 / 4
    assert ideal <= cyc <= 1.25 * ideal
    scalar = simd.step_cycles(k, None, hw, {"n": 1, "co": 16, "o0": 7, "o1": 28}, 4 * 9)
    assert scalar > 3 * cyc


def test_dma_bandwidth_follows_the_measured_curve_and_is_shared():
    hw = sunway().hardware
    for size, bw in hw["dma_curve"]:
        assert model.dma_bandwidth(hw, size) == pytest.approx(bw)
    assert model.dma_bandwidth(hw, 1 << 20) == pytest.approx(20.6e9 * (1 << 20) / ((1 << 20) + 640))
    # one CPE moves 1 MB in 1 KB chunks at 1/64 of the core group's 12.5 GB/s
    assert model.dma_seconds_per_cpe(hw, 1 << 20, 1024) == pytest.approx((1 << 20) / (12.5e9 / 64))


def test_overlap_and_roofline():
    hw = sunway().hardware
    assert model.cpe_seconds(hw, 2.0, 3.0, 0.0, False) == 5.0
    # double-buffered: max + (1 - dma_overlap) * min, plus the exposed first fetch
    assert model.cpe_seconds(hw, 2.0, 3.0, 0.5, True) == pytest.approx(3.0 + 0.2 * 1.5 + 0.5)
    assert model.roofline_seconds(hw, 742.4e9, 0) == pytest.approx(1.0)
    assert model.roofline_seconds(hw, 0, 20.6e9) == pytest.approx(1.0)


def test_elementwise_kernel_is_scalar_and_fits():
    tc = sunway()
    m = make([helper.make_node("Add", ["x", "y"], ["z"])], [("x", [1, 8, 30, 30]), ("y", [1, 8, 30, 30])],
             [("z", [1, 8, 30, 30])])
    p = program(m)
    k = p.kernels[0]
    schedule(p, tc)
    assert k.schedule.vector is None and k.schedule.ldm_bytes <= tc.ldm_budget
    assert rand(1).dtype.name == "float32"


def test_output_channel_plan_competes_on_whole_tiles_only():
    """simd.plan: along the output channels (strided accumulator) where that models fewer
    cycles than along the innermost axis, but only when its axes divide into whole tiles (the
    search costs a full tile; a 14-row axis cut in 8s has a 6-row tile costed as an 8-row one)."""
    hw = sunway().hardware
    k = program(conv_model(c=64, hw=14, co=64)).kernels[0]
    lanes = int(hw["simd_lanes"])
    whole = {"n": 1, "co": 8, "o0": 7, "o1": 14, "ci": 16, "k0": 3, "k1": 3}
    partial = dict(whole, o0=8)
    for tiles in (whole, partial):
        inner = simd._plan_along(k, tiles, hw, lanes, "o1")
        alt = simd._plan_along(k, tiles, hw, lanes, simd.alt_axis(k))
        assert simd.alt_axis(k) == "co" and alt[0] < inner[0]       # the full tile models faster along co
        got = simd.plan(k, tiles, hw)
        assert str(got) == str(alt[1] if simd.whole_tiles(k, tiles, alt[1]) else inner[1])
    assert simd.plan(k, whole, hw).acc_strided and simd.plan(k, whole, hw).r == "o0"
    assert simd.plan(k, partial, hw).v == "o1"
