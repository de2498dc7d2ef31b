"""The tool itself: `generate` adds the SwGen builder and the SwModel method to an Environment."""
from __future__ import annotations


import json
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import SCons.Script
from SCons.Action import Action

import swbuild
from swbuild.driver import build
from swbuild.config import toolchain
from swbuild.support.errors import SwbuildError
from swbuild.support.names import c_prefix
from swbuild.config.recipe import OPTIONS, find_recipe, load_recipe, parse_sets

from . import compile, question
from .actions import fail_action
from .driver import FAIL_FILE
from .gen import PACKAGE_DIR, SWCHECKCOM, SWCLI, SWGENCOM, SWREPORTCOM, package_sources, signature_value, swgen_builder
from .export import add_export
from .scop import add_scop_builder


DEFAULT_TARGET = "sunway-emu"
_runtime_libs: dict = {}   # (fs, target, dir) → runtime lib node: built once, shared by models


def abort(message):
    """Stop reading the SConstruct with one line (a UserError would also print a frame
    from inside this package, which is not where the user's mistake is)."""
    import SCons.Script
    sys.stderr.write(f"scons: *** {message}\n")
    SCons.Script.Exit(2)


def generate(env, target=None, project_dir=None, verbose=None, **kw):
    """Add the SwGen builder and the SwModel method for one target (default: sunway-emu).
    `target`/`verbose` may also come from the environment (the scons variables)."""
    fs_top = env.Dir("#").get_abspath()
    env.SetDefault(SWBUILD_PROJECT=str(project_dir or fs_top), SWBUILD_BUILD_DIR="#build",
                   PYTHON=sys.executable, SWCLI=SWCLI, SWGENCOM=SWGENCOM, SWGENFLAGS="", SWRUNFLAGS="",
                   SWGENSRC="--recipe $SOURCE", SWRUNSRC="--recipe $SWBUILD_RECIPE",
                   SWCHECKCOM=SWCHECKCOM, SWREPORTCOM=SWREPORTCOM)
    project = env["SWBUILD_PROJECT"]
    env.SetDefault(SWBUILD_TARGET=target or env.get("target") or DEFAULT_TARGET)
    if verbose is None:
        verbose = bool(env.get("verbose", False))
    env.SetDefault(SWBUILD_VERBOSE=verbose)
    if not env["SWBUILD_VERBOSE"]:
        env.SetDefault(SWGENCOMSTR="SWGEN $SWBUILD_MODEL -> ${TARGET.dir}",
                       SWCHECKCOMSTR="CHECK $SWBUILD_MODEL ($SWBUILD_TARGET)",
                       SWREPORTCOMSTR="REPORT $SWBUILD_MODEL ($SWBUILD_TARGET)")
    try:
        tc = toolchain.load(env["SWBUILD_TARGET"], project)
    except SwbuildError as e:
        abort(e)
    env["SWBUILD_TOOLCHAIN"] = tc
    env.SetDefault(SWBUILD_SETS=[f"{k}={env[k]}" for k in OPTIONS if env.get(k) is not None])

    # The compiler: from SW5CC=... (command line / environment) or PATH. SCons does not pass
    # the shell's PATH to commands, so its directory is prepended to the build's PATH.
    var = tc.compilers.get("path_variable")
    overrides = {var: env[var]} if var and env.get(var) else {}
    env["SWBUILD_COMPILER_OVERRIDES"] = overrides
    path = tc.compiler_path(overrides) or shutil.which(tc.compilers.get("primary") or "")
    if path and os.path.isabs(path):
        env.PrependENVPath("PATH", os.path.dirname(path))
    if var and tc.compiler_path(overrides):
        env["ENV"][var] = tc.compiler_path(overrides)
    try:
        tc.check_compilers(overrides)
        env["SWBUILD_COMPILER_ERROR"] = ""
    except SwbuildError as e:
        # Not fatal here: sources are still generated; compiling fails with this message.
        env["SWBUILD_COMPILER_ERROR"] = str(e)

    # `python -m swbuild.cli` must run the swbuild this tool was loaded from, with the
    # same toolchain search path (project toolchains override packaged ones).
    if os.environ.get("PYTHONPATH"):
        env.PrependENVPath("PYTHONPATH", os.environ["PYTHONPATH"], delete_existing=False)
    env.PrependENVPath("PYTHONPATH", str(PACKAGE_DIR.parent))
    dirs = [d for d in os.environ.get("SWBUILD_TOOLCHAINS", "").split(os.pathsep) if d]
    if (Path(project) / "toolchains").is_dir():
        dirs.append(str(Path(project) / "toolchains"))
    if dirs:
        env["ENV"]["SWBUILD_TOOLCHAINS"] = os.pathsep.join(dirs)
    # SCons gives commands only PATH: the generator's caches (where they live, `off`) and
    # worker count come from the user's environment. It searches tiles on every core; under
    # `scons -j N` the builds already share the cores, so each searches in its own process.
    for var in ("SWBUILD_SCHEDULE_CACHE", "SWBUILD_ZOO_CACHE", "SWBUILD_JOBS", "XDG_CACHE_HOME", "HOME"):
        if os.environ.get(var):
            env["ENV"][var] = os.environ[var]
    if not os.environ.get("SWBUILD_JOBS") and int(SCons.Script.GetOption("num_jobs") or 1) > 1:
        env["ENV"]["SWBUILD_JOBS"] = "1"
    if os.environ.get(FAIL_FILE):     # run by the CLI (driver.py): the generator says why it failed
        env["ENV"][FAIL_FILE] = os.environ[FAIL_FILE]

    # Content signatures, but a file whose timestamp is unchanged is not read again: a null
    # build of vgg16 does not re-hash its 553 MB of weights (SCons' default re-hashes files
    # younger than --max-drift, two days).
    env.Decider("content-timestamp")
    question.install()     # scons -q names the out-of-date target and why
    if os.environ.get("SWBUILD_CACHEDIR"):
        env.CacheDir(os.environ["SWBUILD_CACHEDIR"])
    env["BUILDERS"]["SwGen"] = swgen_builder
    env.AddMethod(SwModel, "SwModel")
    add_scop_builder(env)   # env.SwScop('src/kernel.c') for C files with #pragma scop


