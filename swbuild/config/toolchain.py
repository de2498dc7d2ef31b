"""Target descriptions: toolchains/<name>.toml → Toolchain.

A new board is a new file. An emulated target names the real one in `emulates` and takes
its hardware numbers and API from it, so the optimizer sees the same chip either way.
"""
from __future__ import annotations

import re
import hashlib
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

from ..support.errors import ToolchainError

RUNTIME_DIR = Path(__file__).resolve().parents[1] / "runtime"


def _search_dirs(project_dir=None):
    dirs = []
    if os.environ.get("SWBUILD_TOOLCHAINS"):
        dirs += [Path(p) for p in os.environ["SWBUILD_TOOLCHAINS"].split(os.pathsep) if p]
    if project_dir is not None:
        dirs.append(Path(project_dir) / "toolchains")
    here = Path(__file__).resolve().parents[1]      # the swbuild package
    dirs.append(here.parent / "toolchains")          # source checkout
    dirs.append(here / "toolchains_data")            # installed wheel
    return [d for d in dirs if d.is_dir()]


def available(project_dir=None):
    """Names of all target descriptions that can be found, sorted."""
    names = set()
    for d in _search_dirs(project_dir):
        names.update(p.stem for p in d.glob("*.toml"))
    return sorted(names)


def bangemu_defines(hw):
    """The toolchain → BANG emulator contract (runtime/bang/README.md): every numeric
    [hardware] key k → BANGEMU_<K>, booleans as 0/1, arch mtp_NNN → BANGEMU_ARCH=NNN."""
    out = []
    for k, v in sorted(hw.items()):
        if k == "arch":
            out.append(f"BANGEMU_ARCH={int(str(v).rsplit('_', 1)[1])}")
        elif isinstance(v, bool):
            out.append(f"BANGEMU_{k.upper()}={int(v)}")
        elif isinstance(v, (int, float)):
            out.append(f"BANGEMU_{k.upper()}={v}")
    return out


# The Sunway hardware rules the emulator enforces: toolchain [hardware] key -> the
# -D define libswemu.a and its headers are built with.  Every other key of a Sunway file is
# a number for the optimizer or the cost model (SWEMU_MODEL_KEYS); a key in neither set
# fails tests/runtime/test_rules.py, so a new rule cannot be added without enforcing it.
SWEMU_RULES = {
    "ldm_bytes": "SWEMU_LDM_BYTES",      # LDM capacity per CPE (heap + static + stack)
    "cpes": "SWEMU_CPES",                # CPE threads
    "dma_align_bytes": "SWEMU_DMA_ALIGN",  # DMA addresses, len, bsize, stride
    "simd_lanes": "SWEMU_SIMD_LANES",    # lanes of simd_type: vector alignment = lanes * 4 B
    "regcomm_buffer_entries": "SWEMU_REGCOMM_DEPTH",  # register communication receive buffer
}
SWEMU_MODEL_KEYS = {
    "mesh", "ldm_reserve_bytes", "clock_hz", "peak_flops_per_cpe", "simd_type",
    "mem_bandwidth_bytes_per_s", "dma_curve", "dma_fit_peak_bytes_per_s", "dma_fit_half_bytes",
    "spawn_seconds", "fma_per_cycle_simd", "fma_per_cycle_scalar", "ldm_loads_per_cycle",
    "dual_issue", "simd_unaligned_load_cost", "loop_overhead_cycles", "div_cycles",
    "transcendental_cycles", "vector_registers", "dma_overlap", "roofline_bytes_per_s",
    "row_broadcast", "row_sync_cycles", "array_broadcast", "array_sync_cycles", "regcomm_latency_cycles",
    "regcomm_message_cycles", "rma_latency_cycles", "rma_bytes_per_cycle",
    "rma_broadcast",
    # MPI cost model (swbuild/driver/mpi.py): network between core groups and between nodes
    "net_bandwidth_bytes_per_s", "net_latency_s", "noc_bandwidth_bytes_per_s", "noc_latency_s",
}
# Rules the compiler enforces before any code runs: key -> the module (under swbuild/) that reads it.
COMPILER_RULES = {
    "core_groups_per_chip": "driver/mpi.py",        # core_groups > this is refused (use nodes=)
    "mem_bytes_per_cg": "driver/compiler.py",       # weights + arena + I/O of one rank must fit
}


# BANG: every numeric key becomes a BANGEMU_<KEY> define (bangemu_defines); these two are
# documentation of the chip the cycle counts stand for, not rules (runtime/bang/README.md).
BANGEMU_MODEL_KEYS = {"clock_hz", "mem_bandwidth_bytes_per_s"}


