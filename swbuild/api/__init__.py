"""The Python API: compile, check, report and run a model, load a recipe.

    import swbuild
    r = swbuild.check("model.onnx", target="sunway-emu")
    print(r.status, r.max_abs_err)

Every function takes the model as a path (an .onnx file, or a recipe .yaml/.yml/.toml) or
`recipe=`, the target by name, and the command line's options as keywords; it returns a
dataclass with the files, the plan and the documents. The command line (cli.py) calls these
same functions. Errors raise swbuild.errors.SwbuildError (a recipe's: RecipeError, every error
in `.errors`; an operator the target cannot run: UnsupportedError).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Mapping, Optional, Sequence, Union

from ..support.errors import SwbuildError

if TYPE_CHECKING:       # the annotations only: importing them here would make `import swbuild.api` heavy
    from ..config.recipe import Recipe
    from ..driver.run_times import Timings

PathLike = Union[str, Path]
Shapes = Union[Mapping[str, Sequence[int]], Sequence[str], None]     # {"data": (1, 3, 224, 224)} or ["data=1x3x224x224"]
Options = Union[Mapping[str, object], Sequence[str], None]           # {"batch": 2, "simd": "off"} or ["batch=2"]
Arrays = Union[PathLike, Mapping[str, object], None]                 # an .npz (.npy for one tensor) or name -> array


@dataclass
class CompileResult:
    """What `compile` wrote: the generated files (and with exe=True the library and runner)."""
    model: str
    target: str
    out_dir: Path
    files: list                     # Paths, sorted
    plan: Optional[dict]            # the compiler's predictions (<prefix>.plan.json); None for a C SCoP recipe
    kernels: int = 0
    arena_bytes: int = 0
    runner: Optional[Path] = None   # with exe=True


@dataclass
class CheckResult:
    """The outcome of `check`: status "pass", "fail" or "vacuous" (nothing compared: the reference
    is within atol of zero everywhere), the errors, the whole JSON document (what `swbuild check`
    prints), and the model's outputs."""
    status: str
    model: str
    target: str
    max_abs_err: Optional[float]
    max_rel_err: Optional[float]
    reason: Optional[str]
    document: dict
    outputs: dict = field(default_factory=dict)      # name -> numpy array (the runner's)
    runner: Optional[Path] = None
    saved: Optional[Path] = None                     # save_outputs=

    @property
    def passed(self) -> bool:
        return self.status == "pass"


@dataclass
class ReportResult:
    """The report document (predicted against measured, per kernel) and its table."""
    document: dict
    plan: dict
    runner: Path
    plot: Optional[Path] = None

    @property
    def text(self) -> str:
        from ..driver.report_text import format_report
        return format_report(self.document)


@dataclass
class RunResult:
    """The outputs of the last run and the times the runner read from the chip's clock."""
    model: str
    target: str
    outputs: dict                   # name -> numpy array
    timings: "Timings"              # runs_ms, warmup_ms, run_cycles, kernels, mean_ms, min_ms, clock_hz
    runner: Path
    saved: Optional[Path] = None

    @property
    def text(self) -> str:
        from ..driver.run_times import format_times
        return format_times(self.timings, self.model, self.target)


def load_recipe(path: PathLike, overrides: Options = None) -> "Recipe":
    """The recipe (swbuild.recipe.Recipe) with `overrides` applied, validated; RecipeError lists
    every problem with its file and line."""
    from ..config import recipe as rc
    return rc.load_recipe(path).with_overrides(rc.parse_sets(_sets(overrides)))


def _sets(options: Options) -> list:
    if not options:
        return []
    if isinstance(options, Mapping):
        return [f"{k}={_text(v)}" for k, v in options.items()]
    return [str(o) for o in options]


def _text(v):
    return ("on" if v else "off") if isinstance(v, bool) else str(v)


def _shapes(shapes: Shapes) -> list:
    if not shapes:
        return []
    if isinstance(shapes, Mapping):
        return [f"{k}={'x'.join(str(int(d)) for d in v)}" for k, v in shapes.items()]
    return [str(s) for s in shapes]


def _args(model, target, recipe, out, input_shapes, options, name, grouping=None, verbose=False, quiet=False, **more):
    """The command line's attribute names, which jobs.py reads."""
    if model is not None and recipe is None and Path(str(model)).suffix.lower() in (".yaml", ".yml", ".toml"):
        model, recipe = None, model
    ns = SimpleNamespace(model=str(model) if model is not None else None, recipe=str(recipe) if recipe else None,
                         target=target, out=str(out) if out else None, input=_shapes(input_shapes),
                         set=_sets(options), grouping=grouping, name=name, verbose=verbose, quiet=quiet, exe=False,
                         inputs=None, expected=None, runner=None, timeout=None, checking=False)
    for k, v in more.items():
        setattr(ns, k, v)
    return ns


