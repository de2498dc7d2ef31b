"""swbuild command line: compile, check, run, report, ops, export, pipeline, scop. The model commands
go through the Python API (api.py)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .support.version import __version__
from .config import toolchain
from .support.errors import RecipeError, SwbuildError, UnknownInputs, UnsupportedError, first_line

EPILOG = """examples:
  swbuild compile model.onnx --target sunway-emu -o out/ --input data=1x3x224x224
  swbuild check --recipe recipes/vgg16.yaml --target sunway-emu
  swbuild check "$(python -c 'import onnx, os; print(os.path.dirname(onnx.__file__))')/backend/test/data/light/light_vgg19.onnx" --target sunway-emu
                                                          (onnx's light model: uses the expected outputs beside it)
  swbuild check model.onnx --target sunway-emu --save-outputs out.npz
  swbuild run model.onnx --target sunway-emu --inputs in.npz --repeat 10 --warmup 2 --outputs out.npz
  swbuild report model.onnx --target sunway-emu --json
  swbuild report recipes/vgg16.yaml --target sunway-emu --plot vgg16.png
  swbuild ops --target sunway-emu
  swbuild ops model.onnx --target diannao-emu             (per node: supported or why not)
  swbuild export model.onnx --target sunway -o model.tar   (sources, weights, Makefile for sw5cc, metadata)
"""


def _seconds(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds") from None
    if v < 1:
        raise argparse.ArgumentTypeError("must be at least 1 second")
    return v


def _api_args(args):
    """The options every model command shares, as the API's keywords (swbuild/api.py)."""
    return dict(model=args.model, target=args.target, recipe=args.recipe, out=args.out, input_shapes=args.input,
                options=args.set, name=args.name, grouping=args.grouping, verbose=args.verbose,
                quiet=getattr(args, "quiet", False))


def _count(least):
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if v < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}")
        return v
    return parse


def cmd_compile(args):
    from . import api
    r = api.compile(**_api_args(args), exe=args.exe)
    if r.plan is None:          # a C SCoP recipe
        print(f"swbuild: {r.model} -> {r.runner or r.out_dir}", file=sys.stderr)
    elif args.exe:              # generated and built through SCons: an up-to-date build is left alone
        print(f"swbuild: built {r.runner}", file=sys.stderr)
    else:
        print(f"swbuild: {r.model} -> {r.out_dir} ({r.kernels} kernels, arena {r.arena_bytes} bytes)", file=sys.stderr)
    return 0


def cmd_check(args):
    from . import api
    try:
        r = api.check(**_api_args(args), inputs=args.inputs, expected=args.expected, runner=args.runner,
                      timeout=args.timeout, save_outputs=args.save_outputs)
        doc = r.document
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
        print(json.dumps({"status": "error", "reason": first_line(e)}))
        return 2
    if doc["status"] == "vacuous":
        print(f"swbuild: check VACUOUS for {doc['model']} on {doc['target']}: {doc.get('reason')}", file=sys.stderr)
    elif doc["status"] != "pass":
        print(f"swbuild: check FAILED for {doc['model']} on {doc['target']}: {doc.get('reason')}", file=sys.stderr)
    else:
        print(f"swbuild: check passed for {doc['model']} on {doc['target']}: max abs err {doc['max_abs_err']:.3g}, "
              f"max rel err {doc['max_rel_err']:.3g}" + (f", {doc['compared']} of {doc['elements']} elements above atol"
              if "compared" in doc else "") + (f"; {doc['note']}" if doc.get("note") else ""), file=sys.stderr)
    if r.saved:
        print(f"swbuild: outputs written to {r.saved}", file=sys.stderr)
    elif args.save_outputs:
        print(f"swbuild: no outputs to write to {args.save_outputs}: the runner did not finish", file=sys.stderr)
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
    from . import api
    r = api.report(**_api_args(args), inputs=args.inputs, runner=args.runner, plot=args.plot)
    if args.plot:
        print(f"swbuild: plot written to {args.plot}", file=sys.stderr)
    print(json.dumps(r.document, sort_keys=True) if args.json else r.text)
    write_result(args, r.document)
    return 0


