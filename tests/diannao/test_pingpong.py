"""Pipelined tile loops (pingpong.py, option double_buffer): load / compute / store over
ping-pong halves with __memcpy_async. The outputs match onnxruntime with no BANG rule
violation (the emulator reports a copy racing compute), the same bytes cross GDRAM where the
tiles are the same, the modelled time drops, the code is the same whatever the directory."""
import numpy as np
from onnx import helper

from dn_build import build_model, run_check
from onnx_builders import make, rand
from swbuild.driver import check
from swbuild.backends.diannao.pingpong import pipelined_cycles
from swbuild.driver.compiler import compile_to


def _both(tc, model, name, tmp_path, inputs):
    out = {}
    for db in ("off", "on"):
        plan, exe = build_model(tc, model, name, tmp_path / db, double_buffer=db)
        doc, stats = run_check(plan, exe, check.onnxruntime_reference(model, inputs), inputs)
        assert doc["status"] == "pass", doc.get("reason")
        assert stats["violations"] == 0 and not any(k["write_conflicts"] for k in stats["kernels"])
        out[db] = (stats, next((tmp_path / db).glob("*_device.mlu")).read_text())
    return out


def _bytes(stats):
    tot = {}
    for k in stats["kernels"]:
        for d, b in k["memcpy_bytes"].items():
            tot[d] = tot.get(d, 0) + b
    return tot


def _cycles(stats):
    return sum(k["cycles"] for k in stats["kernels"])


def test_elementwise_tiles_overlap_and_move_the_same_bytes(tc, tmp_path):
    shape = [1, 64, 128, 128]     # 16 tasks x 4 tiles of 16 K floats
    m = make([helper.make_node("Add", ["x", "y"], ["s"]), helper.make_node("Relu", ["s"], ["z"])],
             [("x", shape), ("y", shape)], [("z", shape)])
    inputs = {"x": rand(*shape, seed=1), "y": rand(*shape, seed=2)}
    r = _both(tc, m, "ew", tmp_path, inputs)
    (off, _), (on, dev) = r["off"], r["on"]
    assert "__memcpy_async" in dev and "__sync_io_move_compute();" in dev and "__memcpy_async" not in r["off"][1]
    assert _bytes(on) == _bytes(off)
    assert _cycles(on) < _cycles(off)


def test_convolution_row_tiles_pipelined_match_onnxruntime(tc, tmp_path):
    w1, w2 = rand(64, 64, 1, 1, seed=3, scale=0.1), rand(64, 64, 3, 3, seed=4, scale=0.05)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "r"], ["s"]), helper.make_node("Relu", ["s"], ["t"]),
             helper.make_node("MaxPool", ["t"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])]
    m = make(nodes, [("x", [1, 64, 56, 56])], [("y", [1, 64, 28, 28])], [("w1", w1), ("w2", w2)])
    r = _both(tc, m, "cv", tmp_path, {"x": rand(1, 64, 56, 56, seed=5)})
    (off, _), (on, dev) = r["off"], r["on"]
    assert dev.count("__bang_conv") > r["off"][1].count("__bang_conv")   # prologue / steady state
    assert "__memcpy_async" in dev
    assert _cycles(on) < _cycles(off)


def test_pipelined_code_is_deterministic(tc, tmp_path):
    m = make([helper.make_node("Relu", ["x"], ["y"])], [("x", [1, 64, 128, 128])], [("y", [1, 64, 128, 128])])
    texts = []
    for d in ("a", "b/c"):
        compile_to(m, tc, tmp_path / d, "det", options={"double_buffer": "on"})
        texts.append(next((tmp_path / d).glob("*_device.mlu")).read_bytes())
    assert texts[0] == texts[1] and b"__memcpy_async" in texts[0]


def test_pipelined_cycles_is_prologue_per_step_max_epilogue():
    assert pipelined_cycles(1, 10, 20, 30) == 60
    assert pipelined_cycles(4, 10, 20, 30, pipelined=False) == 240
    # load 10, compute 20, store 30: 10 + max(10, 20) + 2 * max(40, 20) + max(30, 20) + 30
    assert pipelined_cycles(4, 10, 20, 30) == 10 + 20 + 80 + 30 + 30
    assert pipelined_cycles(2, 5, 100, 5) == 5 + 100 + 100 + 5
    assert np.all([pipelined_cycles(n, 7, 9, 3) < pipelined_cycles(n, 7, 9, 3, False) for n in range(2, 9)])
