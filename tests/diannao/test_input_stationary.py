"""Input-stationary convolutions (schedule/conv.py, option input_stationary): a row tile's input
is copied to NRAM once and the cluster's output-channel blocks loop inside it, their weights
held in SRAM (loaded once per cluster) and moved SRAM -> WRAM per block with __memcpy_async,
the block loop pipelined by pingpong.py (WRAM halves). `all` takes the order wherever it fits;
the result must equal onnxruntime's, the plan's copy bytes the emulator's, and the input must
leave GDRAM fewer times than with the blocks outside the tiles."""
import re

import numpy as np
import pytest
from onnx import helper, numpy_helper


from dn_build import checked_variants
from dn_models import _model, vi

# (spatial size, input channels, output channels, kernel): 3x3 with a halo and a 1x1 whose
# per-channel bias slots differ per block
CASES = [(14, 64, 256, 3), (28, 64, 256, 1)]


def nhwc_convs(cases, seed=4):
    """Per case: NHWC input -> Conv (bias, same padding) -> Relu -> NHWC output (the layout pass
    removes the transposes, so the convolution reads and writes NHWC)."""
    rng = np.random.default_rng(seed)
    ins, outs, nodes, inits = [], [], [], []
    for j, (h, ci, co, k) in enumerate(cases):
        ins.append(vi(f"x{j}", (1, h, h, ci)))
        w = (rng.standard_normal((co, ci, k, k)) / np.sqrt(k * k * ci)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{j}"), numpy_helper.from_array(rng.standard_normal(co).astype(np.float32), f"b{j}")]
        nodes += [helper.make_node("Transpose", [f"x{j}"], [f"xc{j}"], perm=[0, 3, 1, 2]),
                  helper.make_node("Conv", [f"xc{j}", f"w{j}", f"b{j}"], [f"c{j}"], kernel_shape=[k, k], pads=[k // 2] * 4),
                  helper.make_node("Relu", [f"c{j}"], [f"r{j}"]),
                  helper.make_node("Transpose", [f"r{j}"], [f"y{j}"], perm=[0, 2, 3, 1])]
        outs.append(vi(f"y{j}", (1, h, h, co)))
    return _model(nodes, ins, outs, inits, name="xst")


@pytest.fixture(scope="module")
def both(tc, tmp_path_factory):
    return checked_variants(tc, tmp_path_factory, nhwc_convs(CASES), "xst",
                            {st: dict(grouping="off", input_stationary=st) for st in ("off", "all")}, 3, 1e-4, 1e-5)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_stationary_matches_and_reads_input_once(both, case):
    k = {}
    for st, (plan, doc, stats, _) in both.items():
        assert doc["status"] == "pass", (st, doc.get("reason"))
        em = doc["emulator"]
        assert em["copy_mismatches"] == [] and em["violations"] == 0 and em["write_conflicts"] == 0, st
        conv = [x for x in plan["kernels"] if x["class"] == "conv"][case]
        meas = {x["name"]: x for x in stats["kernels"]}[conv["name"]]
        assert conv["copy_bytes"] == meas["memcpy_bytes"], st        # the plan's prediction, exact
        k[st] = conv, meas["memcpy_bytes"]
    on, off = k["all"], k["off"]
    assert on[0]["schedule"].get("input_stationary") is True and off[0]["schedule"].get("input_stationary") is False
    assert on[0]["schedule"]["NCB"] > 1
    h, ci, co, kk = CASES[case]
    # the input leaves GDRAM once per row tile (plus halo rows), never once per block
    rows = on[0]["schedule"]["NRT"] * ((on[0]["schedule"]["R"] - 1) + kk)
    assert on[1]["GDRAM2NRAM"] <= rows * h * ci * 4 + 16 * on[0]["schedule"]["NCB"] * on[0]["schedule"]["Cob"] * 4
    assert on[1]["GDRAM2NRAM"] < off[1]["GDRAM2NRAM"] or off[0]["schedule"]["NCB"] == 1
    assert on[1]["NRAM2GDRAM"] == off[1]["NRAM2GDRAM"] == h * h * co * 4


def test_stationary_block_loop_is_pipelined(both):
    src = both["all"][3]
    assert re.search(r"__memcpy_async\([^;]*SRAM2WRAM", src)      # block jb + 1 while jb computes
    assert re.search(r"__memcpy\([^;]*GDRAM2SRAM", src) and "__sync_cluster();" in src
