"""Element-wise kernels split like their convolutions (schedule/residency_split.py, option
residency_split): DenseNet's step Concat -> BatchNorm + Relu -> Conv 1x1 at 56 x 56, where the
BN split 196 pixels per task and the rows-mode 1x1 convolution 4 rows = 224 pixels, so the BN
output went through GDRAM. Split alike, it stays in its cluster's SRAM: outputs match
onnxruntime, predicted copy bytes equal the emulator's, and GDRAM moves the BN output's bytes
fewer in each direction. With sram_concats (residency_concat.py) the Concat stays there too."""
import json

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from swbuild.driver import build, check
from swbuild.driver.compiler import compile_to

from dn_build import run_check
from dn_models import OPSET, vi

C1, C2, HW = 64, 32, 56


def dense_step(seed=3):
    rng = np.random.default_rng(seed)

    def arr(name, *shape, pos=False):
        a = rng.random(shape) + 0.5 if pos else rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]) or 1)
        return numpy_helper.from_array(a.astype(np.float32), name)
    C = C1 + C2
    inits = [arr("w1", C1, 16, 1, 1), arr("w2", C2, C1, 1, 1), arr("w3", C2, C, 1, 1), arr("s", C, pos=True),
             arr("b", C), arr("m", C), arr("v", C, pos=True)]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1"),
             helper.make_node("Conv", ["c1", "w2"], ["c2"], name="conv2"),
             helper.make_node("Concat", ["c1", "c2"], ["cat"], name="cat", axis=1),
             helper.make_node("BatchNormalization", ["cat", "s", "b", "m", "v"], ["bn"], name="bn"),
             helper.make_node("Relu", ["bn"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "w3"], ["y"], name="conv3")]
    g = helper.make_graph(nodes, "step", [vi("x", (1, 16, HW, HW))], [vi("y", (1, C2, HW, HW))], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])


@pytest.fixture(scope="module")
def built(tc, tmp_path_factory):
    model = dense_step()
    out = {}
    for opt, options in {"off": {"residency_split": "off", "sram_concats": "off"},
                         "on": {"residency_split": "on", "sram_concats": "off"}, "concats": {}}.items():
        d = tmp_path_factory.mktemp(f"split-{opt}")
        prog, _ = compile_to(model, tc, d, "step", options=options)
        steps, _, exe = build.model_steps(tc, prog.prefix, d, d)
        build.run_steps(steps, log=lambda s: None)
        plan = json.loads((d / f"{prog.prefix}.plan.json").read_text())
        inputs = check.seeded_inputs(plan["inputs"], 5)
        out[opt] = (prog, plan, *run_check(plan, exe, check.onnxruntime_reference(model, inputs), inputs))
    return out


def gdram(copies):
    return sum(b for d, b in copies.items() if "GDRAM" in d)


def test_bn_output_stays_in_sram(built):
    for opt in built:
        _, _, doc, stats = built[opt]
        assert doc["status"] == "pass", doc.get("reason")
        em = doc["emulator"]
        assert em["copy_mismatches"] == [] and em["violations"] == 0 and em["write_conflicts"] == 0
    (p_off, off, *_), (p_on, on, *_) = built["off"], built["on"]
    bn = next(k for k in p_on.kernels if k.op == "BatchNormalization")
    r = p_on.root(bn.buffers[bn.out].tensor)
    # the hint: 4 rows of 56 pixels per task, the rows-mode convolution's
    assert p_on.target_state.chunk_hints == {bn.name: 4 * HW}
    assert p_off.target_state.chunk_hints == {}
    assert r in on["on_chip_tensors"] and r not in off["on_chip_tensors"]
    inter = (C1 + C2) * HW * HW * 4
    (k_off,), (k_on,) = off["kernels"], on["kernels"]      # one launch
    assert gdram(k_on["copy_bytes"]) == gdram(k_off["copy_bytes"]) - 2 * inter
    assert k_on["copy_bytes"]["NRAM2SRAM"] - k_off["copy_bytes"].get("NRAM2SRAM", 0) == inter


def test_concat_stays_in_sram(built):
    """sram_concats (residency_concat.py): the Concat `cat` and its two slices, written by the
    two convolutions (one of them reading the other's slice) and read by the BN, are one SRAM
    buffer per cluster; GDRAM then moves the Concat's bytes fewer in each direction."""
    (_, on, *_), (p_c, cc, *_) = built["on"], built["concats"]
    assert "cat" not in on["on_chip_tensors"]
    t = cc["on_chip_tensors"]["cat"]
    assert t["slices"] == ["c1", "c2", "cat"]
    cat = (C1 + C2) * HW * HW * 4
    assert cat // 4 <= t["bytes"] < cat
    (k_on,), (k_c,) = on["kernels"], cc["kernels"]
    # written once (c1, c2), read once by conv2 (c1) and once by the BN (all of it)
    c1 = C1 * HW * HW * 4
    assert gdram(k_c["copy_bytes"]) == gdram(k_on["copy_bytes"]) - 2 * cat - c1


def _kernel(name, cls, out, reads, **info):
    from types import SimpleNamespace as NS
    k = NS(buffers={"o": NS(tensor=out)}, out="o")
    return NS(name=name, cls=cls, info=info, kernel=k,
              params=[(f"g{i}", ("tensor", t)) for i, t in enumerate(reads + [out])])


def _program(slices):
    from types import SimpleNamespace as NS
    shapes = {"x": (1, 16, HW, HW), "c1": (1, C1, HW, HW), "c2": (1, C2, HW, HW), "cat": (1, C1 + C2, HW, HW),
              "r": (1, C1 + C2, HW, HW), "y": (1, C2, HW, HW)}
    return NS(graph=NS(tensors={t: NS(shape=s) for t, s in shapes.items()}), inputs=["x"], outputs=["y"],
              slices=slices, root=lambda t: t)


@pytest.mark.parametrize("reader_mode", ["rows", "clusters"])
def test_chunk_hints_from_readers_or_the_concat_writers(reader_mode):
    """The split comes from the BN output's readers (rows-mode convolutions), else, with
    sram_concats, from the writers of the Concat it reads; none when they disagree."""
    from swbuild.backends.diannao.schedule.residency_split import chunk_hints
    p = _program({"c1": ("cat", 0), "c2": ("cat", 4 * C1)})
    tile = {"axes": [HW * HW, C1 + C2], "chunk": -(-HW * HW // 16)}

    def dev(c2_rows):      # c2's writer: row tiles of c2_rows rows
        return [_kernel("k0", "conv", "c1", ["x"], mode="rows", NRT=HW, R=1),
                _kernel("k1", "conv", "c2", ["c1"], mode="rows", NRT=-(-HW // c2_rows), R=c2_rows),
                _kernel("bn", "elementwise", "r", ["cat"], tile=tile),
                _kernel("k6", "conv", "y", ["r"], mode=reader_mode, NRT=HW, R=1)]
    # 56 rows over 16 tasks: 4 rows (224 pixels) per task, not 196
    want = {"bn": 4 * HW}
    assert chunk_hints(p, dev(1)) == chunk_hints(p, dev(2)) == want     # 4 tiles of 1 row, 2 of 2
    assert chunk_hints(p, dev(1), concats=False) == (want if reader_mode == "rows" else {})
    # c2 written in tiles of 3 rows: 2 per task, 6 rows; the Concat's writers disagree
    assert chunk_hints(p, dev(3)) == (want if reader_mode == "rows" else {})
