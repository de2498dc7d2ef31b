"""float16 models (issue 36): converted with onnxconverter-common, computed in float32 inside
the program (optimizer/halves.py), float16 at the boundary through the convert kernels'
integer-C half conversions (cexpr.HALF_HELPERS), judged with check.fp16_rtol / fp16_atol."""

import json
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper
from onnxconverter_common import float16     # the test extra: how users make fp16 models

from core_models import build_and_run, cnn, make, rand
from swbuild.backends.cexpr import HALF_HELPERS
from swbuild.driver import check
from swbuild.frontends.onnx import import_model


def fp16_model():
    """The core CNN (Conv, groups, pads, MaxPool, LRN, AveragePool, Gemm, Softmax) in fp16,
    with a Cast to float32 and back inside, as the converter leaves around blocked ops."""
    m = float16.convert_float_to_float16(cnn(hw=8))
    g = m.graph
    out = g.output[0].name
    for n in g.node:
        n.output[:] = ["pre_out" if o == out else o for o in n.output]
    g.node.extend([helper.make_node("Cast", ["pre_out"], ["wide"], to=TP.FLOAT, name="widen"),
                   helper.make_node("Sqrt", ["wide"], ["root"], name="sqrt32"),
                   helper.make_node("Cast", ["root"], [out], to=TP.FLOAT16, name="narrow")])
    return m


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu", "diannao-emu"])
def test_fp16_model_matches_onnxruntime_within_fp16_tolerance(tmp_path, target):
    m = fp16_model()
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float16)
    ins = {"gpu_0/data_0": x}
    plan, got = build_and_run(m, target, tmp_path, ins, "h16")
    assert [s["dtype"] for s in plan["inputs"] + plan["outputs"]] == ["float16", "float16"]
    ref = check.onnxruntime_reference(m, ins)
    assert got[0].dtype == np.float16 == ref[0].dtype
    ok, a, _, per = check.compare(got, ref, 1e-3, 1e-4, half=(1e-2, 1e-2))
    assert ok and per[0]["compared"] >= 8 and per[0]["fp16_tolerance"] == {"rtol": 1e-2, "atol": 1e-2}, per
    # computed in float32: the fp16 output is float32's result rounded once (a few fp16 ulps
    # from onnxruntime, which rounds every intermediate)
    assert a <= 4 * np.spacing(np.float16(np.abs(ref[0]).max()))


def test_half_conversions_in_c_match_numpy(tmp_path):
    """Every half widens exactly; floats (all exponents, ties, subnormals, overflow, NaN) and
    doubles (near ties: no double rounding) narrow to what numpy's astype(float16) gives."""
    rng = np.random.default_rng(1)
    bits = np.concatenate([rng.integers(0, 2 ** 32, 200000, dtype=np.uint64).astype(np.uint32),
                           np.arange(0x33000000 - 8, 0x33000000 + 8, dtype=np.uint32),   # half the least subnormal
                           np.arange(0x477fe000 - 8, 0x477ff000 + 8, dtype=np.uint32),   # around 65504 / overflow
                           (np.arange(65536, dtype=np.uint32) << 13) + 0x38000000 + 0x1000])  # exact ties
    floats = bits.view(np.float32)
    (tmp_path / "f.bin").write_bytes(floats.tobytes())
    # doubles a hair off half ties (float rounding would land on the tie: double rounding)
    ties = (np.arange(1, 2048, dtype=np.float64) + 0.5) * 2.0 ** -10
    doubles = np.concatenate([ties * (1 + 2.0 ** -40), ties * (1 - 2.0 ** -40), -ties * (1 + 2.0 ** -40), ties,
                              rng.standard_normal(20000) * 10.0 ** rng.integers(-9, 6, 20000)])
    (tmp_path / "d.bin").write_bytes(doubles.tobytes())
    src = tmp_path / "h.c"
    src.write_text("#include <stdio.h>\n" + HALF_HELPERS + """
int main(void) {
    FILE *f = fopen("f.bin", "rb"), *o = fopen("out.bin", "wb");
    float x; unsigned short h;
    for (unsigned int i = 0; i < 65536; i++) { x = sw_h2f((unsigned short)i); fwrite(&x, 4, 1, o); }
    while (fread(&x, 4, 1, f) == 1) { h = sw_f2h(x); fwrite(&h, 2, 1, o); }
    fclose(f), f = fopen("d.bin", "rb");
    double y;
    while (fread(&y, 8, 1, f) == 1) { h = sw_d2h(y); fwrite(&h, 2, 1, o); }
    fclose(o); return 0;
}
""")
    subprocess.run(["gcc", "-std=c99", "-O1", "-Wall", "-Werror", str(src), "-o", str(tmp_path / "h")], check=True)
    subprocess.run([str(tmp_path / "h")], cwd=tmp_path, check=True)
    out = (tmp_path / "out.bin").read_bytes()
    wide = np.frombuffer(out[:4 * 65536], np.float32)
    want = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(wide[~nan].view(np.uint32), want[~nan].view(np.uint32)) and np.isnan(wide[nan]).all()
    narrow = np.frombuffer(out[4 * 65536:4 * 65536 + 2 * floats.size], np.uint16)
    with np.errstate(over="ignore"):
        ref = floats.astype(np.float16)
        dref = doubles.astype(np.float16)
    assert np.array_equal(np.frombuffer(out[4 * 65536 + 2 * floats.size:], np.uint16), dref.view(np.uint16))
    fin = ~np.isnan(floats)
    assert np.array_equal(narrow[fin], ref[fin].view(np.uint16))
    assert np.isnan(narrow[~fin].view(np.float16)).all()


