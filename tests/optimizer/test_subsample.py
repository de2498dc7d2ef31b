"""passes/subsample.py: a stride-2 1x1 convolution reads a dense copy of the pixels it uses
(written by a copy kernel whose boxes are whole planes) where the cost model gains; the
result is exact and the DMA as predicted on both Sunway targets."""
import json

import pytest

from opt_models import conv_model, program, rand, sunway
import shared_builds
from swbuild.backends.launches import kernel_entries
from swbuild.backends.sunway.passes import subsample as ss
from swbuild.backends.sunway.report import emulator_findings
from swbuild.backends.sunway.schedule.passes import SunwayState
from swbuild.ir.loopnest import iter_loads


def _pass(model, target="sunway-pro-emu", options=None):
    p = program(model)
    p.target_state = SunwayState()
    return ss.subsample_inputs(p, sunway(target), options or {})


def test_stride_two_pointwise_convolution_reads_a_dense_copy(monkeypatch):
    monkeypatch.setattr(ss, "_DECISIONS", {})
    p = _pass(conv_model(c=64, hw=14, co=128, k=1, stride=2, pads=(0, 0, 0, 0)))
    copy, conv = p.kernels
    assert copy.name == conv.name + "_sub" and copy.out == "b1"
    assert p.graph.tensors[copy.buffers["b1"].tensor].shape == (1, 64, 7, 7)
    assert [(a.name, a.extent) for a in copy.reduce_axes] == [("r2", 2), ("r3", 2)]
    x = [ld for ld in iter_loads(conv.body) if conv.buffers[ld.buf].tensor == copy.buffers["b1"].tensor]
    assert len(x) == 1 and [str(i) for i in x[0].index] == ["n", "ci", "(o0 + k0)", "(o1 + k1)"]
    assert any("dense copy" in n for n in p.notes)


def test_the_cost_model_decides(monkeypatch):
    monkeypatch.setattr(ss, "_DECISIONS", {})
    monkeypatch.setattr(ss, "GAIN", 0.0)        # no pair is faster than nothing
    p = _pass(conv_model(c=64, hw=14, co=128, k=1, stride=2, pads=(0, 0, 0, 0)))
    assert [k.name for k in p.kernels] == ["t_k0_conv"]
    assert not any(n.startswith("%swsub:") for n in p.graph.tensors)      # the trial's copy is dropped


@pytest.mark.parametrize("model", [
    conv_model(c=16, hw=14, co=32, k=3, stride=2),                          # pads: its box is padded
    conv_model(c=16, hw=14, co=32, k=3, stride=2, pads=(0, 0, 0, 0)),       # 3x3: rows overlap
    conv_model(c=16, hw=7, co=32, k=1, stride=2, pads=(0, 0, 0, 0)),        # 4 x 2 rows > 7
    conv_model(c=16, hw=14, co=32, k=1, stride=1, pads=(0, 0, 0, 0)),       # dense already
])
def test_other_reads_are_left_alone(model, monkeypatch):
    monkeypatch.setattr(ss, "_DECISIONS", {})
    p = _pass(model)
    assert len(p.kernels) == 1 and not p.kernels[0].name.endswith("_sub")


def test_option_off():
    p = _pass(conv_model(c=64, hw=14, co=128, k=1, stride=2, pads=(0, 0, 0, 0)), options={"subsample": "off"})
    assert len(p.kernels) == 1


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu"])
def test_dense_copy_is_exact_and_faster_on_the_emulator(tmp_path, target):
    from swbuild.config import toolchain
    from swbuild.driver import build, check
    from swbuild.driver.compiler import compile_to
    model = conv_model(c=64, hw=28, co=128, k=1, stride=2, pads=(0, 0, 0, 0))
    tc = toolchain.load(target)
    secs = {}
    for mode in ("off", "on"):
        program_, _ = compile_to(model, tc, tmp_path / mode, "ds", options={"subsample": mode})
        plan = json.loads((tmp_path / mode / f"{program_.prefix}.plan.json").read_text())
        secs[mode] = sum(k["modeled_seconds"] for k in kernel_entries(plan["kernels"]))
    names = [k["name"] for k in kernel_entries(plan["kernels"])]
    assert names == ["ds_k0_conv_sub", "ds_k0_conv"], names
    assert secs["on"] < secs["off"]
    rt_lib = shared_builds.runtime_lib(tc, tmp_path / "_runtime")
    steps, _, exe = build.model_steps(tc, program_.prefix, tmp_path / "on", tmp_path / "on", rt_lib)
    build.run_steps(steps, log=lambda s: None)
    x = rand(*plan["inputs"][0]["shape"], seed=11)
    got, stats, err, code, _ = check.run_runner(exe, plan, {plan["inputs"][0]["name"]: x}, tmp_path / "on")
    assert code == 0, err
    f = emulator_findings(plan, stats)
    assert f["dma_mismatches"] == [] and f["write_conflicts"] == 0 and f["races"] == 0
    ref = check.onnxruntime_reference(model, {plan["inputs"][0]["name"]: x})
    ok, err, _, _ = check.compare(got, ref, 1e-4, 1e-5)
    assert ok, err


def test_trials_run_in_the_parallel_search_workers(tmp_path, monkeypatch):
    """Serial and parallel builds give the same bytes, and with workers no trial searches in
    the process itself (schedule/parallel.py)."""
    import os

    from onnx import helper

    from opt_models import make
    from swbuild.backends.sunway.passes import vector_weights
    from swbuild.backends.sunway.schedule import ldm, parallel, split
    from swbuild.driver.compiler import compile_to
    nodes, inits, c, x, hw = [], [], 8, "x", 32
    for i, co in enumerate([16, 24, 32]):       # three distinct downsamplings
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"y{i}"], strides=[2, 2]))
        inits += [(f"w{i}", rand(co, c, 1, 1, seed=2 * i + 1, scale=0.3)), (f"b{i}", rand(co, seed=2 * i + 2))]
        c, x, hw = co, f"y{i}", hw // 2
    model = make(nodes, [("x", [1, 8, 32, 32])], [(x, [1, c, hw, hw])], inits)
    monkeypatch.setattr(parallel, "MIN_ITEMS", 2)
    monkeypatch.setattr(parallel, "MIN_WORK", 0.0)
    main, calls, real = os.getpid(), [], ldm.enumerate_tiles

    def counted(s, cands):
        if os.getpid() == main:
            calls.append(s.k.name)
        return real(s, cands)
    monkeypatch.setattr(ldm, "enumerate_tiles", counted)
    out = {}
    for jobs in (1, 2):
        monkeypatch.setenv(parallel.ENV, str(jobs))
        for mod in (ldm, split, ss, vector_weights):
            monkeypatch.setattr(mod, "_MEMO" if mod is ldm else "_DECISIONS", {})
        del calls[:]
        _, out[jobs] = compile_to(model, sunway("sunway-pro-emu"), tmp_path / str(jobs), "m")
        if jobs == 1:
            decisions = dict(ss._DECISIONS)
            assert len(decisions) == 3 and any(n.endswith("_sub") for n in calls)
    assert out[2] == out[1] and calls == [] and ss._DECISIONS == decisions
