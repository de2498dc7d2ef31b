"""QuantizeLinear on the MLU's vector unit (schedule/quantize.py, reciprocal.py; issue 36):
the product by a reciprocal only where it is proven to give the quantized value of the true
division for every float32 (or every value the input can take), NaN-aware clamps
(__bang_maxeq_scalar / __bang_mineq_scalar) and rounding by 1.5 * 2^23. Bit for bit the
onnxruntime arithmetic ops/quant.py writes, over every int8 pair of a residual Add, over ties,
limits, NaN and infinities of a float input, and end to end against onnxruntime."""
import re
from types import SimpleNamespace as NS

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from dn_build import build_bit_exact
from swbuild.backends.diannao.schedule.integer import MAGIC
from swbuild.backends.diannao.schedule.quantize import vector_quantize
from swbuild.backends.diannao.schedule.reciprocal import _agrees, exact_reciprocal
from swbuild.backends.diannao.schedule.three_address import Operand, ThreeAddress
from swbuild.ir.graph import Tensor
from swbuild.ir.loopnest import Axis, Bin, Buffer, Const, Kernel, Load, Select, Un, Var, transform

I = Var("i")


def _program(dtypes):
    tensors = {n: Tensor(n, (4,), "float32", None) for n in list(dtypes) + ["y"]}
    return NS(graph=NS(tensors=tensors, exact_ints={n: d for n, d in dtypes.items() if d}), root=lambda t: t)


def _kernel(value, names):
    bufs = {n: Buffer(n, n, (4,), "float32") for n in names} | {"o": Buffer("o", "y", (4,), "float32")}
    return Kernel("k", "QuantizeLinear", "q", "o", (Axis("i", 4),), value, bufs, epilogue=value)


def _saturate(x, s, z, lo=-128.0, hi=127.0):
    """ops/quant.py's saturate(rint(x / s) + z, lo, hi)."""
    v = Bin("+", Un("round", Bin("/", x, Const(s))), Const(z))
    return Select(Bin(">=", v, Const(lo)), Select(Bin("<=", v, Const(hi)), v, Const(hi)), Const(lo))


def _eval(e, env):
    """float32, one rounding per step, as the vector unit and the generated C compute."""
    if isinstance(e, Load):
        return env[e.buf]
    if isinstance(e, Const):
        return np.float32(e.value)
    if isinstance(e, Un):
        return np.rint(_eval(e.a, env))
    if isinstance(e, Select):
        return np.where(_eval(e.cond, env), _eval(e.a, env), _eval(e.b, env)).astype(np.float32)
    a, b = _eval(e.a, env), _eval(e.b, env)
    with np.errstate(all="ignore"):
        return {">=": np.greater_equal, "<=": np.less_equal, "+": np.add, "-": np.subtract, "*": np.multiply,
                "/": np.divide}[e.op](a, b)


def _to_int8(x):
    """__bang_float2int8_rn (bangemu/vector.h): rint, saturate, NaN to 0."""
    x = np.nan_to_num(np.asarray(x, np.float64), nan=0.0, posinf=1e9, neginf=-1e9)
    return np.clip(np.rint(x), -128, 127).astype(np.int8)


def _ops(e):
    found = set()
    transform(e, lambda x: found.add(x.op) if isinstance(x, Bin) else None)
    return found


def _floats(s, lo, hi, z, n=200000, seed=0):
    """Ties and their neighbours (x = (k + 1/2) * s, a few ulps around), limits, NaN, infinities,
    zeros, huge values and seeded random floats of every magnitude."""
    rng = np.random.default_rng(seed)
    h = np.arange(lo - z - 2, hi - z + 2) + 0.5
    x0 = (h * s).astype(np.float32)
    near = (x0.view(np.int32)[:, None] + np.arange(-6, 7, dtype=np.int32)).ravel().view(np.float32)
    special = np.float32([np.nan, np.inf, -np.inf, 0.0, -0.0, 3e38, -3e38, 1e-40, -1e-40, 2.0 ** 22, -2.0 ** 22])
    rnd = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(np.float32)
    anything = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32).view(np.float32)
    return np.concatenate([near, special, rnd, anything])


# ---- the proof ---------------------------------------------------------------------------

@pytest.mark.parametrize("s", [0.25, 2.0, 1 / 64, 0.029791677370667458, 0.1, 1 / 3, 0.0214098934084177])
def test_a_proven_reciprocal_quantizes_every_float_as_the_division(s):
    s32 = np.float32(s)
    r = exact_reciprocal(float(s32), -126.0, 129.0)
    if float(s32) in (0.25, 2.0, 1 / 64):       # 1/s exact: always proven
        assert r == 1 / float(s32)
    if r is None:       # no proof: fl(1 / s) itself disagrees in some window (checked below)
        assert not _agrees(float(s32), np.float32(1) / s32, -126.0, 129.0)
        return
    x = _floats(float(s32), -128, 127, -2)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(np.clip(np.rint(x * np.float32(r)), -126, 129),
                                      np.clip(np.rint(x / s32), -126, 129))


