"""Weight prefetch (schedule/conv.py, option weight_prefetch): a convolution whose weights
change per input-channel block (NIB > 1, through SRAM) fetches block ib + 1 GDRAM -> SRAM with
__memcpy_async while block ib goes SRAM -> WRAM and computes; a block loaded once (NIB = 1)
moves in chunks, chunk j + 1 GDRAM -> SRAM while chunk j goes SRAM -> WRAM. Same result and
the same copies as without it (the bytes each direction moves are equal); fewer cycles,
because the IO queue overlaps the move and compute queues until the __sync_io before the
cluster barrier."""
import re

import pytest

from dn_build import checked_variants, cycles_by_kernel
from dn_models import conv_relu_pairs

# 3x3 (input channels, output channels, spatial size): 4.7 MB of weights, more than one WRAM
# block per output block (NIB > 1); 0.6 MB, one block whatever the output block (NIB = 1)
CASES = [(512, 256, 5), (64, 256, 8)]


def conv():
    return conv_relu_pairs(CASES, 11, "wpf")


@pytest.fixture(scope="module")
def both(tc, tmp_path_factory):
    return checked_variants(tc, tmp_path_factory, conv(), "wpf",
                            {pf: dict(grouping="off", weight_prefetch=pf) for pf in ("off", "on")}, 3)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_prefetch_same_result_and_copies_fewer_cycles(both, case):
    k = {}
    for pf, (plan, doc, stats, _) in both.items():
        assert doc["status"] == "pass", (pf, doc.get("reason"))
        em = doc["emulator"]
        assert em["copy_mismatches"] == [] and em["violations"] == 0 and em["write_conflicts"] == 0, pf
        conv_ = [x for x in plan["kernels"] if x["class"] == "conv"][case]
        assert (conv_["schedule"]["NIB"] > 1) == (case == 0), conv_["schedule"]
        assert conv_["schedule"]["mode"] in ("rows", "clusters"), conv_["schedule"]
        meas = {x["name"]: x for x in stats["kernels"]}[conv_["name"]]
        k[pf] = conv_, meas, cycles_by_kernel(stats)[conv_["name"]]
    assert k["on"][0]["schedule"] == k["off"][0]["schedule"]
    assert k["on"][1]["memcpy_bytes"] == k["off"][1]["memcpy_bytes"]
    assert k["on"][0]["sram_bytes"] == (2 if case == 0 else 1) * k["off"][0]["sram_bytes"]   # NIB > 1: two halves
    assert k["on"][2] < k["off"][2], (k["on"][2], k["off"][2])


def test_prefetch_is_async_and_synced(both):
    src_on, src_off = both["on"][3], both["off"][3]
    assert not re.search(r"__memcpy_async\([^;]*GDRAM2SRAM", src_off)
    assert re.search(r"__memcpy_async\([^;]*GDRAM2SRAM", src_on)
    assert re.search(r"__memcpy_async\([^;]*SRAM2WRAM", src_on) and "__sync_move();" in src_on
