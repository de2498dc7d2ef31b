"""Static memory plan: liveness offsets, the lower bound, Concat inputs placed in place."""
import numpy as np
import pytest
from onnx import helper

from opt_models import make, program, rand
from swbuild.ir.interp import run_program
from swbuild.optimizer.memory import inplace_concat, plan_memory


def concat_model(n=1, hw=6):
    nodes = [helper.make_node("Conv", ["x", "wa"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "wb"], ["b"]),
             helper.make_node("Relu", ["a"], ["ra"]),
             helper.make_node("Concat", ["ra", "b"], ["c"], axis=1),
             helper.make_node("Conv", ["c", "wc"], ["d"]),
             helper.make_node("Concat", ["c", "d"], ["e"], axis=1),
             helper.make_node("Sigmoid", ["e"], ["y"])]
    return make(nodes, [("x", [n, 3, hw, hw])], [("y", [n, 14, hw, hw])],
                [("wa", rand(4, 3, 3, 3, seed=1)), ("wb", rand(2, 3, 1, 1, seed=2)), ("wc", rand(8, 6, 1, 1, seed=3))])


def _valid(p):
    m = p.memory
    allocs = [t for t in m.offsets if t not in m.groups]
    for i, a in enumerate(allocs):
        for b in allocs[i + 1:]:
            la, lb = m.lifetimes[a], m.lifetimes[b]
            if la[1] < lb[0] or lb[1] < la[0]:
                continue
            assert m.offsets[a] + m.sizes[a] <= m.offsets[b] or m.offsets[b] + m.sizes[b] <= m.offsets[a], (a, b)
    assert m.arena_bytes >= m.lower_bound
    for t, (base, off) in m.groups.items():
        assert m.offsets[t] == m.offsets[base] + off


def test_concat_inputs_live_inside_the_output_and_copies_vanish():
    p = program(concat_model())
    before = len(p.kernels)
    copies = sum(k.op == "Concat" for k in p.kernels)
    assert copies == 4
    plan_memory(inplace_concat(p))
    assert len(p.kernels) == before - 4 and not any(k.op == "Concat" for k in p.kernels)
    g = p.memory.groups
    hw = 6 * 6 * 4
    # ra at channel 0 and b at channel 4 of c; c at channel 0 and d at channel 6 of e
    assert g["ra"] == ("e", 0) and g["b"] == ("e", 4 * hw) and g["c"] == ("e", 0) and g["d"] == ("e", 6 * hw)
    _valid(p)
    assert p.memory.arena_bytes == p.memory.lower_bound
    # the program still computes the same thing (numpy interpreter over the shared storage)
    x = rand(1, 3, 6, 6, seed=9)
    ref = run_program(program(concat_model()), {"x": x})[0]
    flat = np.zeros(p.memory.arena_bytes // 4, np.float32)
    arrays = {}
    for name, t in p.graph.tensors.items():
        r = p.root(name)
        if r in p.memory.offsets:
            o = p.memory.offsets[r] // 4
            arrays[name] = flat[o:o + t.size]
    from swbuild.ir.interp import run_kernel
    for name, t in p.graph.tensors.items():
        if name not in arrays:
            arrays[name] = np.array(t.data, np.float32).reshape(-1) if t.data is not None else (
                x.reshape(-1).copy() if name == "x" else np.zeros(t.size, np.float32))
    for k in p.kernels:
        run_kernel(k, arrays)
    np.testing.assert_allclose(arrays["y"].reshape(ref.shape), ref, rtol=1e-5, atol=1e-6)


def test_concat_along_a_non_contiguous_slice_keeps_its_copies():
    p = program(concat_model(n=2))
    plan_memory(inplace_concat(p))
    assert sum(k.op == "Concat" for k in p.kernels) == 4
    assert p.memory.groups == {}
    _valid(p)


@pytest.mark.parametrize("n", [1, 2])
def test_arena_within_five_percent_of_the_liveness_bound(n):
    p = program(concat_model(n=n))
    plan_memory(inplace_concat(p))
    assert p.memory.arena_bytes <= 1.05 * p.memory.lower_bound