def compile(model: PathLike = None, *, target: str, recipe: PathLike = None, out: PathLike = None,
            input_shapes: Shapes = None, options: Options = None, name: str = None, grouping: str = None,
            exe: bool = False, verbose: bool = False, quiet: bool = False) -> CompileResult:
    """Generate the model's C (host, slave or device, headers, weights, runner), its plan and
    lock file into `out` (default build/<target>/<model>); `exe=True` also builds lib<model>.a
    and <model>_runner through SCons (left alone when up to date)."""
    from . import jobs
    from ..support.outlock import locked
    args = _args(model, target, recipe, out, input_shapes, options, name, grouping, verbose, quiet, exe=exe)
    tc = jobs._toolchain(args)
    r = jobs._scop_recipe(args)
    if r is not None:
        exe_path = jobs._scop_compile(r, tc, args)
        d = Path(args.out) if args.out else Path("build") / tc.name / r.name
        return CompileResult(r.name, tc.name, d, sorted(p for p in d.iterdir() if p.is_file()), None, runner=exe_path)
    job = jobs.make_job(args)
    d = jobs._out_dir(args, job, tc)
    if exe:
        runner = jobs.scons_build(args, job, tc, d)
        plan = _plan(runner)
        files = sorted(p for p in d.iterdir() if p.is_file() and p.name.startswith(plan["prefix"]))
        return CompileResult(job.name, tc.name, d, files, plan, len(plan["kernels"]), _arena(plan), runner)
    written = {}
    with locked(d):
        program = jobs.do_compile(job, tc, d, last_use=True, written=written)
    plan = json.loads((d / f"{program.prefix}.plan.json").read_text())
    arena = program.memory.arena_bytes if program.memory is not None else 0
    return CompileResult(job.name, tc.name, d, sorted(written.values()), plan, len(program.kernels), arena)


def _plan(runner):
    return json.loads((Path(runner).parent / f"{Path(runner).name[:-len('_runner')]}.plan.json").read_text())


def _arena(plan):
    return int(plan.get("arena_bytes") or 0)


def check(model: PathLike = None, *, target: str, recipe: PathLike = None, out: PathLike = None,
          input_shapes: Shapes = None, options: Options = None, name: str = None, grouping: str = None,
          inputs: Arrays = None, expected: Arrays = None, runner: PathLike = None, timeout: int = None,
          save_outputs: PathLike = None, verbose: bool = False, quiet: bool = False) -> CheckResult:
    """Build for an emulated target (through SCons; an up-to-date build is reused), run, and
    compare with the reference: `expected`, the outputs shipped beside an onnx light model, or
    onnxruntime on the same inputs (`inputs`, else the light model's, else seeded ones).
    `save_outputs`: write the runner's outputs to this .npz (keyed by output name), when the
    runner ran to the end (`.saved` says whether it did)."""
    from . import jobs
    from ..driver import check as chk
    from ..support.outlock import locked
    args = _args(model, target, recipe, out, input_shapes, options, name, grouping, verbose, quiet, inputs=inputs,
                 expected=expected, runner=str(runner) if runner else None, timeout=timeout, checking=True)
    tc = jobs._toolchain(args)
    r = jobs._scop_recipe(args)
    if r is not None:
        if not tc.emulated:
            raise SwbuildError(f"target {tc.name} is a real chip; run checks on its emulated twin")
        if save_outputs:
            raise SwbuildError(f"{args.recipe}: save_outputs takes a model's tensors; a C SCoP program prints its own")
        with jobs._scop_lock(args, tc, r):
            exe = Path(args.runner) if args.runner else jobs._scop_compile(r, tc, args)
            from ..driver.scop_recipe import check as scop_check
            doc = scop_check(r, tc, exe, exe.parent)
        return _check_result(doc, {}, exe, None)
    job = jobs.make_job(args)
    if timeout is not None:
        job.check["timeout"] = timeout
    exe, plan = jobs._prepare_run(args, job, tc)     # SCons holds the build's lock
    ins, ref = jobs._reference(args, job, plan)
    spec = (lambda x: chk.spec_reference(job.model, x)) if callable(ref) else None   # beside onnxruntime's
    wide = (lambda x, s=None: chk.float64_outputs(job.model, x, s)) if callable(ref) else None   # float32 rounding or not
    kept = {}
    steps = chk.quantization_steps(job.model, [s["name"] for s in plan["outputs"]]) if callable(ref) else None
    unopt = (lambda x: chk.onnxruntime_reference(job.model, x, optimized=False)) if steps and any(steps) else None
    doc = chk.check_build(plan, exe, ref, ins, float(job.check["rtol"]), float(job.check["atol"]),
                          timeout=float(job.check["timeout"]), spec=spec, keep=kept, steps=steps, wide=wide,
                          unoptimised=unopt,
                          half=(float(job.check["fp16_rtol"]), float(job.check["fp16_atol"])))
    saved = _save(save_outputs, kept, "check") if save_outputs and kept else None   # a failed run has none
    return _check_result(doc, kept, exe, saved)


def _check_result(doc, outputs, runner, saved):
    return CheckResult(doc["status"], doc.get("model", ""), doc.get("target", ""), doc.get("max_abs_err"),
                       doc.get("max_rel_err"), doc.get("reason"), doc, outputs, Path(runner) if runner else None, saved)


