"""The paper's Table 2 on diannao-emu: element-wise Add/Sub/Mul/in-place Relu on 16 shapes
and 18 3x3 convolutions on HWC inputs. Each case must give correct results, have every
compute statement tensorized, and take fewer emulated cycles with loop partitioning than
with `partition=off`; the emulator must report no rule violation. All cases of a kind are
one program (one build per partition setting)."""
import numpy as np
import pytest

from swbuild.driver import check

from dn_build import build_model, cycles_by_kernel, run_check
from dn_models import CONV_CASES, EW_OPS, EW_SHAPES, table2_conv, table2_elementwise

# 48 MB cases, two builds per kind: minutes on 2 cores (tests/diannao/test_models.py keeps
# tensorization and partitioning in the quick tier)
pytestmark = pytest.mark.slow


def _both(tc, tmp_path_factory, model, name):
    out = {}
    for part in ("on", "off"):
        # grouping off: the cycles are compared kernel by kernel, one launch each; pipelined
        # tiles off: they cover the two codes differently (a tail tile that partitioning peels
        # after a long tile loop stays serial, pingpong.py), which is not what Table 2 measures
        out[part] = build_model(tc, model, name, tmp_path_factory.mktemp(f"{name}_{part}"), part, grouping="off",
                                double_buffer="off")
    return out


def _assert_table2(builds, reference_fn, cases):
    per = {}
    for part, (plan, exe) in builds.items():
        inputs = check.seeded_inputs(plan["inputs"], 0)
        doc, stats = run_check(plan, exe, reference_fn(plan, inputs), inputs)
        assert doc["status"] == "pass", doc.get("reason")
        assert stats["violations"] == 0
        per[part] = (plan, cycles_by_kernel(stats))
    plan_on, on = per["on"]
    _, off = per["off"]
    assert len(plan_on["kernels"]) == cases
    for k in plan_on["kernels"]:
        assert k["class"] in ("elementwise", "conv"), k["name"]
        assert k["compute_statements"] >= 1 and k["tensorized_statements"] == k["compute_statements"], k
        assert on[k["name"]] < off[k["name"]], (k["name"], on[k["name"]], off[k["name"]])
    assert plan_on["tensorized_fraction"] == 1.0
    return on, off


@pytest.fixture(scope="module")
def ew_builds(tc, tmp_path_factory):
    return _both(tc, tmp_path_factory, table2_elementwise(), "t2ew")


@pytest.fixture(scope="module")
def conv_builds(tc, tmp_path_factory):
    return _both(tc, tmp_path_factory, table2_conv(), "t2conv")


def _ew_reference(plan, inputs):
    fns = {"add": np.add, "sub": np.subtract, "mul": np.multiply}

    def gen():      # one output at a time: the largest cases are 48 MB each
        for o in plan["outputs"]:
            op, i = o["name"].rstrip("0123456789"), o["name"][len(o["name"].rstrip("0123456789")):]
            x = inputs[f"x{i}"]
            yield np.maximum(x, 0) if op == "relu" else fns[op](x, inputs[f"y{i}"])
    return gen()


def test_table2_elementwise(ew_builds):
    on, off = _assert_table2(ew_builds, _ew_reference, len(EW_SHAPES) * len(EW_OPS))
    assert sum(on.values()) < sum(off.values())


def test_table2_conv(conv_builds):
    model = table2_conv()
    on, off = _assert_table2(conv_builds, lambda plan, ins: check.onnxruntime_reference(model, ins), len(CONV_CASES))
    plan = conv_builds["on"][0]
    # the NHWC <-> NCHW transposes around each convolution are gone; weights go through SRAM
    assert sum("identity copy" in n for n in plan["notes"]) == 2 * len(CONV_CASES)
    assert all(k["static_instructions"].get("__bang_conv") for k in plan["kernels"])
