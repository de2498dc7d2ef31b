"""Sunway backend (SW26010 / SW26010-Pro, Athread v1 or CRTS): the pass list and the emitter."""
from __future__ import annotations

from ... import __version__
from ...optimizer.fuse import fuse_epilogues
from ...optimizer.ldm import size_buffers, traffic_weight_for
from ...optimizer.memory import inplace_concat, plan_memory
from ...optimizer.partition import split_reductions
from .host import Storage, host_c, model_header, para_header, runner_c, slave_file, weights_asm
from .slave import kernel_c

try:                                    # special kernels (data-dependent Gather, Cast across dtypes) register themselves
    from . import convert as _convert
    from . import gather as _gather
    _gather.register()
    _convert.register()
except ImportError:                     # pragma: no cover
    pass


def _budget(tc, options):
    if options.get("ldm_reserve") not in (None, "auto"):
        return int(tc.hardware["ldm_bytes"]) - int(options["ldm_reserve"])
    return tc.ldm_budget


def _size_all(program, tc, options):
    budget = _budget(tc, options)
    if options.get("traffic_target") not in (None, "", "off"):
        # trade modelled time for main-memory traffic until the program meets the target
        w = traffic_weight_for(program, tc.hardware, budget, options, float(options["traffic_target"]))
        options = dict(options, traffic_weight=w)
        program.notes.append(f"traffic weight {w:g} s/B for traffic <= {options['traffic_target']} x compulsory")
    for k in program.kernels:
        size_buffers(k, tc.hardware, budget, options, program.graph)
    return program


# The per-target pipeline, a plain list of passes (TVM Relax style): Program -> Program.
PIPELINE = [
    lambda p, tc, o: fuse_epilogues(p),
    lambda p, tc, o: inplace_concat(p),     # Concat inputs written in place: copy kernels vanish
    lambda p, tc, o: split_reductions(p, tc, o, _budget(tc, o)),   # reductions split over CPEs
    lambda p, tc, o: plan_memory(p),
    _size_all,                              # tiles, LDM, reorder, DMA plan, SIMD (optimizer/ldm.py)
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