def _save(path, arrays, what):
    """An .npz of the outputs, keyed by output name; refused when the run gave none."""
    import numpy as np
    if not arrays:
        raise SwbuildError(f"{path}: the {what} produced no outputs to save (the runner failed)")
    path = Path(path)
    if path.suffix != ".npz":
        raise SwbuildError(f"{path}: outputs are saved as an .npz (one array per output name)")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(path)
    return path


def report(model: PathLike = None, *, target: str, recipe: PathLike = None, out: PathLike = None,
           input_shapes: Shapes = None, options: Options = None, name: str = None, grouping: str = None,
           inputs: Arrays = None, runner: PathLike = None, plot: PathLike = None, verbose: bool = False,
           quiet: bool = False) -> ReportResult:
    """Build for an emulated target, run once and return the report: per kernel the compiler's
    predictions next to the emulator's measurements (`.document`; `.text` is the table).
    `plot`: also draw it into this PNG (needs matplotlib, the `plot` extra)."""
    import tempfile

    from . import jobs
    from ..driver import check as chk
    from ..backends import family_of
    if plot:
        _plot_needs()
    args = _args(model, target, recipe, out, input_shapes, options, name, grouping, verbose, quiet, inputs=inputs,
                 runner=str(runner) if runner else None, reporting=True)
    tc = jobs._toolchain(args)
    r = jobs._scop_recipe(args)
    if r is not None:       # a C SCoP program: the emulator's numbers per kernel
        from ..driver.scop_recipe import report as scop_report
        if plot:
            raise SwbuildError(f"{args.recipe}: plot draws a model's kernels against its plan; a SCoP recipe has none")
        with jobs._scop_lock(args, tc, r):
            exe = Path(args.runner) if args.runner else jobs._scop_compile(r, tc, args)
            rep = scop_report(r, tc, exe)
        return ReportResult(rep, None, exe)
    fam = family_of(tc)
    job = jobs.make_job(args)
    exe, plan = jobs._prepare_run(args, job, tc)     # SCons holds the build's lock
    ins, _ = jobs._reference(args, job, plan)
    with tempfile.TemporaryDirectory(prefix="swreport-") as tmp:
        _, stats, err, code, _ = chk.run_runner(exe, plan, ins, tmp, timeout=float(job.check["timeout"]))
    if code != 0:
        raise SwbuildError(f"runner failed with status {code}: {err.strip()[-500:]}")
    if plan.get("mpi"):     # one report of a rank's kernels (rank 0's counters), plus the ranks
        from ..driver import mpi
        rep = dict(fam.report(plan, stats[0][0], tc), mpi=mpi.report(fam, plan, stats))
        if plot:
            mpi.plot(rep["mpi"], str(plot))
    else:
        rep = fam.report(plan, stats, tc)
        if plot:
            fam.plot(rep, tc, str(plot))
    return ReportResult(rep, plan, exe, Path(plot) if plot else None)


def _plot_needs():
    """plot= is the `plot` extra: say so before building anything."""
    try:
        import matplotlib  # noqa: F401  (only whether it is there)
    except ImportError:
        raise SwbuildError("--plot needs matplotlib, the `plot` extra: pip install 'swbuild[plot]' "
                           "(or leave out --plot)") from None


def run(model: PathLike = None, *, target: str, recipe: PathLike = None, out: PathLike = None,
        input_shapes: Shapes = None, options: Options = None, name: str = None, grouping: str = None,
        inputs: Arrays = None, repeat: int = 1, warmup: int = 0, save_outputs: PathLike = None,
        runner: PathLike = None, timeout: int = None, verbose: bool = False, quiet: bool = False) -> RunResult:
    """Build for an emulated target (or take `runner`), run it `warmup` + `repeat` times on
    `inputs` (else the light model's or seeded ones, as check) and return the last run's outputs
    with each run's and each kernel's time from the chip's clock (the runner prints them:
    Sunway rtc, CNRT notifiers; under emulation the emulator's modelled clock).
    `save_outputs`: write the outputs to this .npz."""
    from . import jobs
    from ..driver.run_times import run_model
    args = _args(model, target, recipe, out, input_shapes, options, name, grouping, verbose, quiet, inputs=inputs,
                 runner=str(runner) if runner else None)
    tc = jobs._toolchain(args)
    if jobs._scop_recipe(args) is not None:
        raise SwbuildError(f"{args.recipe}: swbuild run takes ONNX models; a C SCoP recipe's program is run by "
                           "swbuild check")
    job = jobs.make_job(args)
    if timeout is not None:
        job.check["timeout"] = timeout
    exe, plan = jobs._prepare_run(args, job, tc)
    ins, _ = jobs._reference(args, job, plan)
    outputs, timings = run_model(plan, exe, ins, int(repeat), int(warmup), float(job.check["timeout"]))
    saved = _save(save_outputs, outputs, "run") if save_outputs else None
    return RunResult(plan["model"], plan["target"], outputs, timings, exe, saved)
