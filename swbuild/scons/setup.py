"""setup(ARGUMENTS): the command-line variables of a swbuild project, its help, its errors.

    scons target=sunway-emu model=vgg16 batch=2 simd=off [check|report]
"""
from __future__ import annotations

import difflib
from pathlib import Path

import SCons.Errors
import SCons.Script
from SCons.Util import CLVar
from SCons.Variables import BoolVariable, EnumVariable, PathVariable, Variables

from swbuild.config import recipe, toolchain
from swbuild.support.errors import SwbuildError

from .tool import abort, generate

HELP_TAIL = """
Aliases:
    check       build the runners and compare their outputs with onnxruntime
    report      build the runners and print the JSON performance report
    check-<model>, report-<model>   the same for one model
    compiledb   compile_commands.json of the models' host, slave and runtime C

Outputs land in build/<target>/<model>/ (build/<target>/<model>-batch2-... when options are
given here). check and report write <prefix>.check.json / .report.json there and are up to
date while nothing they depend on changed. Set SWBUILD_CACHEDIR to share a build cache.
"""


# Flags a user may add on the command line; they reach the generated C like any other C.
USER_FLAGS = {"CCFLAGS": "extra C/C++ compiler flags for the model's and the runtime's sources",
              "LINKFLAGS": "extra linker flags for the runner"}


def compiler_variables(project_dir):
    """{SW5CC: 'sw5cc', ...}: the compiler-path variable of every known toolchain."""
    out = {}
    for name in toolchain.available(project_dir):
        try:
            c = toolchain.load(name, project_dir).compilers
        except SwbuildError:
            continue   # a broken file only matters when it is the selected target
        if c.get("path_variable"):
            out.setdefault(c["path_variable"], c.get("primary", ""))
    return dict(sorted(out.items()))


def _option_validator(key, value, env):
    try:
        recipe.parse_sets([f"{key}={value}"])
    except SwbuildError:
        raise SCons.Errors.UserError(f"bad value {key}={value}; allowed: {recipe.OPTIONS[key].allowed}") from None


def make_variables(args, project_dir, default_target=None):
    targets = toolchain.available(project_dir)
    models = recipe.list_models(project_dir)
    default_target = default_target or ("sunway-emu" if "sunway-emu" in targets else (targets or [""])[0])
    v = Variables(None, args)
    base_fmt = v.FormatVariableHelpText

    def fmt(env, key, help, default, actual, aliases=None):
        # None means "not set here": the recipe (or PATH, for compilers) decides.
        unset = "(the recipe's)" if key in recipe.OPTIONS else "(found on PATH)"
        shown = lambda x: unset if x is None else x  # noqa: E731
        return base_fmt(env, key, help, shown(default), shown(actual), aliases or [])
    v.FormatVariableHelpText = fmt
    v.Add(EnumVariable("target", "target to build for (a toolchains/*.toml)", default_target,
                       allowed_values=targets))
    v.Add(EnumVariable("model", "recipe in recipes/ to build, or all", "all",
                       allowed_values=models + ["all"]))
    v.Add(BoolVariable("verbose", "print full command lines", False))
    for var, exe in compiler_variables(project_dir).items():
        v.Add(PathVariable(var, f"full path of {exe}", None,
                           PathVariable.PathAccept))
    for key, what in USER_FLAGS.items():
        v.Add(key, f"{what}, after the target's own (e.g. {key}='-g -DTRACE')", None)
    for key, opt in recipe.OPTIONS.items():
        v.Add(key, f"{opt.help}; {opt.allowed} (overrides the recipe; default {opt.default})",
              None, _option_validator)
    return v


def setup(ARGUMENTS, project_dir=None, default_target=None, **env_kw):
    """Variables + help + the swbuild tool → an Environment for `target=`.

    env['SWBUILD_MODELS'] lists the models `model=` selects (all recipes by default).
    """
    project_dir = str(Path(project_dir or SCons.Script.Dir("#").get_abspath()).absolute())
    v = make_variables(ARGUMENTS, project_dir, default_target)
    try:
        env = SCons.Script.Environment(variables=v, SWBUILD_PROJECT=project_dir, **env_kw)
    except SCons.Errors.UserError as e:   # a bad target=/model=/option value
        abort(e)
    SCons.Script.Help(v.GenerateHelpText(env) + HELP_TAIL)
    for key in USER_FLAGS:     # a list, so the tool's Prepend keeps both
        env[key] = CLVar(env.get(key) or [])

    unknown = v.UnknownVariables()
    if unknown:
        known = [o.key for o in v.options]
        hints = []
        for k in unknown:
            close = difflib.get_close_matches(k, known, n=1)
            hints.append(f"{k}={unknown[k]}" + (f" (did you mean {close[0]}=?)" if close else ""))
        abort(f"unknown variable(s): {', '.join(hints)}; known: {', '.join(known)} (see scons -h)")
    models = recipe.list_models(project_dir)
    if not models and not SCons.Script.GetOption("help"):
        abort(f"no recipes in {Path(project_dir) / 'recipes'} (expected <model>.yaml, .yml or .toml)")
    generate(env, project_dir=project_dir)
    if env["model"] == "all":   # every recipe that allows this target
        env["SWBUILD_MODELS"] = [m for m in models if _allows(project_dir, m, env["SWBUILD_TARGET"])]
        if models and not env["SWBUILD_MODELS"] and not SCons.Script.GetOption("help"):
            groups = {}     # recipes with the same targets on one line
            for m in models:
                groups.setdefault(", ".join(_targets(project_dir, m)) or "any", []).append(m)
            allowed = "; ".join(f"{', '.join(ms)}: {ts}" for ts, ms in groups.items())
            abort(f"no recipe in {Path(project_dir) / 'recipes'} allows target={env['SWBUILD_TARGET']} "
                  f"(recipes and their targets: {allowed})")
    else:
        env["SWBUILD_MODELS"] = [env["model"]]
    return env


def _targets(project_dir, model):
    return recipe.load_recipe(recipe.find_recipe(project_dir, model)).targets


def _allows(project_dir, model, target):
    try:
        return recipe.load_recipe(recipe.find_recipe(project_dir, model)).allows(target)
    except SwbuildError:
        return True    # keep it: SwModel() reports the error with file and line
