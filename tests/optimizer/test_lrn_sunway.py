"""LRN on Sunway: the epilogue's x[c] is read from the box of the channel window (one fetch of
x per tile, its window axis never tiled), pow(., 0.75) is two square roots; small LRNs with odd
sizes and channel counts no multiple of 8 match onnxruntime with exact DMA counts. Inception's
stem (stride-2 MaxPool then LRN): the pool's rows missing a column are fetched whole."""
import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper

from opt_models import make, program, rand, sunway
from swbuild.backends import cexpr
from swbuild.backends.sunway.schedule.dma import box_plans
from swbuild.backends.sunway.schedule.ldm import Search


def lrn_model(c, h, w, size, beta=0.75, alpha=0.3, bias=1.5):
    nodes = [helper.make_node("LRN", ["x"], ["y"], size=size, alpha=alpha, beta=beta, bias=bias)]
    return make(nodes, [("x", [1, c, h, w])], [("y", [1, c, h, w])])


def pool_lrn_model(c, h, w, k=3, stride=2):
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[k, k], strides=[stride, stride]),
             helper.make_node("LRN", ["p"], ["y"], size=5, alpha=0.3, beta=0.75, bias=1.5)]
    oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
    return make(nodes, [("x", [1, c, h, w])], [("y", [1, c, oh, ow])])


def _lrn_kernel(model):
    return next(k for k in program(model).kernels if k.op == "LRN")


@pytest.mark.parametrize("size", [3, 4, 5])
def test_epilogue_reads_the_window_box(size):
    k = _lrn_kernel(lrn_model(13, 7, 9, size))
    boxes = box_plans(k)
    ins = [b for b in boxes if b.context != "out"]
    assert len(ins) == 1 and ins[0].context == "body" and ins[0].epi_host
    assert ins[0].keep_whole == {"j"}
    s = Search(k, sunway().hardware, 57344, {})
    assert s.candidates()["j"] == [size]
    tiles = {a.name: a.extent for a in s.axes}
    assert s.evaluate(tiles) is not None
    tiles["j"] = 1                      # a tiled window would leave the epilogue's x[c] behind
    assert s.evaluate(tiles) is None


def test_epilogue_load_outside_the_window_keeps_its_box():
    # y = x[c] / (1 + sum_j x[c + j]^2) read at c + 2 over j in [0, 1]: outside [c, c + 1]
    from swbuild.backends.sunway.schedule.dma import _inside
    assert not _inside({"c": 1, None: 2}, [{"c": 1, "j": 1, None: 0}], {"j"}, {"c": 9, "j": 2})
    assert _inside({"c": 1, None: 1}, [{"c": 1, "j": 1, None: 0}], {"j"}, {"c": 9, "j": 2})
    assert not _inside({"c": 2, None: 0}, [{"c": 1, "j": 1, None: 0}], {"j"}, {"c": 9, "j": 2})


CASES = [("sunway-emu", 13, 7, 9, 5, 0.75, 61440), ("sunway-emu", 11, 5, 6, 3, 0.6, None),
         ("sunway-pro-emu", 9, 3, 5, 3, 0.75, None)]


