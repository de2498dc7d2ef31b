"""Every numeric rule of a toolchain file is enforced by the emulator from the file's value:
a [hardware] key is either a number of the optimizer / cost model (toolchain.SWEMU_MODEL_KEYS,
BANGEMU_MODEL_KEYS) or a rule whose define the runtime's code reads.  Adding a rule to a
toolchain file without enforcing it fails here."""
import re

import pytest

from swbuild.config import toolchain
from swbuild.config.toolchain import RUNTIME_DIR

DEFAULT = re.compile(r"^\s*#\s*(ifndef|define)\s+(SWEMU|BANGEMU)_\w+(\s+[-\w.()*/ ]+)?\s*$")


def runtime_text(rt):
    """The runtime's sources without the `#ifndef X / #define X default` lines."""
    files = sorted((RUNTIME_DIR / rt).rglob("*.[ch]"))
    return "\n".join(ln for f in files for ln in f.read_text().splitlines() if not DEFAULT.match(ln))


def real_targets():
    return [n for n in toolchain.available() if toolchain.load(n).hardware and not toolchain.load(n).emulated]


@pytest.mark.parametrize("name", real_targets())
def test_every_hardware_key_is_enforced_or_a_model_number(name):
    tc = toolchain.load(name)
    rt = {"sunway": "athread", "diannao": "bang"}[tc.family]
    assert toolchain.unenforced_keys(tc.family, tc.hardware, runtime_text(rt)) == []


def test_a_new_rule_without_enforcement_is_caught():
    hw = dict(toolchain.load("sunway").hardware, dma_size_multiple_bytes=8)
    assert toolchain.unenforced_keys("sunway", hw, runtime_text("athread")) == ["dma_size_multiple_bytes"]
    hw = dict(toolchain.load("diannao").hardware, sram_align_bytes=64)
    assert toolchain.unenforced_keys("diannao", hw, runtime_text("bang")) == ["sram_align_bytes"]
    # GDRAM rules the chip documents nowhere yet are ready: stating them enforces them
    hw = dict(toolchain.load("diannao").hardware, gdram_align_bytes=64, gdram_size_multiple_bytes=64)
    assert toolchain.unenforced_keys("diannao", hw, runtime_text("bang")) == []
    # a rule the table names but the runtime never reads is caught as well
    assert toolchain.unenforced_keys("sunway", {"dma_align_bytes": 4}, "") == ["dma_align_bytes"]


@pytest.mark.parametrize("name, want", [
    ("sunway-emu", {"SWEMU_LDM_BYTES": "65536", "SWEMU_CPES": "64", "SWEMU_DMA_ALIGN": "4", "SWEMU_SIMD_LANES": "4",
                    "SWEMU_REGCOMM_DEPTH": "4"}),
    ("sunway-pro-emu", {"SWEMU_LDM_BYTES": "262144", "SWEMU_CPES": "64", "SWEMU_DMA_ALIGN": "4", "SWEMU_SIMD_LANES": "8"}),
])
def test_emulator_defines_come_from_the_file(name, want):
    got = dict(d.split("=", 1) for d in toolchain.load(name).runtime_defines() if "=" in d)
    assert {k: got[k] for k in want} == want
    assert toolchain.swemu_defines({"dma_align_bytes": 8, "ldm_bytes": 131072}) == \
        ["SWEMU_LDM_BYTES=131072", "SWEMU_DMA_ALIGN=8"]


def test_compiler_rules_are_read_where_the_table_says():
    hw = dict(toolchain.load("sunway").hardware)
    assert {"core_groups_per_chip", "mem_bytes_per_cg"} <= set(hw)
    assert toolchain.unenforced_keys("sunway", hw, runtime_text("athread")) == []
    saved = dict(toolchain.COMPILER_RULES)
    try:   # pointing a rule at a module that never reads it is caught
        toolchain.COMPILER_RULES["mem_bytes_per_cg"] = "names.py"
        assert toolchain.unenforced_keys("sunway", hw, runtime_text("athread")) == ["mem_bytes_per_cg"]
    finally:
        toolchain.COMPILER_RULES.update(saved)


def test_main_memory_per_core_group_is_a_rule(tmp_path):
    """A program whose weights + arena + I/O exceed mem_bytes_per_cg is refused before any C."""
    import dataclasses

    from onnx import helper
    from onnx_builders import make, rand

    from swbuild.driver import compiler
    from swbuild.support.errors import SwbuildError

    w = rand(64, 64)
    m = make([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", [4, 64])], [("y", [4, 64])], inits=[("w", w)])
    path = tmp_path / "mm.onnx"
    path.write_bytes(m.SerializeToString())
    tc = toolchain.load("sunway-emu")
    program, _ = compiler.compile_to(path, tc, tmp_path / "ok", "mm")
    weights, arena, io = compiler.main_memory_bytes(program)
    assert weights == w.nbytes and io == 2 * 4 * 64 * 4
    small = dataclasses.replace(tc, hardware=dict(tc.hardware, mem_bytes_per_cg=weights + io - 1))
    with pytest.raises(SwbuildError, match=r"model mm: needs \d+ bytes of main memory per core group .*mem_bytes_per_cg"):
        compiler.compile_to(path, small, tmp_path / "no", "mm")
    assert not (tmp_path / "no").exists() or not any((tmp_path / "no").iterdir())


def test_slave_objects_check_plain_stores_by_default(monkeypatch):
    monkeypatch.delenv("SWEMU_INSTRUMENT", raising=False)
    flags = toolchain.load("sunway-emu").runtime_slave_flags()
    assert "-fsanitize=kernel-address" in flags and flags[-2:] == ["--param", "asan-instrument-reads=0"]
    assert toolchain.load("sunway-pro-emu").runtime_slave_flags() == flags
    assert toolchain.load("diannao-emu").runtime_slave_flags() == []
    monkeypatch.setenv("SWEMU_INSTRUMENT", "1")
    assert toolchain.load("sunway-emu").runtime_slave_flags() == toolchain.SWEMU_INSTRUMENT_FLAGS
    monkeypatch.setenv("SWEMU_INSTRUMENT", "0")
    assert toolchain.load("sunway-emu").runtime_slave_flags() == []


def test_unknown_instrument_level_is_refused(monkeypatch):
    monkeypatch.setenv("SWEMU_INSTRUMENT", "loads")
    with pytest.raises(toolchain.ToolchainError, match=r"SWEMU_INSTRUMENT=loads: expected 0 .*, stores .* or 1"):
        toolchain.load("sunway-emu").runtime_slave_flags()
