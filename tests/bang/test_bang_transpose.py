"""__bang_transpose in the BANG emulator: the transpose of 32-bit and 8-bit matrices against
numpy, its cycles from the toolchain's cost table, and its rules (sizes, overlap, space,
alignment) each caught as one fatal line."""
import json
import math
import re

import numpy as np
import pytest

from bangemu_build import HERE, compile_mlu, hardware, run


@pytest.fixture(scope="module")
def exe(tmp_path_factory):
    return compile_mlu(HERE / "transpose.mlu", tmp_path_factory.mktemp("transpose") / "transpose", hardware())


def test_transpose_values_and_cycles(exe, tmp_path):
    rng = np.random.default_rng(1)
    a32 = rng.standard_normal((16, 48)).astype(np.float32)
    a8 = rng.integers(-128, 128, (64, 128)).astype(np.int8)
    a32.tofile(tmp_path / "in32")
    a8.tofile(tmp_path / "in8")
    stats = tmp_path / "s.json"
    run(exe, "ok", tmp_path, stats=stats)
    assert np.array_equal(np.fromfile(tmp_path / "out32", np.float32).reshape(48, 16), a32.T)
    assert np.array_equal(np.fromfile(tmp_path / "out8", np.int8).reshape(128, 64), a8.T)
    hw = hardware()
    k = json.loads(stats.read_text())["kernels"][0]
    assert k["violations"] == 0 and k["instructions"]["__bang_transpose"] == 2
    per = [hw["vector_startup_cycles"] + math.ceil(b / hw["vector_bytes_per_cycle"]) * hw["transpose_cycles_per_chunk"]
           for b in (16 * 48 * 4, 64 * 128)]
    assert k["instruction_cycles"]["__bang_transpose"] == sum(per)


FATAL = {
    "size": re.escape("__bang_transpose: height * sizeof(T) and width * sizeof(T) must be multiples of 64 B "
                      "(height=3, width=48, sizeof(T)=4)"),
    "overlap": r"__bang_transpose: src and dst must not overlap \(dst=NRAM\+\d+, src=NRAM\+\d+, bytes=1024\)",
    "space": r"__bang_transpose: src must be in NRAM \(src is in GDRAM\)",
    "align": r"__bang_transpose: NRAM operands must be 64-B aligned \(dst=NRAM\+\d+\)",
}


@pytest.mark.parametrize("case", sorted(FATAL))
def test_transpose_rules(exe, case):
    r = run(exe, case, check=False)
    assert r.returncode == 87
    assert re.fullmatch(rf"bangemu: error: kernel {case} task 0: {FATAL[case]}\n", r.stderr), r.stderr
