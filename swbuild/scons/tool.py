"""The tool itself: `generate` adds the SwGen builder and the SwModel method to an Environment."""
from __future__ import annotations


import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

from SCons.Action import Action

from swbuild import build, toolchain
from swbuild.errors import SwbuildError
from swbuild.names import c_prefix
from swbuild.recipe import OPTIONS, find_recipe, load_recipe, parse_sets

from .actions import fail_action, step_commands
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
                   PYTHON=sys.executable, SWCLI=SWCLI, SWGENCOM=SWGENCOM, SWGENFLAGS="",
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

    if os.environ.get("SWBUILD_CACHEDIR"):
        env.CacheDir(os.environ["SWBUILD_CACHEDIR"])
    env["BUILDERS"]["SwGen"] = swgen_builder
    env.AddMethod(SwModel, "SwModel")
    add_scop_builder(env)   # env.SwScop('src/kernel.c') for C files with #pragma scop


def exists(env):
    return bool(toolchain.available(env.get("SWBUILD_PROJECT")))


def _set_flags(sets):
    return " ".join(f"--set {s}" for s in sets)


def SwModel(env, model=None, recipe=None):
    """Generate, compile and link one model for $SWBUILD_TARGET into
    $SWBUILD_BUILD_DIR/<target>/<model>/; registers the `check` and `report` aliases.
    Returns a namespace with recipe, prefix, dir, sources, lib, runner, check, report,
    runtime (the emulation runtime library node, or None)."""
    try:
        return _sw_model(env, model, recipe)
    except SwbuildError as e:   # a recipe error, or a target family without a layout
        abort(e)


def _sw_model(env, model, recipe):
    tc = env["SWBUILD_TOOLCHAIN"]
    target, project = env["SWBUILD_TARGET"], env["SWBUILD_PROJECT"]
    path = Path(recipe) if recipe else find_recipe(project, model)
    overrides = parse_sets(env["SWBUILD_SETS"])
    r = load_recipe(path).with_overrides(overrides)
    r.check_target(target)
    model = model or path.stem
    prefix = c_prefix(r.name)
    sets = [f"{k}={v}" for k, v in sorted(overrides.items())]
    verbose = env["SWBUILD_VERBOSE"]
    out = env.Dir(f"$SWBUILD_BUILD_DIR/{target}/{model}")
    mpi = int(r.options.get("core_groups", 1)) * int(r.options.get("nodes", 1)) > 1
    meta = dict(SWBUILD_MODEL=model, SWBUILD_PREFIX=prefix, SWBUILD_FAMILY=tc.family, SWBUILD_MPI="1" if mpi else "0",
                SWBUILD_RECIPE=env.File(str(path)).path, SWBUILD_OUT=out.path,
                SWGENFLAGS=_set_flags(sets))

    tc_files = [tc.path] + _emulated_base(tc, project)
    if r.source_kind == "scop":
        return _scop_model(env, r, path, model, prefix, out, meta, [signature_value(env, r, target)]
                           + [env.File(str(p)) for p in tc_files] + [env.File(p) for p in package_sources()])
    sources = env.SwGen(out, env.File(str(path)), **meta)
    env.Depends(sources, [signature_value(env, r, target)] + [env.File(str(p)) for p in tc_files]
                + [env.File(p) for p in package_sources()])

    # Compile and link: the same Steps `swbuild compile --exe` runs.
    gen_dir = Path(out.path)
    cpppath = [out] + [env.Dir(str(d)) for d in tc.runtime_include_dirs()]
    runtime_lib = _runtime(env, tc, verbose)
    steps, lib, exe = build.model_steps(tc, prefix, gen_dir, gen_dir, runtime_lib,
                                        env["SWBUILD_COMPILER_OVERRIDES"], mpi=mpi)
    nodes = step_commands(env, steps, verbose=verbose, CPPPATH=cpppath)
    built = [n for ns in nodes.values() for n in ns]
    if env["SWBUILD_COMPILER_ERROR"]:
        gate = _compiler_gate(env)
        env.Depends(gate, sources)      # generate first, then fail: the sources are written
        env.Depends(built, gate)
    lib_node, exe_node = nodes[str(lib)], nodes[str(exe)]

    # Commands on never-written files (AlwaysBuild) rather than Alias actions: Alias()
    # takes no construction-variable overrides.
    check = env.Command(out.File(".check"), exe_node, Action("$SWCHECKCOM", "$SWCHECKCOMSTR"), **meta)
    report = env.Command(out.File(".report"), exe_node, Action("$SWREPORTCOM", "$SWREPORTCOMSTR"), **meta)
    env.AlwaysBuild(check, report)
    check = env.Alias(f"check-{model}", check)
    report = env.Alias(f"report-{model}", report)
    env.Alias("check", check)
    env.Alias("report", report)
    if not mpi:     # swbuild export refuses builds over MPI ranks
        add_export(env, tc, out, prefix, model, sources)
    return SimpleNamespace(model=model, recipe=r, prefix=prefix, dir=out, sources=sources,
                           lib=lib_node, runner=exe_node, check=check, report=report,
                           runtime=env.File(str(runtime_lib)) if runtime_lib else None)


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
    check = env.Command(out.File(".check"), exe, Action("$SWCHECKCOM", "$SWCHECKCOMSTR"), **meta)
    env.AlwaysBuild(check)
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


def _runtime(env, tc, verbose):
    """The emulation runtime library of this target: one set of nodes for all its models."""
    out_dir = Path(env.Dir(f"$SWBUILD_BUILD_DIR/{tc.name}/_runtime").path)
    key = (id(env.fs), tc.name, str(out_dir))
    if key not in _runtime_libs:
        steps, lib = build.runtime_steps(tc, out_dir)
        cpppath = [env.Dir(str(d)) for d in tc.runtime_include_dirs()]
        nodes = step_commands(env, steps, verbose=verbose, CPPPATH=cpppath)
        if env["SWBUILD_COMPILER_ERROR"] and nodes:
            env.Depends([n for ns in nodes.values() for n in ns], _compiler_gate(env))
        _runtime_libs[key] = lib
    return _runtime_libs[key]


def _compiler_gate(env):
    """A node that fails with the ToolchainError message; compile steps depend on it."""
    gate = env.Dir(f"$SWBUILD_BUILD_DIR/{env['SWBUILD_TARGET']}").File(".compiler-missing")
    if not gate.has_builder():
        env.Command(gate, [], fail_action(env["SWBUILD_COMPILER_ERROR"]))
    return gate
