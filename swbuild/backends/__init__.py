"""The target registry: each target family (a toolchain file's `family`) and what it brings.

compiler.py, build.py, check.py, cli.py and the SCons tool ask `family(name)` for the
pipeline, the printer, the plan and report builders, the generated files and how they
compile; nothing outside this module switches on a family's name. A new family is a package
`backends/<family>/` (pipeline.py, outputs.py, report.py, ...) and one entry in FAMILIES.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..support.errors import ToolchainError
from .common import BANG_EXIT, LDM_EXIT, file_names


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
    options_for: Callable = None  # (Program, options) -> the options its pipeline runs with (a copy), or None

    def generated_files(self, prefix):
        """{role: file name} of every file `swbuild compile` writes for a model."""
        return file_names(self.files, prefix)

    def optimize(self, program, target, options):
        """Run the pipeline over a lowered program."""
        from ..support.progress import Steps
        program.target_state = self.state()
        if self.options_for is not None:
            options = self.options_for(program, options)
        with Steps(len(self.pipeline), program.name) as p:
            for run in self.pipeline:
                p.step(f"{run.__name__} ({len(program.kernels)} kernels)")
                program = run(program, target, options)
        return program


def _sunway():
    from .sunway.mpi import render as mpi
    from .sunway import outputs, pipeline, report, summary
    return Family("sunway", pipeline.PIPELINE, pipeline.STATE, outputs.render, outputs.plan, report.build_report,
                  report.emulator_findings, report.plot_report, outputs.FILES, outputs.UNITS,
                  {LDM_EXIT: "emulated hardware limit violated"}, mpi.render, summary, pipeline.options_for)


def _diannao():
    from .diannao import outputs, pipeline, report, summary
    return Family("diannao", pipeline.PIPELINE, pipeline.STATE, outputs.render, outputs.plan, report.build_report,
                  report.emulator_findings, report.plot_report, outputs.FILES, outputs.UNITS,
                  {LDM_EXIT: "emulated hardware limit violated", BANG_EXIT: "emulated BANG rule violated"},
                  summary=summary)


class _Registry(dict):
    """Family name -> Family; a family's modules are imported when it is first asked for (a
    build for one family does not pay for the others')."""

    def __init__(self, loaders):
        super().__init__()
        self.loaders = loaders

    def __missing__(self, name):
        if name not in self.loaders:
            raise KeyError(name)
        fam = self[name] = self.loaders[name]()
        return fam

    def __contains__(self, name):
        return name in self.loaders or dict.__contains__(self, name)

    def __iter__(self):
        return iter(sorted(set(self.loaders) | set(dict.keys(self))))

    def __len__(self):
        return len(set(self.loaders) | set(dict.keys(self)))


FAMILIES = _Registry({"sunway": _sunway, "diannao": _diannao})


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
