"""swbuild command line: compile, check, report, ops, scop."""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .config import toolchain
from .support.errors import RecipeError, SwbuildError, UnknownInputs, UnsupportedError
from .support.names import model_name_problem
from .support.outlock import locked

EPILOG = """examples:
  swbuild compile model.onnx --target sunway-emu -o out/ --input data=1x3x224x224
  swbuild check --recipe recipes/vgg16.yaml --target sunway-emu
  swbuild check light_vgg19.onnx --target sunway-emu      (uses the shipped expected outputs)
  swbuild report model.onnx --target sunway-emu --json
  swbuild report recipes/vgg16.yaml --target sunway-emu --plot vgg16.png
  swbuild ops --target sunway-emu
  swbuild ops model.onnx --target diannao-emu             (per node: supported or why not)
  swbuild export model.onnx --target sunway -o model.tar   (sources, weights, Makefile for sw5cc, metadata)
"""


@dataclass
class Job:
    """One model to build: where it comes from and every option that shapes the output."""
    name: str
    source: object                # ModelProto, path, or a function that builds the model (zoo)
    model_path: Path | None       # the file, when there is one (light references, hashing)
    input_shapes: dict
    batch: int | None
    options: dict
    check: dict
    recipe: object = None
    lock_inputs: dict = field(default_factory=dict)

    @property
    def model(self):
        """The model, built on first use: `swbuild check` of a zoo recipe builds it only after
        SCons built the runner (its generator builds its own copy), not both at once."""
        if callable(self.source):
            self.source = self.source()
        return self.source

    @model.setter
    def model(self, value):
        self.source = value


def _shape(text):
    name, sep, dims = text.partition("=")
    if not sep or not name:
        raise SwbuildError(f"--input {text!r}: expected NAME=D0xD1x... (e.g. data=1x3x224x224)")
    try:
        shape = tuple(int(d) for d in dims.replace(",", "x").split("x"))
    except ValueError:
        raise SwbuildError(f"--input {text!r}: dimensions must be integers") from None
    if not shape or any(d <= 0 for d in shape):
        raise SwbuildError(f"--input {text!r}: dimensions must be positive")
    return name, shape


