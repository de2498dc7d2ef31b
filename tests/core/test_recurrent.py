"""GRU, LSTM and RNN on the emulated targets against onnxruntime: every direction, both
layouts, linear_before_reset, activations with alpha/beta, clip, input_forget, peepholes,
sequence lengths (constant and run-time), initial states and every output. Many nodes are
compiled into one program per target (one build); swbuild's check judges outputs and the
emulator's findings (Sunway: DMA predicted == measured for every kernel)."""
import json

import numpy as np
import pytest

from rnn_models import check_on, combine, combine_expected, node_test_models, rnn_node_model, torch_export_pattern
from swbuild.config import toolchain
from swbuild.driver.compiler import build_program
from swbuild.support.errors import UnsupportedError

ACTS = {"activations": ["LeakyRelu", "Affine", "HardSigmoid", "ScaledTanh"], "activation_alpha": [0.3, 0.7, 0.25, 1.2],
        "activation_beta": [0.2, 0.4, 0.9], "clip": 1.5}
CASES = [
    ("GRU", dict(direction="bidirectional", h0=True)),                                   # linear_before_reset=0
    ("GRU", dict(attrs={"linear_before_reset": 1}, direction="reverse", h0=True, layout=1)),
    ("GRU", dict(H=70, B=3, T=4, I=5, lens=[4, 1, 2], direction="bidirectional", attrs={"linear_before_reset": 1})),
    ("LSTM", dict(direction="bidirectional", h0=True, c0=True, peep=True)),
    ("LSTM", dict(lens=[5, 3], h0=True, c0=True, direction="bidirectional", layout=1, outputs=("Y_h", "Y_c"))),
    ("LSTM", dict(attrs={"input_forget": 1, "clip": 0.8, "activations": ["HardSigmoid", "Softsign", "Elu"]},
                  peep=True, bias=False, outputs=("Y", "Y_c"))),
    ("RNN", dict(lens=[2, 5], direction="reverse", runtime_lens=True)),
    ("RNN", dict(attrs={k: v[:2] if k != "clip" else v for k, v in ACTS.items()}, direction="bidirectional",
                 outputs=("Y_h",), H=33)),
    ("RNN", dict(attrs={"activations": ["Softplus"]}, outputs=("Y",), B=1, T=3)),
    ("GRU", dict(attrs={"activations": ["ThresholdedRelu", "Relu"], "activation_alpha": [0.1]}, h0=True, outputs=("Y",))),
]


@pytest.fixture(scope="module")
def bundle():
    return combine([rnn_node_model(cell, seed=i, **kw) for i, (cell, kw) in enumerate(CASES)])


@pytest.mark.parametrize("target", ["sunway-emu", "diannao-emu"])
def test_recurrent_nodes_match_onnxruntime(bundle, target, tmp_path):
    m, feed, refs = bundle
    doc, plan = check_on(m, feed, target, tmp_path, ref=refs)
    assert doc["status"] == "pass", doc.get("reason")
    kinds = [k.get("kind", k.get("class")) for k in plan["kernels"]]
    # one projection GEMM per node, one recurrence kernel per direction: never per step
    ndir = sum(2 if kw.get("direction") == "bidirectional" else 1 for _, kw in CASES)
    assert kinds.count("recurrence") == ndir
    assert len(plan["kernels"]) == ndir + len(CASES)


@pytest.mark.parametrize("target", ["sunway-emu", "diannao-emu"])
def test_onnx_node_tests(target, tmp_path):
    """The onnx package's GRU / LSTM / RNN node tests (all static shapes), as one program."""
    cases = node_test_models()
    assert len(cases) >= 18
    m, feed, refs = combine_expected(cases)
    doc, plan = check_on(m, feed, target, tmp_path, ref=refs, rtol=1e-3, atol=1e-5)
    assert doc["status"] == "pass", doc.get("reason")


@pytest.mark.parametrize("target", ["sunway-emu", "diannao-emu"])
def test_torch_export_pattern(target, tmp_path):
    """A 2-layer GRU and a 2-layer bidirectional LSTM as PyTorch exports them, one program."""
    m, feed, refs = combine([torch_export_pattern("GRU"), torch_export_pattern("LSTM", bidirectional=True)])
    doc, plan = check_on(m, feed, target, tmp_path, ref=refs)
    assert doc["status"] == "pass", doc.get("reason")
    rec = [k for k in plan["kernels"] if k.get("kind", k.get("class")) == "recurrence"]
    assert len(rec) == 2 + 4        # one launch per layer (and direction), never per step


