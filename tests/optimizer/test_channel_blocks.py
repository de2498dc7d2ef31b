"""Option channel_blocks (Sunway): model-internal activations in [N][C/8][H][W][8].

Under the Athread emulator the rewritten kernels still match onnxruntime with every kernel's
DMA predicted exactly; a Concat written in place is blocked with all its parts or not at all;
tensors the pass must leave in NCHW (LRN's window across channels, views, graph inputs and
outputs) stay so;
`on` blocks only where the predictor models the kernels faster, and then the model is faster."""
import onnx
import pytest
from onnx import helper

from opt_models import checked_plan, make, rand
from swbuild.backends.launches import kernel_entries
from swbuild.backends.sunway.passes import channel_blocks
from swbuild.backends.sunway.passes.channel_blocks import _channel
from swbuild.backends.sunway.cost.predict import predict_program
from swbuild.driver.compiler import build_program
from swbuild.config.toolchain import load
from swbuild.ir.loopnest import Var, iconst
from swbuild.config.recipe import OPTIONS


def mixed_model(c=16, hw=12):
    """Convolutions 1x1 and 3x3, a depthwise and a grouped one, a residual Add, max and
    average pooling, an in-place Concat read by LRN, a per-channel Mul."""
    def conv(x, y, w, k=1, g=1):
        return helper.make_node("Conv", [x, w], [y], pads=[k // 2] * 4, group=g)
    nodes = [conv("x", "a0", "wa"), helper.make_node("Relu", ["a0"], ["a"]),
             conv("a", "b0", "wb", 3), helper.make_node("Relu", ["b0"], ["b"]), conv("b", "d", "wd", 3, c),
             helper.make_node("Add", ["d", "a"], ["s"]), helper.make_node("Relu", ["s"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["m"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("AveragePool", ["m"], ["ap"], kernel_shape=[2, 2], pads=[0, 0, 1, 1]),
             conv("ap", "p", "wp"), conv("ap", "q", "wq", 3), helper.make_node("Concat", ["p", "q"], ["cat"], axis=1),
             helper.make_node("LRN", ["cat"], ["l"], size=5), conv("l", "gq", "wg", 3, 2),
             helper.make_node("Mul", ["gq", "sc"], ["sm"]), conv("sm", "y0", "wy"),
             helper.make_node("Sigmoid", ["y0"], ["y"])]
    inits = [("wa", rand(c, 3, 1, 1, seed=1, scale=0.5)), ("wb", rand(c, c, 3, 3, seed=2, scale=0.2)),
             ("wd", rand(c, 1, 3, 3, seed=3, scale=0.3)), ("wp", rand(c, c, 1, 1, seed=4, scale=0.3)),
             ("wq", rand(c, c, 3, 3, seed=5, scale=0.2)), ("wg", rand(2 * c, c, 3, 3, seed=6, scale=0.2)),
             ("sc", rand(1, 2 * c, 1, 1, seed=7)), ("wy", rand(8, 2 * c, 1, 1, seed=8, scale=0.3))]
    return make(nodes, [("x", [1, 3, hw, hw])], [("y", [1, 8, hw // 2, hw // 2])], inits)


def pointwise_model(c=128, hw=28):
    """A stage of 1x1 convolutions where 8-channel blocks model faster (ResNet-50 stage 2's shapes)."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h0"]), helper.make_node("Relu", ["h0"], ["h"]),
             helper.make_node("Conv", ["h", "w2"], ["y0"]), helper.make_node("Add", ["y0", "x"], ["y"])]
    inits = [("w1", rand(4 * c, c, 1, 1, seed=1, scale=0.1)), ("w2", rand(c, 4 * c, 1, 1, seed=2, scale=0.05))]
    return make(nodes, [("x", [1, c, hw, hw])], [("y", [1, c, hw, hw])], inits)


def concat_model(first=8, c=16, hw=10):
    """Concats written in place, one inside the other; the first part has `first` channels."""
    def conv(x, y, w, k=1):
        return helper.make_node("Conv", [x, w], [y], pads=[k // 2] * 4)
    nodes = [conv("x", "a", "wa"), helper.make_node("Relu", ["a"], ["ar"]), conv("ar", "p", "wp"),
             conv("ar", "q", "wq", 3), helper.make_node("MaxPool", ["ar"], ["mp"], kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Concat", ["p", "q", "mp"], ["cat"], axis=1), conv("cat", "r", "wr", 3),
             helper.make_node("Concat", ["r", "cat"], ["cat2"], axis=1), conv("cat2", "y", "wy")]
    cat = first + 24 + c
    inits = [("wa", rand(c, 3, 1, 1, seed=1, scale=0.5)), ("wp", rand(first, c, 1, 1, seed=2, scale=0.3)),
             ("wq", rand(24, c, 3, 3, seed=3, scale=0.2)), ("wr", rand(c, cat, 3, 3, seed=4, scale=0.1)),
             ("wy", rand(8, c + cat, 1, 1, seed=5, scale=0.2))]
    return make(nodes, [("x", [1, 3, hw, hw])], [("y", [1, 8, hw, hw])], inits)


@pytest.fixture(scope="module")
def mixed_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("blocks") / "mixed.onnx"
    onnx.save(mixed_model(), p)
    return p


def _check(model_file, out, target, mode):
    return checked_plan(model_file, out, target, "--set", f"channel_blocks={mode}")


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu"])
def test_every_tensor_the_kernels_can_take_matches_and_predicts_exactly(mixed_file, tmp_path, target):
    plan = _check(mixed_file, tmp_path, target, "all")
    # the pools' outputs are blocked (their channel axis split, the lane innermost); LRN's input
    # (a Concat, so its parts too), the graph input and output stay NCHW
    assert plan["channel_blocks"] == ["ap", "m"]
    tiles = {k["name"].split("_", 1)[1]: k["tiles"] for k in kernel_entries(plan["kernels"])}
    assert {"c_b", "c_l"} <= set(tiles["k8_averagepool"]) and {"c_b", "c_l"} <= set(tiles["k7_maxpool"])
    assert {"ci_b", "ci_l"} <= set(tiles["k9_conv"]) and "co" in tiles["k9_conv"]


@pytest.mark.parametrize("first, blocked", [
    (8, ["ar", "cat", "cat2", "mp", "p", "q", "r"]),     # every part starts on an 8-channel boundary
    (4, []),          # a part of 4 channels: both Concats stay NCHW, and so does the input the
                      # max pool reads along its output's channel axis
])
def test_a_concat_is_blocked_with_its_parts_or_not_at_all(tmp_path, first, blocked):
    f = tmp_path / "cat.onnx"
    onnx.save(concat_model(first), f)
    assert _check(f, tmp_path / "out", "sunway-emu", "all")["channel_blocks"] == blocked


def test_on_blocks_where_the_model_is_faster(tmp_path):
    f = tmp_path / "pw.onnx"
    onnx.save(pointwise_model(), f)
    plans = {m: _check(f, tmp_path / m, "sunway-emu", m) for m in ("off", "on")}
    assert "channel_blocks" not in plans["off"]
    assert plans["on"]["channel_blocks"] == ["h"]
    secs = {m: sum(k["modeled_seconds"] for k in p["kernels"]) for m, p in plans.items()}
    assert secs["on"] < secs["off"]


def test_a_variant_is_chosen_by_the_seconds_the_build_then_models(monkeypatch):
    """Variants runs a kernel alone through a copy of the scheduling passes: its seconds must
    be the plan's for the kernel the build keeps (the copy must follow the pipeline)."""
    seen = {}
    seconds = channel_blocks.Variants._seconds

    def spy(self, k):
        seen[(k.name, tuple(a.name for a in k.axes))] = s = seconds(self, k)
        return s
    monkeypatch.setattr(channel_blocks.Variants, "_seconds", spy)
    tc = load("sunway-emu")
    p = build_program(pointwise_model(), tc, "pw", options={"channel_blocks": "on"})
    assert any("_b" in a.name for k in p.kernels for a in k.axes)
    for k, e in zip(p.kernels, predict_program(p, tc)):
        assert e["modeled_seconds"] == seen[(k.name, tuple(a.name for a in k.axes))]


@pytest.mark.parametrize("expr, want", [
    (Var("c"), ("c", {}, 0)),
    (Var("n") * iconst(256) + Var("co"), ("co", {"n": 32}, 0)),
    (Var("c") + iconst(16), ("c", {}, 2)),
    (Var("c") + iconst(4), None),                  # a slice not on a block boundary
    (Var("c") + Var("k") - iconst(2), None),       # LRN's window across channels
    (Var("c") * iconst(2), None),                  # a stride over channels
])
def test_a_channel_index_splits_only_on_block_boundaries(expr, want):
    assert _channel(expr, {"c": 32, "co": 64, "n": 1, "k": 5}) == want


def test_the_option_takes_off_on_all():
    o = OPTIONS["channel_blocks"]
    assert [o.parse(v) for v in ("off", "ON", "all", True)] == ["off", "on", "all", "on"]
    with pytest.raises(ValueError):
        o.parse("some")
    assert o.allowed == "off, on, all"


def test_a_stitched_kernel_keeps_what_its_stages_read_in_nchw(tmp_path):
    """DenseNet's BatchNormalization + Relu stitched into the 1x1 convolution: the stage reads
    the Concat in NCHW, so the Concat (and its parts) stay NCHW, and the build still matches."""
    from stitch_models import dense_layer
    f = tmp_path / "dense.onnx"
    onnx.save(dense_layer(), f)
    plan = _check(f, tmp_path / "out", "sunway-emu", "all")
    assert plan["grouping"]["stitched"], "the producer is no longer stitched: this test checks nothing"
    assert not {"a", "b", "cat"} & set(plan.get("channel_blocks", []))


def test_a_concat_headed_by_a_merged_sibling_is_blocked_with_its_container(tmp_path):
    """merge_siblings puts the merged output and the Concat after it in one tensor that no
    kernel reads whole: with `all` that container, the merged output, the Concat and its
    parts are blocked together, and the build still matches with exact DMA."""
    from test_siblings import module_model
    f = tmp_path / "mod.onnx"
    onnx.save(module_model(head=True), f)
    plan = _check(f, tmp_path / "out", "sunway-emu", "all")
    blocked = plan["channel_blocks"]
    assert any(t.startswith("%swsib:") and t.endswith(":outer") for t in blocked), blocked
    assert {"cat", "rc", "ya", "yb"} <= set(blocked), blocked
