"""passes/siblings.py: 1x1 convolutions of one input (an Inception module's reductions) run as
one kernel whose output holds theirs, where the cost model gains; what it leaves alone; and,
under the emulator with DMA landing late or at random points, outputs equal to onnxruntime's
with the predicted DMA, no race and no write conflict."""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper

from opt_models import make, program, rand, sunway
import shared_builds
from swbuild.backends.sunway.passes import siblings as sb
from swbuild.backends.sunway.schedule.passes import SunwayState
from swbuild.optimizer.memory import inplace_concat


def module_model(relu_b=True, c=64, hw=14, head=False):
    """An Inception-like module: reductions a (24) and b (8) feed a 3x3 and a 5x5, branch c (16)
    goes straight into the Concat, last (or first: `head`, as Inception's 1x1 branch); a 1x1
    after the Concat, so its parts live inside it."""
    nodes = [helper.make_node("Conv", ["x", "wa", "ba"], ["ca"]), helper.make_node("Relu", ["ca"], ["ra"]),
             helper.make_node("Conv", ["ra", "w3"], ["ya"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "wb", "bb"], ["cb" if relu_b else "rb"]),
             helper.make_node("Conv", ["rb", "w5"], ["yb"], pads=[2, 2, 2, 2]),
             helper.make_node("Conv", ["x", "wc", "bc"], ["cc"]), helper.make_node("Relu", ["cc"], ["rc"]),
             helper.make_node("Concat", ["rc", "ya", "yb"] if head else ["ya", "yb", "rc"], ["cat"], axis=1),
             helper.make_node("Conv", ["cat", "wo"], ["y"])]
    if relu_b:
        nodes.insert(4, helper.make_node("Relu", ["cb"], ["rb"]))
    return make(nodes, [("x", [1, c, hw, hw])], [("y", [1, 8, hw, hw])],
                [("wa", rand(24, c, 1, 1, seed=1, scale=0.2)), ("ba", rand(24, seed=2)),
                 ("w3", rand(16, 24, 3, 3, seed=3, scale=0.1)),
                 ("wb", rand(8, c, 1, 1, seed=4, scale=0.2)), ("bb", rand(8, seed=5)),
                 ("w5", rand(8, 8, 5, 5, seed=6, scale=0.1)),
                 ("wc", rand(16, c, 1, 1, seed=7, scale=0.2)), ("bc", rand(16, seed=8)),
                 ("wo", rand(8, 40, 1, 1, seed=9, scale=0.2))])


def _pass(model, target="sunway-emu", options=None):
    p = inplace_concat(program(model))
    p.target_state = SunwayState()
    return sb.merge_siblings(p, sunway(target), options or {})


def test_reductions_of_one_input_become_one_kernel(monkeypatch):
    monkeypatch.setattr(sb, "_DECISIONS", {})
    p = _pass(module_model())
    convs = [k for k in p.kernels if k.op == "Conv"]
    assert len(convs) == 5                       # a and b merged; c (inside the Concat), 3x3, 5x5, last 1x1
    (m,) = [k for k in convs if k.fused and "Relu" in str(k.fused) and k.axes[1].extent == 32]
    out = m.buffers[m.out].tensor
    assert p.graph.tensors[out].shape == (1, 32, 14, 14)
    inside = {t: v for t, v in p.slices.items() if v[0] == out}
    assert sorted(inside.values()) == [(out, 0), (out, 24 * 14 * 14 * 4)]
    w = p.graph.tensors[m.buffers[[b for b in m.buffers if p.graph.tensors[m.buffers[b].tensor].shape
                                    == (32, 64, 1, 1)][0]].tensor].data
    assert np.array_equal(w[:24], rand(24, 64, 1, 1, seed=1, scale=0.2))
    assert np.array_equal(w[24:], rand(8, 64, 1, 1, seed=4, scale=0.2))
    assert any("siblings" in n for n in p.notes)


def test_the_cost_model_decides(monkeypatch):
    monkeypatch.setattr(sb, "_DECISIONS", {})
    monkeypatch.setattr(sb, "GAIN", 0.0)         # nothing is faster than nothing
    p = _pass(module_model())
    assert sum(k.op == "Conv" for k in p.kernels) == 6
    assert not any(t.startswith("%swsib:") for t in p.graph.tensors)      # the trial's tensors are dropped


def test_different_epilogues_and_the_option_off(monkeypatch):
    monkeypatch.setattr(sb, "_DECISIONS", {})
    assert sum(k.op == "Conv" for k in _pass(module_model(relu_b=False)).kernels) == 6    # Relu on one only
    assert sum(k.op == "Conv" for k in _pass(module_model(), options={"siblings": "off"}).kernels) == 6


def test_the_head_of_a_concat_joins_last(monkeypatch):
    """Branch c heads the Concat: it joins the reductions as their last channels, and the
    merged output and the Concat overlap in one tensor at c's channels."""
    monkeypatch.setattr(sb, "_DECISIONS", {})
    monkeypatch.setattr(sb, "GAIN", 10.0)
    p = _pass(module_model(head=True))
    (m,) = [k for k in p.kernels if k.op == "Conv" and k.axes[1].extent == 48]
    out = m.buffers[m.out].tensor
    outer, at = p.slices[out]
    plane = 14 * 14 * 4
    assert at == 0 and p.graph.tensors[outer].shape == (1, 32 + 40, 14, 14)    # a, b, then the Concat
    (cat,) = [t for t, (c, _) in p.slices.items() if c == outer and t != out]
    assert p.slices[cat] == (outer, 32 * plane) and p.graph.tensors[cat].shape == (1, 40, 14, 14)
    (rc,) = [t for t, v in p.slices.items() if v == (out, 32 * plane)]
    assert p.graph.tensors[rc].shape == (1, 16, 14, 14)
    assert sum(k.op == "Conv" for k in p.kernels) == 4


