"""What every target family's output shares: compile units as data, the plan's common head."""
from __future__ import annotations

from dataclasses import dataclass

from .. import __version__

LDM_EXIT = 86       # the emulation runtimes' exit status for a hardware-limit violation
BANG_EXIT = 87      # the BANG emulator's exit status for a broken rule (runtime/bang/README.md)


@dataclass(frozen=True)
class CompileUnit:
    """One generated source compiled into the model's library (build.py turns it into a Step)."""
    role: str       # the file's role in the family's FILES ("host", "slave", "device")
    tool: str       # the toolchain's compiler for it ("host_cc", "slave_cc", "device_cc")
    side: str       # whose flags it takes ([flags] host / slave / device)
    deps: tuple     # roles of the generated files it reads (itself first)


def file_names(files, prefix):
    """{role: file name} of a family's FILES patterns for one model prefix."""
    return {role: pattern.format(prefix=prefix) for role, pattern in files.items()}


def plan_head(program, tc):
    """The plan document's fields every family writes: model, I/O, arena."""
    g = program.graph
    return {
        "model": program.name, "prefix": program.prefix, "target": tc.name, "swbuild_version": __version__,
        "inputs": [{"name": t, "shape": list(g.tensors[t].shape), "dtype": g.tensors[t].dtype} for t in program.inputs],
        "outputs": [{"name": t, "shape": list(g.tensors[t].shape), "dtype": g.tensors[t].dtype} for t in program.outputs],
        "arena_bytes": program.memory.arena_bytes, "arena_lower_bound": program.memory.lower_bound,
    }
