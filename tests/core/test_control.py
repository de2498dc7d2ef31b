"""Scan and Loop with a compile-time trip count on both emulated targets: the body is lowered
once and the host runs its kernels every iteration (the emulators count the launches), the
results against onnxruntime / the onnx node tests; dynamic loops are refused by name."""
import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnn_models import check_on, combine, combine_expected, node_test_models
from swbuild.config import toolchain
from swbuild.driver.compiler import build_program
from swbuild.support.errors import UnsupportedError

T, N = 5, 4


def scan_model(seed=0):
    """Two states (a running sum and a tanh recurrence through an outer-scope weight), two scan
    inputs (one read backwards), two scan outputs (one written backwards)."""
    rng = np.random.default_rng(seed)
    W = (rng.standard_normal((N, N)) * 0.5).astype(np.float32)
    f = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)  # noqa: E731
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x"], ["s_out"]),
         helper.make_node("MatMul", ["h_in", "W"], ["hw"]),
         helper.make_node("Add", ["hw", "z"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_out"]),
         helper.make_node("Mul", ["h_out", "s_out"], ["y"]),
         helper.make_node("Identity", ["h_out"], ["h_copy"])],
        "body", [f("s_in", [1, N]), f("h_in", [1, N]), f("x", [1, N]), f("z", [1, N])],
        [f("s_out", [1, N]), f("h_out", [1, N]), f("y", [1, N]), f("h_copy", [1, N])])
    node = helper.make_node("Scan", ["s0", "h0", "X", "Z"], ["s", "h", "Y", "H"], name="scan0", body=body,
                            num_scan_inputs=2, scan_input_directions=[0, 1], scan_output_directions=[0, 1])
    g = helper.make_graph([node], "scan", [f("s0", [1, N]), f("h0", [1, N]), f("X", [T, 1, N]), f("Z", [T, 1, N])],
                          [f("s", [1, N]), f("h", [1, N]), f("Y", [T, 1, N]), f("H", [T, 1, N])],
                          initializer=[numpy_helper.from_array(W, "W")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)], ir_version=8)
    feed = {k: rng.standard_normal(s).astype(np.float32) for k, s in (("s0", [1, N]), ("h0", [1, N]), ("X", [T, 1, N]),
                                                                    ("Z", [T, 1, N]))}
    return m, feed


def loop_model(trips=4, use_counter=False, cond_const=True, seed=1):
    """Loop with a constant trip count: v <- relu(v * 0.9 + b); each v scanned out."""
    rng = np.random.default_rng(seed)
    f = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)  # noqa: E731
    nodes = [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
             helper.make_node("Mul", ["v_in", "k"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["v_out"]),
             helper.make_node("Identity", ["v_out"], ["scan"])]
    if use_counter:
        nodes[2] = helper.make_node("Add", ["m", "i_f"], ["a"])
        nodes.insert(0, helper.make_node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT))
    body = helper.make_graph(nodes, "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                                             helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []), f("v_in", [3])],
                             [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), f("v_out", [3]), f("scan", [3])])
    inits = [numpy_helper.from_array(np.array(trips, np.int64), "M"),
             numpy_helper.from_array(np.array(0.9, np.float32), "k"),
             numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b")]
    ins = [f("v0", [3])]
    if cond_const:
        inits.append(numpy_helper.from_array(np.array(True), "cond"))
    else:
        ins.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
    g = helper.make_graph([helper.make_node("Loop", ["M", "cond", "v0"], ["v", "vs"], name="loop0", body=body)], "loop",
                          ins, [f("v", [3]), f("vs", [trips, 3])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)], ir_version=8)
    return m, {"v0": rng.standard_normal(3).astype(np.float32)}


@pytest.mark.parametrize("target", ["sunway-emu", "diannao-emu"])
def test_scan_and_loop_run_their_body_once_per_iteration(target, tmp_path):
    m, feed, refs = combine([scan_model(), loop_model()])
    doc, plan = check_on(m, feed, target, tmp_path, ref=refs, rtol=1e-4, atol=1e-5)
    assert doc["status"] == "pass", doc.get("reason")
    stats = json.loads((tmp_path / "emulator_stats.json").read_text())["kernels"]
    runs = {k["name"]: k.get("spawns", k.get("launches")) for k in stats}
    counts = sorted(runs.values())
    # scan: 2 state copies in, then per iteration its body kernels + 2 carried copies + 2 scan-out copies;
    # loop: 1 state copy in, per iteration its body + 1 carried copy + 1 scan-out copy
    assert counts.count(T) >= 6 and counts.count(4) >= 4 and counts.count(1) >= 3
    assert all(c in (1, T, 4) for c in counts)


