"""The requantization of an integer convolution whose int8 result is stored as bytes
(schedule/integer.py saturating_int8): __bang_float2int8_rn saturates, so the clamp is left to
it and the zero point joins the rounding's subtraction. Bit for bit the vector steps it
replaces, evaluated in float32 as the vector unit does, on ties, limits and far-out values."""
import numpy as np

from swbuild.backends.diannao.schedule.integer import MAGIC, conversion_rounds, fewer_passes, saturating_int8, vector_requant
from swbuild.ir.loopnest import Acc, Bin, Const, Select, Un


def _requant(scale, z, lo, hi):
    """ops/quant.py's saturate(rint(acc * scale) + z, lo, hi) before vector_requant."""
    v = Bin("+", Un("round", Bin("*", Acc(), Const(scale))), Const(z))
    return Select(Bin(">=", v, Const(lo)), Select(Bin("<=", v, Const(hi)), v, Const(hi)), Const(lo))


def _eval(e, acc):
    """The vector steps in float32, each rounded as __bang_add_scalar and friends round."""
    if isinstance(e, Acc):
        return acc
    if isinstance(e, Const):
        return np.float32(e.value)
    if isinstance(e, Select):        # __bang_mineq/maxeq_scalar: x <= s ? x : s (x >= s ? x : s)
        c, a, b = _eval(e.cond.a, acc), _eval(e.a, acc), _eval(e.b, acc)
        return np.where(c <= _eval(e.cond.b, acc) if e.cond.op == "<=" else c >= _eval(e.cond.b, acc), a, b)
    a, b = _eval(e.a, acc), _eval(e.b, acc)
    return {"+": np.add, "-": np.subtract, "*": np.multiply, "min": np.minimum, "max": np.maximum}[e.op](a, b)


def _to_int8(x):
    """__bang_float2int8_rn (bangemu/vector.h): rint, then saturate to [-128, 127]."""
    return np.clip(np.rint(x.astype(np.float64)), -128, 127).astype(np.int8)


def _accs():
    rng = np.random.default_rng(0)
    ties = (np.arange(-300, 300) + 0.5) / np.float32(0.25)       # acc * 0.25 lands on k + 0.5
    far = np.array([2.0 ** 22, 2.0 ** 22 + 3, 2.0 ** 23, 2.0 ** 24 - 1]) * 4
    return np.concatenate([ties, far, -far, rng.integers(-2 ** 24, 2 ** 24, 4000),
                           np.arange(-2000, 2000)]).astype(np.float32)


def test_folded_requantization_matches_the_clamped_one_bit_for_bit():
    acc = _accs()
    for scale, z, lo in [(0.25, -128.0, -128.0), (0.25, 5.0, -128.0), (0.0019453269, -128.0, -128.0),
                         (0.25, 0.0, -128.0), (0.37, 17.0, -128.0)]:
        epi = vector_requant(_requant(scale, z, lo, 127.0), set())
        folded = saturating_int8(epi)
        assert folded != epi and isinstance(folded, Bin) and folded.b == Const(MAGIC - z), (scale, z, folded)
        np.testing.assert_array_equal(_to_int8(_eval(folded, acc)), _to_int8(_eval(epi, acc)))


def _on_every_integer(scale, z):
    """Every integer accumulator whose product lands within 140 + |z| of zero, the ties
    n * s = k + 0.5 and their float neighbours among them when s is a power of two."""
    n = np.ceil((140 + abs(z)) / abs(scale))
    return np.arange(-n, n + 1).astype(np.float32)


