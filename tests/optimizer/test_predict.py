"""The vectorised DMA prediction against a plain step-by-step replay of the generated code's
decisions (fetch a box when its footprint changes), over pinned schedules."""
import math

import pytest
from onnx import helper

from opt_models import conv_model, make, program, rand, sunway
from swbuild.optimizer import ldm
from swbuild.optimizer.partition import cpe_share, decode
from swbuild.perf.predict import compulsory_bytes, predict_kernel, simulate


def naive(k, cores, para):
    s = k.schedule
    t = s.tiles
    ext = {a.name: a.extent for a in list(k.axes) + list(k.reduce_axes)}
    counts = [math.ceil(ext[n] / t[n]) for n in s.grid_order]
    rc = [math.ceil(ext[n] / t[n]) for n in s.red_order]
    total = math.prod(counts)
    gops = gby = pops = pby = 0
    for c in range(cores):
        g0, n, step = cpe_share(total, cores, c, s.partition)
        resident = {}
        for j in range(n):
            coords = decode(g0 + j * step, s.grid_order, counts)
            ranges = {a: (ci * t[a], min(t[a], ext[a] - ci * t[a])) for a, ci in zip(s.grid_order, coords)}
            for r in range(math.prod(rc)):
                rcoords = decode(r, s.red_order, rc)
                rr = dict(ranges)
                rr.update({a: (ci * t[a], min(t[a], ext[a] - ci * t[a])) for a, ci in zip(s.red_order, rcoords)})
                for a in k.reduce_axes:
                    rr.setdefault(a.name, (0, a.extent))
                for b in s.boxes:
                    if b.context == "out":
                        continue
                    fp = b.footprint(rr)
                    if resident.get(b.name) != fp:
                        resident[b.name] = fp
                        calls, by, _ = b.transfer(*fp)
                        gops += calls
                        gby += by
            ob = s.boxes[-1]
            calls, by, _ = ob.transfer(*ob.footprint(ranges))
            pops += calls
            pby += by
    return {"get": {"ops": gops + cores, "bytes": gby + cores * para}, "put": {"ops": pops, "bytes": pby}}


def _pool_model():
    return make([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 0, 0]),
                 helper.make_node("Add", ["y", "b"], ["z"])],
                [("x", [1, 6, 15, 15])], [("z", [1, 6, 7, 7])], [("b", rand(1, 6, 1, 1))])


CASES = [
    (conv_model(c=16, hw=10, co=12, pads=(1, 2, 0, 1)), {"Conv": {"ci": 4, "co": 4, "o0": 1, "o1": 4, "k0": 2}}, "cyclic"),
    (conv_model(c=16, hw=10, co=12, pads=(1, 2, 0, 1)), {"Conv": {"ci": 4, "co": 4, "o0": 1, "o1": 4, "k0": 2}}, "block"),
    (conv_model(c=8, hw=17, co=8, stride=2, group=2), {"Conv": {"ci": 2, "co": 2, "o0": 3, "o1": 5}}, "block"),
    (_pool_model(), {"MaxPool": {"c": 2, "o0": 2, "k1": 2}, "Add": {"i1": 4, "i3": 3}}, "cyclic"),
]


@pytest.mark.parametrize("model,tiles,mode", CASES)
@pytest.mark.parametrize("db", [False, True])
def test_vectorised_prediction_equals_a_plain_replay(model, tiles, mode, db):
    tc = sunway()
    p = program(model)
    opts = {"force_tiles": tiles, "force_double_buffer": db, "force_partition": mode}
    for k in p.kernels:
        ldm.size_buffers(k, tc.hardware, tc.ldm_budget, opts, p.graph)
        para = 8 * len(k.buffers)
        assert predict_kernel(k, 64, para) == naive(k, 64, para), k.name


def test_cost_model_replay_is_consistent():
    tc = sunway()
    p = program(conv_model(c=32, hw=28, co=64))
    k = p.kernels[0]
    ldm.size_buffers(k, tc.hardware, tc.ldm_budget, {}, p.graph)
    r = simulate(k, 64, 40, tc.hardware)
    busy = r["tiles"] > 0
    assert (r["cpe_seconds"][busy] >= r["compute_seconds"][busy]).all()
    assert (r["cpe_seconds"][busy] >= 0.8 * r["dma_seconds"][busy]).all()
    # compulsory: input 32x28x28, weights 64x32x3x3, bias 64, output 64x28x28 floats
    assert compulsory_bytes(k) == 4 * (32 * 28 * 28 + 64 * 32 * 9 + 64 + 64 * 28 * 28)
