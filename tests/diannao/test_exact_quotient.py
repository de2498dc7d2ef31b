"""A QuantizeLinear whose scale has no exact reciprocal, on the vector unit as x * fl(1/s) plus
its exact error (schedule/exact_quotient.py, issue 36): the proof accepts it only where it
quantizes like onnxruntime's division, and it does on the rounding boundaries x = (k + 1/2) * s,
their float neighbours, NaN, infinities, overflowing splits and random floats of every
magnitude; end to end bit for bit against onnxruntime with no scalar code left."""
import re
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

import swbuild.backends.diannao.schedule.exact_quotient as eq
from dn_build import build_bit_exact
from swbuild.backends.diannao.schedule.quantize import vector_quantize
from swbuild.backends.diannao.schedule.reciprocal import exact_reciprocal
from swbuild.backends.diannao.schedule.three_address import Operand, ThreeAddress
from swbuild.ir.loopnest import Axis, Const, Load, Select
from test_vector_quantize import I, _eval, _floats, _kernel, _ops, _program, _qdq, _saturate, _to_int8

IMAGE_SCALE = 0.03657234460115433      # ResNet-18's input: fl(1/s) misquantizes 12 floats
HW = {"cores": 16, "vector_startup_cycles": 16, "vector_bytes_per_cycle": 128, "scalar_cycles_per_op": 1}


def _scales():
    rng = np.random.default_rng(3)
    return [IMAGE_SCALE, 0.1, 1 / 3, 0.005579044111073017] + list(rng.uniform(1e-3, 0.2, 6))


@pytest.mark.parametrize("s", _scales())
def test_two_floats_quantize_every_float_as_the_division(s):
    s32 = np.float32(s)
    assert eq.proven(float(s32), -126, 129)
    x = _floats(float(s32), -128, 127, -2, n=100000)
    with np.errstate(all="ignore"):
        want = np.clip(np.nan_to_num(np.rint(x / s32), nan=-126), -126, 129)
        got = np.clip(np.nan_to_num(np.rint(eq.evaluate(x, s32)), nan=-126), -126, 129)
    np.testing.assert_array_equal(got, want)
    # the expression the kernel computes is the one the proof evaluated, step for step
    tree = _eval(eq.quotient(Load("x", (I,)), float(s32)), {"x": x})
    np.testing.assert_array_equal(tree.view(np.int32), eq.evaluate(x, s32).view(np.int32))


def test_the_proof_finds_the_reciprocals_counterexamples(monkeypatch):
    s = float(np.float32(IMAGE_SCALE))
    assert exact_reciprocal(s, -126.0, 129.0) is None
    monkeypatch.setattr(eq, "evaluate", lambda x, s: np.asarray(x, np.float32) * (np.float32(1) / np.float32(s)))
    assert not eq.proven(s, -126, 129)


@pytest.mark.parametrize("z", [-2.0, 0.0, 5.0])
def test_the_rewrite_is_bit_for_bit_and_has_no_division(z):
    s = float(np.float32(IMAGE_SCALE))
    p = _program({"x": None})
    epi = _saturate(Load("x", (I,)), s, z)
    x = _floats(s, -128, 127, z, n=50000)
    want = _eval(epi, {"x": x})
    big = replace(_kernel(epi, "x"), axes=(Axis("i", 1 << 16),))     # 4096 elements a core
    for bytes_out in (False, True):
        got, notes = vector_quantize(epi, big, p, bytes_out, HW)
        assert notes == [(s, "two floats")] and "/" not in _ops(got)
        out = _eval(got, {"x": x})
        if bytes_out:
            np.testing.assert_array_equal(_to_int8(out), _to_int8(want))
        else:
            np.testing.assert_array_equal(out, want)
    # without the hardware table (or on a tiny tensor) the division stays: nothing says it pays
    assert vector_quantize(epi, _kernel(epi, "x"), p, False)[1] == [(s, None)]
    assert not eq.cheaper(_kernel(epi, "x"), HW)     # 4 elements


def test_image_quantize_runs_on_the_vector_unit_bit_exact(tc, tmp_path):
    s, z = IMAGE_SCALE, -2
    s32 = np.float32(s)
    rng = np.random.default_rng(6)
    x = rng.standard_normal(16 * 32 * 32).astype(np.float32)
    h = (np.arange(-126, 130) + 0.5).astype(np.float64)
    x0 = (h * np.float64(s32)).astype(np.float32)
    near = (x0.view(np.int32)[:, None] + np.arange(-3, 4, dtype=np.int32)).ravel().view(np.float32)
    # the 12 floats where the product by fl(1/s) quantizes otherwise than the division are among them
    assert np.sum(np.rint(near * (np.float32(1) / s32)) != np.rint(near / s32)) == 12
    x[:near.size] = near
    x[near.size:near.size + 6] = [np.nan, np.inf, -np.inf, -0.0, 1e36, -3e38]
    build_bit_exact(tc, _qdq(s, z), "qimg", x.reshape(1, 16, 32, 32), tmp_path)
    device = next((tmp_path / "b").glob("*_device.mlu")).read_text()
    assert "4097.0f" in device and not re.search(r"SWB_SCALAR\(\d", device)


def _run_statements(stmts, env):
    """The three-address statements in float32, in order (tiles as arrays, written in place)."""
    env = dict(env)

    def ev(e):
        if isinstance(e, Load):
            return env[e.buf]
        if isinstance(e, Const):
            return np.float32(e.value)
        if isinstance(e, Select):
            c = e.cond
            a, b = ev(c.a), ev(c.b)
            keep = a >= b if c.op == ">=" else a <= b
            return np.where(keep, ev(e.a), ev(e.b)).astype(np.float32)
        f = {"+": np.add, "-": np.subtract, "*": np.multiply}[e.op]
        return np.asarray(f(ev(e.a), ev(e.b)), np.float32)
    with np.errstate(all="ignore"):
        for st in stmts:
            env[st.dst.buf] = ev(st.expr)
    return env


def test_three_address_computes_the_quotients_repeated_subtrees_once():
    """x' (read four times), t and x_hi (twice each) are computed once and kept until their last
    read, also where a clamp ran in place on the input tile: 11 statements, equal bit for bit to
    the expression and to the proof's evaluation."""
    s = float(np.float32(IMAGE_SCALE))
    tree = eq.quotient(Load("x", (I,)), s)
    ta = ThreeAddress(SimpleNamespace(sid=lambda kind, label: label), "e", lambda: Const(4, "int"))
    res = ta.run(tree, lambda ld: Operand("buf", "x0"), ())
    assert len(ta.stmts) == eq.passes(tree) == 11
    x = _floats(s, -128, 127, -2, n=20000)
    x[:5] = [np.nan, np.inf, -np.inf, 1e36, -3e38]
    got = _run_statements(ta.stmts, {"x0": x})[res.ref]
    np.testing.assert_array_equal(got.view(np.int32), eq.evaluate(x, s).view(np.int32))
    np.testing.assert_array_equal(got.view(np.int32), _eval(tree, {"x": x}).view(np.int32))
