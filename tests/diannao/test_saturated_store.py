"""A QuantizeLinear whose int8 result is stored as bytes leaves its clamp to the byte conversion
(schedule/narrow.py saturated_store): __bang_float2int8_rn saturates to [-128, 127], which is
the clamp on every value that is not NaN, so an element-wise or pool kernel computes its
requantized value once instead of three times. Bit for bit on every pair of int8 inputs of a
residual Add; kept where a NaN could reach it or the clamp is narrower than int8. The built
residual block: tests/diannao/test_defer_dequantize.py."""
from types import SimpleNamespace as NS

import numpy as np

from swbuild.backends.diannao.schedule.narrow import _interval, saturated_store
from swbuild.ir.graph import Tensor
from swbuild.ir.loopnest import Axis, Bin, Buffer, Const, Kernel, Load, Select, Un, Var

I = Var("i")


def _program(dtypes):
    """A program-like namespace: tensors a, b (dtype in exact_ints, or plain float32) and y."""
    tensors = {n: Tensor(n, (4,), "float32", None) for n in list(dtypes) + ["y"]}
    return NS(graph=NS(tensors=tensors, exact_ints={n: d for n, d in dtypes.items() if d}), root=lambda t: t)


def _kernel(epilogue, names=("a", "b")):
    """A point-wise kernel y[i] = epilogue over buffers a, b."""
    bufs = {n: Buffer(n, n, (4,), "float32") for n in names} | {"o": Buffer("o", "y", (4,), "float32")}
    body = epilogue if epilogue is not None else Const(0.0)
    return Kernel("k", "QuantizeLinear", "q", "o", (Axis("i", 4),), body, bufs, epilogue=body)


def _residual(sa, za, sb, zb, s, z, lo=-128.0, hi=127.0):
    """QuantizeLinear(DequantizeLinear(a) + DequantizeLinear(b)) as ops/quant.py lowers it."""
    x = Bin("+", Bin("*", Bin("-", Load("a", (I,)), Const(za)), Const(sa)),
            Bin("*", Bin("-", Load("b", (I,)), Const(zb)), Const(sb)))
    v = Bin("+", Un("round", Bin("/", x, Const(s))), Const(z))
    return Select(Bin(">=", v, Const(lo)), Select(Bin("<=", v, Const(hi)), v, Const(hi)), Const(lo))


def _eval(e, a, b):
    """e over float32 lanes, each step rounded to float32 as the device code does."""
    if isinstance(e, Load):
        return {"a": a, "b": b}[e.buf]
    if isinstance(e, Const):
        return np.float32(e.value)
    if isinstance(e, Un):
        return np.rint(_eval(e.a, a, b))
    if isinstance(e, Select):
        return np.where(_eval(e.cond, a, b), _eval(e.a, a, b), _eval(e.b, a, b))
    x, y = _eval(e.a, a, b), _eval(e.b, a, b)
    if e.op in (">=", "<="):
        return x >= y if e.op == ">=" else x <= y
    return {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[e.op](x, y).astype(np.float32)


def _to_int8(x):
    """__bang_float2int8_rn (bangemu/vector.h): rint, saturate to [-128, 127], NaN to 0."""
    x = np.nan_to_num(np.asarray(x, np.float64), nan=0.0, posinf=1e9, neginf=-1e9)
    return np.clip(np.rint(x), -128, 127).astype(np.int8)


def test_unclamped_requantization_equals_the_clamped_one_on_every_int8_pair():
    p = _program({"a": "int8", "b": "int8"})
    a, b = (g.astype(np.float32) for g in np.meshgrid(np.arange(-128, 128), np.arange(-128, 128)))
    for args in [(0.0438, -5.0, 0.0214, -128.0, 0.0298, -128.0), (0.5, 0.0, 0.5, 0.0, 0.25, 3.0),
                 (0.02, 10.0, 0.03, -7.0, 1e-3, 0.0), (1.0, 0.0, 1.0, 0.0, 2.0, -128.0)]:
        epi = _residual(*args)
        k = saturated_store(_kernel(epi), p)
        assert k.epilogue != epi and not isinstance(k.epilogue, Select), args
        np.testing.assert_array_equal(_to_int8(_eval(k.epilogue, a, b)), _to_int8(_eval(epi, a, b)))


def test_the_clamp_stays_where_a_nan_may_reach_it_or_it_is_narrower_than_int8():
    epi = _residual(0.5, 0.0, 0.5, 0.0, 0.25, 3.0)
    # b a float tensor (a graph input, say): it may hold NaN, which the clamp sends to -128
    k = _kernel(epi)
    assert saturated_store(k, _program({"a": "int8", "b": None})) is k
    # a clamp at -100 (a relu at zero point -100) is not the conversion's saturation
    k = _kernel(_residual(0.5, 0.0, 0.5, 0.0, 0.25, -100.0, lo=-100.0))
    assert saturated_store(k, _program({"a": "int8", "b": "int8"})) is k
    # a division by a tensor (possibly zero) is not bounded
    p = _program({"a": "int8", "b": "int8"})
    assert _interval(Bin("/", Load("a", (I,)), Load("b", (I,))), _kernel(None), p) is None
    # infinities: inf - inf and 0 * inf are NaN
    big = Bin("*", Load("a", (I,)), Const(1e36))      # |a| * 1e36 may overflow float32
    assert _interval(big, _kernel(None), p) == (-np.inf, np.inf)
    assert _interval(Bin("-", big, big), _kernel(None), p) is None
    assert _interval(Bin("*", big, Load("b", (I,))), _kernel(None), p) is None
    assert _interval(Bin("+", Load("a", (I,)), Const(0.5)), _kernel(None), p) == (-127.5, 127.5)

