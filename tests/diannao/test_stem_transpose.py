"""The stem convolution on the MLU (schedule/conv.py, issue 34/36): a channels-first 3-channel
image is copied a row of each channel per segment into a CHW tile and re-laid out on chip by
__bang_transpose to the HWC tile __bang_conv reads, instead of gathered one element per copy
segment; the schedule's estimate picks it. Folded (option stem_fold, issue 36): a tile of
one output row holds the 7 image rows of its window as channels (channel (ky, c)), a 1x7
__bang_conv over 21 channels. Float and int8 (QDQ: the image
through QuantizeLinear) stems match onnxruntime, the predicted copy bytes equal the
emulator's, no BANG rule is violated and no two tasks write the same bytes."""
import re
import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from dn_build import build_bit_exact, build_model, run_check
from swbuild.driver import check

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from quant_models import ort_quantized  # noqa: E402

H, CO = 24, 64
HO = (H + 6 - 7) // 2 + 1


def stem(seed=0, H=H):
    """7x7 stride-2 Conv (pads 3, bias) + Relu on a 1x3xHxH image, as ResNet's first layer."""
    HO = (H + 6 - 7) // 2 + 1
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array((rng.standard_normal((CO, 3, 7, 7)) / 12).astype(np.float32), "w"),
             numpy_helper.from_array((rng.standard_normal(CO) * 0.1).astype(np.float32), "b")]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w", "b"], ["c"], kernel_shape=[7, 7], strides=[2, 2], pads=[3, 3, 3, 3], name="stem"),
             n("Relu", ["c"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "stem", [helper.make_tensor_value_info("x", TP.FLOAT, [1, 3, H, H])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, CO, HO, HO])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _stem_kernel(plan):
    """(launch name, the convolution's plan entry): a group launch holds several kernels."""
    convs = [(k["name"], s) for k in plan["kernels"] for s in k.get("kernels", [k]) if s.get("class") == "conv"]
    assert len(convs) == 1
    return convs[0]


def _check_copies(plan, stats, out_dir, folded=1):
    """Transposed once per row tile; every copy from GDRAM into NRAM moves at least a whole
    image row per segment (a per-element gather moves `eb` bytes per segment)."""
    launch, k = _stem_kernel(plan)
    s = k["schedule"]
    assert s["transposed_input"] is True and s.get("folded_height", 1) == folded, s
    eb = 1 if s["narrow_in"] else 4
    meas = next(m for m in stats["kernels"] if m["name"] == launch)
    assert meas["instructions"]["__bang_transpose"] == s["NRT"], meas["instructions"]
    device = next(Path(out_dir).glob("*_device.mlu")).read_text()
    body = device.split(f" void {k['name']}(")[1].split("\n__mlu_")[0]    # its kernel or group function
    lens = [int(n) for n in re.findall(r"__memcpy(?:_async)?\([^;]*?, (\d+), GDRAM2NRAM", body)]
    assert lens and min(lens) >= H * eb, lens
    # no copy is segments contiguous on both sides (size == both strides): the output row
    # tile, all its channels, is stored as one segment (mapper.py's score)
    packed = re.findall(r"__memcpy(?:_async)?\([^;]*?, (\d+), [A-Z0-9]+, \1, \1, \d+ - 1\)", body)
    assert not packed, packed
    return k, body


def test_float_stem_transposed_on_chip(tc, tmp_path):
    model = stem()
    plan, exe = build_model(tc, model, "stem", tmp_path / "b", stem_fold="off")
    inputs = check.seeded_inputs(plan["inputs"], 3)
    doc, stats = run_check(plan, exe, check.onnxruntime_reference(model, inputs), inputs)
    assert doc["status"] == "pass", doc.get("reason")
    em = doc["emulator"]
    assert em["copy_mismatches"] == [] and em["violations"] == 0 and em["write_conflicts"] == 0
    _check_copies(plan, stats, tmp_path / "b")


def test_int8_stem_transposed_on_chip(tc, tmp_path):
    m = ort_quantized(tmp_path, model=stem(1), activations="QInt8")
    x = np.random.default_rng(4).standard_normal((1, 3, H, H)).astype(np.float32)
    plan, exe = build_bit_exact(tc, m, "qstem", x, tmp_path, stem_fold="off")
    _, stats = run_check(plan, exe, check.onnxruntime_reference(m, {"x": x}), {"x": x}, 0, 0)
    _check_copies(plan, stats, tmp_path / "b")
    # the int8 tile's 61 padded channels meet zero weights: any byte there adds nothing, so the
    # halo fills (the zero point) cover the 3 image channels only (preprocess.staged_copy)
    device = next(Path(tmp_path / "b").glob("*_device.mlu")).read_text()
    fills = re.findall(r"for \(int c = 0; c < (\d+); \+\+c\) \{\s*(?:for \([^\n]*\n\s*)?__memset_nram", device)
    assert fills and set(fills) == {"3"}, fills


def _conv_cycles(stats, launch):
    return next(m for m in stats["kernels"] if m["name"] == launch)["instruction_cycles"]["__bang_conv"]


def test_int8_stem_folded(tc, tmp_path):
    """The estimate folds the int8 stem (21 channels padded to 64 against 7 taps of 3 padded to
    64): bit exact, a 1x7 __bang_conv on one row, its modelled convolution cycles over 4x fewer than unfolded
    (7x fewer MACs; at this size each call's start-up weighs)."""
    m = ort_quantized(tmp_path, model=stem(1), activations="QInt8")
    x = np.random.default_rng(4).standard_normal((1, 3, H, H)).astype(np.float32)
    plan, exe = build_bit_exact(tc, m, "qstem", x, tmp_path)
    _, stats = run_check(plan, exe, check.onnxruntime_reference(m, {"x": x}), {"x": x}, 0, 0)
    k, body = _check_copies(plan, stats, tmp_path / "b", folded=7)
    # __bang_conv(dst, src, kernel, Ci, height, width, kh, kw, ...): a 1x7 window over 64 channels
    assert re.findall(r"__bang_conv\([^;]*?, 64, 1, \d+, 1, 7, 2, 2,", body), body
    plain, exe0 = build_bit_exact(tc, m, "qstem", x, tmp_path / "off", stem_fold="off")
    _, stats0 = run_check(plain, exe0, check.onnxruntime_reference(m, {"x": x}), {"x": x}, 0, 0)
    folded, unfolded = _conv_cycles(stats, _stem_kernel(plan)[0]), _conv_cycles(stats0, _stem_kernel(plain)[0])
    assert folded * 4 < unfolded, (folded, unfolded)     # 7x fewer MACs, the same start-ups per call


def test_float_stem_folded(tc, tmp_path):
    """A float stem folds too (21 channels padded to 32, zeroed), and matches onnxruntime."""
    model = stem()
    plan, exe = build_model(tc, model, "stem", tmp_path / "b")
    inputs = check.seeded_inputs(plan["inputs"], 3)
    doc, stats = run_check(plan, exe, check.onnxruntime_reference(model, inputs), inputs)
    assert doc["status"] == "pass", doc.get("reason")
    em = doc["emulator"]
    assert em["copy_mismatches"] == [] and em["violations"] == 0 and em["write_conflicts"] == 0
    _check_copies(plan, stats, tmp_path / "b", folded=7)


def test_int8_stem_folded_pipelined(tc, tmp_path):
    """With several row tiles a task (a 192x192 image), the folded tile's rows are loaded with
    __memcpy_async while the previous tile computes (pingpong.py), still bit exact."""
    h = 192
    m = ort_quantized(tmp_path, model=stem(2, H=h), activations="QInt8")
    x = np.random.default_rng(5).standard_normal((1, 3, h, h)).astype(np.float32)
    plan, _ = build_bit_exact(tc, m, "qstem", x, tmp_path)
    launch, k = _stem_kernel(plan)
    assert k["schedule"]["folded_height"] == 7 and k["schedule"]["NRT"] > 16, k["schedule"]
    device = next(Path(tmp_path / "b").glob("*_device.mlu")).read_text()
    body = device.split(f" void {k['name']}(")[1].split("\n__mlu_")[0]
    rows = re.findall(r"__memcpy(_async)?\(\(\(int8_t \*\)[^;]*GDRAM2NRAM", body)
    assert rows and rows.count("_async") * 2 > len(rows), rows
