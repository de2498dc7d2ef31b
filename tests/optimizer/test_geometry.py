"""Box footprints, DMA shapes, constant blocking, the CPE split and loop reordering."""
import math

import numpy as np
import pytest

from opt_models import conv_model, program
from swbuild.ir.loopnest import Axis, Bin, Buffer, Kernel, Load
from swbuild.backends.sunway.schedule import grid, reorder
from swbuild.backends.sunway.schedule.dma import blocked_array, box_plans, transfers


def _conv(stride=2):
    k = program(conv_model(c=4, hw=16, co=8, stride=stride)).kernels[0]
    boxes = box_plans(k)
    return k, {b.buf: b for b in boxes if b.context != "out"}, boxes[-1]


def test_composite_subscript_footprint_of_strided_conv():
    k, boxes, _ = _conv(stride=2)
    x = next(b for b in boxes.values() if b.pad_dims)
    tiles = {"n": 1, "co": 8, "o0": 4, "o1": 8, "ci": 2, "k0": 3, "k1": 3}
    # rows o0*2 + k0 - 1 over a tile of 4 outputs and the 3 taps: 2*(4-1) + 3 = 9 rows
    assert x.span(tiles) == (1, 2, 9, 17)         # columns -1..15: the whole 16 plus the left pad
    assert x.pad_dims == (2, 3)
    lo, hi = x.footprint({"n": (0, 1), "ci": (0, 2), "o0": (4, 4), "o1": (0, 8), "k0": (0, 3), "k1": (0, 3)})
    assert (lo, hi) == ([0, 0, 7, -1], [0, 1, 15, 15])


def test_dma_shape_merges_whole_rows_and_strides_over_channels():
    k, boxes, out = _conv(stride=2)
    x = next(b for b in boxes.values() if b.pad_dims)
    tiles = {"n": 1, "co": 8, "o0": 4, "o1": 8, "ci": 2, "k0": 3, "k1": 3}
    x.finish(tiles)
    assert x.merge == 3                      # the column dim is whole in every footprint
    # first row tile: rows -1..7 clamp to 0..7 (8 rows of 16 = 512 B contiguous per channel),
    # one strided DMA over the 2 channels
    assert x.transfer([0, 0, -1, -1], [0, 1, 7, 15]) == (1, 2 * 8 * 16 * 4, 8 * 16 * 4)
    # entirely outside the tensor: nothing to fetch (the pad is materialised in LDM)
    assert x.transfer([0, 0, -5, -1], [0, 1, -2, 15]) == (0, 0, 0)
    out.finish(tiles)
    calls, by, chunk = transfers(out, [np.array([0]), np.array([0]), np.array([4]), np.array([0])],
                                 [np.array([0]), np.array([7]), np.array([7]), np.array([7])])
    assert (calls[0], by[0], chunk[0]) == (1, 8 * 4 * 8 * 4, 4 * 8 * 4)


def test_blocked_constant_layout_makes_each_tile_one_block():
    a = np.arange(15, dtype=np.float32).reshape(5, 3)
    blk, grid = blocked_array(a, (5, 3), (2, 3))
    assert grid == [3, 1] and blk.shape == (3, 1, 2, 3)
    np.testing.assert_array_equal(blk[1, 0], a[2:4])
    np.testing.assert_array_equal(blk[2, 0], np.vstack([a[4:5], np.zeros((1, 3), np.float32)]))


@pytest.mark.parametrize("total", [1, 63, 64, 100, 129, 4096])
@pytest.mark.parametrize("mode", grid.MODES)
def test_every_tile_goes_to_exactly_one_cpe_and_balance_is_ceil(total, mode):
    lists = grid.cpe_tile_lists(total, 64, mode)
    flat = sorted(t for lst in lists for t in lst)
    assert flat == list(range(total))
    assert max(len(lst) for lst in lists) == math.ceil(total / 64)
    if mode == "block":
        assert all(lst == list(range(lst[0], lst[0] + len(lst))) for lst in lists if lst)


def _two_reduce_kernel():
    i, a, b = Axis("i", 4), Axis("a", 8), Axis("b", 8)
    bufs = {"b0": Buffer("b0", "X", (4, 8, 8)), "b1": Buffer("b1", "Y", (8,)), "b2": Buffer("b2", "Z", (4,))}
    body = Bin("*", Load("b0", (i.var, a.var, b.var)), Load("b1", (a.var,)))
    return Kernel("k", "Test", "n", "b2", (i,), body, bufs, reduce_axes=(b, a), combine="sum")


def test_reorder_puts_the_loop_a_small_box_depends_on_outermost():
    k = _two_reduce_kernel()
    boxes = box_plans(k)
    tiles = {"i": 4, "a": 2, "b": 2}
    for bx in boxes:
        bx.finish(tiles)
    order, (ops, _) = reorder.order_reduce(k, boxes, tiles)
    assert order == ["a", "b"]                  # Y[a] is then fetched 4 times per tile, not 16
    y = next(bx for bx in boxes if bx.buf == "b1")
    x = next(bx for bx in boxes if bx.buf == "b0")
    counts = reorder.reduce_counts(k, tiles)
    assert reorder.fetches_per_tile(y, order, counts) == 4
    assert reorder.fetches_per_tile(x, order, counts) == 16
    assert y.level == 0 and x.level == 1
    assert ops == 4 * 1 + 16 * 4                # X: 4 strided calls (one per i row) per fetch