def _check(tmp_path, target, mode, head=False):
    f = tmp_path / "mod.onnx"
    onnx.save(module_model(head=head), f)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEMU_")}
    env["SWEMU_DMA"] = mode
    r = subprocess.run([sys.executable, "-m", "swbuild.cli", "check", str(f), "--target", target, "-o",
                        str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["status"] == "pass" and doc["emulator"]["dma_mismatches"] == [], doc
    assert doc["emulator"]["races"] == 0 and doc["emulator"]["write_conflicts"] == 0
    return json.loads((tmp_path / "out" / "mod.plan.json").read_text())


@pytest.mark.parametrize("target, mode, head", [("sunway-emu", "random:7", False), ("sunway-pro-emu", "wait", False),
                                                ("sunway-emu", "random:5", True)])
def test_merged_kernel_is_exact_under_the_emulator(tmp_path, target, mode, head):
    plan = _check(tmp_path, target, mode, head)
    ks = [k for e in plan["kernels"] for k in e.get("kernels", [e])]
    assert sum(k["op"] == "Conv" for k in ks) == 5 - head, [k["name"] for k in ks]


def window_model(stride_b=1, scale_shift=False):
    """Two 3x3 convolutions (batch norm, or `scale_shift`: Mul and Add of [C, 1, 1] constants
    as light Inception-v2 has them; Relu) of one input, each read by a 1x1."""
    nodes, inits = [], []
    for j, (co, s) in enumerate([(16, 1), (8, stride_b)]):
        nodes.append(helper.make_node("Conv", ["x", f"w{j}"], [f"c{j}"], pads=[1, 1, 1, 1], strides=[s, s]))
        if scale_shift:
            nodes += [helper.make_node("Mul", [f"c{j}", f"s{j}"], [f"p{j}"]),
                      helper.make_node("Add", [f"p{j}", f"b{j}"], [f"n{j}"])]
            inits += [(f"s{j}", rand(co, 1, 1, seed=10 * j + 7)), (f"b{j}", rand(co, 1, 1, seed=10 * j + 8))]
        else:
            nodes.append(helper.make_node("BatchNormalization", [f"c{j}", f"s{j}", f"b{j}", f"m{j}", f"v{j}"],
                                          [f"n{j}"]))
            inits += [(f"s{j}", rand(co, seed=10 * j + 2)), (f"b{j}", rand(co, seed=10 * j + 3)),
                      (f"m{j}", rand(co, seed=10 * j + 4)), (f"v{j}", rand(co, seed=10 * j + 5) ** 2 + 0.5)]
        nodes += [helper.make_node("Relu", [f"n{j}"], [f"r{j}"]),
                  helper.make_node("Conv", [f"r{j}", f"o{j}"], [f"y{j}"])]
        inits += [(f"w{j}", rand(co, 16, 3, 3, seed=10 * j + 1, scale=0.1)), (f"o{j}", rand(4, co, 1, 1, seed=10 * j + 6))]
    return make(nodes, [("x", [1, 16, 12, 12])], [("y0", [1, 4, 12, 12]), ("y1", [1, 4, 12 // stride_b, 12 // stride_b])],
                inits)


def test_windows_and_strides_must_match(monkeypatch):
    monkeypatch.setattr(sb, "_DECISIONS", {})
    monkeypatch.setattr(sb, "GAIN", 10.0)        # whatever the cost model says
    for scale_shift in (False, True):
        p = _pass(window_model(scale_shift=scale_shift))
        assert [k.axes[1].extent for k in p.kernels if k.op == "Conv"] == [24, 4, 4], scale_shift
    assert sum(k.op == "Conv" for k in _pass(window_model(stride_b=2)).kernels) == 4


@pytest.mark.parametrize("scale_shift", [False, True])
def test_merged_windows_are_exact_under_the_emulator(tmp_path, monkeypatch, scale_shift):
    monkeypatch.setattr(sb, "_DECISIONS", {})
    monkeypatch.setattr(sb, "GAIN", 10.0)
    from swbuild.config import toolchain
    from swbuild.driver import build, check
    from swbuild.driver.compiler import compile_to
    from swbuild.backends.launches import kernel_entries
    from swbuild.backends.sunway.report import emulator_findings
    model, tc = window_model(scale_shift=scale_shift), toolchain.load("sunway-emu")
    p, _ = compile_to(model, tc, tmp_path, "w")
    plan = json.loads((tmp_path / f"{p.prefix}.plan.json").read_text())
    assert sum(k["op"] == "Conv" for k in kernel_entries(plan["kernels"])) == 3
    rt_lib = shared_builds.runtime_lib(tc, tmp_path / "_runtime")
    steps, _, exe = build.model_steps(tc, p.prefix, tmp_path, tmp_path, rt_lib)
    build.run_steps(steps, log=lambda s: None)
    x = rand(1, 16, 12, 12, seed=11)
    monkeypatch.setenv("SWEMU_DMA", "random:3")
    got, stats, err, code, _ = check.run_runner(exe, plan, {"x": x}, tmp_path)
    assert code == 0, err
    f = emulator_findings(plan, stats)
    assert f["dma_mismatches"] == [] and f["write_conflicts"] == 0 and f["races"] == 0
    ok, err, _, _ = check.compare(got, check.onnxruntime_reference(model, {"x": x}), 1e-4, 1e-5)
    assert ok, err
