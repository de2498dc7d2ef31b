"""__bang_cycle_add / _sub / _mul in the BANG emulator (a per-channel operand of a convolution
epilogue applied without replicating it over the tile, schedule/cycle_ops.py): values with the
cycle operand repeated, cost of the non-cycle op of the same length, and the rules (elem_count
a multiple of cycle_count, operands 64-B aligned)."""
import json
import math
import re

import numpy as np
import pytest

from bangemu_build import HERE, compile_mlu, hardware, run


@pytest.fixture(scope="module")
def exe(tmp_path_factory):
    return compile_mlu(HERE / "cycle.mlu", tmp_path_factory.mktemp("cycle") / "cycle", hardware())


def test_cycle_ops_values_and_cycles(exe, tmp_path):
    rng = np.random.default_rng(7)
    a = rng.standard_normal(256).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    np.concatenate([a, b]).tofile(tmp_path / "in")
    stats = tmp_path / "s.json"
    run(exe, "ok", tmp_path, stats=stats)
    out = np.fromfile(tmp_path / "out", np.float32)
    rep = np.tile(b, 4)
    np.testing.assert_array_equal(out[:256], a + rep)
    np.testing.assert_array_equal(out[256:512], a - rep)
    np.testing.assert_array_equal(out[512:], a * rep)
    hw = hardware()
    k = json.loads(stats.read_text())["kernels"][0]
    per = hw["vector_startup_cycles"] + math.ceil(256 * 4 / hw["vector_bytes_per_cycle"])   # 16 + 8
    assert k["violations"] == 0
    for op in ("add", "sub", "mul"):
        assert k["instructions"][f"__bang_cycle_{op}"] == 1
        assert k["instruction_cycles"][f"__bang_cycle_{op}"] == per == 24


@pytest.mark.parametrize("mode, message", [
    ("count", r"__bang_cycle_mul: elem_count must be a multiple of cycle_count \(elem_count=256, cycle_count=96\)"),
    ("align", r"__bang_cycle_add: NRAM operands must be 64-B aligned \(cycle_src=NRAM\+\d+\)"),
])
def test_cycle_ops_rules(exe, mode, message):
    r = run(exe, mode, check=False)
    assert r.returncode == 87 and re.search(message, r.stderr), r.stderr