def exists(env):
    return bool(toolchain.available(env.get("SWBUILD_PROJECT")))


def _set_flags(sets):
    return " ".join(f"--set {s}" for s in sets)


def SwModel(env, model=None, recipe=None, onnx=None, inputs=None, name=None, sets=None, out=None):
    """Generate, compile and link one model for $SWBUILD_TARGET into
    $SWBUILD_BUILD_DIR/<target>/<model>[-<options>]/; registers the `check` and `report` aliases.
    `onnx` (with `inputs` {name: shape}, `name`, `sets` ["batch=2", ...]) builds a bare model
    file instead of a recipe, as `swbuild compile model.onnx --exe` does; `out` a directory.
    Returns a namespace with recipe, prefix, dir, sources, lib, runner, check, report,
    runtime (the emulation runtime library node, or None)."""
    try:
        if onnx is not None:
            return _onnx_model(env, onnx, inputs or {}, name, list(sets or []), out)
        return _sw_model(env, model, recipe, out)
    except SwbuildError as e:   # a recipe error, or a target family without a layout
        abort(e)


def _compiler_files(env, tc):
    project = env["SWBUILD_PROJECT"]
    return [env.File(str(p)) for p in [tc.path] + _emulated_base(tc, project)] + [env.File(p) for p in package_sources()]