def test_the_conversion_rounds_where_proven_bit_for_bit():
    # __bang_float2int8_rn rounds ties to even: fl(acc * s) + z replaces (acc * s + M) - (M - z)
    # only where every integer accumulator gives the same int8 (an even z keeps a tie's parity)
    kept = 0
    for scale, z in [(0.25, -128.0), (0.25, 0.0), (0.25, 3.0), (0.5, 1.0), (0.0043728449, -128.0),
                     (0.0013079912, 5.0), (0.0012010809, -7.0), (0.00056024367, 0.0), (-0.37, 17.0), (-0.125, 2.0)]:
        scale = float(np.float32(scale))
        folded = saturating_int8(vector_requant(_requant(scale, z, -128.0, 127.0), set()))
        rounded = conversion_rounds(folded, lambda x: isinstance(x, Acc))
        acc = _on_every_integer(scale, z)
        np.testing.assert_array_equal(_to_int8(_eval(rounded, acc)), _to_int8(_eval(folded, acc)), err_msg=str((scale, z)))
        if rounded == folded:
            kept += 1
        else:
            assert _passes(rounded) == _passes(folded) - (2 if z == 0 else 1)
        if scale == 0.25 and z in (-128.0, 0.0):
            assert rounded != folded
        if scale == 0.25 and z == 3.0:      # a tie, 0.5 + 3 = 3.5, rounds to 4 where rint(0.5) + 3 is 3
            assert rounded == folded
    assert kept >= 2
    # a multiplicand not proven an exact integer keeps the rounding
    folded = saturating_int8(vector_requant(_requant(0.25, -128.0, -128.0, 127.0), set()))
    assert conversion_rounds(folded, lambda x: False) == folded


def test_a_clamp_inside_int8s_range_is_kept():
    # a relu at zero point -100 clamps at -100, which the conversion's saturation would not
    for lo, hi in [(-100.0, 127.0), (-128.0, 100.0)]:
        epi = vector_requant(_requant(0.25, -100.0 if lo == -100.0 else 0.0, lo, hi), set())
        assert saturating_int8(epi) == epi
    assert saturating_int8(Bin("+", Acc(), Const(1.0))) == Bin("+", Acc(), Const(1.0))


def test_requantization_kept_as_float_takes_fewer_passes_bit_for_bit():
    acc = _accs()
    for scale, z, lo, s2 in [(0.25, -128.0, -128.0, 0.0214), (0.0043728449, -128.0, -128.0, 0.02140989),
                             (0.25, 3.0, -128.0, 0.5), (0.37, 0.0, 0.0, 1.0), (0.3, 10.0, 10.0, 0.1)]:
        epi = vector_requant(_requant(scale, z, lo, 127.0), set())
        for e in (epi, Bin("*", Bin("-", epi, Const(z)), Const(s2))):       # requantized, and dequantized
            fewer = fewer_passes(e)
            assert _passes(fewer) < _passes(e), (fewer, e)
            np.testing.assert_array_equal(_eval(fewer, acc), _eval(e, acc))


def test_clamp_instructions_take_one_pass_each_bit_for_bit():
    # with __bang_mineq/maxeq_scalar (mtp_322+) the clamp is two passes and + z joins the rounding
    acc = _accs()
    for scale, z, lo, hi, s2 in [(0.25, -128.0, -128.0, 127.0, 0.0214), (0.0043728449, 4.0, -128.0, 127.0, 0.02140989),
                                 (0.25, 3.0, -128.0, 127.0, 0.5), (0.37, 0.0, 0.0, 127.0, 1.0),
                                 (0.3, 10.0, 10.0, 100.0, 0.1), (-0.25, -11.0, -128.0, 127.0, 0.03)]:
        epi = vector_requant(_requant(scale, z, lo, hi), set())
        for e in (epi, Bin("*", Bin("-", epi, Const(z)), Const(s2))):
            fewer = fewer_passes(e, clamps=True)
            assert _passes(fewer) < _passes(fewer_passes(e)) < _passes(e), (fewer, e)
            np.testing.assert_array_equal(_eval(fewer, acc), _eval(e, acc))
    ties = (np.arange(-300, 300, dtype=np.float32) + np.float32(0.5)) / np.float32(0.25)
    got = _eval(fewer_passes(vector_requant(_requant(0.25, 3.0, -128.0, 127.0), set()), clamps=True), ties)
    np.testing.assert_array_equal(got, np.clip(np.rint(ties.astype(np.float64) * 0.25) + 3, -128, 127))


def _passes(e):
    """Vector passes three_address.py emits: min five, s - x two, a max with 0 one (relu), the rest one."""
    if isinstance(e, (Acc, Const)):
        return 0
    if isinstance(e, Select):       # one __bang_mineq/maxeq_scalar
        return 1 + _passes(e.a)
    own = {"min": 5, "max": 1 if e.b == Const(0.0) else 3}.get(e.op, 2 if isinstance(e.a, Const) else 1)
    return own + _passes(e.a) + _passes(e.b)
