"""Two 1x1 convolutions in one mesh kernel (kinds/mesh_chain.py): the intermediate stays in
the 64 LDMs and reaches the second layer by column broadcasts. Under the emulator's
strictest register communication (a one-message receive buffer) the outputs match
onnxruntime, predicted DMA and messages equal the measured ones, and the intermediate's
bytes never move."""
from mesh_models import bn_chain_model, chain_model, strict_check
from opt_models import program, sunway
from swbuild.backends.sunway.kinds.mesh_chain import chain_counts, chain_schedule
from swbuild.backends.sunway.kinds.mesh_gemm import mesh_counts, mesh_schedule

BUDGET = 3456       # with bn_chain_model: every loop of the chain runs more than once


def test_the_intermediate_never_moves():
    tc = sunway()
    p = program(bn_chain_model())
    k1, k2 = p.kernels
    s, why = chain_schedule(k1, k2, tc.hardware, BUDGET, graph=p.graph)
    assert why == "" and min(s.nco1, s.nk1, s.nco2, s.npt) > 1 and s.ldm_bytes <= BUDGET
    c = chain_counts(s, 64, 8 * 7)          # the consumer's 4 buffers and the producer's 3 inputs
    # X read once per co tile of layer 1, Y written once; the weights once per pixel tile and image
    assert c["put_bytes"] == 4 * 2 * 48 * 18 * 18
    w = 4 * (128 * 32 + 48 * 128) + 4 * 8 * (128 + 48)    # W1, W2; the biases (BN folded into W1's) per column
    assert c["get_bytes"] == 64 * 8 * 7 + 2 * s.npt * w + 4 * 2 * s.nco1 * 32 * 18 * 18
    # the two layers apart: both move the intermediate (2 x 2 x 128 x 324 floats) through memory
    apart = []
    for k in (k1, k2):
        m, _ = mesh_schedule(k, tc.hardware, tc.ldm_budget, graph=p.graph)
        apart.append(mesh_counts(m, 64, 8 * len(k.buffers)))
    assert sum(a["put_bytes"] for a in apart) - c["put_bytes"] == 4 * 2 * 128 * 18 * 18


def test_chain_under_the_strictest_messages(tmp_path):
    _, plan = strict_check(tmp_path, "chain", chain_model(), [], "random:5")
    (k,) = plan["kernels"]
    assert k["kind"] == "mesh_chain" and k["fused"][0] == "Conv_0"
    assert k["regcomm"]["putr"] > 0 and k["regcomm"]["putc"] > 0


def test_tiled_chain_under_the_strictest_messages(tmp_path):
    _, plan = strict_check(tmp_path, "bn_chain", bn_chain_model(), ["--set", f"ldm_reserve={65536 - BUDGET}"], "wait")
    (k,) = plan["kernels"]
    assert k["kind"] == "mesh_chain" and "(2 tiles" in k["mesh"] and "3 pixel tiles" in k["mesh"]
