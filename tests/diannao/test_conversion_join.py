"""Per-channel requantization multipliers (schedule/conversion_join.py): the window proof that
the zero point joins __bang_float2int8_rn's rounding gives integer._z_joins's answer (every
integer tried) on each scale, and conversion_rounds folds a per-channel multiplier only where
every channel's is proven, bit for bit on every accumulator."""
import numpy as np

from swbuild.backends.diannao.schedule.conversion_join import joins_every_channel, joins_on_windows
from swbuild.backends.diannao.schedule.integer import MAGIC, _z_joins, conversion_rounds
from swbuild.ir.loopnest import Acc, Bin, Const, Load


def test_windows_agree_with_every_integer():
    rng = np.random.default_rng(1)
    scales = [0.25, 0.5, 0.37, -0.37, -0.125] + list(rng.uniform(1e-4, 0.05, 60)) + list(-rng.uniform(1e-4, 0.05, 10))
    answers = []
    for s in scales:
        s = float(np.float32(s))
        for z in (-128.0, 0.0, 3.0, -7.0, 5.0):
            answers.append(joins_on_windows(s, z))
            assert answers[-1] == _z_joins.__wrapped__(s, z), (s, z)
    assert 0 < sum(answers) < len(answers)         # both outcomes occur
    assert not joins_on_windows(float("nan"), 0.0) and not joins_on_windows(0.25, 0.5)


def _epilogue(z):
    """saturating_int8's (acc * s[c] + M) - (M - z), s a per-channel Load."""
    return Bin("-", Bin("+", Bin("*", Acc(), Load("s", ("co",))), Const(MAGIC)), Const(MAGIC - z))


def _int8(acc, s, e_folded, z):
    v = acc * np.float32(s)
    if e_folded:
        return np.clip(np.rint((v + np.float32(z)).astype(np.float64)), -128, 127)
    return np.clip(np.rint(((v + np.float32(MAGIC)) - np.float32(MAGIC - z)).astype(np.float64)), -128, 127)


def test_a_per_channel_multiplier_folds_only_where_every_channel_joins():
    rng = np.random.default_rng(2)
    good = np.float32([0.25, 0.5, 0.125])
    mixed = np.float32(rng.uniform(1e-3, 4e-3, 64))
    assert joins_every_channel(good, -128.0) and not joins_every_channel(mixed, -128.0)
    assert joins_every_channel(mixed, 0.0)           # v + 0 is v: always
    for scales, z, folds in [(good, -128.0, True), (mixed, -128.0, False), (mixed, 0.0, True)]:
        e = _epilogue(z)
        got = conversion_rounds(e, lambda x: isinstance(x, Acc), lambda load: scales)
        assert (got is not e) == folds
        if folds:
            assert got == (Bin("+", e.a.a, Const(z)) if z else e.a.a)
            for s in scales:
                acc = np.arange(-np.ceil(300 / s), np.ceil(300 / s) + 1).astype(np.float32)
                np.testing.assert_array_equal(_int8(acc, s, True, z), _int8(acc, s, False, z))
    # no values known: kept
    assert conversion_rounds(_epilogue(0.0), lambda x: True, lambda load: None) == _epilogue(0.0)