def unenforced_keys(family, hw, runtime_text):
    """Keys of a [hardware] table that neither a model number nor enforced by the emulator
    (their define must occur in `runtime_text`, the runtime's sources outside the defaults)."""
    bad = []
    for k in sorted(hw):
        if family == "sunway":
            if k in SWEMU_MODEL_KEYS:
                continue
            if k in COMPILER_RULES:
                if f'"{k}"' not in (Path(__file__).parents[1] / COMPILER_RULES[k]).read_text():
                    bad.append(k)
                continue
            if k not in SWEMU_RULES or not re.search(rf"\b{SWEMU_RULES[k]}\b", runtime_text):
                bad.append(k)
        elif family == "diannao" and k not in BANGEMU_MODEL_KEYS:
            name = "BANGEMU_ARCH" if k == "arch" else f"BANGEMU_{k.upper()}"
            if not re.search(rf"\b{name}\b", runtime_text):
                bad.append(k)
    return bad


# Byte-level checks of plain accesses of slave code (runtime/athread/src/access.c): gcc calls
# __asan_{load,store}*_noabort before each access.  Stores are checked by default (they are
# what corrupts another CPE's LDM or races in main memory; vgg16 about 1.4x); loads too with
# SWEMU_INSTRUMENT=1 at build time (about 4-7x), none with SWEMU_INSTRUMENT=0.
SWEMU_INSTRUMENT_FLAGS = ["-fsanitize=kernel-address", "--param", "asan-instrumentation-with-call-threshold=0",
                          "--param", "asan-stack=0", "--param", "asan-globals=0"]
SWEMU_STORE_FLAGS = SWEMU_INSTRUMENT_FLAGS + ["--param", "asan-instrument-reads=0"]
SWEMU_INSTRUMENT_LEVELS = {"0": [], "stores": SWEMU_STORE_FLAGS, "1": SWEMU_INSTRUMENT_FLAGS}


def swemu_instrument_flags(level=None):
    """Slave flags for an instrumentation level: SWEMU_INSTRUMENT (0, stores = default, 1)."""
    level = os.environ.get("SWEMU_INSTRUMENT", "stores") if level is None else level
    if level not in SWEMU_INSTRUMENT_LEVELS:
        raise ToolchainError(f"SWEMU_INSTRUMENT={level}: expected 0 (no access checks), "
                             "stores (the default: plain stores checked) or 1 (loads and stores)")
    return list(SWEMU_INSTRUMENT_LEVELS[level])


def swemu_defines(hw):
    """The toolchain -> Athread emulator contract: one define per rule of SWEMU_RULES."""
    return [f"{d}={int(hw[k])}" for k, d in SWEMU_RULES.items() if k in hw]


# The cost numbers the Athread emulator's modelled clock runs on (runtime/athread/src/timing.c):
# toolchain key -> define. Cost-model numbers still (SWEMU_MODEL_KEYS); `swbuild calibrate`
# measured under emulation recovers them.
SWEMU_TIMING = {
    "clock_hz": "SWEMU_CLOCK_HZ", "dma_fit_peak_bytes_per_s": "SWEMU_DMA_FIT_PEAK",
    "dma_fit_half_bytes": "SWEMU_DMA_FIT_HALF", "spawn_seconds": "SWEMU_SPAWN_SECONDS",
    "row_sync_cycles": "SWEMU_ROW_SYNC_CYCLES", "array_sync_cycles": "SWEMU_ARRAY_SYNC_CYCLES",
    "regcomm_latency_cycles": "SWEMU_REGCOMM_LATENCY_CYCLES",
    "regcomm_message_cycles": "SWEMU_REGCOMM_MESSAGE_CYCLES",
    "rma_latency_cycles": "SWEMU_RMA_LATENCY_CYCLES", "rma_bytes_per_cycle": "SWEMU_RMA_BYTES_PER_CYCLE",
}


def swemu_timing_defines(hw):
    """The modelled clock's numbers as defines; `dma_curve` as two comma lists (no braces:
    a Makefile's shell would expand them)."""
    out = [f"{d}={float(hw[k])!r}" for k, d in SWEMU_TIMING.items() if k in hw]
    if hw.get("dma_curve"):
        curve = sorted(hw["dma_curve"])
        out += ["SWEMU_DMA_CURVE_BYTES=" + ",".join(repr(float(s)) for s, _ in curve),
                "SWEMU_DMA_CURVE_BPS=" + ",".join(repr(float(b)) for _, b in curve)]
    return out


def find_file(name, project_dir=None):
    for d in _search_dirs(project_dir):
        p = d / f"{name}.toml"
        if p.is_file():
            return p
    raise ToolchainError(f"unknown target '{name}': no toolchains/{name}.toml "
                         f"(known: {', '.join(available(project_dir)) or 'none'})")


