"""benchmarks/layer_bounds.py: the layer-by-layer roofline of a model against its physical bound
(issue 34), on a one-convolution model whose numbers are worked out here by hand from
toolchains/diannao.toml (16 x 512 MACs/cycle, 307.2 B/cycle, Ci to 64 B, Co to 64)."""
import sys
from pathlib import Path

import numpy as np
from onnx import helper

from onnx_builders import make
from swbuild.config.toolchain import load

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import layer_bounds  # noqa: E402


def test_one_convolution_padded_and_exact(tmp_path):
    # 3 -> 32 channels, 3x3, 8x8 image: 64 pixels x 32 x 3 x 9 = 55 296 MACs; __bang_conv pads
    # Co to 64 and Ci to 16 floats, or the 3 kernel columns folded into Ci (9 -> 16, x 3 rows)
    m = make([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], [("x", [1, 3, 8, 8])],
             [("y", [1, 32, 8, 8])], [("w", np.ones((32, 3, 3, 3), np.float32))])
    path = tmp_path / "c.onnx"
    path.write_bytes(m.SerializeToString())
    r = layer_bounds.one(path, load("diannao-emu"), top=1)
    assert (r["layers"], r["macs"], r["padded_macs"]) == (1, 55296, 64 * 64 * 16 * 3)
    weights, io = 32 * 27 * 4, (3 + 32) * 64 * 4
    bound = (weights + io) / 307.2                   # memory-bound: 40.4 cycles against 6.75 of MACs
    assert r["bound_cycles"] == round(bound)
    assert r["layer_sum_cycles"] == round(weights / 307.2)          # 11.25: its weights, not its 6.75 MACs
    assert r["padded_layer_sum_cycles"] == round(64 * 64 * 16 * 3 / 8192)   # 24: padded MACs now dominate
    assert r["most_padded"][0]["padded_macs"] == 196608 and r["most_padded"][0]["macs"] == 55296
