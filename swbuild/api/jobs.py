"""What a command works on: the job (a model or recipe with its options), its toolchain, its
output directory, the build through SCons and the run's inputs and reference. The Python API
(api.py) and so the command line (cli.py) share these; `args` is any object with the command
line's attribute names (an argparse Namespace, or api.py's)."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..support.version import __version__
from ..config import toolchain
from ..support.errors import RecipeError, SwbuildError, UnknownInputs
from ..support.names import model_name_problem


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


def _set_args(args) -> list:
    """--set NAME=VALUE texts, with the option flags that stand for one (--grouping)."""
    extra = [f"grouping={args.grouping}"] if getattr(args, "grouping", None) else []
    return list(args.set or []) + extra


def make_job(args) -> Job:
    from ..config import recipe as rc
    sets = rc.parse_sets(_set_args(args))
    shapes = dict(_shape(s) for s in args.input or [])
    if args.recipe:
        if args.model:
            raise SwbuildError("give either MODEL or --recipe, not both")
        r = rc.load_recipe(args.recipe).with_overrides(sets)
        r.check_target(args.target)
        if r.source_kind == "zoo":
            from .. import zoo
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
    check = {k: opts.pop(k) for k in ("seed", "rtol", "atol", "fp16_rtol", "fp16_atol", "timeout")}
    batch = opts.pop("batch") if "batch" in sets else None
    return Job(name, path, path, shapes, batch, opts, check, None, {path.name: path})


def _normalized(job, tc):
    if job.recipe is not None:
        return job.recipe.normalized()
    from ..config.recipe import sha256_file
    return {"model": job.name, "source": {"onnx": job.model_path.name, "sha256": sha256_file(job.model_path)},
            "inputs": [{"name": k, "shape": list(v)} for k, v in sorted(job.input_shapes.items())],
            "batch": job.batch, "options": job.options, "check": job.check}


def blame_inputs(job, e):
    """Input names the model lacks, blamed where the user wrote them: the recipe's
    `inputs[i].name` line, or the --input flag."""
    from ..support.errors import did_you_mean
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


def do_compile(job, tc, out_dir, last_use=False, written=None):
    """Generate sources and the lock file into out_dir; returns the program.
    `last_use`: nothing reads job.model afterwards, so a ModelProto's weights are freed during
    the compile (held next to the graph's arrays they are vgg16's 550 MB twice).
    `written`: a dict that receives name → Path of every file written."""
    from ..backends import family_of
    from ..driver.compiler import compile_to
    from ..config.lockfile import write_lock
    from ..driver.mpi import compile_hook
    shapes, batch, post = compile_hook(job, tc)
    model = job.model
    if last_use and post is None and job.model_path is None:   # the MPI post step compiles job.model again
        from ..frontends.onnx import Handover
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
    if written is not None:
        written.update(outputs, **{names["lock"]: Path(out_dir) / names["lock"]})
    return program


def scons_build(args, job, tc, out):
    """Build (or find up to date) the model's library and runner through SCons, on the
    same description a project's SConstruct uses (swbuild/scons/driver.py); returns the runner."""
    from ..config.recipe import project_dir_of
    from ..scons import driver
    if job.recipe is not None:
        spec = driver.job_spec(tc, out, bool(args.out), project_dir_of(args.recipe), recipe=args.recipe,
                               sets=_set_args(args), verbose=args.verbose)
    else:
        spec = driver.job_spec(tc, out, bool(args.out), Path.cwd(), onnx=args.model, inputs=job.input_shapes,
                               name=args.name, sets=_set_args(args), verbose=args.verbose)
    driver.build(spec, quiet=getattr(args, "quiet", False))
    from ..support.names import c_prefix
    return Path(out) / f"{c_prefix(job.name)}_runner"


def _out_dir(args, job, tc):
    from ..driver.build import variant_name
    from ..config.recipe import parse_sets
    return Path(args.out) if args.out else Path("build") / tc.name / variant_name(job.name, parse_sets(_set_args(args)))


def _toolchain(args):
    """The target's description; a project's own toolchains/ (beside its recipes/) wins."""
    from ..config.recipe import project_dir_of
    project = project_dir_of(args.recipe) if getattr(args, "recipe", None) else Path.cwd()
    return toolchain.load(args.target, project)


def _scop_recipe(args):
    """The recipe when it names a C file with #pragma scop regions, else None."""
    if not getattr(args, "recipe", None):
        return None
    from ..config import recipe as rc
    r = rc.load_recipe(args.recipe).with_overrides(rc.parse_sets(args.set))
    if r.source_kind != "scop":
        return None
    r.check_target(args.target)
    return r


def _scop_compile(r, tc, args):
    from ..driver.scop import generate
    from ..driver.scop_recipe import build_program
    out = Path(args.out) if args.out else Path("build") / tc.name / r.name
    if getattr(args, "exe", False) or getattr(args, "checking", False) or getattr(args, "reporting", False):
        return build_program(r, tc, out, args.verbose, log=lambda m: print(m, file=sys.stderr))
    r.verify_source()
    generate(r.source, tc, out, r.scop["include"], r.scop["defines"])
    return None


def _scop_lock(args, tc, r):
    """The build directory's lock while this command builds there; with --runner (SCons
    built it and holds the tree) none, so check and report of one program run side by side."""
    import contextlib

    from ..support.outlock import locked
    if getattr(args, "runner", None):
        return contextlib.nullcontext()
    return locked(Path(args.out) if args.out else Path("build") / tc.name / r.name)


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
        from ..support.names import c_prefix
        plan_path = out / f"{c_prefix(job.name)}.plan.json"
    else:
        runner = scons_build(args, job, tc, out)
        plan_path = runner.parent / f"{runner.name[:-len('_runner')]}.plan.json"
    return runner, json.loads(plan_path.read_text())


def _given(given, specs, what):
    """Arrays the caller gave: a path (.npz, or .npy for a model of one), or a dict name → array."""
    from ..driver import check
    if isinstance(given, dict):
        return check.check_arrays(given, specs, what)
    return check.load_npz(given, specs, what)


def _reference(args, job, plan):
    """The run's inputs (given, an onnx light model's own, or seeded) and the reference: given
    outputs, the light model's, or a function that asks onnxruntime."""
    from ..driver import check
    names_out = [s["name"] for s in plan["outputs"]]
    given = getattr(args, "inputs", None)
    light = None if given is not None else check.light_reference(job.model_path, plan["inputs"])
    if given is not None:
        inputs = _given(given, plan["inputs"], "input")
    elif light:
        inputs = light[0]
    else:
        inputs = check.seeded_inputs(plan["inputs"], int(job.check["seed"]), check.index_bounds(job.model))
    if getattr(args, "expected", None) is not None:
        exp = _given(args.expected, plan["outputs"], "expected output")
        ref = [exp[n] for n in names_out]
    elif light and given is None:
        ref = light[1]
    else:
        def ref(ins):
            return check.onnxruntime_reference(job.model, ins)
    return inputs, ref
