"""Resize (every mode), GatherND, ScatterND and Gather with many constant indices on the three
emulated targets: the onnx node tests (sunway-emu runs them in tests/conformance too) and
the patterns PyTorch exports, against onnxruntime; what cannot be lowered is refused by name."""
import collections

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnn_models import check_on, combine_expected, node_test_models
from swbuild.config import toolchain
from swbuild.driver.compiler import build_program
from swbuild.support.errors import UnsupportedError
from swbuild.frontends.onnx import import_model
from swbuild.driver.lowering import lower

TARGETS = ["sunway-emu", "sunway-pro-emu", "diannao-emu"]


def _by_opset(cases):
    """Node tests grouped by opset (Upsample exists only below 10): one program per group."""
    groups = collections.defaultdict(list)
    for c in cases:
        groups[max(o.version for o in c[1].opset_import if o.domain in ("", "ai.onnx"))].append(c)
    return [groups[k] for k in sorted(groups)]


def _float_only(cases):
    return [c for c in cases if all(v.dtype == np.float32 for v in c[2].values())
            and all(o.dtype == np.float32 for o in c[3])]


@pytest.mark.parametrize("target", ["sunway-pro-emu", "diannao-emu"])
def test_resize_node_tests(target, tmp_path):
    """Every test_resize_* / test_upsample_* node test (40 in onnx 1.23): nearest, linear, cubic, antialias,
    every coordinate transformation, tf_crop_and_resize with extrapolation, axes, aspect policies."""
    cases = node_test_models(("Resize", "Upsample"))
    assert len(cases) >= 40       # (onnx 1.23)
    for k, group in enumerate(_by_opset(cases)):
        m, feed, refs = combine_expected(group)
        doc, _ = check_on(m, feed, target, tmp_path / str(k), ref=refs, rtol=1e-3, atol=1e-5)
        assert doc["status"] == "pass", (target, [c[0] for c in group], doc.get("reason"))


@pytest.mark.parametrize("target", TARGETS)
def test_gather_nd_scatter_nd_node_tests(target, tmp_path):
    """The float GatherND and every ScatterND node test (reduction none/add/mul/max/min, with
    repeated indices), and Gather's; int32 GatherND data is refused by dtype (conformance)."""
    cases = _float_only(node_test_models(("Gather", "GatherND", "ScatterND")))
    assert {c[0] for c in cases} >= {"test_gathernd_example_float32", "test_scatternd_add", "test_scatternd_multiply",
                                     "test_scatternd_max", "test_scatternd_min", "test_scatternd"}
    for k, group in enumerate(_by_opset(cases)):
        m, feed, refs = combine_expected(group)
        doc, _ = check_on(m, feed, target, tmp_path / str(k), ref=refs, rtol=1e-5, atol=1e-6)
        assert doc["status"] == "pass", (target, [c[0] for c in group], doc.get("reason"))


def _kernels(m):
    return lower(import_model(m), "m").kernels


