"""The vectorised DMA prediction against a plain step-by-step replay of the generated code's
decisions (fetch a box when its footprint changes), over pinned schedules."""
import math

import pytest
from onnx import helper

from opt_models import conv_model, make, program, rand, schedule, sunway
from swbuild.backends.sunway.cost.predict import compulsory_bytes, predict_kernel, simulate
from swbuild.backends.sunway.schedule import ldm
from swbuild.backends.sunway.schedule.grid import all_cpe_sequences, cpe_sequence, cpe_share, decode


def tiles_of(s, counts, cores, c):
    """Grid coordinates of CPE c's tiles, in order: its share of the grid, or with row (array)
    sharing its row's (the array's) share of the groups with lane tile (group lane coordinate)
    * W + position, W = 8 (64)."""
    if not s.lane:
        g0, n, step = cpe_share(math.prod(counts), cores, c, s.partition)
        return [decode(g0 + j * step, s.grid_order, counts) for j in range(n)]
    W = s.share_width
    li = s.grid_order.index(s.lane)
    gc = list(counts)
    gc[li] //= W
    g0, n, step = cpe_share(math.prod(gc), cores // W, c // W, s.partition)
    out = []
    for j in range(n):
        coords = decode(g0 + j * step, s.grid_order, gc)
        coords[li] = coords[li] * W + c % W
        out.append(coords)
    return out


def naive(k, cores, para):
    s = k.schedule
    t = s.tiles
    ext = {a.name: a.extent for a in list(k.axes) + list(k.reduce_axes)}
    counts = [math.ceil(ext[n] / t[n]) for n in s.grid_order]
    rc = [math.ceil(ext[n] / t[n]) for n in s.red_order]
    gops = gby = pops = pby = 0
    for c in range(cores):
        resident, fetches = {}, {}
        for j, coords in enumerate(tiles_of(s, counts, cores, c)):
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
                        kth = fetches[b.name] = fetches.get(b.name, -1) + 1
                        if b.shared and kth % s.share_width != c % s.share_width:
                            continue        # another CPE of the row (array) broadcasts the box's kth fetch
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


LANE_CASES = [   # row sharing: the row splits co (input broadcast) or a pixel axis (weights broadcast)
    (conv_model(c=16, hw=10, co=32, pads=(1, 2, 0, 1)), {"Conv": {"ci": 4, "co": 4, "o0": 1, "o1": 4, "k0": 2}}, "cyclic", "co"),
    (conv_model(c=16, hw=16, co=12, pads=(1, 2, 0, 1)), {"Conv": {"ci": 4, "co": 4, "o0": 2, "o1": 2, "k0": 2}}, "block", "o0"),
    (conv_model(c=8, hw=17, co=32, stride=2, group=2), {"Conv": {"ci": 2, "co": 2, "o0": 3, "o1": 5}}, "block", "co"),
    # array sharing: all 64 CPEs split co (64 tiles: the input broadcast to all) or o0
    (conv_model(c=16, hw=10, co=64, pads=(1, 2, 0, 1)), {"Conv": {"ci": 4, "co": 1, "o0": 5, "o1": 4, "k0": 2}},
     "cyclic", ("co", 64)),
    (conv_model(c=4, hw=64, co=8), {"Conv": {"ci": 2, "co": 4, "o0": 1, "o1": 16}}, "block", ("o0", 64)),
    (conv_model(c=16, hw=10, co=128), {"Conv": {"ci": 4, "co": 1, "o0": 4, "o1": 10}}, "block", ("co", 64)),
]


@pytest.mark.parametrize("model,tiles,mode,lane", [c + (None,) for c in CASES] + LANE_CASES)
@pytest.mark.parametrize("db", [False, True])
def test_vectorised_prediction_equals_a_plain_replay(model, tiles, mode, db, lane):
    tc = sunway()
    p = program(model)
    schedule(p, tc, tiles=tiles, double_buffer=db, partition=mode, lane=lane)
    for k in p.kernels:
        para = 8 * len(k.buffers)
        if lane and k.op == "Conv":
            axis, width = (lane, 8) if isinstance(lane, str) else lane
            assert (k.schedule.lane, k.schedule.share_width) == (axis, width)
            assert any(b.shared for b in k.schedule.boxes)
        assert predict_kernel(k, 64, para) == naive(k, 64, para), k.name


def test_cost_model_replay_is_consistent():
    tc = sunway()
    p = program(conv_model(c=32, hw=28, co=64))
    k = p.kernels[0]
    schedule(p, tc)
    r = simulate(k, 64, 40, tc.hardware)
    busy = r["tiles"] > 0
    assert (r["cpe_seconds"][busy] >= r["compute_seconds"][busy]).all()
    assert (r["cpe_seconds"][busy] >= 0.8 * r["dma_seconds"][busy]).all()
    # compulsory: input 32x28x28, weights 64x32x3x3, bias 64, output 64x28x28 floats
    assert compulsory_bytes(k) == 4 * (32 * 28 * 28 + 64 * 32 * 9 + 64 + 64 * 28 * 28)


def test_exposed_parts_add_up_to_the_modelled_time():
    """benchmarks/exposed_time.py reads simulate's exposed parts: the first fetch of each box,
    the last put and the parameter struct. With the DMA and compute seconds they must give
    back each CPE's modelled seconds through the cost model."""
    from swbuild.backends.sunway.cost import model
    tc = sunway()
    p = program(conv_model(c=32, hw=28, co=64))
    k = p.kernels[0]
    schedule(p, tc)
    r = simulate(k, 64, 40, tc.hardware)
    first = r["first_fetch_seconds"]
    assert set(first) == {b.buf for b in k.schedule.boxes if b.context != "out"}   # input, weights, bias
    exposed = sum(first.values()) + r["last_put_seconds"] + r["para_seconds"]
    busy = r["tiles"] > 0
    assert k.schedule.double_buffer and (exposed[busy] > 0).all()
    # compute-bound CPEs: their modelled seconds are compute + exposed, so every part counts
    assert (r["compute_seconds"][busy] > r["dma_seconds"][busy] - exposed[busy]).all()
    again = model.cpe_seconds(tc.hardware, r["dma_seconds"], r["compute_seconds"], exposed, True)
    assert again[busy] == pytest.approx(r["cpe_seconds"][busy], rel=1e-12)


def test_row_sharing_lanes_need_a_broadcasting_chip_and_whole_rows():
    """A lane is a spatial axis whose tile count is a multiple of the row width (8), on a chip
    whose toolchain declares the row broadcast (SW26010) or the RMA broadcast (SW26010-Pro),
    unless `row_share=off`."""
    p = program(conv_model(c=32, hw=16, co=64))
    k = p.kernels[0]
    tiles = {"n": 1, "co": 8, "o0": 2, "o1": 16, "ci": 8, "k0": 3, "k1": 3}
    emu, pro = sunway(), sunway("sunway-pro-emu")
    s = ldm.Search(k, emu.hardware, emu.ldm_budget, {}, p.graph)
    assert s.lanes(tiles) == [("co", 8), ("o0", 8)]            # 8 co tiles, 8 o0 tiles; 1 o1 tile
    assert s.lanes(dict(tiles, co=16)) == [("o0", 8)]          # 4 co tiles: not a whole row
    # 64 co tiles: a row, or all 64 CPEs (array broadcast, SW26010's BCAST_MODE to all rows)
    assert s.lanes(dict(tiles, co=1)) == [("co", 8), ("co", 64), ("o0", 8)]
    no_array = dict(emu.hardware, array_broadcast=False)
    assert ldm.Search(k, no_array, emu.ldm_budget, {}, p.graph).lanes(dict(tiles, co=1)) == [("co", 8), ("o0", 8)]
    assert ldm.Search(k, emu.hardware, emu.ldm_budget, {"row_share": "off"}, p.graph).lanes(tiles) == []
    # SW26010-Pro has no broadcast DMA: it shares by RMA broadcast (rma_broadcast), rows and array,
    # and in two dimensions (rows in lockstep, columns sharing what only depends on the lane: the
    # weights under lane co, whose 8 groups of tiles move every 8 o0 tiles; the input under o0)
    assert ldm.Search(k, pro.hardware, pro.ldm_budget, {}, p.graph).lanes(dict(tiles, co=1)) == [
        ("co", 8), ("co", 64), ("o0", 8), ("co", 8, 8), ("o0", 8, 8)]
    # 8 co tiles and 8 o0 tiles: 8 groups under either lane, the other axis moving every group
    assert ldm.Search(k, pro.hardware, pro.ldm_budget, {}, p.graph).lanes(tiles) == [
        ("co", 8), ("o0", 8), ("co", 8, 8), ("o0", 8, 8)]
    assert ldm.Search(k, pro.hardware, pro.ldm_budget, {}, p.graph).lanes(dict(tiles, o0=4)) == [("co", 8)]
    no_rma = dict(pro.hardware, rma_broadcast=False)
    assert ldm.Search(k, no_rma, pro.ldm_budget, {}, p.graph).lanes(tiles) == []
    # the chosen lane's broadcast boxes are exactly those that do not depend on it
    schedule(p, emu, tiles={"Conv": tiles}, lane="co")
    assert k.schedule.lane == "co"
    assert {b.buf for b in k.schedule.boxes if b.shared} == {b.buf for b in k.schedule.boxes
                                                             if b.context != "out" and "co" not in b.vars}
    assert "rows split co" in str(k.schedule)


@pytest.mark.parametrize("counts", [[1], [3], [7, 8], [2, 16, 5], [64], [65], [8, 8, 8], [16, 3], [200]])
@pytest.mark.parametrize("mode", ["cyclic", "block"])
def test_all_cpe_sequences_are_the_cpes_own_sequences_in_cpe_order(counts, mode):
    """simulate deals the tiles of every CPE at once; each CPE's run must be cpe_sequence's."""
    import numpy as np
    for cores in (64, 16):
        lanes = [(None, 8)] + [(i, w) for i, c in enumerate(counts) for w in (8, cores) if c % w == 0]
        for lane, w in lanes:
            g, cpe, pos = all_cpe_sequences(counts, cores, mode, lane, w)
            for c in range(cores):
                own = cpe_sequence(counts, cores, c, mode, lane, w)
                assert g[cpe == c].tolist() == own.tolist()
                assert pos[cpe == c].tolist() == list(range(len(own)))
            assert (np.diff(cpe) >= 0).all()
            assert sorted(g.tolist()) == list(range(math.prod(counts)))   # every tile once


def test_every_cpe_of_a_row_pays_for_expanding_its_copy_of_a_broadcast_box():
    """A broadcast box with pads lands in every LDM of the row and every CPE materialises the
    pads of its own copy (slave.py), so the model charges the expansion to each of them, not
    only to the CPE that issued the broadcast: CPEs of a row with the same tiles compute alike."""
    import numpy as np
    tc = sunway()
    p = program(conv_model(c=16, hw=10, co=32, pads=(1, 2, 0, 1)))
    schedule(p, tc, tiles={"Conv": {"ci": 4, "co": 4, "o0": 1, "o1": 4, "k0": 2}}, lane="co")
    k = p.kernels[0]
    assert k.schedule.lane == "co" and any(b.shared and b.pad_dims for b in k.schedule.boxes)
    r = simulate(k, 64, 40, tc.hardware)
    per_row = np.asarray(r["compute_seconds"]).reshape(8, 8)
    busy = np.asarray(r["tiles"]).reshape(8, 8) > 0
    for row, b in zip(per_row, busy):
        assert np.allclose(row[b], row[b][0], rtol=0, atol=1e-15), row
