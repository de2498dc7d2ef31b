"""A QDQ residual Add stored as int8 bytes (dequantize two int8 tensors, add, requantize) in four
vector passes, ((a + b R) + K) A with the int8 conversion rounding and saturating
(schedule/quantize.py pair_requantize, issue 36): the constants are proven on every one of the
65,536 pairs, so the bytes equal onnxruntime's float computation of the graph bit for bit."""
import numpy as np
import pytest

from swbuild.backends.diannao.schedule import _vector_quantize
from swbuild.backends.diannao.schedule.exact_quotient import passes
from swbuild.backends.diannao.schedule.narrow import saturated_store
from swbuild.backends.diannao.schedule.quantize import pair_requantize
from swbuild.ir.loopnest import Acc, Bin, Const, Load, Select, Un
from test_vector_quantize import I, _eval, _kernel, _program, _saturate, _to_int8


def _residual_add(sa, za, sb, zb, so, zo):
    a, b = Load("a", (I,)), Load("b", (I,))
    deq = lambda x, s, z: Bin("*", Bin("-", x, Const(z)), Const(s))   # noqa: E731
    return _saturate(Bin("+", deq(a, sa, za), deq(b, sb, zb)), so, zo)


def _pairs():
    v = np.arange(-128, 128, dtype=np.float32)
    a, b = np.meshgrid(v, v, indexing="ij")
    return {"a": a.ravel(), "b": b.ravel()}


def _scheduled(value):
    p = _program({"a": "int8", "b": "int8"})
    p.notes = []
    k = _kernel(value, ["a", "b"])
    k = saturated_store(_vector_quantize(k, p, True), p)
    return k, pair_requantize(k, p)


RESNET = (0.043854039162397385, -5.0, 0.0214098934084177, -128.0, 0.029791677370667458, -128.0)


def _random_params(n):
    rng = np.random.default_rng(4)
    return [tuple(float(np.float32(rng.uniform(0.005, 0.1))) if i % 2 == 0 else float(rng.integers(-20, 21))
                  for i in range(6)) for _ in range(n)]


@pytest.mark.parametrize("q", [RESNET] + _random_params(5))
def test_the_pair_form_stores_every_pairs_byte_as_the_graph(q):
    value = _residual_add(*q)
    before, after = _scheduled(value)
    env = _pairs()
    want = _to_int8(_eval(value, env))          # the graph in float32, as onnxruntime computes it
    assert after is not before and after.epilogue == Acc() and passes(after.body) == 4
    np.testing.assert_array_equal(_to_int8(_eval(after.body, env)), want)


def test_three_leaves_or_a_float_leaf_are_left_as_they_are():
    a, b, c = Load("a", (I,)), Load("b", (I,)), Load("c", (I,))
    p = _program({"a": "int8", "b": "int8", "c": "int8"})
    k = _kernel(_saturate(Bin("+", Bin("+", a, b), c), 0.5, 0.0), ["a", "b", "c"])
    assert pair_requantize(k, p) is k
    p = _program({"a": "int8", "b": None})                 # b a float tensor: no finite domain
    k = _kernel(_saturate(Bin("+", a, b), 0.5, 0.0), ["a", "b"])
    assert pair_requantize(k, p) is k


def test_a_convolutions_fused_residual_add_takes_the_pair_form_bit_for_bit():
    """A downsample convolution's epilogue: its requantized accumulator c (a saturation, 256
    values) and the shortcut r (int8) are the two leaves; the epilogue becomes the pair form,
    the accumulator's own requantization kept inside it, equal on every accumulator and shortcut."""
    from dataclasses import replace
    m, z1, zr, sr, s1, so = 0.00188034982, -1.0, -11.0, 0.0379159338, 0.0396452695, 0.0261591263
    v = Bin("+", Un("round", Bin("*", Acc(), Const(m))), Const(z1))      # ops/quant.py's requantization
    c = Select(Bin(">=", v, Const(-128.0)), Select(Bin("<=", v, Const(127.0)), v, Const(127.0)), Const(-128.0))
    r = Load("r", (I,))
    deq = lambda x, s, z: Bin("*", Bin("-", x, Const(z)), Const(s))   # noqa: E731
    value = _saturate(Bin("+", deq(r, sr, zr), deq(c, s1, z1)), so, -128.0)
    p = _program({"r": "int8"})
    p.notes = []
    # a QLinearConv's: its own requantization c is integer.py's to rewrite, not _vector_quantize's
    k = replace(_kernel(value, ["r"]), op="QLinearConv", combine="sum", body=Const(0.0))
    k = _vector_quantize(k, p, True)
    got = pair_requantize(k, p)
    assert got is not k and got.body == k.body and any(x == c for x in (got.epilogue.a.a.a, got.epilogue.a.a.b.a))
    acc = np.arange(-80000, 80000, 7, dtype=np.float32)
    rv = np.arange(-128, 128, dtype=np.float32)
    A, R = (g.ravel() for g in np.meshgrid(acc, rv, indexing="ij"))

    def run(e):
        from swbuild.ir.loopnest import substitute_acc
        return _to_int8(_eval(substitute_acc(e, Load("acc", (I,))), {"acc": A, "r": R}))
    np.testing.assert_array_equal(run(got.epilogue), run(value))


def test_a_float_leaf_written_by_a_dequantize_of_int8_has_its_256_values():
    """PyTorch's shortcut DequantizeLinear as a kernel of its own: the float tensor it writes,
    (q - z) * s in float32, takes 256 values, so the Add reading it still has the pair form
    (quantize.py _written_values), equal on every pair; a writer of two leaves gives no domain."""
    from dataclasses import replace
    from swbuild.ir.loopnest import Axis, Buffer, Kernel
    sa, za, sb, zb, so, zo = RESNET
    p = _program({"a": "int8", "q": "int8", "b": None})
    p.notes = []
    q = Load("q", (I,))
    writer = Kernel("w", "DequantizeLinear", "dq", "o", (Axis("i", 4),), Bin("*", Bin("-", q, Const(zb)), Const(sb)),
                    {"q": Buffer("q", "q", (4,), "float32"), "o": Buffer("o", "b", (4,), "float32")})
    a, b = Load("a", (I,)), Load("b", (I,))
    value = _saturate(Bin("+", Bin("*", Bin("-", a, Const(za)), Const(sa)), b), so, zo)
    k = saturated_store(_vector_quantize(_kernel(value, ["a", "b"]), p, True), p)
    assert pair_requantize(k, p) is k                       # no writer known: b is any float
    p.kernels = [writer]
    after = pair_requantize(k, p)
    assert after is not k and passes(after.body) == 4
    env = _pairs()
    env["b"] = ((env.pop("b") - np.float32(zb)) * np.float32(sb)).astype(np.float32)   # the writer's float32 values
    np.testing.assert_array_equal(_to_int8(_eval(after.body, {"a": env["a"], "b": env["b"]})), _to_int8(_eval(value, env)))
    p.kernels = [replace(writer, body=Bin("+", q, Load("a", (I,))),
                         buffers={**writer.buffers, "a": Buffer("a", "a", (4,), "float32")})]
    assert pair_requantize(k, p) is k
