"""Copies into another cluster's SRAM (tests/bang/sram2sram.mlu): __memcpy SRAM2SRAM with
id_dst_cluster lands in that cluster's SRAM, costs an on-chip SRAM copy (sram_bytes_per_cycle of
toolchains/diannao.toml), is counted under SRAM2SRAM, and is the destination's only after a
__sync_all; reading it earlier, two clusters writing the same bytes, a cluster id out of range,
another direction or a source outside SRAM is a violation."""
import json
import math
import re

import numpy as np
import pytest

from bangemu_build import HERE, compile_mlu, hardware, run

Q = 2048   # floats per quarter (sram2sram.mlu)


@pytest.fixture(scope="module")
def exe(tmp_path_factory):
    return compile_mlu(HERE / "sram2sram.mlu", tmp_path_factory.mktemp("s2s") / "sram2sram", hardware())


def launch(exe, tmp_path, mode):
    out, stats = tmp_path / f"{mode}.bin", tmp_path / f"{mode}.json"
    run(exe, mode, out, stats=stats)
    got = json.loads(stats.read_text())
    assert got["violations"] == 0
    (k,) = got["kernels"]
    assert k["write_conflicts"] == 0
    x = (np.arange(4 * Q) % 997 - 400).astype(np.float32)
    np.testing.assert_array_equal(np.fromfile(out, np.float32), np.tile(x, 16))   # every task saw the whole block
    return k


@pytest.mark.parametrize("mode, segments", [("broadcast", 1), ("strided", 2)])
def test_quarters_sent_to_the_other_clusters_make_the_block_whole(exe, tmp_path, mode, segments):
    hw = hardware()
    k = launch(exe, tmp_path, mode)
    qb = Q * 4
    # the block leaves GDRAM once; each cluster sends its quarter three times
    assert k["memcpy_bytes"] == {"GDRAM2SRAM": 4 * qb, "SRAM2SRAM": 12 * qb,
                                 "SRAM2NRAM": 16 * 4 * qb, "NRAM2GDRAM": 16 * 4 * qb}
    start, gran = hw["memcpy_startup_cycles"], hw["gdram_cycles_per_granule"] / hw["gdram_granule_bytes"]
    load = start + qb * gran
    send = start + (segments - 1) * hw["strided_segment_cycles"] + math.ceil(qb / hw["sram_bytes_per_cycle"])
    to_nram = start + math.ceil(4 * qb / hw["sram_bytes_per_cycle"])
    store = start + 4 * qb * gran
    # core 0 loads, cores 1..3 send side by side, then every core copies and stores
    assert k["cycles"] == (load + hw["sync_cluster_cycles"] + send + hw["sync_all_cycles"] + to_nram + store
                           + hw["launch_cycles"])
    assert k["instruction_cycles"]["__memcpy"] == 4 * load + 12 * send + 16 * (to_nram + store)


@pytest.mark.parametrize("mode, task, message", [
    ("read_before_sync", 7, r"__memcpy: the SRAM of cluster 0 is read by its task 3 and written by this copy "
                            r"with no __sync_all between them \(dst=SRAM\+8192, bytes=8192\)"),
    ("two_writers", 5, r"__memcpy: the SRAM of cluster 3 was written by __memcpy SRAM2SRAM of task 1 with "
                       r"no __sync_all since \(dst=SRAM\+0, bytes=8192\)"),
    ("bad_cluster", 1, r"__memcpy: id_dst_cluster must be in 0\.\.3 \(clusterDim - 1\) \(id_dst_cluster=4\)"),
    ("bad_dir", 1, r"__memcpy: a copy to another cluster needs dir SRAM2SRAM \(dir=GDRAM2SRAM\)"),
    ("nram_src", 1, r"__memcpy: src must be in SRAM \(src is in NRAM\+0\)"),
])
def test_a_wrong_copy_to_another_cluster_is_a_violation(exe, tmp_path, mode, task, message):
    r = run(exe, mode, tmp_path / "o.bin", check=False)
    assert r.returncode == 87, r.stderr
    assert re.fullmatch(rf"bangemu: error: kernel {mode}_k task {task}: {message}", r.stderr.splitlines()[0]), r.stderr


def test_the_destination_reading_after_the_copy_but_before_sync_all_is_a_violation(exe, tmp_path):
    """The other order: the sender runs first, then the destination cluster reads the bytes
    (cluster 0's task 1 sends to cluster 1 before cluster 1 runs, in read_before_sync)."""
    r = run(exe, "read_before_sync", tmp_path / "o.bin", check=False, cont=True)
    lines = [ln for ln in r.stderr.splitlines() if "bangemu: error" in ln]
    assert any(re.fullmatch(r"bangemu: error: kernel read_before_sync_k task 4: __memcpy: the SRAM of cluster 1 "
                            r"was written by __memcpy SRAM2SRAM of task 1 with no __sync_all since "
                            r"\(operand=SRAM\+0, bytes=32768\)", ln) for ln in lines), r.stderr
