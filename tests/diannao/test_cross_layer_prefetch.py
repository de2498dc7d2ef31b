"""Cross-layer weight prefetch (cross_layer.py, option cross_layer_prefetch): two 1x1
convolutions in one launch; the second's chunk-0 weight copy GDRAM -> SRAM is issued inside
the first kernel (after its last compute, before the join), not in the second's prologue.
Same outputs (onnxruntime), the same copies (bytes per direction, predicted = emulator),
fewer cycles: the copy overlaps the first kernel's compute until the __sync_all()."""
import re

import pytest

from dn_build import checked_variants
from dn_models import pointwise_chain


@pytest.fixture(scope="module")
def built(tc, tmp_path_factory):
    return checked_variants(tc, tmp_path_factory, pointwise_chain(128, 256, 14, 5), "xl",
                            {opt: dict(cross_layer_prefetch=opt) for opt in ("off", "on")}, 4)


def _functions(src):
    """{kernel function name: its text} of the __mlu_func__ kernels."""
    parts = re.split(r"^__mlu_func__ void (\w+)\(", src, flags=re.M)
    return {parts[i]: parts[i + 1].split("\n}\n")[0] for i in range(1, len(parts), 2)}


def test_same_result_same_copies_fewer_cycles(built):
    for opt, (plan, doc, stats, _) in built.items():
        assert doc["status"] == "pass", (opt, doc.get("reason"))
        em = doc["emulator"]
        assert em["copy_mismatches"] == [] and em["violations"] == 0 and em["write_conflicts"] == 0, opt
        assert len(plan["kernels"]) == 1 and len(plan["kernels"][0]["kernels"]) == 2, opt   # one launch
    (on, off) = (built[o][0]["kernels"][0]["copy_bytes"] for o in ("on", "off"))
    assert on == off
    assert built["on"][1]["emulator"]["cycles"] < built["off"][1]["emulator"]["cycles"]


def test_second_weights_issued_in_first(built):
    """The GDRAM -> SRAM copies the second kernel no longer issues are in the first, each after
    the first kernel's last __bang_conv of its task branch."""
    n = {}
    for opt in ("off", "on"):
        fns = list(_functions(built[opt][3]).values())
        assert len(fns) == 2
        n[opt] = [len(re.findall(r"GDRAM2SRAM", f)) for f in fns]
    # (printed once per task branch of the first kernel: the counts differ, the bytes do not)
    assert n["on"][1] < n["off"][1] and n["on"][0] > n["off"][0], n
    first = list(_functions(built["on"][3]).values())[0]
    branch = first[first.index("__bang_conv"):]
    after = branch[branch.index("__bang_conv"):branch.index("NRAM2GDRAM")]
    assert "GDRAM2SRAM" in after