def _model(nodes, inputs, outputs, inits=(), opset=18):
    f = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)  # noqa: E731
    g = helper.make_graph(nodes, "t", [f(n, s) for n, s in inputs], [f(n, s) for n, s in outputs],
                          initializer=[numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def deeplab_head(ctm="pytorch_half_pixel", C=5, h=7, H=56):
    """DeepLabV3's last step as torchvision exports it: F.interpolate(x, size=input.shape[-2:],
    mode="bilinear", align_corners=False), the sizes from Shape -> Slice -> Concat."""
    nodes = [helper.make_node("Conv", ["feat", "w"], ["logits"]),
             helper.make_node("Shape", ["img"], ["ishape"]),
             helper.make_node("Slice", ["ishape", "s2", "s4"], ["hw"]),
             helper.make_node("Shape", ["logits"], ["lshape"]),
             helper.make_node("Slice", ["lshape", "s0", "s2"], ["nc"]),
             helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
             helper.make_node("Resize", ["logits", "", "", "sizes"], ["out"], mode="linear",
                              coordinate_transformation_mode=ctm, name="upsample_logits")]
    rng = np.random.default_rng(0)
    inits = [("w", rng.standard_normal((C, 8, 1, 1)).astype(np.float32)),
             ("s0", np.array([0], np.int64)), ("s2", np.array([2], np.int64)), ("s4", np.array([4], np.int64))]
    m = _model(nodes, [("feat", [1, 8, h, h]), ("img", [1, 3, H, H])], [("out", [1, C, H, H])], inits, opset=13)
    feed = {"feat": rng.standard_normal((1, 8, h, h)).astype(np.float32),
            "img": rng.standard_normal((1, 3, H, H)).astype(np.float32)}
    return m, feed


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("ctm", ["pytorch_half_pixel", "half_pixel", "align_corners"])
def test_deeplab_bilinear_head(target, ctm, tmp_path):
    m, feed = deeplab_head(ctm)
    doc, _ = check_on(m, feed, target, tmp_path, rtol=1e-4, atol=1e-5)
    assert doc["status"] == "pass", doc.get("reason")
    resize = [k for k in _kernels(m) if k.op == "Resize"]
    assert [(k.combine, k.reduce_points) for k in resize] == [("sum", 7)] * 2     # one matrix pass per axis


def large_gathers():
    """PyTorch's as_strided as the dynamo exporter writes it: Gather over a flattened tensor with
    thousands of constant indices; one affine pattern (a strided view), one window pattern
    (affine runs), one permutation (no pattern: a gather kernel)."""
    rng = np.random.default_rng(1)
    n = 24 * 24
    strided = np.arange(3, 3 + 2 * 280, 2, dtype=np.int64)                       # 280 indices, step 2
    windows = np.concatenate([np.arange(24 * r, 24 * r + 22) for r in range(0, 24, 2)])   # 12 runs of 22
    perm = rng.permutation(n).astype(np.int64)                                      # 576 indices
    nodes = [helper.make_node("Reshape", ["x", "flat"], ["xf"])]
    outs = []
    for name, idx in (("strided", strided), ("windows", windows), ("perm", perm)):
        nodes.append(helper.make_node("Gather", ["xf", f"{name}_idx"], [name], axis=1, name=f"gather_{name}"))
        outs.append((name, [2, idx.size]))
    inits = [("flat", np.array([2, n], np.int64)), ("strided_idx", strided), ("windows_idx", windows),
             ("perm_idx", perm)]
    m = _model(nodes, [("x", [2, 24, 24])], outs, inits, opset=13)
    return m, {"x": rng.standard_normal((2, 24, 24)).astype(np.float32)}


@pytest.mark.parametrize("target", TARGETS)
def test_large_constant_gather(target, tmp_path):
    m, feed = large_gathers()
    doc, _ = check_on(m, feed, target, tmp_path, rtol=0, atol=0)
    assert doc["status"] == "pass", doc.get("reason")


def test_large_constant_gather_kernels():
    """Past 256 constant indices (one kernel each below): one strided copy per affine run while
    runs are few, else one gather kernel over the constant table."""
    by_node = collections.Counter((k.node, k.kind) for k in _kernels(large_gathers()[0]))
    assert by_node == {("gather_strided", "compute"): 1, ("gather_windows", "compute"): 12,
                       ("gather_perm", "gather"): 1}


def dynamo_indexing():
    """Advanced indexing as the dynamo exporter writes it (x[:, idx] with index tensors that
    fold to constants): GatherND with batch_dims 1 (a negative index too), and index_put as
    ScatterND: with a repeated row and reduction add, and without repeats (reduction none)."""
    rng = np.random.default_rng(2)
    B, S, H = 2, 6, 4
    gidx = np.array([[[5], [0], [2]], [[1], [-1], [4]]], np.int64)        # [B, 3, 1]: rows per batch
    add_idx = np.array([[0, 2], [1, 3], [0, 2], [1, 0]], np.int64)        # row (0, 2) twice
    put_idx = np.array([[1, 5], [0, 0], [0, 3]], np.int64)
    nodes = [helper.make_node("GatherND", ["x", "gidx"], ["g"], batch_dims=1, name="gnd"),
             helper.make_node("ScatterND", ["x", "add_idx", "upd"], ["s"], reduction="add", name="scatter_add"),
             helper.make_node("ScatterND", ["x", "put_idx", "upd3"], ["t"], name="scatter_put")]
    m = _model(nodes, [("x", [B, S, H]), ("upd", [4, H]), ("upd3", [3, H])],
               [("g", [B, 3, H]), ("s", [B, S, H]), ("t", [B, S, H])],
               [("gidx", gidx), ("add_idx", add_idx), ("put_idx", put_idx)], opset=18)
    feed = {"x": rng.standard_normal((B, S, H)).astype(np.float32), "upd": rng.standard_normal((4, H)).astype(np.float32),
            "upd3": rng.standard_normal((3, H)).astype(np.float32)}
    return m, feed


@pytest.mark.parametrize("target", TARGETS)
def test_dynamo_gather_nd_scatter_nd(target, tmp_path):
    m, feed = dynamo_indexing()
    doc, _ = check_on(m, feed, target, tmp_path, rtol=1e-6, atol=1e-6)
    assert doc["status"] == "pass", doc.get("reason")


def _runtime_gather_nd(k, batch_dims=0):
    g = helper.make_graph([helper.make_node("GatherND", ["x", "i"], ["y"], name="gnd", batch_dims=batch_dims)], "t",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 2]),
                           helper.make_tensor_value_info("i", TensorProto.INT64, [3, 5, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("target", TARGETS)
def test_gather_nd_run_time_rows(target, tmp_path):
    """One index per row, read at run time, negatives too (DianNao's scalar kernels read before
    the tensor for them until this issue): the run-time Gather's kernel."""
    m = _runtime_gather_nd(1)
    rng = np.random.default_rng(3)
    feed = {"x": rng.standard_normal((3, 4, 2)).astype(np.float32), "i": rng.integers(-3, 3, (3, 5, 1))}
    doc, _ = check_on(m, feed, target, tmp_path, rtol=0, atol=0)
    assert doc["status"] == "pass", doc.get("reason")


def test_run_time_indices_and_bad_modes_are_refused_by_name():
    tc = toolchain.load("sunway-emu")
    for m in (_runtime_gather_nd(2), _runtime_gather_nd(1, batch_dims=1)):
        with pytest.raises(UnsupportedError, match=r"node 'gnd' \(GatherND\): indices 'i' are computed at run time"):
            build_program(m, tc, "m")
    m = _model([helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="nearest", antialias=1, name="rs")],
               [("x", [1, 1, 4, 4])], [("y", [1, 1, 2, 2])], [("sc", np.array([1, 1, 0.5, 0.5], np.float32))])
    with pytest.raises(UnsupportedError, match=r"node 'rs' \(Resize\): antialias with mode 'nearest'"):
        build_program(m, tc, "m")


def test_resize_to_nothing_computes_nothing():
    """A scale that leaves no element (1 row * 0.5): onnxruntime returns an empty tensor; no kernel."""
    for mode in ("nearest", "linear"):
        m = _model([helper.make_node("Resize", ["x", "", "sc"], ["y"], mode=mode)], [("x", [1, 1, 1, 4])],
                   [("y", [1, 1, 0, 4])], [("sc", np.array([1, 1, 0.5, 1], np.float32))])
        assert [k for k in _kernels(m) if k.op == "Resize"] == []
