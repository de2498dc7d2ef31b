"""Helpers for the BANG emulator tests: toolchain numbers → defines, compile, run."""
import os
import subprocess
from pathlib import Path

from swbuild.config import toolchain

HERE = Path(__file__).resolve().parent
INCLUDE = HERE.parents[1] / "swbuild" / "runtime" / "bang" / "include"

# MLU270 numbers (the comment in toolchains/diannao.toml): arch switches float conv off.
MTP_270 = {"arch": "mtp_270", "nram_bytes": 524288, "sram_bytes": 2097152,
           "gdram_cycles_per_granule": 10, "conv_float_macs_per_cycle": 0}


def hardware(**overrides):
    hw = dict(toolchain.load("diannao-emu").hardware)
    hw.update(overrides)
    return hw


bangemu_defines = toolchain.bangemu_defines   # also for the MLU270 / override builds below


def compile_mlu(src, exe, hw, extra=()):
    tc = toolchain.load("diannao-emu")
    argv = (tc.compilers["device_cc"] + tc.flags["device"] + ["-Wall", "-Werror"]
            + [f"-D{d}" for d in bangemu_defines(hw)] + list(extra)
            + ["-I", str(INCLUDE), str(src), "-o", str(exe)] + tc.flags["link"] + tc.flags["libs"])
    r = subprocess.run(argv, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(argv)}\n{r.stderr}"
    return exe


def run(exe, *args, stats=None, cont=False, check=True):
    env = dict(os.environ)
    env.pop("BANGEMU_STATS", None)
    env.pop("BANGEMU_ON_VIOLATION", None)
    if stats:
        env["BANGEMU_STATS"] = str(stats)
    if cont:
        env["BANGEMU_ON_VIOLATION"] = "continue"
    r = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, env=env, timeout=120)
    if check:
        assert r.returncode == 0, r.stderr
    return r
