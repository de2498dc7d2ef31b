"""`physical_bound_seconds` and `bound_ratio` in both families' reports: the bound of a one-Conv
model computed by hand from the toolchain file's constants (flops at every core's peak, weights
+ input + output once at the memory bandwidth), and the table's line saying it."""
import json
import tomllib
from pathlib import Path

import onnx
import pytest
from onnx import helper

from onnx_builders import make, rand
from swbuild import cli

TOOLCHAINS = Path(__file__).resolve().parents[2] / "toolchains"
C, HW = 64, 16      # 64 -> 64 channels, 3x3, 16x16: compute sets the bound on both families


@pytest.fixture(scope="module")
def conv(tmp_path_factory):
    d = tmp_path_factory.mktemp("bound")
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])]
    path = d / "conv.onnx"
    onnx.save(make(nodes, [("x", [1, C, HW, HW])], [("y", [1, C, HW, HW])], [("w", rand(C, C, 3, 3))]), path)
    return d, path


def _report(capsys, path, target, out):
    assert cli.main(["report", str(path), "--target", target, "-o", str(out), "-Q"]) == 0
    table = capsys.readouterr().out
    assert cli.main(["report", str(path), "--target", target, "--runner", str(out / "conv_runner"), "--json"]) == 0
    return table, json.loads(capsys.readouterr().out)


def _by_hand(target):
    hw = tomllib.loads((TOOLCHAINS / f"{target}.toml").read_text())["hardware"]
    flops = 2 * C * C * 9 * HW * HW
    compulsory = 4 * (C * HW * HW + C * C * 9 + C * HW * HW)
    if target.startswith("diannao"):
        peak = 2 * hw["conv_float_macs_per_cycle"] * hw["cores"] * hw["clock_hz"]
    else:
        peak = hw["peak_flops_per_cpe"] * hw["cpes"]
    return flops, compulsory, flops / peak, compulsory / hw["mem_bandwidth_bytes_per_s"]


@pytest.mark.parametrize("target, toolchain", [("diannao-emu", "diannao"), ("sunway-emu", "sunway")])
def test_bound_is_the_hand_computation(conv, capsys, target, toolchain):
    d, path = conv
    table, rep = _report(capsys, path, target, d / target)
    flops, compulsory, compute_s, memory_s = _by_hand(toolchain)
    assert rep["flops"] == flops and rep["model_compulsory_bytes"] == compulsory
    assert compute_s > memory_s and rep["physical_bound_limit"] == "compute"
    assert rep["physical_bound_seconds"] == pytest.approx(max(compute_s, memory_s), rel=1e-12)
    assert rep["bound_ratio"] == pytest.approx(rep["modeled_seconds"] / max(compute_s, memory_s), rel=1e-12)
    assert rep["bound_ratio"] > 1.0     # no schedule beats the bound
    if toolchain == "diannao":          # the plan's copies (traffic.py) are the emulator's
        assert rep["predicted_gdram_bytes"] == rep["gdram_bytes"] > compulsory and rep["copy_mismatches"] == []
    assert (f"physical bound {rep['physical_bound_seconds'] * 1e3:.3f} ms (compute" in table
            and f"= {rep['bound_ratio']:.2f}x the bound" in table)
