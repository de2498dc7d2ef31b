"""An AveragePool whose one window holds the whole image and some padding, padding excluded
(light Inception-v1's last pool: 7x7, pads 0,0,1,1 on 6x6), is lowered as a GlobalAveragePool
(ops/nn.py _image_window): its window count is then the constant H * W and the kernel runs as
one __bang_avgpool window per channel block instead of scalar code. Against onnxruntime, on
the vector unit, its GDRAM bytes (the image once, the means once) predicted equal to the
emulator's; the same model through the Sunway pipelines (the lowering is shared); and the
pools where that is not the same sum keep their AveragePool."""
import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper

from dn_build import build_model, run_check
from onnx_builders import make, rand
from swbuild.backends.launches import kernel_entries
from swbuild.driver import check
from swbuild.driver.lowering import lower
from swbuild.frontends.onnx import import_model
from swbuild.ir.interp import run_program

INCEPTION_TAIL = dict(kernel_shape=[7, 7], strides=[1, 1], pads=[0, 0, 1, 1])


def _pool(attrs, C=64, H=6):
    opset = 19 if "dilations" in attrs else 13     # AveragePool's dilations: opset 19
    return make([helper.make_node("AveragePool", ["x"], ["y"], **attrs)], [("x", [1, C, H, H])], [("y", None)],
                opset=opset)


def _lowered(model, x):
    prog = lower(import_model(model), "t")
    got = run_program(prog, {"x": x})[0]
    ref = check.onnxruntime_reference(model, {"x": x})[0]
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)
    return prog


def test_inception_tail_is_a_global_pool_on_the_vector_unit(tc, tmp_path):
    x = rand(1, 64, 6, 6, seed=3, scale=2.0)
    m = _pool(INCEPTION_TAIL)
    assert [k.op for k in _lowered(m, x).kernels] == ["GlobalAveragePool"]
    plan, exe = build_model(tc, m, "tail", tmp_path, grouping="off")
    doc, stats = run_check(plan, exe, check.onnxruntime_reference(m, {"x": x}), {"x": x}, 1e-6, 1e-7)
    assert doc["status"] == "pass", doc.get("reason")
    assert stats["violations"] == 0 and not doc["emulator"]["copy_mismatches"] and doc["emulator"]["write_conflicts"] == 0
    (k,) = kernel_entries(plan["kernels"])
    assert k["class"] == "pool"
    # the image read once and the 64 means written once, predicted and counted alike
    assert k["copy_bytes"] == {"GDRAM2NRAM": 64 * 6 * 6 * 4, "NRAM2GDRAM": 64 * 4}
    (meas,) = stats["kernels"]
    assert {d: v for d, v in meas["memcpy_bytes"].items() if v} == k["copy_bytes"]
    assert not meas["instruction_cycles"].get("scalar_ops")
    device = next(tmp_path.glob("*_device.mlu")).read_text()
    body = device.split("_globalaveragepool(")[1].split("__mlu_global__")[0]
    assert "__bang_avgpool(" in body and "acc +=" not in body


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]),                    # many windows
    dict(INCEPTION_TAIL, count_include_pad=1),                       # divides by 49, not 36
    dict(kernel_shape=[4, 4], dilations=[2, 2], pads=[0, 0, 1, 1]),  # one window that skips pixels
    dict(kernel_shape=[6, 6], strides=[1, 1]),                       # no padding: already a constant count
], ids=["windows", "include_pad", "dilated", "unpadded"])
def test_pools_that_are_not_the_image_mean_keep_their_average_pool(attrs):
    prog = _lowered(_pool(attrs), rand(1, 64, 6, 6, seed=4))
    assert [k.op for k in prog.kernels] == ["AveragePool"]


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu"])
def test_sunway_targets_run_the_global_pool_too(target, tmp_path):
    m = make([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("AveragePool", ["r"], ["y"], **INCEPTION_TAIL)],
             [("x", [1, 64, 6, 6])], [("y", None)])
    path = tmp_path / "tail.onnx"
    onnx.save(m, path)
    r = subprocess.run([sys.executable, "-m", "swbuild.cli", "check", str(path), "--target", target, "-Q",
                        "-o", str(tmp_path / "b")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["status"] == "pass" and doc["max_abs_err"] < 1e-6
    assert not doc["emulator"]["dma_mismatches"] and doc["emulator"]["write_conflicts"] == 0
