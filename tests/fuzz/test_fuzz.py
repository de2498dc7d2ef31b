"""The fixed CI slice of the differential fuzzer (fuzz_graphs.py; the long run is
benchmarks/fuzz.py): seeded random graphs, one program per emulated target, zero wrong
results; a refusal must name its reason."""
import pytest

import fuzz_graphs

SEED, CASES = 2026, 16


@pytest.fixture(scope="module")
def slice_doc(tmp_path_factory):
    # grouping off here (the default is on): the grouped slice below covers on
    return fuzz_graphs.run(SEED, CASES, ["sunway-emu", "sunway-pro-emu", "diannao-emu"], tmp_path_factory.mktemp("fuzz"),
                           {"grouping": "off"})


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu", "diannao-emu"])
def test_fuzz_slice_has_no_wrong_result(slice_doc, target):
    res = slice_doc["targets"][target]
    assert res["wrong"] == [], res["wrong"]
    assert all(r["reason"] for r in res["refused"])
    assert res["passed"] + len(res["refused"]) == slice_doc["kept"]
    assert res["passed"] >= slice_doc["kept"] * 3 // 4      # refusals stay the exception
    _clean(res)


def _clean(res):
    """On Sunway: every kernel's DMA predicted exactly, no write conflict, race or LDM overrun."""
    e = res.get("emulator")
    if e is not None:
        assert (e["dma_mismatches"], e["write_conflicts"], e["races"], e["ldm_over_budget"]) == ([], 0, 0, []), e


GROUPED_SEED = 0      # its cases form multi-kernel groups, a tensor written in three parts and stitched producers


@pytest.fixture(scope="module")
def grouped_doc(tmp_path_factory):
    return fuzz_graphs.run(GROUPED_SEED, CASES, ["sunway-emu", "diannao-emu"], tmp_path_factory.mktemp("fuzzg"),
                           {"grouping": "on"})


@pytest.mark.parametrize("target", ["sunway-emu", "diannao-emu"])
def test_fuzz_slice_with_grouping_has_no_wrong_result(grouped_doc, target):
    """The combined program of many random graphs, grouped (GraphTurbo): groups, their order
    and the launches they share must not change a result."""
    res = grouped_doc["targets"][target]
    assert res["wrong"] == [], res["wrong"]
    assert res["passed"] + len(res["refused"]) == grouped_doc["kept"]
    assert res["passed"] >= grouped_doc["kept"] * 3 // 4
    _clean(res)
    if target == "sunway-emu":      # producers recomputed in their consumer's LDM (stitch_producers.py)
        assert res["stitched"] > 0


def test_fuzz_cases_are_reproducible_and_varied():
    a = [c.model().SerializeToString() for c in (fuzz_graphs.make_case(SEED, k) for k in range(CASES))]
    b = [c.model().SerializeToString() for c in (fuzz_graphs.make_case(SEED, k) for k in range(CASES))]
    assert a == b
    ops = set().union(*(fuzz_graphs.make_case(SEED, k).ops for k in range(64)))
    assert len(ops) >= 25
    assert any(fuzz_graphs.make_case(SEED, k).special for k in range(CASES))


def test_comparison_catches_nan_and_dtype_differences():
    import numpy as np
    assert fuzz_graphs.same(np.array([np.nan, 1.0], np.float32), np.array([np.nan, 1.0], np.float32))
    assert not fuzz_graphs.same(np.array([0.0, 1.0], np.float32), np.array([np.nan, 1.0], np.float32))
    assert not fuzz_graphs.same(np.array([1], np.int32), np.array([1], np.int64))


RESIZE_SEED, RESIZE_CASES = 37, 24


@pytest.fixture(scope="module")
def resize_doc(tmp_path_factory):
    return fuzz_graphs.run(RESIZE_SEED, RESIZE_CASES, ["sunway-emu", "sunway-pro-emu", "diannao-emu"],
                           tmp_path_factory.mktemp("fuzzr"), {"grouping": "off"}, maker=fuzz_graphs.make_resize_case)


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu", "diannao-emu"])
def test_fuzz_resize_has_no_wrong_result(resize_doc, target):
    """Random Resize configurations (every mode, coordinate transformation, nearest mode,
    antialias, extrapolation, axes, scales or sizes with an aspect policy) against onnxruntime
    where it agrees with the spec's reference: none refused, none wrong."""
    res = resize_doc["targets"][target]
    assert resize_doc["kept"] >= RESIZE_CASES * 2 // 3
    assert res["wrong"] == [] and res["refused"] == [], res
    assert res["passed"] == resize_doc["kept"]
    _clean(res)


def test_resize_cases_cover_the_attributes():
    from onnx import helper
    attrs = [{a.name: helper.get_attribute_value(a) for a in fuzz_graphs.make_resize_case(RESIZE_SEED, k).nodes[0].attribute}
             for k in range(RESIZE_CASES)]
    assert {a["mode"] for a in attrs} == {b"nearest", b"linear", b"cubic"}
    assert {a["coordinate_transformation_mode"] for a in attrs} == {c.encode() for c in fuzz_graphs.CTMS}
    assert any(a.get("antialias") for a in attrs) and any("keep_aspect_ratio_policy" in a for a in attrs)