def test_the_program_does_not_grow_with_the_trip_count():
    tc = toolchain.load("sunway-emu")
    a = build_program(loop_model(trips=3)[0], tc, "a")
    b = build_program(loop_model(trips=300)[0], tc, "b")
    assert len(a.kernels) == len(b.kernels)
    assert [lp.trips for lp in b.loops.values()] == [300]


@pytest.mark.parametrize("target", ["sunway-emu", "diannao-emu"])
def test_grouping_is_off_for_a_model_with_a_static_loop_and_says_so(target):
    """The kernel graph of a loop body has cycles (carried state): grouping does not apply."""
    p = build_program(loop_model()[0], toolchain.load(target), "g", options={"grouping": "on"})
    assert p.grouping is None
    assert "grouping: off for this model (it has a static Scan/Loop)" in p.notes


@pytest.mark.parametrize("target", ["sunway-emu", "diannao-emu"])
def test_onnx_scan_node_tests(target, tmp_path):
    """The onnx package's Scan-9 node tests (static shapes), as one program."""
    cases = [c for c in node_test_models(("Scan",)) if c[0].startswith("test_scan9")]
    assert len(cases) == 3
    m, feed, refs = combine_expected(cases)
    doc, _ = check_on(m, feed, target, tmp_path, ref=refs, rtol=1e-3, atol=1e-5)
    assert doc["status"] == "pass", doc.get("reason")


@pytest.mark.parametrize("model,why", [
    (lambda: loop_model(use_counter=True)[0], "reads the iteration counter"),
    (lambda: loop_model(cond_const=False)[0], "initial condition is computed at run time"),
])
def test_dynamic_loops_are_refused_by_name(model, why):
    with pytest.raises(UnsupportedError, match=f"node 'loop0' \\(Loop\\): .*{why}"):
        build_program(model(), toolchain.load("sunway-emu"), "bad")


def outer_shape_scan_model(seed=2):
    """A Scan whose unshaped body unsqueezes by axes of the outer graph and scales by an outer
    scalar (the pattern of onnx's expanded LinearAttention): onnx shape inference alone cannot
    shape the body's outputs, so the frontend binds the outer constants into the body."""
    rng = np.random.default_rng(seed)
    f = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)  # noqa: E731
    body = helper.make_graph(
        [helper.make_node("Unsqueeze", ["x", "ax"], ["xr"]),
         helper.make_node("Mul", ["xr", "scale"], ["xs"]),
         helper.make_node("Add", ["s_in", "xs"], ["s_out"]),
         helper.make_node("Squeeze", ["s_out", "ax"], ["y"])],
        "body", [f("s_in", None), f("x", None)], [f("s_out", None), f("y", None)])
    consts = [helper.make_node("Constant", [], ["ax"], value=numpy_helper.from_array(np.array([-2], np.int64))),
              helper.make_node("Constant", [], ["scale"], value=numpy_helper.from_array(np.array(0.5, np.float32)))]
    node = helper.make_node("Scan", ["s0", "X"], ["s", "Y"], name="scan_outer", body=body, num_scan_inputs=1)
    g = helper.make_graph(consts + [node], "outer", [f("s0", [1, 6]), f("X", [T, 6])],
                          [helper.make_tensor_value_info("s", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)], ir_version=8)
    return m, {"s0": rng.standard_normal((1, 6)).astype(np.float32), "X": rng.standard_normal((T, 6)).astype(np.float32)}


def test_a_body_reading_outer_shape_constants_gets_static_shapes(tmp_path):
    m, feed = outer_shape_scan_model()
    p = build_program(m, toolchain.load("sunway-emu"), "outer")
    assert p.graph.tensors["Y"].shape == (T, 6)
    doc, _ = check_on(m, feed, "sunway-emu", tmp_path, rtol=1e-5, atol=1e-6)
    assert doc["status"] == "pass", doc.get("reason")


def test_a_constant_loop_whose_body_reads_outer_constants_folds(tmp_path):
    """Every input constant and the body reads outer constants: the Loop folds at compile time
    (it used to fail with 'constant folding failed: Unable to find input')."""
    m, _ = loop_model(trips=3)
    g = m.graph
    g.input.remove(g.input[0])
    g.initializer.append(numpy_helper.from_array(np.array([1.0, -2.0, 3.0], np.float32), "v0"))
    p = build_program(m, toolchain.load("sunway-emu"), "folded")
    assert p.graph.nodes == [] and {k.op for k in p.kernels} == {"Copy"}   # outputs copied from constants
    doc, _ = check_on(m, {}, "sunway-emu", tmp_path, rtol=1e-6, atol=1e-7)
    assert doc["status"] == "pass", doc.get("reason")