def _sw_model(env, model, recipe, out_dir=None):
    tc = env["SWBUILD_TOOLCHAIN"]
    target, project = env["SWBUILD_TARGET"], env["SWBUILD_PROJECT"]
    path = Path(recipe) if recipe else find_recipe(project, model)
    overrides = parse_sets(env["SWBUILD_SETS"])
    r = load_recipe(path).with_overrides(overrides)
    r.check_target(target)
    model = model or path.stem
    prefix = c_prefix(r.name)
    sets = [f"{k}={v}" for k, v in sorted(overrides.items())]
    out = env.Dir(out_dir or f"$SWBUILD_BUILD_DIR/{target}/{build.variant_name(model, overrides)}")
    mpi = int(r.options.get("core_groups", 1)) * int(r.options.get("nodes", 1)) > 1
    meta = dict(SWBUILD_MODEL=model, SWBUILD_PREFIX=prefix, SWBUILD_FAMILY=tc.family, SWBUILD_MPI="1" if mpi else "0",
                SWBUILD_RECIPE=env.File(str(path)).path, SWBUILD_OUT=out.path,
                SWGENFLAGS=_set_flags(sets))
    deps = [signature_value(env, r, target)] + _compiler_files(env, tc)
    if r.source_kind == "scop":
        return _scop_model(env, r, path, model, prefix, out, meta, deps)
    sources = env.SwGen(out, env.File(str(path)), **meta)
    env.Depends(sources, deps)
    return _compile_and_run(env, model, r, prefix, out, sources, mpi, meta, deps + [env.File(str(p)) for p in r.source_files()])


def _onnx_model(env, onnx, inputs, name, sets, out_dir):
    """A bare ONNX file (the CLI's `swbuild compile model.onnx --exe`): its options come as
    --set/--input/--name flags, which are part of the generator's command signature."""
    tc = env["SWBUILD_TOOLCHAIN"]
    src = env.File(str(onnx))
    name = name or Path(str(onnx)).stem
    overrides = parse_sets(sets)
    opts = {k: o.default for k, o in OPTIONS.items()}
    opts.update(overrides)
    mpi = int(opts.get("core_groups", 1)) * int(opts.get("nodes", 1)) > 1
    prefix = c_prefix(name)
    out = env.Dir(out_dir or f"$SWBUILD_BUILD_DIR/{env['SWBUILD_TARGET']}/{build.variant_name(name, overrides)}")
    flags = [_set_flags(sorted(f"{k}={v}" for k, v in overrides.items()))]
    flags += [f"--input {k}={'x'.join(map(str, v))}" for k, v in sorted(inputs.items())]
    flags += [f"--name {name}"] if name != Path(str(onnx)).stem else []
    meta = dict(SWBUILD_MODEL=name, SWBUILD_PREFIX=prefix, SWBUILD_FAMILY=tc.family, SWBUILD_MPI="1" if mpi else "0",
                SWBUILD_RECIPE=src.path, SWBUILD_OUT=out.path, SWGENSRC="$SOURCE", SWRUNSRC="$SWBUILD_RECIPE",
                SWGENFLAGS=" ".join(f for f in flags if f))
    deps = [env.Value(json.dumps({"swbuild_version": swbuild.__version__, "target": env["SWBUILD_TARGET"]}))]
    deps += _compiler_files(env, tc)
    sources = env.SwGen(out, src, **meta)
    env.Depends(sources, deps)
    return _compile_and_run(env, name, None, prefix, out, sources, mpi, meta, deps + [src])


def _compile_and_run(env, model, r, prefix, out, sources, mpi, meta, run_deps):
    """SCons' C builders over the generated sources (swbuild.driver.build.model_build), then the
    `check` and `report` targets: JSON files that are up to date while the runner, the
    plan, the recipe and swbuild are."""
    tc = env["SWBUILD_TOOLCHAIN"]
    verbose = env["SWBUILD_VERBOSE"]
    gate = None
    if env["SWBUILD_COMPILER_ERROR"]:
        gate = _compiler_gate(env)
        env.Depends(gate, sources)      # generate first, then fail: the sources are written
    runtime_lib, runtime_node = _runtime(env, tc, verbose, gate)
    b = build.model_build(tc, prefix, Path(out.path), Path(out.path), runtime_lib,
                          env["SWBUILD_COMPILER_OVERRIDES"], mpi=mpi)
    lib_node, exe_node = compile.model(env, b, runtime_node, verbose, gate)

    plan = out.File(build.generated_files(prefix, tc.family)["plan"])
    check = env.Command(out.File(f"{prefix}.check.json"), [exe_node, plan] + run_deps,
                        Action("$SWCHECKCOM", "$SWCHECKCOMSTR"), **meta)
    report = env.Command(out.File(f"{prefix}.report.json"), [exe_node, plan] + run_deps,
                         Action("$SWREPORTCOM", "$SWREPORTCOMSTR"), **meta)
    env.Clean(exe_node, check + report)     # `scons -c` leaves no result of a removed runner
    env.NoCache(check + report)             # results of a run on this machine, not build products
    check = env.Alias(f"check-{model}", check)
    report = env.Alias(f"report-{model}", report)
    env.Alias("check", check)
    env.Alias("report", report)
    if not mpi:     # swbuild export refuses builds over MPI ranks
        add_export(env, tc, out, prefix, model, sources)
    return SimpleNamespace(model=model, recipe=r, prefix=prefix, dir=out, sources=sources,
                           lib=lib_node, runner=exe_node, check=check, report=report,
                           runtime=runtime_node[0] if runtime_node else None)