def _seconds(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds") from None
    if v < 1:
        raise argparse.ArgumentTypeError("must be at least 1 second")
    return v


def _set_args(args) -> list:
    """--set NAME=VALUE texts, with the option flags that stand for one (--grouping)."""
    extra = [f"grouping={args.grouping}"] if getattr(args, "grouping", None) else []
    return list(args.set or []) + extra


def make_job(args) -> Job:
    from .config import recipe as rc
    sets = rc.parse_sets(_set_args(args))
    shapes = dict(_shape(s) for s in args.input or [])
    if args.recipe:
        if args.model:
            raise SwbuildError("give either MODEL or --recipe, not both")
        r = rc.load_recipe(args.recipe).with_overrides(sets)
        r.check_target(args.target)
        if r.source_kind == "zoo":
            from . import zoo
            model, path = (lambda: zoo.build_model(r.source, batch=r.batch, seed=int(r.check["seed"]))), None
        else:
            r.verify_source()
            model = path = Path(r.source)
        shapes = {**{i.name: tuple(i.shape) for i in r.inputs}, **shapes}
        lock_inputs = {Path(args.recipe).name: Path(args.recipe)}
        lock_inputs.update({p.name: p for p in r.source_files()})
        return Job(r.name, model, path, shapes, r.batch, dict(r.options), dict(r.check), r, lock_inputs)
    if not args.model:
        raise SwbuildError("give a MODEL.onnx or --recipe RECIPE")
    path = Path(args.model)
    if not path.is_file():      # before SCons, whose message would name a generated file instead
        raise SwbuildError(f"{path}: no such ONNX file" if not path.exists() else f"{path}: not a file")
    opts = {k: o.default for k, o in rc.OPTIONS.items() if k not in rc.WHEN_GIVEN}
    opts.update(sets)
    name = args.name or path.stem
    bad = model_name_problem(name)
    if bad:
        raise SwbuildError(f"--name: {bad}" if args.name else f"{path}: the file name gives the model name; {bad} "
                           "(choose one with --name)")
    check = {k: opts.pop(k) for k in ("seed", "rtol", "atol", "timeout")}
    batch = opts.pop("batch") if "batch" in sets else None
    return Job(name, path, path, shapes, batch, opts, check, None, {path.name: path})


def _normalized(job, tc):
    if job.recipe is not None:
        return job.recipe.normalized()
    from .config.recipe import sha256_file
    return {"model": job.name, "source": {"onnx": job.model_path.name, "sha256": sha256_file(job.model_path)},
            "inputs": [{"name": k, "shape": list(v)} for k, v in sorted(job.input_shapes.items())],
            "batch": job.batch, "options": job.options, "check": job.check}


def blame_inputs(job, e):
    """Input names the model lacks, blamed where the user wrote them: the recipe's
    `inputs[i].name` line, or the --input flag."""
    from .support.errors import did_you_mean
    given = [i.name for i in job.recipe.inputs] if job.recipe is not None else []
    errors = []
    for name in e.names:
        msg = f"'{name}' is not an input of the model{did_you_mean(name, e.inputs)}; its inputs: {', '.join(e.inputs)}"
        if name in given:
            errors.append(job.recipe.error(f"inputs[{given.index(name)}].name", msg))
        else:
            errors.append(SwbuildError(f"--input {name}=...: {msg}"))
    if all(isinstance(x, RecipeError) for x in errors):
        return RecipeError.of(errors)
    return errors[0]


def do_compile(job, tc, out_dir, last_use=False):
    """Generate sources and the lock file into out_dir; returns (program, prefix).
    `last_use`: nothing reads job.model afterwards, so a ModelProto's weights are freed during
    the compile (held next to the graph's arrays they are vgg16's 550 MB twice)."""
    from .backends import family_of
    from .driver.compiler import compile_to
    from .config.lockfile import write_lock
    from .driver.mpi import compile_hook
    shapes, batch, post = compile_hook(job, tc)
    model = job.model
    if last_use and post is None and job.model_path is None:   # the MPI post step compiles job.model again
        from .frontends.onnx import Handover
        model, job.model = Handover(job.model), None
    digests = {}
    try:
        program, files = compile_to(model, tc, out_dir, job.name, shapes, batch, job.options, post=post,
                                    digests=digests)
    except UnknownInputs as e:
        raise blame_inputs(job, e) from None
    names = family_of(tc).generated_files(program.prefix)
    outputs = {n: Path(out_dir) / n for n in sorted(files)}
    write_lock(Path(out_dir) / names["lock"], recipe_normalized=_normalized(job, tc), inputs=job.lock_inputs,
               toolchain=tc, outputs=outputs, swbuild_version=__version__, digests=digests)
    return program


def scons_build(args, job, tc, out):
    """Build (or find up to date) the model's library and runner through SCons, on the
    same description a project's SConstruct uses (swbuild/scons/driver.py); returns the runner."""
    from .config.recipe import project_dir_of
    from .scons import driver
    if job.recipe is not None:
        spec = driver.job_spec(tc, out, bool(args.out), project_dir_of(args.recipe), recipe=args.recipe,
                               sets=_set_args(args), verbose=args.verbose)
    else:
        spec = driver.job_spec(tc, out, bool(args.out), Path.cwd(), onnx=args.model, inputs=job.input_shapes,
                               name=args.name, sets=_set_args(args), verbose=args.verbose)
    driver.build(spec, quiet=getattr(args, "quiet", False))
    from .support.names import c_prefix
    return Path(out) / f"{c_prefix(job.name)}_runner"


def _out_dir(args, job, tc):
    from .driver.build import variant_name
    from .config.recipe import parse_sets
    return Path(args.out) if args.out else Path("build") / tc.name / variant_name(job.name, parse_sets(_set_args(args)))


def _toolchain(args):
    """The target's description; a project's own toolchains/ (beside its recipes/) wins."""
    from .config.recipe import project_dir_of
    project = project_dir_of(args.recipe) if getattr(args, "recipe", None) else Path.cwd()
    return toolchain.load(args.target, project)


def _scop_recipe(args):
    """The recipe when it names a C file with #pragma scop regions, else None."""
    if not getattr(args, "recipe", None):
        return None
    from .config import recipe as rc
    r = rc.load_recipe(args.recipe).with_overrides(rc.parse_sets(args.set))
    if r.source_kind != "scop":
        return None
    r.check_target(args.target)
    return r


def _scop_compile(r, tc, args):
    from .driver.scop import generate
    from .driver.scop_recipe import build_program
    out = Path(args.out) if args.out else Path("build") / tc.name / r.name
    if getattr(args, "exe", False) or getattr(args, "fn", None) is cmd_check:
        return build_program(r, tc, out, args.verbose, log=lambda m: print(m, file=sys.stderr))
    r.verify_source()
    generate(r.source, tc, out, r.scop["include"], r.scop["defines"])
    return None


def cmd_compile(args):
    tc = _toolchain(args)
    r = _scop_recipe(args)
    if r is not None:
        exe = _scop_compile(r, tc, args)
        print(f"swbuild: {r.name} -> {exe or args.out or Path('build') / tc.name / r.name}", file=sys.stderr)
        return 0
    job = make_job(args)
    out = _out_dir(args, job, tc)
    if args.exe:    # generate and build through SCons: an up-to-date build is left alone
        exe = scons_build(args, job, tc, out)
        print(f"swbuild: built {exe}", file=sys.stderr)
        return 0
    with locked(out):
        program = do_compile(job, tc, out, last_use=True)
        print(f"swbuild: {job.name} -> {out} ({len(program.kernels)} kernels, arena {program.memory.arena_bytes} bytes)",
              file=sys.stderr)
    return 0


def _prepare_run(args, job, tc):
    """Build (unless --runner points at an existing build) and load the plan."""
    if not tc.emulated:
        raise SwbuildError(f"target {tc.name} is a real chip; run checks on its emulated twin "
                           f"(e.g. {tc.name}-emu)")
    out = _out_dir(args, job, tc)
    if args.runner:
        runner = Path(args.runner)
        out = runner.parent
        if not runner.is_file():
            raise SwbuildError(f"--runner {runner}: no such program (build it first)")
        from .support.names import c_prefix
        plan_path = out / f"{c_prefix(job.name)}.plan.json"
    else:
        runner = scons_build(args, job, tc, out)
        plan_path = runner.parent / f"{runner.name[:-len('_runner')]}.plan.json"
    return runner, json.loads(plan_path.read_text())


def _reference(args, job, plan):
    from .driver import check
    names_out = [s["name"] for s in plan["outputs"]]
    light = None if args.inputs else check.light_reference(job.model_path, plan["inputs"])
    if args.inputs:
        inputs = check.load_npz(args.inputs, plan["inputs"], "input")
    elif light:
        inputs = light[0]
    else:
        inputs = check.seeded_inputs(plan["inputs"], int(job.check["seed"]), check.index_bounds(job.model))
    if args.expected:
        exp = check.load_npz(args.expected, plan["outputs"], "expected output")
        ref = [exp[n] for n in names_out]
    elif light and not args.inputs:
        ref = light[1]
    else:
        def ref(ins):
            return check.onnxruntime_reference(job.model, ins)
    return inputs, ref


def cmd_check(args):
    from .driver import check
    try:
        tc = _toolchain(args)
        r = _scop_recipe(args)
        if r is not None:
            if not tc.emulated:
                raise SwbuildError(f"target {tc.name} is a real chip; run checks on its emulated twin")
            with locked(Path(args.out) if args.out else Path("build") / tc.name / r.name):
                runner = Path(args.runner) if args.runner else _scop_compile(r, tc, args)
                from .driver.scop_recipe import check as scop_check
                doc = scop_check(r, tc, runner, runner.parent)
        else:
            job = make_job(args)
            if args.timeout is not None:
                job.check["timeout"] = args.timeout
            runner, plan = _prepare_run(args, job, tc)     # SCons holds the build's lock
            inputs, ref = _reference(args, job, plan)
            doc = check.check_build(plan, runner, ref, inputs, float(job.check["rtol"]), float(job.check["atol"]),
                                    timeout=float(job.check["timeout"]))
    except UnsupportedError as e:
        print(json.dumps({"status": "unsupported", "reason": e.reason}))
        return 3
    except (SwbuildError, OSError) as e:
        for one in getattr(e, "errors", [e]):     # a recipe's errors, one line each
            print(f"swbuild: error: {one}", file=sys.stderr)
        print(json.dumps({"status": "error", "reason": str(e).splitlines()[0]}))
        return 2
    except Exception as e:  # e.g. onnxruntime rejecting the reference model: still one JSON line
        print(f"swbuild: error: {type(e).__name__}: {e}", file=sys.stderr)
        print(json.dumps({"status": "error", "reason": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}))
        return 2
    if doc["status"] != "pass":
        print(f"swbuild: check FAILED for {doc['model']} on {doc['target']}: {doc.get('reason')}", file=sys.stderr)
    else:
        print(f"swbuild: check passed for {doc['model']} on {doc['target']}: max abs err {doc['max_abs_err']:.3g}, "
              f"max rel err {doc['max_rel_err']:.3g}", file=sys.stderr)
    print(json.dumps(doc, sort_keys=True))
    write_result(args, doc)
    return 0 if doc["status"] == "pass" else 1


def write_result(args, doc):
    """--result FILE: the JSON document as a file (the SCons check/report targets); replaced
    in one step so a reader never sees half of it."""
    if getattr(args, "result", None):
        tmp = Path(args.result + ".tmp")
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        tmp.replace(args.result)


def cmd_report(args):
    import tempfile

    from .driver import check
    from .backends import family_of
    from .driver.report_text import format_report
    if args.plot:
        _plot_needs()
    tc = _toolchain(args)
    fam = family_of(tc)
    job = make_job(args)
    runner, plan = _prepare_run(args, job, tc)     # SCons holds the build's lock
    inputs, _ = _reference(args, job, plan)
    with tempfile.TemporaryDirectory(prefix="swreport-") as tmp:
        _, stats, err, code, _ = check.run_runner(runner, plan, inputs, tmp, timeout=float(job.check["timeout"]))
    if code != 0:
        raise SwbuildError(f"runner failed with status {code}: {err.strip()[-500:]}")
    if plan.get("mpi"):     # one report of a rank's kernels (rank 0's counters), plus the ranks
        from .driver import mpi
        rep = dict(fam.report(plan, stats[0][0], tc), mpi=mpi.report(fam, plan, stats))
        if args.plot:
            mpi.plot(rep["mpi"], args.plot)
    else:
        rep = fam.report(plan, stats, tc)
        if args.plot:
            fam.plot(rep, tc, args.plot)
    if args.plot:
        print(f"swbuild: plot written to {args.plot}", file=sys.stderr)
    print(json.dumps(rep, sort_keys=True) if args.json else format_report(rep))
    write_result(args, rep)
    return 0


def _plot_needs():
    """--plot is the `plot` extra: say so before building anything."""
    try:
        import matplotlib  # noqa: F401  (only whether it is there)
    except ImportError:
        raise SwbuildError("--plot needs matplotlib, the `plot` extra: pip install 'swbuild[plot]' "
                           "(or leave out --plot)") from None


def cmd_ops(args):
    """Without MODEL: the operators (of a target); with MODEL: per node, supported or why not."""
    from .driver import ops_report
    from .ops import supported_ops
    if not args.model and not args.recipe:
        if args.target:
            print(ops_report.target_list(_toolchain(args)))
        else:
            print("\n".join(supported_ops()))
        return 0
    if not args.target:
        raise SwbuildError("give --target T: whether a node is supported depends on the target "
                           f"({', '.join(toolchain.available())})")
    tc = _toolchain(args)
    job = make_job(args)
    try:
        doc = ops_report.analyse(job.model, tc, job.name, job.input_shapes, job.batch, job.options)
    except UnknownInputs as e:
        raise blame_inputs(job, e) from None
    print(json.dumps(doc, sort_keys=True) if args.json else ops_report.format_table(doc))
    return 0 if doc["supported"] else 3


def cmd_export(args):
    """Generate the model's sources in a scratch directory and archive them with a Makefile
    and metadata (swbuild/driver/export.py)."""
    import tempfile

    from .driver.export import export
    tc = _toolchain(args)
    if _scop_recipe(args) is not None:
        raise SwbuildError(f"{args.recipe}: export takes ONNX models; a C SCoP recipe's output is C already "
                           "(swbuild compile writes it)")
    job = make_job(args)
    with tempfile.TemporaryDirectory(prefix="swexport-") as tmp:
        program = do_compile(job, tc, tmp, last_use=True)
        path, meta = export(tmp, tc, program.prefix, args.out or f"{job.name}-{tc.name}.tar")
    print(f"swbuild: {job.name} for {tc.name} -> {path} ({len(meta['files'])} files + Makefile, metadata.json; "
          f"workspace {meta['workspace_bytes']} bytes)", file=sys.stderr)
    return 0


def cmd_pipeline(args):
    """The target family's passes, in the order they run, each with its one-line doc."""
    from .backends import family_of
    tc = toolchain.load(args.target, Path.cwd())
    fam = family_of(tc)
    print(f"{tc.name}: family {fam.name}, {len(fam.pipeline)} passes (Program, Target, Options) -> Program")
    for i, run in enumerate(fam.pipeline, 1):
        doc = (run.__doc__ or "").strip().splitlines()
        where = run.__module__.removeprefix("swbuild.")
        print(f"{i:3}. {run.__name__:<26} {where:<32} {doc[0] if doc else ''}")
    return 0


def _model_args(p, out_help="output directory (default build/<target>/<model>)"):
    p.add_argument("model", nargs="?", help="an .onnx file, or a recipe (.yaml/.yml/.toml)")
    p.add_argument("--recipe", help="a recipe file (YAML or TOML)")
    p.add_argument("--target", "-t", required=True, help="target name: " + ", ".join(toolchain.available()))
    p.add_argument("--input", action="append", metavar="NAME=SHAPE", help="fix an input's shape, e.g. data=1x3x224x224")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a recipe option (see docs/recipes.md)")
    p.add_argument("--grouping", choices=["on", "off"], help="GraphTurbo grouping, on by default (same as --set grouping=...)")
    p.add_argument("--name", help="model name for file and symbol prefixes (default: the file's stem)")
    p.add_argument("-o", "--out", help=out_help)
    p.add_argument("-v", "--verbose", action="store_true", help="print full compiler commands")
    p.add_argument("-Q", "--quiet", action="store_true", help="no progress lines, only errors and results")


def parser():
    ap = argparse.ArgumentParser(prog="swbuild", description="Compile ONNX models and C SCoPs for Sunway and DianNao, "
                                 "and check them under emulation.", epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=f"swbuild {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    p = sub.add_parser("compile", help="generate C sources (and with --exe, build them)",
                       description="Generate host/slave C, headers, weights and a lock file for a model.")
    _model_args(p)
    p.add_argument("--exe", action="store_true", help="also compile and link lib<model>.a and <model>_runner")
    p.set_defaults(fn=cmd_compile)
    p = sub.add_parser("check", help="build, run under emulation and compare with a reference",
                       description="Build for an emulated target, run, compare. The last output line is one JSON "
                       "object with status (pass/fail/unsupported/error), max_abs_err and max_rel_err; exit 0 only on pass.")
    _model_args(p)
    p.add_argument("--inputs", help="npz of inputs keyed by graph input names (default: seeded normal)")
    p.add_argument("--expected", help="npz of expected outputs keyed by graph output names (default: onnxruntime)")
    p.add_argument("--runner", help="use this already built runner (its directory holds the plan)")
    p.add_argument("--result", metavar="FILE", help="also write the JSON document to FILE")
    p.add_argument("--timeout", type=_seconds, metavar="SECONDS",
                   help="stop the runner after this long and name the kernel it was in (default: the recipe's "
                        "check.timeout, 3600)")
    p.set_defaults(fn=cmd_check)
    p = sub.add_parser("report", help="predicted and measured kernel numbers: a table, or JSON",
                       description="Build, run under emulation and print the report: a table of the kernels "
                       "(time, traffic, roofline fraction) with totals, or with --json the whole JSON document.")
    _model_args(p)
    p.add_argument("--inputs", help=argparse.SUPPRESS)
    p.add_argument("--expected", help=argparse.SUPPRESS)
    p.add_argument("--runner", help="use this already built runner")
    p.add_argument("--result", metavar="FILE", help="also write the JSON document to FILE")
    p.add_argument("--json", action="store_true", help="the whole report document as JSON on one line")
    p.add_argument("--plot", metavar="FILE.png", help="Sunway: the roofline and per-kernel times; DianNao: cycles by "
                   "kernel and instruction class; MPI: the ranks' timelines (needs the `plot` extra: matplotlib)")
    p.set_defaults(fn=cmd_report)
    p = sub.add_parser("ops", help="supported ONNX operators; with MODEL, per node: supported or why not",
                       description="Without MODEL: the ONNX operators swbuild lowers (with --target: what the "
                       "target does with them). With MODEL (and --target): every node of the model, supported or "
                       "why not (operator, attribute, dtype, local memory); exit 3 when any node is not.")
    p.add_argument("model", nargs="?", help="an .onnx file, or a recipe (.yaml/.yml/.toml)")
    p.add_argument("--recipe", help="a recipe file (YAML or TOML)")
    p.add_argument("--target", "-t", help="target name: " + ", ".join(toolchain.available()))
    p.add_argument("--input", action="append", metavar="NAME=SHAPE", help="fix an input's shape, e.g. data=1x3x224x224")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a recipe option (see docs/recipes.md)")
    p.add_argument("--name", help="model name (default: the file's stem)")
    p.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    p.set_defaults(fn=cmd_ops)
    p = sub.add_parser("export", help="one archive to build on the machine without swbuild",
                       description="Generate the model for the target and write one archive: sources, headers, "
                       "weights, a Makefile for the target's own compilers (make CC=... to override), the lock "
                       "file, the plan and metadata.json (inputs, outputs, dtypes, shapes, workspace, versions).")
    _model_args(p, out_help="the archive: .tar, .tar.gz or .tgz (default <model>-<target>.tar)")
    p.set_defaults(fn=cmd_export)
    p = sub.add_parser("pipeline", help="list a target's optimizer passes in order",
                       description="Print the passes of the target family's pipeline, in the order they run.")
    p.add_argument("--target", "-t", required=True, help="target name: " + ", ".join(toolchain.available()))
    p.set_defaults(fn=cmd_pipeline)
    try:
        from .driver import scop as scop_cli
        scop_cli.add_parser(sub)
    except ImportError:
        pass
    return ap


RECIPE_SUFFIXES = (".yaml", ".yml", ".toml")


def main(argv=None):
    from .support.allocator import keep_freed_memory
    from .support.blas import load_numpy_single_threaded
    keep_freed_memory()
    load_numpy_single_threaded()
    args = parser().parse_args(argv)
    model = getattr(args, "model", None)
    if model and Path(model).suffix.lower() in RECIPE_SUFFIXES:   # `swbuild report RECIPE` as the issue spells it
        if args.recipe:
            print("swbuild: error: give either MODEL or --recipe, not both", file=sys.stderr)
            return 2
        args.recipe, args.model = model, None
    if getattr(args, "quiet", False):
        from .support.progress import quiet
        quiet()
    try:
        return args.fn(args)
    except RecipeError as e:
        _record(e)
        for one in e.errors:        # every error of the recipe, one `file:line: field: message` each
            print(f"swbuild: error: {one}", file=sys.stderr)
        return 2
    except SwbuildError as e:
        _record(e)
        print(f"swbuild: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:     # `swbuild ops ... | head`: the reader has all it wanted
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except MemoryError:
        print(f"swbuild: error: {_input_of(args)}: out of memory", file=sys.stderr)
        return 2
    except Exception as e:  # a bug of ours: still one line, never a traceback
        print(f"swbuild: error: {_input_of(args)}: internal error {type(e).__name__}: {_one_line(e)} "
              "(please report it with the model)", file=sys.stderr)
        return 2


def _record(e):
    """When SCons runs this generator for the CLI, tell the CLI why it failed (driver.py)."""
    from .scons.driver import record_failure
    record_failure(e)


def _one_line(e):
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _input_of(args):
    return getattr(args, "recipe", None) or getattr(args, "model", None) or getattr(args, "source", None) or "swbuild"


if __name__ == "__main__":
    sys.exit(main())
