"""What a Sunway build writes: the generated files, how they compile, the plan document."""
from __future__ import annotations

from ...support.version import __version__
from ..common import CompileUnit, file_names, plan_head
from .cost.predict import Simulations, predict_program
from .passes.prefetch import adjust_entries
from .emit.host import Storage, host_c, model_header, para_header, runner_c, weights_asm
from .emit.slave import kernel_c
from .emit.slave_file import slave_file
from .passes.stitch import launch_c, launch_entries
from .emit.cpe_api import api_of

FILES = {"host": "{prefix}_host.c", "slave": "{prefix}_slave.c", "para": "{prefix}_para.h", "header": "{prefix}.h",
         "weights": "{prefix}_weights.bin", "weights_asm": "{prefix}_weights.S", "runner": "{prefix}_runner.c",
         "plan": "{prefix}.plan.json", "lock": "{prefix}.lock.json"}

UNITS = (CompileUnit("host", "host_cc", "host", ("host", "para", "header")),
         CompileUnit("slave", "slave_cc", "slave", ("slave", "para")))


def render(program, tc):
    """{file name: bytes} of every generated source (the lock and plan are added by the caller)."""
    v = __version__
    storage = Storage(program)
    f = file_names(FILES, program.prefix)
    kernels = [kernel_c(k, tc.cores, rma=api_of(tc).rma) for k in program.kernels]
    by = {k.name: k for k in program.kernels}
    kernels += [launch_c(ln, api_of(tc), by) for ln in program.target_state.launches or () if ln.stitched]
    return {
        f["host"]: host_c(program, storage, tc, v).encode(),
        f["slave"]: slave_file(program, tc, v, kernels).encode(),
        f["para"]: para_header(program, v).encode(),
        f["header"]: model_header(program, storage, v).encode(),
        f["weights"]: storage.blob,      # a WeightsBlob: write_outputs streams it to the file
        f["weights_asm"]: weights_asm(program, storage).encode(),
        f["runner"]: runner_c(program, storage, v, tc.hardware["clock_hz"]).encode(),
    }


def plan(program, tc):
    """What the compiler predicts for each kernel: read by check and report."""
    sims = Simulations(tc.hardware, tc.cores)     # each kernel simulated once for both
    entries = adjust_entries(program, predict_program(program, tc, sims), tc, sims)
    launches = program.target_state.launches
    if launches:
        entries = launch_entries(entries, launches, tc.hardware, tc.cores)
    blocked = program.target_state.channel_blocks
    return dict(plan_head(program, tc), kernels=entries) | ({"channel_blocks": blocked} if blocked is not None else {})