def cmd_run(args):
    """Run a built model --warmup + --repeat times; print each run's and each kernel's time."""
    from . import api
    r = api.run(**_api_args(args), inputs=args.inputs, repeat=args.repeat, warmup=args.warmup,
                save_outputs=args.outputs, runner=args.runner, timeout=args.timeout)
    if args.outputs:
        print(f"swbuild: outputs written to {args.outputs}", file=sys.stderr)
    doc = {"model": r.model, "target": r.target, "runner": str(r.runner), **r.timings.as_dict()}
    print(json.dumps(doc, sort_keys=True) if args.json else r.text)
    write_result(args, doc)
    return 0


def cmd_ops(args):
    """Without MODEL: the operators (of a target); with MODEL: per node, supported or why not."""
    from .driver import ops_report
    from .api.jobs import _toolchain, blame_inputs, make_job
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
    from .api.jobs import _scop_recipe, _toolchain, do_compile, make_job
    tc = _toolchain(args)
    r = _scop_recipe(args)
    if r is not None:       # the generated C, the recipe's C files and headers, a Makefile
        from .driver.scop_export import export_recipe
        path, meta = export_recipe(r, tc, args.out or f"{r.name}-{tc.name}.tar")
        print(f"swbuild: {r.name} for {tc.name} -> {path} ({len(meta['files'])} files + Makefile, metadata.json)",
              file=sys.stderr)
        return 0
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
    width = max(len(run.__module__.removeprefix("swbuild.")) for run in fam.pipeline)
    for i, run in enumerate(fam.pipeline, 1):
        doc = (run.__doc__ or "").strip().splitlines()
        where = run.__module__.removeprefix("swbuild.")
        print(f"{i:3}. {run.__name__:<26} {where:<{width}} {doc[0] if doc else ''}")
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
                       "object with status (pass/fail/vacuous/unsupported/error), max_abs_err, max_rel_err and compared (elements "
                       "above atol: none is `vacuous`, not a pass); exit 0 only on pass.")
    _model_args(p)
    p.add_argument("--inputs", help="npz of inputs keyed by graph input names (default: seeded normal)")
    p.add_argument("--expected", help="npz of expected outputs keyed by graph output names (default: onnxruntime)")
    p.add_argument("--runner", help="use this already built runner (its directory holds the plan)")
    p.add_argument("--result", metavar="FILE", help="also write the JSON document to FILE")
    p.add_argument("--timeout", type=_seconds, metavar="SECONDS",
                   help="stop the runner after this long and name the kernel it was in (default: the recipe's "
                        "check.timeout, 3600)")
    p.add_argument("--save-outputs", metavar="OUT.npz", help="also write the runner's outputs (keyed by output name)")
    p.set_defaults(fn=cmd_check)
    p = sub.add_parser("run", help="run a built model N times and print each run's and each kernel's time",
                       description="Build for an emulated target (or take --runner), run it --warmup + --repeat "
                       "times on --inputs (.npz keyed by input name, .npy for a model of one input; default: as "
                       "check) and print each run's and each kernel's time, read by the runner from the chip's "
                       "clock (Sunway rtc, CNRT notifiers; under emulation the emulator's clock). The exported "
                       "runner takes the same options on the machine: --repeat N --warmup W --times IN.npy OUT.npy.")
    _model_args(p)
    p.add_argument("--inputs", help="npz of inputs keyed by graph input names, or .npy for one input")
    p.add_argument("--outputs", metavar="OUT.npz", help="write the last run's outputs (keyed by output name)")
    p.add_argument("--repeat", type=_count(1), default=1, metavar="N", help="timed runs (default 1)")
    p.add_argument("--warmup", type=_count(0), default=0, metavar="W", help="untimed runs before them (default 0)")
    p.add_argument("--runner", help="use this already built runner (its directory holds the plan)")
    p.add_argument("--result", metavar="FILE", help="also write the JSON document to FILE")
    p.add_argument("--json", action="store_true", help="the times as one JSON document")
    p.add_argument("--timeout", type=_seconds, metavar="SECONDS", help="stop the runner after this long (all runs)")
    p.set_defaults(fn=cmd_run)
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
    from .driver import calibrate
    calibrate.add_parser(sub)
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