def test_gather_elements_folds_past_64_choices():
    """BERT's position ids: a [1, 32] GatherElements from a [1, 64] constant (onnx's reference
    evaluator fails past 64 choices: 'cannot reshape array of size 1 into shape (1,32)')."""
    pos = np.arange(64, dtype=np.int64).reshape(1, 64)
    idx = np.array([[5, -1] * 16], np.int64)
    n = helper.make_node
    m = make([n("GatherElements", ["pos", "idx"], ["ids"], axis=1), n("Gather", ["emb", "ids"], ["e"]),
              n("Add", ["e", "x"], ["y"])],
             [("x", [1, 32, 4])], [("y", [1, 32, 4])], [("pos", pos), ("idx", idx), ("emb", rand(64, 4, seed=1))])
    g = import_model(m)
    assert [x.op for x in g.nodes] == ["Add"]
    folded = next(g.tensors[i].data for i in g.nodes[0].inputs if g.tensors[i].data is not None)
    np.testing.assert_array_equal(folded, rand(64, 4, seed=1)[[5, 63] * 16][None])


def test_check_judges_only_float16_outputs_with_fp16_tolerance():
    r32, r16 = np.array([1.0, 2.0], np.float32), np.array([1.0, 2.0], np.float16)
    off = np.array([1.005, 2.0])
    assert check.compare([off.astype(np.float16)], [r16], 1e-3, 1e-4, half=(1e-2, 1e-2))[0]
    assert not check.compare([off.astype(np.float16)], [r16], 1e-3, 1e-4, half=(1e-3, 1e-4))[0]
    assert not check.compare([off.astype(np.float32)], [r32], 1e-3, 1e-4, half=(1e-2, 1e-2))[0]
    assert not check.compare([np.array([1.05, 2.0], np.float16)], [r16], 1e-3, 1e-4, half=(1e-2, 1e-2))[0]


def test_ops_report_names_the_fp16_path(tmp_path, capsys):
    from swbuild import cli
    onnx.save(fp16_model(), tmp_path / "h.onnx")
    assert cli.main(["ops", str(tmp_path / "h.onnx"), "--target", "diannao-emu", "--json"]) == 0
    rows = [r for r in json.loads(capsys.readouterr().out)["nodes"] if r["status"] != "folded"]
    conv = next(r for r in rows if r["op"] == "Conv")
    assert conv["dtype_path"] == "float16 computed and stored as float32 (converted at the model's boundary)"
    assert {r["node"] for r in rows if "dtype_path" not in r} == {"sqrt32"}     # a float32 node between Casts
