"""The target registry: each target family (a toolchain file's `family`) and what it brings.

compiler.py, build.py, check.py, cli.py and the SCons tool ask `family(name)` for the
pipeline, the printer, the plan and report builders, the generated files and how they
compile; nothing outside this module switches on a family's name. A new family is a package
`backends/<family>/` (pipeline.py, outputs.py, report.py, ...) and one entry in FAMILIES.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import ToolchainError
from .common import BANG_EXIT, LDM_EXIT, file_names
from .diannao import outputs as diannao_outputs
from .diannao import pipeline as diannao_pipeline
from .diannao import report as diannao_report
from .diannao import summary as diannao_summary
from .sunway import mpi as sunway_mpi
from .sunway import outputs as sunway_outputs
from .sunway import pipeline as sunway_pipeline
from .sunway import report as sunway_report
from .sunway import summary as sunway_summary


@dataclass(frozen=True)
class Family:
    name: str
    pipeline: list          # passes (Program, Target, Options) -> Program, in the order they run
    state: type             # the dataclass the passes keep in program.target_state
    render: Callable        # (Program, Target) -> {file name: bytes} of the generated sources
    plan: Callable          # (Program, Target) -> the plan document (plan.json)
    report: Callable        # (plan, emulator stats, Target) -> the report document
    findings: Callable      # (plan, emulator stats) -> what `swbuild check` judges
    plot: Callable          # (report, Target, path) -> PNG, or None
    files: dict             # role -> file name pattern ("{prefix}_host.c"), in emitter order
    units: tuple            # CompileUnit per generated source compiled into lib<prefix>.a
    exit_reasons: dict      # runner exit status -> what the emulator rejected
    mpi_render: Callable = None   # (Program, Target, mpi.Layout, version) -> files of a build over MPI ranks
    summary: object = None        # module: report_lines(report), kernel_note(plan kernel), OPS_NOTE (for people)

    def generated_files(self, prefix):
        """{role: file name} of every file `swbuild compile` writes for a model."""
        return file_names(self.files, prefix)

    def optimize(self, program, target, options):
        """Run the pipeline over a lowered program."""
        from ..progress import Steps
        program.target_state = self.state()
        with Steps(len(self.pipeline), program.name) as p:
            for run in self.pipeline:
                p.step(f"{run.__name__} ({len(program.kernels)} kernels)")
                program = run(program, target, options)
        return program


FAMILIES = {
    "sunway": Family("sunway", sunway_pipeline.PIPELINE, sunway_pipeline.STATE, sunway_outputs.render,
                     sunway_outputs.plan, sunway_report.build_report, sunway_report.emulator_findings,
                     sunway_report.plot_report, sunway_outputs.FILES, sunway_outputs.UNITS,
                     {LDM_EXIT: "emulated hardware limit violated"}, sunway_mpi.render, sunway_summary),
    "diannao": Family("diannao", diannao_pipeline.PIPELINE, diannao_pipeline.STATE, diannao_outputs.render,
                      diannao_outputs.plan, diannao_report.build_report, diannao_report.emulator_findings,
                      diannao_report.plot_report, diannao_outputs.FILES, diannao_outputs.UNITS,
                      {LDM_EXIT: "emulated hardware limit violated", BANG_EXIT: "emulated BANG rule violated"},
                      summary=diannao_summary),
}


def family(name, target=None):
    """The registered family `name`; a ToolchainError naming the target when there is none."""
    if name not in FAMILIES:
        who = f"target {target}: " if target else ""
        raise ToolchainError(f"{who}no backend for target family '{name}' (known: {', '.join(sorted(FAMILIES))})")
    return FAMILIES[name]


def family_of(tc):
    return family(tc.family, tc.name)


def family_of_plan(plan):
    """The family that wrote a plan document (Sunway plans carry no `family` field)."""
    return family(plan.get("family", "sunway"))