def test_the_proof_refuses_a_reciprocal_with_a_counterexample():
    """A scale whose fl(1/s) misrounds a tie: the proof must say no (and does find it)."""
    rng = np.random.default_rng(5)
    for s in rng.uniform(1e-3, 1e-1, 40).astype(np.float32):
        r0 = np.float32(1) / s
        h = np.arange(-128, 128) + 0.5
        x = (h[:, None] * np.float64(s)).astype(np.float32).view(np.int32) + np.arange(-24, 25, dtype=np.int32)
        x = x.ravel().view(np.float32)
        differs = not np.array_equal(np.clip(np.rint(x * r0), -128, 127), np.clip(np.rint(x / s), -128, 127))
        assert _agrees(float(s), r0, -128.0, 127.0) == (not differs)


# ---- the rewrite, bit for bit ------------------------------------------------------------

def _residual(sa, za, sb, zb, s, z, lo=-128.0, hi=127.0):
    x = Bin("+", Bin("*", Bin("-", Load("a", (I,)), Const(za)), Const(sa)),
            Bin("*", Bin("-", Load("b", (I,)), Const(zb)), Const(sb)))
    return _saturate(x, s, z, lo, hi)


@pytest.mark.parametrize("args", [(0.041398853, 7.0, 0.029791677, -128.0, 0.039041586, -128.0),
                                  (0.0438, -5.0, 0.0214, -128.0, 0.0298, -128.0), (0.5, 0.0, 0.5, 0.0, 0.25, 3.0),
                                  (0.02, 10.0, 0.03, -7.0, 1e-3, 0.0), (0.013, 0.0, 0.021, 4.0, 0.017, 0.0, 0.0, 127.0)])
def test_residual_add_requantization_on_every_int8_pair(args):
    p = _program({"a": "int8", "b": "int8"})
    a, b = (g.astype(np.float32).ravel() for g in np.meshgrid(np.arange(-128, 128), np.arange(-128, 128)))
    epi = _residual(*args)
    want = _eval(epi, {"a": a, "b": b})
    for bytes_out in (False, True):
        got, notes = vector_quantize(epi, _kernel(epi, "ab"), p, bytes_out)
        assert len(notes) == 1 and not isinstance(got, Select) and "/" not in _ops(got) and notes[0][1] is not None
        out = _eval(got, {"a": a, "b": b})
        if bytes_out:
            np.testing.assert_array_equal(_to_int8(out), _to_int8(want))
        else:
            np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("s,z", [(0.25, 3.0), (0.03657234460115433, -2.0), (1 / 3, 0.0), (0.5, -128.0)])
def test_a_float_input_with_nan_and_infinities(s, z):
    """A graph input may hold anything: NaN goes to lo as onnxruntime's clamp sends it."""
    p = _program({"x": None})
    epi = _saturate(Load("x", (I,)), float(np.float32(s)), z)
    x = _floats(float(np.float32(s)), -128, 127, z)
    want = _eval(epi, {"x": x})
    for bytes_out in (False, True):
        got, notes = vector_quantize(epi, _kernel(epi, "x"), p, bytes_out)
        assert (notes[0][1] is None) == ("/" in _ops(got))
        out = _eval(got, {"x": x})
        if bytes_out:
            np.testing.assert_array_equal(_to_int8(out), _to_int8(want))
        else:
            np.testing.assert_array_equal(out, want)


def test_a_kept_division_stays_a_division_in_three_address_form():
    """The magic addition is a rounding: the division under it is not made a product there."""
    p = _program({"x": None})
    epi = _saturate(Load("x", (I,)), 0.1, 0.0)
    got, notes = vector_quantize(epi, _kernel(epi, "x"), p)
    assert notes == [(0.1, None)] and got.b == Const(MAGIC)
    kb = NS(sid=lambda kind, label: label)
    ta = ThreeAddress(kb, "e", lambda: Const(4, "int"))
    ta.run(got, lambda ld: Operand("buf", "x0"), ())
    exprs = [st.expr for st in ta.stmts]
    assert any(isinstance(e, Bin) and e.op == "/" for e in exprs)
    # one statement per clamp (the select form __bang_maxeq_scalar / __bang_mineq_scalar match)
    assert sum(isinstance(e, Select) for e in exprs) == 2 and len(exprs) == 5


# ---- end to end --------------------------------------------------------------------------

def _qdq(s, z):
    n = helper.make_node
    inits = [numpy_helper.from_array(np.float32(s), "s"), numpy_helper.from_array(np.int8(z), "z")]
    g = helper.make_graph([n("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
                           n("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq")], "qdq",
                          [helper.make_tensor_value_info("x", TP.FLOAT, [1, 16, 32, 32])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, 16, 32, 32])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_quantize_of_a_graph_input_runs_on_the_vector_unit_bit_exact(tc, tmp_path):
    s, z = 0.25, 3
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(16 * 32 * 32) * 40).astype(np.float32)
    ties = ((np.arange(-140, 140) + 0.5) * s).astype(np.float32)
    x[:ties.size] = ties
    x[ties.size:ties.size + 5] = [np.nan, np.inf, -np.inf, -0.0, 1e30]
    build_bit_exact(tc, _qdq(s, z), "qdq", x.reshape(1, 16, 32, 32), tmp_path)
    device = next((tmp_path / "b").glob("*_device.mlu")).read_text()
    assert "__bang_maxeq_scalar(" in device and "__bang_mul_scalar(" in device
    assert not re.search(r"SWB_SCALAR\(\d", device) and "nearbyintf" not in device    # no scalar code left
