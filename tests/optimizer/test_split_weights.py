"""A split reduction's part kernel reads the weights through a view W[co, s, ci', kh, kw]
(schedule/split.py _split_views): every dim one axis, so its weight boxes are still re-laid
out in contiguous blocks and transposed for SIMD along the output channels, as the whole
kernel's are."""
import pytest

from opt_models import conv_model, program, sunway

from swbuild.backends.sunway.schedule import dma, ldm, split
from swbuild.ir.loopnest import Var, iter_loads


def _weights(k, graph):
    return next(n for n, b in k.buffers.items()
                if graph.tensors.get(b.tensor) is not None and graph.tensors[b.tensor].data is not None
                and len(b.shape) == 4)


def test_the_part_kernel_views_the_weights_with_the_split_axis_as_a_dim():
    tc = sunway("sunway-pro-emu")
    p = program(conv_model(c=64, hw=7, co=32, k=3))
    k = p.kernels[0]
    w = _weights(k, p.graph)
    part, _ = split._split_kernel(k, 4, p.graph)
    b = part.buffers[w]
    assert b.tensor == k.buffers[w].tensor                  # a view: no new constant
    assert tuple(b.shape) == (32, 4, 16, 3, 3)
    (ld,) = [ld for ld in iter_loads(part.body) if ld.buf == w]
    assert all(isinstance(i, Var) for i in ld.index) and ld.index[1].name == part.axes[0].name
    # the activation is still read at s*16 + ci (not a constant: no view)
    x = next(ld for ld in iter_loads(part.body) if ld.buf != w)
    assert not all(isinstance(i, Var) for i in x.index)
    s = ldm.Search(part, tc.hardware, tc.ldm_budget, {}, p.graph)
    box = next(bx for bx in s.boxes if bx.buf == w)
    assert s.can_block[id(box)] and dma.blockable(box, part, p.graph) is not None   # one run per box


@pytest.mark.parametrize("target", ["sunway-pro-emu"])
def test_split_3x3_runs_with_blocked_vector_weights(tmp_path, target):
    """A stride-2 3x3 with a long reduction (ResNet-50's stage-4 shape on 14x14 pixels) splits
    on SW26010-Pro; its part kernel's weights are blocked and read as vectors, and the pair is
    exact under the emulator with DMA and RMA as predicted."""
    from test_emulated import _run_pinned, kernel_entries
    from swbuild.backends.sunway.report import emulator_findings
    from swbuild.driver import check
    model = conv_model(c=256, hw=14, co=256, k=3, stride=2)
    plan, stats, got, ref = _run_pinned(model, target, {}, tmp_path)
    ks = kernel_entries(plan["kernels"])
    assert [k["name"].rsplit("_", 1)[1] for k in ks] == ["part", "sum"], [k["name"] for k in ks]
    part = ks[0]
    assert part["blocked"], part
    assert "gather" not in part["simd"] and ":vec" in part["simd"], part["simd"]
    f = emulator_findings(plan, stats)
    assert f["dma_mismatches"] == [] and f["write_conflicts"] == 0 and f["ldm_over_budget"] == []
    ok, err, _, _ = check.compare(got, ref, 1e-4, 1e-5)
    assert ok, err
