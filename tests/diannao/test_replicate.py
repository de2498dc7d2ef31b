"""One row of lanes repeated over a tile by doubling copies (schedule/replicate.py): every row
ends up holding row 0, the copies never overlap what they read, and the emulator's cost of the
copies is below the strided copy they replace (bangemu/memcpy.h's formula, toolchain numbers)."""
import numpy as np
import pytest

from swbuild.backends.diannao.schedule.replicate import copies_needed, doubling_copies
from swbuild.ir.loopnest import Bin, iconst
from swbuild.backends.diannao.devir import simp


def _run(row, rows, base):
    """Apply the copies to a buffer whose row 0 holds 1..row and the rest -1; (buffer, copies)."""
    buf = np.full(base + row * rows, -1.0)
    buf[base:base + row] = np.arange(1, row + 1)
    at = lambda e: simp(Bin("+", iconst(base), e))      # noqa: E731
    copies = doubling_copies("r", at, row, rows, (), lambda: "s")
    for c in copies:
        (n,) = [lp.ext.value for lp in c.loops]
        d0 = _offset(c.dst.index[0])
        s0 = _offset(c.expr.index[0])
        assert s0 + n <= d0, "a copy reads only rows written before it"
        buf[d0:d0 + n] = buf[s0:s0 + n]
    return buf, copies


def _offset(e):
    """The index at i = 0 (an affine i + constant)."""
    from swbuild.backends.diannao.devir import subst
    return int(simp(subst(e, {"i": 0})).value)


@pytest.mark.parametrize("row,rows", [(64, 112), (128, 28), (64, 2), (32, 7), (64, 1), (16, 64)])
def test_every_row_holds_row_zero(row, rows):
    buf, copies = _run(row, rows, 64)
    assert len(copies) == copies_needed(rows)
    np.testing.assert_array_equal(buf[64:].reshape(rows, row), np.tile(np.arange(1, row + 1), (rows, 1)))


def _memcpy_cycles(size, segs):
    """bangemu/memcpy.h for NRAM2NRAM: start-up, each further segment, bytes at 128 per cycle
    (toolchains/diannao.toml: memcpy_startup_cycles 32, strided_segment_cycles 4)."""
    return 32 + (segs - 1) * 4 + -(-size * segs // 128)


def test_cheaper_than_the_strided_copy():
    # layer1 of ResNet-18: 64 float lanes repeated over a tile of 2 x 56 pixels
    row, rows = 64, 112
    _, copies = _run(row, rows, 0)
    doubling = sum(_memcpy_cycles(c.loops[0].ext.value * 4, 1) for c in copies)
    strided = _memcpy_cycles(row * 4, rows - 1)
    assert (doubling, strided) == (7 * 32 + 222, 32 + 110 * 4 + 222)
