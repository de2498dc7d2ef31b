"""Weights leave GDRAM once (schedule/weight_broadcast.py, option weight_broadcast): a rows-mode
convolution's clusters each load a quarter of every weight block GDRAM -> SRAM and send it to
the other three clusters' SRAM (__memcpy SRAM2SRAM with id_dst_cluster), instead of every
cluster loading the whole block. Same result, the weight bytes leave GDRAM once instead of
four times, the plan's predicted copy bytes equal the emulator's, no rule violation (the
emulator reports a send racing a cluster's own use of its SRAM)."""
import re

import pytest

from dn_build import checked_variants
from dn_models import conv_relu_pairs

# 3x3 (input channels, output channels, spatial size): one output-channel block, rows mode
CASES = [(64, 64, 28), (128, 128, 14)]


@pytest.fixture(scope="module", params=["on", "off"])
def both(tc, tmp_path_factory, request):
    """weight_broadcast off and all, with weight_prefetch (chunked staging) on or off."""
    # input_stationary off: the staged blocks (input-stationary ones are not broadcast)
    return checked_variants(tc, tmp_path_factory, conv_relu_pairs(CASES, 5, "wbc"), "wbc",
                            {bc: dict(grouping="off", weight_prefetch=request.param, weight_broadcast=bc,
                                      input_stationary="off") for bc in ("off", "all")}, 2)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_weights_leave_gdram_once(both, case):
    got = {}
    for bc, (plan, doc, stats, _) in both.items():
        assert doc["status"] == "pass", (bc, doc.get("reason"))
        em = doc["emulator"]
        assert em["copy_mismatches"] == [] and em["violations"] == 0 and em["write_conflicts"] == 0, bc
        conv_ = [x for x in plan["kernels"] if x["class"] == "conv"][case]
        sch = conv_["schedule"]
        assert sch["mode"] == "rows" and sch["NIB"] == 1, sch
        ci, co, _ = CASES[case]
        weights = sch["NCB"] * sch["Cob"] * 9 * sch["Cib"] * 4      # the bank-layout image, padded channels included
        assert sch["Cib"] >= ci and sch["NCB"] * sch["Cob"] >= co
        got[bc] = weights, {x["name"]: x for x in stats["kernels"]}[conv_["name"]]["memcpy_bytes"], sch
    assert got["all"][2] == got["off"][2]
    weights, on, _ = got["all"]
    assert on["GDRAM2SRAM"] == weights                  # once: each cluster a quarter
    assert on["SRAM2SRAM"] == 3 * weights               # each quarter to the three other clusters
    assert got["off"][1]["GDRAM2SRAM"] == 4 * weights   # every cluster the whole block
    assert "SRAM2SRAM" not in got["off"][1]
    assert on["SRAM2WRAM"] == got["off"][1]["SRAM2WRAM"] == 16 * weights   # every core its WRAM copy
    for direction in set(on) - {"GDRAM2SRAM", "SRAM2SRAM"}:
        assert on[direction] == got["off"][1][direction], direction


def test_sends_name_the_destination_cluster_and_sync_all(both):
    src_on, src_off = both["all"][3], both["off"][3]
    # core k of cluster c sends to cluster (c + k) % 4 (partitioning may fix c or k in a branch)
    sends = re.findall(r"__memcpy\([^;]*SRAM2SRAM, (SW_MOD\([^;]*\), 4\))\);", src_on)
    assert sends and all("coreId" in s for s in sends), sends
    assert "__memcpy_async" not in "".join(re.findall(r"[^;]*SRAM2SRAM[^;]*;", src_on))    # no async form
    assert "SRAM2SRAM" not in src_off
    assert src_on.count("__sync_all();") > src_off.count("__sync_all();")


@pytest.mark.parametrize("blk, chunked, pays", [
    (147456, False, True),      # 64 x 3x3 x 64 floats, one copy: 4 000 cycles against 4 608
    (147456, True, False),      # chunked: the staging's copies overlap, the sends do not (4 432 against 3 008)
    (16384, False, False),      # a small block: the two __sync_all cost more than the loads saved
])
def test_on_broadcasts_where_the_estimate_says_it_is_no_slower(tc, blk, chunked, pays):
    from swbuild.backends.diannao.schedule import weight_broadcast as wb
    from swbuild.backends.diannao.schedule.weight_prefetch import staged_weight_cycles
    hw = tc.hardware
    n, gran, bpc = (4 if chunked else 1), hw["gdram_cycles_per_granule"] / hw["gdram_granule_bytes"], hw["sram_bytes_per_cycle"]
    L, S, M = blk * gran / 16 / n, blk / 4 / n / bpc, blk / n / bpc
    sa, sc = hw["sync_all_cycles"], hw["sync_cluster_cycles"]
    assert wb.broadcast_cycles(blk, hw, chunked) == sa + L + n * (sc + S + sa) + (n - 1) * max(L, M) + M
    assert wb.broadcasts("rows", blk, hw, chunked, "on") == pays
    assert (wb.broadcast_cycles(blk, hw, chunked) <= staged_weight_cycles(blk, hw, chunked)) == pays
    assert wb.broadcasts("rows", blk, hw, chunked, "all") and not wb.broadcasts("rows", blk, hw, chunked, "off")
    assert not wb.broadcasts("clusters", blk, hw, chunked, "all")       # one cluster per block: nothing to share
    assert not wb.broadcasts("rows", blk, hw, chunked, "all", nib_prefetched=True)