def _scop_model(env, r, path, model, prefix, out, meta, deps):
    """A recipe whose source is a C file with #pragma scop regions: generate host + slave C
    and build the program in one step (`swbuild compile --exe`), check against the serial
    program. The C scanner follows the C file's #includes, so a header edit rebuilds."""
    import SCons.Scanner.C
    stem = Path(r.source).stem
    gen = [out.File(f"{stem}_host.c"), out.File(f"{stem}_slave.c"), out.File(f"{stem}_scop.h")]
    exe = out.File(prefix)
    srcs = [env.File(str(p)) for p in r.source_files()]
    cpppath = [env.Dir(str(Path(r.source).parent))] + [env.Dir(str(i)) for i in r.scop["include"]]
    prog = env.Command(gen + [exe], [env.File(str(path))] + srcs,
                       Action("$SWCLI compile --recipe $SWBUILD_RECIPE --target $SWBUILD_TARGET -o $SWBUILD_OUT "
                              "--exe $SWGENFLAGS", "$SWGENCOMSTR"),
                       source_scanner=SCons.Scanner.C.CScanner(), CPPPATH=cpppath, **meta)
    env.Depends(prog, deps)
    check = env.Command(out.File(f"{prefix}.check.json"), [exe] + srcs + deps,
                        Action("$SWCHECKCOM", "$SWCHECKCOMSTR"), **meta)
    env.NoCache(check)
    check = env.Alias(f"check-{model}", check)
    env.Alias("check", check)
    return SimpleNamespace(model=model, recipe=r, prefix=prefix, dir=out, sources=gen, lib=None,
                           runner=exe, check=check, report=None, runtime=None)


def _emulated_base(tc, project):
    """The toolchain file an emulated target `emulates` (its hardware numbers come from it)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib
    with open(tc.path, "rb") as f:
        base = tomllib.load(f).get("emulates")
    return [toolchain.find_file(base, project)] if base else []


def _runtime(env, tc, verbose, gate=None):
    """The emulation runtime library of this target in $SWBUILD_BUILD_DIR/<target>/_runtime:
    one set of nodes for all its models. Returns (path, node list) or (None, None)."""
    out_dir = Path(env.Dir(env.get("SWBUILD_RUNTIME_DIR") or f"$SWBUILD_BUILD_DIR/{tc.name}/_runtime").path)
    key = (id(env.fs), tc.name, str(out_dir))
    if key not in _runtime_libs:
        compiles = build.runtime_compiles(tc, out_dir)
        lib = out_dir / "libswemu.a"
        node = compile.runtime(env, compiles, lib, tc.argv("ar"), verbose, gate) if compiles else None
        _runtime_libs[key] = (lib if compiles else None, node)
    return _runtime_libs[key]


def _compiler_gate(env):
    """A node that fails with the ToolchainError message; compile steps depend on it."""
    gate = env.Dir(f"$SWBUILD_BUILD_DIR/{env['SWBUILD_TARGET']}").File(".compiler-missing")
    if not gate.has_builder():
        env.Command(gate, [], fail_action(env["SWBUILD_COMPILER_ERROR"]))
    return gate
