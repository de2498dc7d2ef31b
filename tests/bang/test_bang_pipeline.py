"""The emulator's queues (tests/bang/pipeline.mlu): copies issued with __memcpy_async run on
the IO queue, on-chip ones on the move queue, compute on the compute queue, overlapping until
a __sync_* joins them; a synchronous __memcpy blocks. The same copies and compute cost their sum serialised and
prologue + per-step maximum + epilogue pipelined (numbers from toolchains/diannao.toml),
and a copy that races compute is reported."""
import json
import math
import re

import numpy as np
import pytest

from bangemu_build import HERE, compile_mlu, hardware, run

TILE = 4096   # floats per tile (pipeline.mlu)


@pytest.fixture(scope="module")
def exe(tmp_path_factory):
    return compile_mlu(HERE / "pipeline.mlu", tmp_path_factory.mktemp("pipe") / "pipeline", hardware())


def costs(hw, reps):
    """Cycles of one tile's load, compute (reps vector multiplies) and store on one core."""
    nbytes = TILE * 4
    copy = hw["memcpy_startup_cycles"] + nbytes // hw["gdram_granule_bytes"] * hw["gdram_cycles_per_granule"]
    vec = hw["vector_startup_cycles"] + math.ceil(nbytes / hw["vector_bytes_per_cycle"])
    return copy, reps * vec, copy


def launch(exe, tmp_path, mode, steps, reps):
    out, stats = tmp_path / f"{mode}.bin", tmp_path / f"{mode}.json"
    run(exe, mode, steps, reps, out, stats=stats)
    got = json.loads(stats.read_text())
    assert got["violations"] == 0
    (k,) = got["kernels"]
    x = (np.arange(16 * steps * TILE) % 1000 - 500).astype(np.float32)
    np.testing.assert_array_equal(np.fromfile(out, np.float32), x * np.float32(2.0 ** reps))
    return k


@pytest.mark.parametrize("steps, reps", [(2, 1), (6, 2), (6, 16), (8, 5)])   # IO-bound to compute-bound
def test_serialised_costs_the_sum_pipelined_the_per_step_maximum(exe, tmp_path, steps, reps):
    hw = hardware()
    L, C, S = costs(hw, reps)
    serial = launch(exe, tmp_path, "serial", steps, reps)
    piped = launch(exe, tmp_path, "pipelined", steps, reps)
    assert serial["cycles"] == steps * (L + C + S) + hw["launch_cycles"]
    prologue = L + max(L, C)
    epilogue = max(S, C) + S
    assert piped["cycles"] == prologue + (steps - 2) * max(S + L, C) + epilogue + hw["launch_cycles"]
    assert piped["cycles"] < serial["cycles"]
    # the same work: copies, bytes and compute instructions
    assert piped["memcpy_bytes"] == serial["memcpy_bytes"] == {"GDRAM2NRAM": 16 * steps * TILE * 4,
                                                              "NRAM2GDRAM": 16 * steps * TILE * 4}
    assert piped["instructions"] == {"__memcpy_async": 16 * 2 * steps, "__bang_mul_scalar": 16 * steps * reps}
    assert serial["instructions"] == {"__memcpy": 16 * 2 * steps, "__bang_mul_scalar": 16 * steps * reps}
    assert piped["instruction_cycles"]["__memcpy_async"] == serial["instruction_cycles"]["__memcpy"]


@pytest.mark.parametrize("reps", [1, 12])
def test_on_chip_copies_overlap_compute_until_sync_move(exe, tmp_path, reps):
    hw = hardware()
    L, C, S = costs(hw, reps)
    move = hw["memcpy_startup_cycles"] + math.ceil(TILE * 4 / hw["nram_bytes_per_cycle"])
    add = costs(hw, 1)[1]
    out, stats = tmp_path / "m.bin", tmp_path / "m.json"
    run(exe, "move", 2, reps, out, stats=stats)
    (k,) = json.loads(stats.read_text())["kernels"]
    assert k["violations"] == 0
    assert k["cycles"] == L + max(move, C) + add + S + hw["launch_cycles"]
    x = (np.arange(16 * TILE) % 1000 - 500).astype(np.float32)   # task t: tile t
    got = np.fromfile(out, np.float32)[:16 * TILE]
    np.testing.assert_array_equal(got, x * np.float32(2.0 ** reps) + x)


@pytest.mark.parametrize("mode, message", [
    ("move_unsynced", r"__bang_mul_scalar: src reads the destination of __memcpy_async #1 \(NRAM2NRAM\) "
                      r"before __sync_move \(src=NRAM\+\d+, bytes=16384\)"),
    ("store_before_compute", r"__memcpy_async: src reads what __bang_mul_scalar still writes before __sync_compute "
                             r"\(src=NRAM\+\d+, bytes=16384\)"),
    ("load_over_compute", r"__memcpy_async: dst overwrites what __bang_mul_scalar still reads before __sync_compute "
                          r"\(dst=NRAM\+\d+, bytes=16384\)"),
    ("compute_before_load", r"__bang_mul_scalar: src reads the destination of __memcpy_async #1 \(GDRAM2NRAM\) "
                            r"before __sync_io \(src=NRAM\+\d+, bytes=16384\)"),
])
def test_a_copy_racing_compute_is_a_violation(exe, tmp_path, mode, message):
    r = run(exe, mode, 2, 1, tmp_path / "o.bin", check=False)
    assert r.returncode == 87, r.stderr
    assert re.fullmatch(rf"bangemu: error: kernel {mode}_k task 0: {message}", r.stderr.splitlines()[0]), r.stderr