@pytest.mark.slow
@pytest.mark.parametrize("target", ["sunway-emu", "diannao-emu"])
@pytest.mark.parametrize("cell,bidir", [("GRU", False), ("LSTM", True)])
def test_torch_export_pattern_issue_size(target, cell, bidir, tmp_path):
    """The issue's models: hidden 256, 32 steps, batch 4, 2 layers (the LSTM bidirectional);
    on Sunway the recurrent weights stay resident (read once per sequence)."""
    m, feed = torch_export_pattern(cell, bidirectional=bidir, T=32, B=4, I=128, H=256)
    doc, plan = check_on(m, feed, target, tmp_path, rtol=1e-3, atol=1e-4)
    assert doc["status"] == "pass", doc.get("reason")
    rec = [k for k in plan["kernels"] if k.get("kind", k.get("class")) == "recurrence"]
    assert len(rec) == (4 if bidir else 2)
    if target == "sunway-emu":
        assert all(k["weights"] == "resident" for k in rec)


def test_weights_read_once_per_sequence_on_sunway(tmp_path):
    """A GRU's recurrent weights move from memory to LDM once per sequence, not once per step:
    the measured DMA bytes of the recurrence equal the predicted ones, which hold R once."""
    T, B, H = 12, 2, 128
    m, feed = rnn_node_model("GRU", T=T, B=B, I=16, H=H, attrs={"linear_before_reset": 1}, outputs=("Y_h",))
    doc, plan = check_on(m, feed, "sunway-emu", tmp_path, rtol=1e-3, atol=1e-4)   # float32 sums of 128 terms
    assert doc["status"] == "pass", doc.get("reason")
    rec = next(k for k in plan["kernels"] if k.get("kind") == "recurrence")
    assert rec["weights"] == "resident" and rec["weight_bytes_per_sequence"] == 3 * H * H * 4
    assert not doc["emulator"].get("dma_mismatches")
    stats = json.loads((tmp_path / "emulator_stats.json").read_text())
    k = next(k for k in stats["kernels"] if k["name"] == rec["name"])
    assert k["spawns"] == 1                                   # one launch runs every step
    got = k["dma"]["get"]["bytes"]
    # 64 CPEs own 2 units each: the weights once; per step each mesh row gets h(t-1) by one
    # broadcast (not at step 0: no initial_h) and each CPE its units' xw; all get the
    # parameter struct (xw, R, hx, Rb_h, Y_h) and their Rb_h slice
    expect = 3 * H * H * 4 + 8 * (T - 1) * B * H * 4 + 64 * (T * B * 3 * 2 * 4 + 5 * 8) + 64 * 4 * 2
    assert got == expect
    assert got < T * 3 * H * H * 4                            # weights read per step would exceed it


def test_streamed_when_the_slice_does_not_fit(tmp_path):
    """Hidden 1024: a CPE's slice of a GRU's weights (3 x 16 rows x 4 KB) exceeds the LDM: the
    plan says streamed and counts the weights once per step."""
    m, _ = rnn_node_model("GRU", T=2, B=1, I=4, H=1024, outputs=("Y_h",))
    prog = build_program(m, toolchain.load("sunway-emu"), "big")
    rec = next(k for k in prog.kernels if k.kind == "recurrence")
    assert rec.schedule.resident is False
    assert rec.schedule.report["weight_bytes_per_sequence"] == 2 * 3 * 1024 * 1024 * 4


def test_refusals_name_the_node():
    m, _ = rnn_node_model("GRU", attrs={"activations": ["Sigmoid", "Gelu"]})
    with pytest.raises(UnsupportedError, match="node 'gru0'.*activation Gelu"):
        build_program(m, toolchain.load("sunway-emu"), "bad")


def test_diannao_model_equals_emulator(tmp_path):
    """DianNao: the recurrence's modelled cycles and GDRAM bytes (plan) equal the emulator's."""
    parts = [rnn_node_model("GRU", T=5, B=2, I=8, H=64, h0=True, seed=1),                       # two exchanges a step
             rnn_node_model("LSTM", T=4, B=3, I=8, H=40, direction="bidirectional", outputs=("Y", "Y_c"), seed=2)]
    m, feed, refs = combine(parts)
    doc, plan = check_on(m, feed, "diannao-emu", tmp_path, ref=refs)
    assert doc["status"] == "pass", doc.get("reason")
    stats = {k["name"]: k for k in json.loads((tmp_path / "emulator_stats.json").read_text())["kernels"]}
    rec = [k for k in plan["kernels"] if k["class"] == "recurrence"]
    assert len(rec) == 3
    for k in rec:
        s = stats[k["name"]]
        assert s["launches"] == 1
        assert k["recurrence"]["modeled_cycles"] == s["cycles"]
        assert k["recurrence"]["gdram_bytes"] == sum(v for d, v in s["memcpy_bytes"].items() if "GDRAM" in d)
        assert k["recurrence"]["weights"] == "resident"
