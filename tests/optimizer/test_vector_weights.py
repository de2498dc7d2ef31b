"""passes/vector_weights.py: weights read along the output channels get a transposed copy
where the kernel then models faster; kernels it cannot rewrite are left alone."""
import numpy as np

from opt_models import conv_model, program, sunway
from stitch_models import pool_branch, stitched_consumer
from swbuild.backends.sunway.passes import vector_weights as vw
from swbuild.backends.sunway.schedule.passes import SunwayState


def test_seven_wide_convolution_reads_transposed_weights():
    p = program(conv_model(c=64, hw=7, co=128, k=3))
    p.target_state = SunwayState()
    k = p.kernels[0]
    buf, dim = vw._candidate(p, k, 8)
    w = np.asarray(p.graph.tensors[k.buffers[buf].tensor].data)
    vw.vector_weights(p, sunway("sunway-pro-emu"), {})
    k2 = p.kernels[0]
    t = p.graph.tensors[k2.buffers[buf].tensor]
    assert dim == 0 and k2.buffers[buf].tensor != k.buffers[buf].tensor
    assert np.array_equal(t.data, np.moveaxis(w, dim, -1))
    ld = [x for x in vw.iter_loads(k2.body) if x.buf == buf][0]
    assert [str(i) for i in ld.index] == ["ci", "k0", "k1", "co"]


def test_simd_off_and_stitched_stages_are_left_alone():
    p = program(conv_model(c=64, hw=7, co=128, k=3))
    p.target_state = SunwayState()
    before = p.kernels[0]
    vw.vector_weights(p, sunway("sunway-pro-emu"), {"simd": "off"})
    assert p.kernels[0] is before
    model = pool_branch(c=16, hw=7, co=64)
    k, _ = stitched_consumer(model)
    assert k.stages and vw._candidate(program(model), k, 8) is None
