"""DenseNet's copies (issue 34): NHWC spreads from the convolutions through point-wise kernels
(Concat, BatchNormalization + Relu), an element-wise kernel tiles in its output's storage
order, and a per-channel operand is loaded once per task (one pixel's channels, replicated on
chip), not once per tile. Before, the BN
between a Concat and a Conv read NCHW and wrote NHWC one 4-byte segment per element and
loaded each of its four per-channel operands as a full-size tile, every tile."""
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from swbuild.driver import check
from swbuild.driver.compiler import build_program

from dn_build import build_model, run_check
from dn_models import OPSET, vi

C1, C2, HW = 64, 32, 64


def dense_block(seed=0):
    rng = np.random.default_rng(seed)

    def arr(name, *shape, pos=False):
        a = rng.random(shape) + 0.5 if pos else rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]) or 1)
        return numpy_helper.from_array(a.astype(np.float32), name)
    C = C1 + C2
    inits = [arr("w1", C1, 3, 3, 3), arr("w2", C2, C1, 1, 1), arr("w3", C2, C, 1, 1), arr("s", C, pos=True),
             arr("b", C), arr("m", C), arr("v", C, pos=True)]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["c1", "w2"], ["c2"], name="conv2"),
             helper.make_node("Concat", ["c1", "c2"], ["cat"], name="cat", axis=1),
             helper.make_node("BatchNormalization", ["cat", "s", "b", "m", "v"], ["bn"], name="bn"),
             helper.make_node("Relu", ["bn"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "w3"], ["y"], name="conv3")]
    g = helper.make_graph(nodes, "dense", [vi("x", (1, 3, HW, HW))], [vi("y", (1, C2, HW, HW))], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])


@pytest.fixture(scope="module")
def program(tc):
    return build_program(dense_block(), tc, "dense")


def test_concat_and_bn_are_nhwc(program):
    layouts = program.target_state.layouts
    bn = next(k for k in program.kernels if k.op == "BatchNormalization")
    cat = next(program.root(b.tensor) for n, b in bn.buffers.items()
               if n != bn.out and program.graph.tensors[b.tensor].data is None)
    assert cat in layouts                                            # no convolution touches it
    assert program.root(bn.buffers[bn.out].tensor) in layouts
    # both convolutions write their channels of it in place (concat_slices.py): no Concat kernel
    assert not any(k.op == "Concat" for k in program.kernels)
    assert sorted(c for c, _ in program.slices.values()) == [cat, cat]


def _copies(dk):
    from swbuild.backends.diannao.devir import stmts
    return [s.mapped for s in stmts(dk.body) if s.mapped is not None and s.mapped.desc.kind == "copy"]


def test_bn_copies_whole_pixels_and_its_operands_once(program):
    from swbuild.backends.diannao.traffic import predicted_copy_bytes
    dk = next(d for d in program.target_state.dev if d.op == "BatchNormalization")
    C = C1 + C2
    # every copy moves whole pixels (C channels, contiguous in NHWC), none element by element
    assert all(int(m.params.get("n", 1)) % C == 0 for m in _copies(dk))
    copies, _ = predicted_copy_bytes(dk)
    act = 4 * C * HW * HW
    # stored once, to GDRAM or (sram_residency: its reader is in the same launch) to SRAM
    assert copies.get("NRAM2GDRAM", 0) + copies.get("NRAM2SRAM", 0) == act
    # the activation once, each per-channel operand (scale, shift: up to four before folding)
    # one pixel's C channels per task (all 16 busy), replicated over the tile's pixels on chip
    # (NRAM2NRAM, source stride 0), though each task computes more than one tile: loaded per
    # tile, q operands would move q activations' bytes, and once per task as whole tiles
    # 16 x lanes each
    lanes = dk.info["tile"]["lanes"]
    assert HW * HW * C > 16 * lanes and lanes > C
    # (the activation from GDRAM, or from SRAM where sram_concats keeps its Concat there)
    operands = copies["GDRAM2NRAM"] + copies.get("SRAM2NRAM", 0) - act
    q, rest = divmod(operands, 16 * 4 * C)
    assert rest == 0 and 1 <= q <= 4
    assert copies["NRAM2NRAM"] == q * 16 * 4 * (lanes - C)


def test_dense_block_matches_onnxruntime(tc, tmp_path):
    model = dense_block()
    plan, exe = build_model(tc, model, "dense", tmp_path)
    inputs = check.seeded_inputs(plan["inputs"], 1)
    doc, stats = run_check(plan, exe, check.onnxruntime_reference(model, inputs), inputs)
    assert doc["status"] == "pass", doc.get("reason")
    assert stats["violations"] == 0 and doc["emulator"]["copy_mismatches"] == []