@pytest.mark.parametrize("target,c,h,w,size,beta,reserve", CASES, ids=["emu-4KB", "emu-b06", "pro"])
def test_lrn_matches_onnxruntime_with_exact_dma(tmp_path, target, c, h, w, size, beta, reserve):
    p = tmp_path / "lrn.onnx"
    onnx.save(lrn_model(c, h, w, size, beta), p)
    cmd = [sys.executable, "-m", "swbuild.cli", "check", str(p), "--target", target, "-o", str(tmp_path)]
    if reserve is not None:
        cmd += ["--set", f"ldm_reserve={reserve}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["status"] == "pass" and doc["max_abs_err"] < 1e-5 and doc["compared"] > 0
    em = doc["emulator"]
    assert em["dma_mismatches"] == [] and em["write_conflicts"] == 0 and em["ldm_over_budget"] == []
    plan = json.loads((tmp_path / "lrn.plan.json").read_text())
    k = next(k for k in plan["kernels"] if k["op"] == "LRN")
    tc, nbytes = k["tiles"]["i1"], c * h * w * 4
    # x read once per tile with its halo (no second box for the epilogue), plus the parameters
    assert k["dma"]["get"]["bytes"] <= nbytes * (tc + size - 1) / tc + 64 * 1024
    if reserve is not None:
        assert tc < c                   # the tight budget cuts the channels into tiles
    text = (tmp_path / "lrn_slave.c").read_text()
    # the helper's definition is in every file: its calls are the second occurrence on
    assert (text.count("sw_pow34f(") > 1) == (beta == 0.75) and ("powf(" in text) == (beta != 0.75)


@pytest.mark.parametrize("w,k,stride,span", [(16, 3, 2, 16), (17, 3, 2, 17), (16, 1, 4, 13), (16, 1, 2, 15)])
def test_pool_rows_fetched_whole(w, k, stride, span):
    """Columns 0..14 of 16 (a 3x3 stride-2 window over 7 outputs): the box spans the row, one
    contiguous run per fetch; 0..12 of 16 (every 4th column) misses more than 1/8 of it, and
    0..14 of 16 read every 2nd column has gaps (passes/subsample.py's case): strided DMAs of rows."""
    kern = next(x for x in program(pool_lrn_model(5, 9, w, k, stride)).kernels if x.op == "MaxPool")
    b = box_plans(kern)[0]
    tiles = {a.name: a.extent for a in list(kern.axes) + list(kern.reduce_axes)}
    assert b.span(tiles)[3] == span
    b.finish(tiles)
    calls, by, chunk = b.transfer([0] * 4, [x - 1 for x in b.span(tiles)])
    assert (chunk == by) == (span == w) and by == 4 * 5 * 9 * span


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu"])
def test_stem_pool_then_lrn_matches_onnxruntime(tmp_path, target):
    p = tmp_path / "stem.onnx"
    onnx.save(pool_lrn_model(11, 17, 32), p)
    r = subprocess.run([sys.executable, "-m", "swbuild.cli", "check", str(p), "--target", target,
                        "-o", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["status"] == "pass" and doc["max_abs_err"] < 1e-5 and doc["compared"] > 0
    em = doc["emulator"]
    assert em["dma_mismatches"] == [] and em["write_conflicts"] == 0 and em["ldm_over_budget"] == []


def test_pow34_helper_matches_powf(tmp_path):
    """sw_pow34f / sw_pow34 against powf / pow: within 2 ulp, the same at 0, inf and NaN."""
    src = tmp_path / "p.c"
    src.write_text("#include <math.h>\n#include <stdio.h>\n" + cexpr.PRELUDE + cexpr.DOUBLE_HELPERS + r"""
int main(void)
{
    float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -1.0f, 1.0f, 16.0f, 0.0625f};
    for (unsigned i = 0; i < sizeof(sp) / sizeof(sp[0]); i++) {
        float a = sw_pow34f(sp[i]), b = powf(sp[i], 0.75f);
        double c = sw_pow34((double)sp[i]), d = pow((double)sp[i], 0.75);
        if (!(a == b && signbit(a) == signbit(b)) && !(a != a && b != b)) { printf("special %g: %g vs %g\n", sp[i], a, b); return 1; }
        if (!(c == d && signbit(c) == signbit(d)) && !(c != c && d != d)) { printf("special %g: %g vs %g\n", sp[i], c, d); return 1; }
    }
    double worst = 0.0;
    for (double xd = 1.5e-45; xd < 3e38; xd *= 1.0137) {     /* subnormals to near FLT_MAX */
        float x = (float)xd, a = sw_pow34f(x), b = (float)pow((double)x, 0.75);
        double ulp = fabs((double)a - (double)b) / (nextafterf(b, INFINITY) - b);
        if (ulp > worst) worst = ulp;
    }
    printf("%g\n", worst);
    return worst <= 2.0 ? 0 : 1;
}
""")
    exe = tmp_path / "p"
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(src), "-lm"], check=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
    assert 0.0 < float(r.stdout) <= 2.0        # compared something, and within 2 ulp
