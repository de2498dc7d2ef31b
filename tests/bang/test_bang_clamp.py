"""__bang_maxeq_scalar / __bang_mineq_scalar in the BANG emulator (what a QuantizeLinear's
saturation runs on, backends/diannao/schedule/quantize.py): a NaN element gives the scalar,
infinities and signed zeros as a select, cycles from the toolchain's vector cost, the count
rule, and refused before mtp_322 (the declarations' __BANG_ARCH__ >= 322)."""
import json
import math
import re

import numpy as np
import pytest

from bangemu_build import HERE, MTP_270, compile_mlu, hardware, run


@pytest.fixture(scope="module")
def exes(tmp_path_factory):
    d = tmp_path_factory.mktemp("clamp")
    return {"372": compile_mlu(HERE / "clamp.mlu", d / "clamp", hardware()),
            "270": compile_mlu(HERE / "clamp.mlu", d / "clamp270", hardware(**MTP_270))}


def test_maxeq_and_mineq_values_nan_and_cycles(exes, tmp_path):
    x = np.random.default_rng(4).standard_normal(256).astype(np.float32) * 4
    x[:6] = [np.nan, np.inf, -np.inf, -0.0, -2.5, 3.0]
    x.tofile(tmp_path / "in")
    stats = tmp_path / "s.json"
    run(exes["372"], "ok", tmp_path, stats=stats)
    out = np.fromfile(tmp_path / "out", np.float32)
    np.testing.assert_array_equal(out[:256], np.where(x >= -2.5, x, np.float32(-2.5)))
    np.testing.assert_array_equal(out[256:], np.where(x <= 3.0, x, np.float32(3.0)))
    assert out[0] == -2.5 and out[256] == 3.0             # NaN gives the scalar
    assert np.signbit(out[3]) and np.signbit(out[259])    # -0.0 kept
    hw = hardware()
    k = json.loads(stats.read_text())["kernels"][0]
    per = hw["vector_startup_cycles"] + math.ceil(256 * 4 / hw["vector_bytes_per_cycle"])
    assert k["violations"] == 0
    assert k["instruction_cycles"]["__bang_maxeq_scalar"] == k["instruction_cycles"]["__bang_mineq_scalar"] == per


def test_count_rule_and_arch(exes, tmp_path):
    r = run(exes["372"], "count", check=False)
    assert r.returncode == 87 and re.search(r"__bang_maxeq_scalar: n \* sizeof\(T\) must be a multiple of 128 B", r.stderr)
    np.zeros(256, np.float32).tofile(tmp_path / "in")
    r = run(exes["270"], "ok", tmp_path, check=False)
    assert r.returncode == 87 and "__bang_maxeq_scalar: needs mtp_322 or later (arch=mtp_270)" in r.stderr
