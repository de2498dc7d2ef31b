"""A constant used by many nodes is stored once. ALBERT applies one shared layer 12 times;
its weights were re-laid out (Sunway's blocked DMA copies) or staged (DianNao's device image)
once per use, and ALBERT-xxlarge needed 9.7 GB of main memory for 0.8 GB of weights."""
import json
import re
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from swbuild.backends.blob import WeightsBlob
from swbuild.config.toolchain import load
from swbuild.driver import compiler

N, LAYERS = 64, 6


def _shared_layer_model():
    """x -> (MatMul W, Add b, Relu) x LAYERS, then one unshared MatMul. The first half of the
    layers name the same W and b; the second half name copies with the same bytes (what folding
    a shared layer's per-use constants gives)."""
    rng = np.random.default_rng(0)
    W = (rng.standard_normal((N, N)) / 8).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b"),
             numpy_helper.from_array((rng.standard_normal((N, N)) / 8).astype(np.float32), "V")]
    inits += [numpy_helper.from_array(a, f"{n}{i}") for i in range(LAYERS // 2, LAYERS) for n, a in (("W", W), ("b", b))]
    nodes, x = [], "x"
    for i in range(LAYERS):
        w, c = ("W", "b") if i < LAYERS // 2 else (f"W{i}", f"b{i}")
        nodes += [helper.make_node("MatMul", [x, w], [f"m{i}"], name=f"mm{i}"),
                  helper.make_node("Add", [f"m{i}", c], [f"a{i}"], name=f"add{i}"),
                  helper.make_node("Relu", [f"a{i}"], [f"r{i}"], name=f"relu{i}")]
        x = f"r{i}"
    nodes.append(helper.make_node("MatMul", [x, "V"], ["y"], name="last"))
    g = helper.make_graph(nodes, "shared", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, N])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, N])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_blob_stores_equal_bytes_once():
    b = WeightsBlob(64)
    a = np.arange(32, dtype=np.float32)
    assert b.add(a, "float32") == 0
    assert b.add(np.ones(32, np.float32), "float32") == 128
    assert b.add(a.copy().reshape(4, 8), "float32") == 0            # same bytes, other shape
    assert b.add(a.astype(np.float64), "float32") == 0              # same bytes once converted
    assert b.add(a.astype(np.float64), "float64") == 256            # other bytes: a new piece
    c = a.copy()
    c[31] = np.nextafter(c[31], 100, dtype=np.float32)              # one ulp away
    assert b.add(c, "float32") == 512
    assert len(b) == 512 + 128


@pytest.mark.parametrize("target", ["sunway-emu", "diannao-emu"])
def test_a_weight_shared_by_layers_is_stored_once(tmp_path, target):
    path = tmp_path / "shared.onnx"
    path.write_bytes(_shared_layer_model().SerializeToString())
    weights, _, _ = compiler.main_memory_bytes(compiler.build_program(str(path), load(target), "shared"))
    out = tmp_path / "b"
    p = subprocess.run([sys.executable, "-m", "swbuild.cli", "check", str(path), "-t", target, "-o", str(out), "-Q"],
                       capture_output=True, text=True)
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    assert doc["status"] == "pass", doc
    blob = (out / "shared_weights.bin").stat().st_size
    # W, b and V once each (plus alignment and the target's own constants), not W and b six times
    assert weights <= 3 * N * N * 4, weights
    assert blob <= 3 * N * N * 4, blob
    if target == "diannao-emu":     # the device image the host fills from the blob, in 4-byte words
        image = int(re.search(r"const size_t img = (\d+)UL", (out / "shared_host.cpp").read_text()).group(1))
        assert image <= 3 * N * N, image