@dataclass
class Toolchain:
    name: str
    path: Path
    family: str
    api: str
    chip: str
    emulated: bool
    description: str
    compilers: dict
    flags: dict
    hardware: dict
    emulation: dict = field(default_factory=dict)
    sha256: str = ""
    emulates: str = ""          # the real target an emulated one stands for
    base_path: Path | None = None  # its toolchain file (part of the signature)

    # -- hardware numbers the optimizer reads -------------------------------------------
    @property
    def cores(self) -> int:
        return int(self.hardware.get("cores", self.hardware.get("cpes")))

    @property
    def ldm_budget(self) -> int:
        """Bytes of local memory a kernel's buffers may use per core."""
        return int(self.hardware["ldm_bytes"]) - int(self.hardware.get("ldm_reserve_bytes", 0))

    @property
    def nram_budget(self) -> int:
        """DianNao: bytes of NRAM per core a program may declare (cncc keeps a reserve)."""
        return int(self.hardware["nram_bytes"]) - int(self.hardware.get("nram_reserve_bytes", 0))

    @property
    def wram_budget(self) -> int:
        return int(self.hardware["wram_bytes"])

    @property
    def sram_budget(self) -> int:
        return int(self.hardware["sram_bytes"]) - int(self.hardware.get("sram_reserve_bytes", 0))

    # -- commands -----------------------------------------------------------------------
    def argv(self, tool, overrides=None):
        """argv prefix for `tool` (host_cc, slave_cc, asm, link, ar), with the user's
        compiler path applied (SCons variable or environment variable `path_variable`)."""
        raw = [a.replace("{python}", sys.executable) for a in self.compilers[tool]]
        path = self.compiler_path(overrides)
        primary = self.compilers.get("primary")
        if path and raw and raw[0] == primary:
            raw[0] = path
        return raw

    def compiler_path(self, overrides=None):
        var = self.compilers.get("path_variable")
        if not var:
            return None
        overrides = overrides or {}
        return overrides.get(var) or os.environ.get(var) or None

    def check_compilers(self, overrides=None):
        """Raise a ToolchainError naming the missing compiler and how to point at it."""
        primary = self.compilers.get("primary")
        if not primary:
            return
        path = self.compiler_path(overrides)
        found = (path and os.path.isfile(path) and os.access(path, os.X_OK)) or \
            (not path and shutil.which(primary))
        if found:
            return
        var = self.compilers.get("path_variable")
        how = (f"install it, or point swbuild at it with {var}=/path/to/{primary} "
               f"(on the scons command line or in the environment)") if var else "install it"
        given = f" ({var}={path} is not an executable file)" if path else " (not on PATH)"
        raise ToolchainError(f"target {self.name}: compiler '{primary}' not found{given}; {how}. "
                             f"The generated sources are written; only compiling needs {primary}.")

    def runtime_include_dirs(self):
        rt = self.emulation.get("runtime")
        return [RUNTIME_DIR / rt / "include"] if rt else []

    def runtime_sources(self):
        rt = self.emulation.get("runtime")
        return sorted((RUNTIME_DIR / rt / "src").glob("*.c")) if rt else []

    def runtime_slave_flags(self):
        """Extra flags for slave objects of an emulated Sunway target (SWEMU_INSTRUMENT)."""
        if self.emulation.get("runtime") == "athread":
            return swemu_instrument_flags()
        return []

    def runtime_defines(self):
        """Preprocessor definitions that select the emulated chip's API and limits."""
        if not self.emulated:
            return []
        api = {"athread": "SWEMU_API_V1", "crts": "SWEMU_API_CRTS"}.get(self.api)
        out = [api] if api else []
        rt = RUNTIME_DEFINES.get(self.emulation.get("runtime"))
        out += rt(self) if rt else []
        return out + list(self.emulation.get("defines", []))


# The hardware numbers each emulation runtime is compiled with, by runtime name.
RUNTIME_DEFINES = {
    "athread": lambda tc: swemu_defines(tc.hardware) + swemu_timing_defines(tc.hardware),
    "bang": lambda tc: bangemu_defines(tc.hardware),
}


def load(name, project_dir=None) -> Toolchain:
    path = find_file(name, project_dir)
    data = _read(path)
    base = {}
    if data.get("emulates"):
        base = _read(find_file(data["emulates"], project_dir))
    hardware = dict(base.get("hardware", {}))
    hardware.update(data.get("hardware", {}))
    for key in ("name", "compilers", "flags"):
        if key not in data:
            raise ToolchainError(f"{path}: missing [{key}]")
    digest = hashlib.sha256(path.read_bytes())
    if data.get("emulates"):
        digest.update(find_file(data["emulates"], project_dir).read_bytes())
    return Toolchain(
        name=data["name"], path=path,
        family=data.get("family", base.get("family", "")),
        api=data.get("api", base.get("api", "")),
        chip=data.get("chip", base.get("chip", "")),
        emulated=bool(data.get("emulated", False)),
        description=data.get("description", ""),
        compilers=data["compilers"], flags=data["flags"], hardware=hardware,
        emulation=data.get("emulation", {}), sha256=digest.hexdigest(),
        emulates=data.get("emulates", ""),
        base_path=find_file(data["emulates"], project_dir) if data.get("emulates") else None,
    )


def _read(path):
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ToolchainError(f"{path}: {e}") from None
