"""Option mesh_gemm (kinds/mesh_gemm.py, passes/mesh.py): 1x1 convolutions as SUMMA over the
SW26010 mesh, operands passed by register messages. Which kernels it can take, what it
refuses and why, that `on` takes it only where the model predicts a gain, and, under the
emulator with its strictest register-communication settings (a receive buffer of one
message, DMA landing at random points), outputs that match onnxruntime with predicted DMA
and per-direction message counts equal to the measured ones."""
import numpy as np
import pytest
from onnx import helper

from mesh_models import chain_model, strict_check
from opt_models import conv_model, make, program, rand, schedule, sunway
from swbuild.backends.sunway.kinds.mesh_gemm import gemm_shape, mesh_counts, mesh_schedule, mesh_weights


TILED = dict(n=2, c=64, hw=18, co=128, k=1, pads=(0, 0, 0, 0))   # with a 1536-B budget: every loop > 1
TILED_BUDGET = 1280


def test_shapes_it_takes_and_refuses():
    p = program(conv_model(c=16, hw=6, co=24, k=1, pads=(0, 0, 0, 0)))
    g, why = gemm_shape(p.kernels[0], p.graph)
    assert why == "" and (g.N, g.CO, g.CI, g.P, g.vecs, g.res) == (1, 24, 16, 36, ("b2",), ())
    p = program(chain_model())
    assert gemm_shape(p.kernels[1], p.graph)[0].res == ("b2",)
    assert gemm_shape(p.kernels[1])[1] == "the weights are not a constant"     # no graph: nothing to re-lay out
    for kw, reason in [(dict(k=3), "not a 1x1 window"),
                       (dict(k=1, stride=2, pads=(0, 0, 0, 0)), "the loads are not"),
                       (dict(k=1, pads=(1, 1, 1, 1)), "an index with an offset or pads"),
                       (dict(k=1, pads=(0, 0, 0, 0), group=2), "not a 4-d convolution")]:
        p = program(conv_model(c=16, hw=6, co=24, **kw))
        g, why = gemm_shape(p.kernels[0], p.graph)
        assert g is None and why.startswith(reason), (kw, why)
    hw = sunway("sunway-pro-emu")
    p = program(conv_model(c=16, hw=6, co=24, k=1, pads=(0, 0, 0, 0)))
    assert mesh_schedule(p.kernels[0], hw.hardware, hw.ldm_budget, hw.api, p.graph)[0] is None   # no messages on Pro


def test_counts_follow_the_tiling():
    tc = sunway()
    p = program(conv_model(**TILED))
    s, _ = mesh_schedule(p.kernels[0], tc.hardware, TILED_BUDGET, graph=p.graph)
    assert s.nco > 1 and s.npt > 1 and s.nk > 1 and s.ldm_bytes <= TILED_BUDGET
    c = mesh_counts(s, 64, 8 * len(p.kernels[0].buffers))
    rc = c["regcomm"]
    assert rc["getr"] == 7 * rc["putr"] and rc["getc"] == 7 * rc["putc"] and rc["puts"] == rc["putr"] + rc["putc"]
    # W read once, the bias once per mesh column, X once per co tile and image, Y written once
    assert c["put_bytes"] == 4 * 2 * 128 * 18 * 18
    assert c["get_bytes"] == 64 * 8 * 4 + 4 * (128 * 64 + 8 * 128) + 4 * 2 * s.nco * 64 * 18 * 18
    assert c["get_ops"] == 64 + 64 * s.nco * 2 + c["put_ops"] * 1 * s.nk    # W in one run per co tile, then X pieces


def test_weights_are_laid_out_in_runs_per_cpe():
    W = np.arange(32 * 48, dtype=np.float32).reshape(32, 48)
    mc, kc = 2, 3                    # 2 co tiles, 2 k steps
    a = mesh_weights(W, mc, kc).reshape(-1)
    nk, n = 48 // (8 * kc), 2 * mc * kc
    for t, r, c, j, i, q in [(0, 0, 0, 0, 0, 0), (1, 7, 5, 1, 1, 2), (0, 3, 6, 1, 0, 1)]:
        got = a[((t * 8 + r) * 8 + c) * n + (j * mc + i) * kc + q]
        assert got == W[t * 8 * mc + r * mc + i, j * 8 * kc + c * kc + q] and nk == 2


def test_on_takes_it_only_where_the_model_predicts_a_gain():
    tc = sunway()
    conv = lambda: program(conv_model(c=64, hw=14, co=64, k=1, pads=(0, 0, 0, 0)))   # noqa: E731
    p = schedule(conv(), tc, {"mesh_gemm": "on"})
    (k,) = p.kernels
    q = conv()
    mesh, _ = mesh_schedule(q.kernels[0], tc.hardware, tc.ldm_budget, graph=q.graph)
    tiled = p.target_state.drafts[k.name].seconds + tc.hardware["spawn_seconds"]
    # messages at 18.4 cycles per 32 B lose to the tile search's array-broadcast DMA here
    assert k.kind == "compute" and mesh.modeled_seconds > tiled
    p = schedule(program(conv_model(c=64, hw=14, co=64, k=1, pads=(0, 0, 0, 0))), tc, {"mesh_gemm": "all"})
    assert p.kernels[0].kind == "mesh" and p.kernels[0].schedule.report["regcomm"]["putc"] > 0


@pytest.mark.parametrize("name, model, extra, mode", [
    ("tiled", lambda: conv_model(**TILED), ["--set", f"ldm_reserve={65536 - TILED_BUDGET}"], "wait"),
    ("tiled_random", lambda: conv_model(**TILED), ["--set", f"ldm_reserve={65536 - TILED_BUDGET}"], "random:7"),
])
def test_emulated_check_with_the_strictest_messages(tmp_path, name, model, extra, mode):
    _, plan = strict_check(tmp_path, name, model(), extra, mode)
    (k,) = plan["kernels"]
    assert k["kind"] == "mesh" and k["regcomm"]["putr"] > 0 and k["regcomm"]["putc"] > 0
    assert "2 co tiles x 6 pixel tiles x 4 k steps" in k["mesh"]


def test_1x1s_next_to_a_3x3_run_alone_on_the_mesh(tmp_path):
    """1x1 (bias, Relu) -> 3x3 -> 1x1 + residual input + Relu: no 1x1 feeds a 1x1, so the two
    1x1s run as single mesh kernels (the residual read per output tile), the 3x3 as before."""
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"]), helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["c2", "w3"], ["c3"]), helper.make_node("Add", ["c3", "x"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    m = make(nodes, [("x", [1, 24, 9, 9])], [("y", [1, 24, 9, 9])],
             [("w1", rand(40, 24, 1, 1, seed=1, scale=0.3)), ("b1", rand(40, seed=2)),
              ("w2", rand(40, 40, 3, 3, seed=3, scale=0.1)), ("w3", rand(24, 40, 1, 1, seed=4, scale=0.3))])
    _, plan = strict_check(tmp_path, "lone", m, [], "random:3")
    ks = [k for e in plan["kernels"] for k in e.get("kernels", [e])]
    assert sorted(k.get("kind", "compute") for k in ks) == ["compute", "mesh", "mesh"]
    assert all(k["regcomm"]["putc"] > 0 for k in ks if k.get("kind") == "mesh")
