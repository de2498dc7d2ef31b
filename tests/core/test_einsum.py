"""Einsum (ops/einsum.py) on the three emulated targets: the onnx node tests, seeded random
equations against onnxruntime, MaxViT's attention equations, and refusals that name the node."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from core_models import node_tests
from rnn_models import check_on, combine_expected
from swbuild.driver.lowering import lower
from swbuild.frontends.onnx import import_model
from swbuild.ops.einsum import parse
from swbuild.support.errors import UnsupportedError

TARGETS = ["sunway-emu", "sunway-pro-emu", "diannao-emu"]


def _as_float32(m, feed, refs):
    """The model with its float64 graph inputs and outputs declared float32 (DianNao has no
    double arithmetic and refuses it by node), the data cast to match."""
    for vi in list(m.graph.input) + list(m.graph.output):
        if vi.type.tensor_type.elem_type == TensorProto.DOUBLE:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT
    f32 = lambda v: v.astype(np.float32) if v.dtype == np.float64 else v  # noqa: E731
    return m, {k: f32(v) for k, v in feed.items()}, [f32(r) for r in refs]


@pytest.mark.parametrize("target", TARGETS)
def test_einsum_node_tests(target, tmp_path):
    """Every numeric test_einsum_* node test (transpose, sum, batch diagonal with '...', inner
    product with an implicit output, batch matmul with spaces, the scalar '->'): in float64 on
    Sunway, cast to float32 on DianNao."""
    cases = node_tests(lambda c: {n.op_type for n in c.model.graph.node} == {"Einsum"} and "bfloat16" not in c.name, {})
    assert {c[0] for c in cases} >= {"test_einsum_batch_diagonal", "test_einsum_batch_matmul", "test_einsum_inner_prod",
                                     "test_einsum_sum", "test_einsum_transpose"}
    m, feed, refs = combine_expected(cases)
    rtol, atol = 1e-12, 1e-12
    if target == "diannao-emu":
        (m, feed, refs), rtol, atol = _as_float32(m, feed, refs), 1e-5, 1e-6
    doc, _ = check_on(m, feed, target, tmp_path, ref=refs, rtol=rtol, atol=atol)
    assert doc["status"] == "pass", (target, doc.get("reason"))


def random_equation(rng):
    """(equation, operand shapes): 1-3 operands of rank 0-4 over a few letters of random
    extents, sometimes a repeated letter (a diagonal), sometimes a shared '...' of 1-2
    dimensions (extent-1 ones broadcast), the output explicit (a random subset, permuted) or
    implicit (lower-case letters only: onnxruntime 1.32 rejects an upper-case letter in an
    implicit output, which numpy and the spec order before the lower-case ones)."""
    explicit = rng.random() < 0.7
    letters = list("abcdBG" if explicit else "abcde")
    ext = {L: int(rng.integers(1, 5)) for L in letters}
    n_ops = int(rng.integers(1, 4))
    ell = [int(rng.integers(1, 4)) for _ in range(int(rng.integers(1, 3)))] if rng.random() < 0.3 else []
    terms, shapes, used = [], [], []
    for _ in range(n_ops):
        lab = list(rng.choice(letters, size=int(rng.integers(0 if n_ops > 1 else 1, 4)), replace=True))
        used += lab
        t, sh = "".join(lab), [ext[L] for L in lab]
        if ell:
            at = int(rng.integers(0, len(lab) + 1))
            t = t[:at] + "..." + t[at:]
            sh = sh[:at] + [e if rng.random() < 0.7 else 1 for e in ell] + sh[at:]
        terms.append(t)
        shapes.append(sh)
    eq = ",".join(terms)
    if explicit:
        out = [str(L) for L in rng.permutation(sorted(set(used)))][:int(rng.integers(0, len(set(used)) + 1))]
        if ell:
            out.insert(int(rng.integers(0, len(out) + 1)), "...")
        eq += "->" + "".join(out)
    return eq, shapes


def _einsum_model(equations, seed):
    rng = np.random.default_rng(seed)
    nodes, ins, outs, feed = [], [], [], {}
    for k, (eq, shapes) in enumerate(equations):
        names = [f"x{k}_{i}" for i in range(len(shapes))]
        nodes.append(helper.make_node("Einsum", names, [f"y{k}"], equation=eq, name=f"einsum{k}"))
        ins += [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in zip(names, shapes)]
        outs.append(helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, None))
        feed.update({n: rng.standard_normal(s).astype(np.float32) for n, s in zip(names, shapes)})
    g = helper.make_graph(nodes, "einsum", ins, outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), feed


MAXVIT = [("B G H I D, B G H J D -> B G H I J", [[1, 2, 3, 4, 8], [1, 2, 3, 5, 8]]),
          ("B G H I J, B G H J D -> B G H I D", [[1, 2, 3, 4, 5], [1, 2, 3, 5, 8]])]


@pytest.mark.parametrize("target", ["sunway-emu", "diannao-emu"])
def test_random_equations_match_onnxruntime(target, tmp_path):
    rng = np.random.default_rng(37)
    eqs = [random_equation(rng) for _ in range(16)] + MAXVIT
    assert any("..." in e for e, _ in eqs) and any("->" not in e for e, _ in eqs)
    m, feed = _einsum_model(eqs, 1)
    doc, _ = check_on(m, feed, target, tmp_path, rtol=1e-4, atol=1e-5)
    assert doc["status"] == "pass", (target, eqs, doc.get("reason"))


def test_attention_einsum_is_one_reduction_kernel():
    """MaxViT's equation lowers to one kernel: output axes B G H I J, the reduction over D."""
    m, _ = _einsum_model(MAXVIT[:1], 0)
    (k,) = lower(import_model(m), "m").kernels
    assert k.op == "Einsum" and [a.name for a in k.axes] == ["lB", "lG", "lH", "lI", "lJ"]
    assert [(a.name, a.extent) for a in k.reduce_axes] == [("lD", 8)] and k.combine == "sum"


def test_implicit_output_is_alphabetical():
    """'cBa,a' sums a and keeps B then c (ASCII order, as numpy: upper case first)."""
    m, _ = _einsum_model([("cBa,a", [[2, 3, 4], [4]])], 0)
    (k,) = lower(import_model(m), "m").kernels
    assert [(a.name, a.extent) for a in k.axes] == [("lB", 3), ("lc", 2)]
    assert [a.name for a in k.reduce_axes] == ["la"]


@pytest.mark.parametrize("eq,shapes,why", [
    ("i...j->j", [[2, 3, 4]], "'...' dimensions are missing from the output"),
    ("ij,jk->ik", [[2, 3]], "2 operand terms for 1 inputs"),
    ("i1->i", [[2, 3]], "not letters"),
])
def test_refusals_name_the_node(eq, shapes, why):
    """Equations onnx's shape inference would stop earlier still get a refusal naming the node."""
    node = type("N", (), {"name": "bad_einsum"})
    with pytest.raises(UnsupportedError, match=why) as e:
        parse(node, eq, shapes)
    assert "node 'bad_einsum' (Einsum)" in str(e.value)
