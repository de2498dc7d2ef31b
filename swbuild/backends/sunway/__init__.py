"""Sunway backend (SW26010 / SW26010-Pro, Athread v1 or CRTS): the pass list and the emitter."""
from __future__ import annotations

from ... import __version__
from ...optimizer.fuse import fuse_epilogues
from ...optimizer.ldm import size_buffers
from ...optimizer.memory import plan_memory
from .host import Storage, host_c, model_header, para_header, runner_c, slave_file, weights_asm
from .slave import kernel_c


def _size_all(program, tc, options):
    budget = tc.ldm_budget
    if options.get("ldm_reserve") not in (None, "auto"):
        budget = int(tc.hardware["ldm_bytes"]) - int(options["ldm_reserve"])
    for k in program.kernels:
        size_buffers(k, tc.hardware, budget)
    return program


# The per-target pipeline, a plain list of passes (TVM Relax style): Program -> Program.
PIPELINE = [
    lambda p, tc, o: fuse_epilogues(p),
    lambda p, tc, o: plan_memory(p),
    _size_all,
]


def optimize(program, tc, options):
    for pass_ in PIPELINE:
        program = pass_(program, tc, options)
    return program


def render(program, tc):
    """{file name: bytes} of every generated source (the lock and plan are added by the caller)."""
    from ...build import generated_files
    v = __version__
    storage = Storage(program)
    f = generated_files(program.prefix, "sunway")
    kernels = [kernel_c(k, tc.cores) for k in program.kernels]
    return {
        f["host"]: host_c(program, storage, tc, v).encode(),
        f["slave"]: slave_file(program, tc, v, kernels).encode(),
        f["para"]: para_header(program, v).encode(),
        f["header"]: model_header(program, storage, v).encode(),
        f["weights"]: bytes(storage.blob),
        f["weights_asm"]: weights_asm(program, storage).encode(),
        f["runner"]: runner_c(program, storage, v).encode(),
    }
