"""Several models in one SW26010-Pro program. Pro slave files declare the RMA reply words and
counters that operand sharing uses; as globals they made two models' objects clash at link
time (`multiple definition of sw_rma_n`), so no program could hold two Pro models. The
CumSum node tests (one model each, float64 and int32 inputs) are the models."""
import numpy as np

import node_bundle
from swbuild.config import toolchain


def test_cumsum_node_tests_in_one_pro_program(tmp_path):
    tc = toolchain.load("sunway-pro-emu")
    cases = [node_bundle.bind_params(c, i) for i, c in enumerate(node_bundle.collect(["CumSum"]))]
    assert len(cases) >= 9
    for c in cases:
        node_bundle.compile_case(c, tc, tmp_path)
        assert c.status == "compiled", (c.name, c.reason)
    exe = node_bundle.build_bundle(cases, tc, tmp_path)
    for c in cases:
        got, stats, err = node_bundle.run_case(c, exe, tmp_path)
        assert got is not None, (c.name, err)
        for g, r in zip(got, c.outputs):
            assert g.dtype == r.dtype, c.name
            np.testing.assert_allclose(g, r, rtol=c.rtol, atol=c.atol, err_msg=c.name)
        assert all(k["write_conflicts"] == 0 for k in stats["kernels"]), c.name
