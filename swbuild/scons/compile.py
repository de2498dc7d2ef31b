"""swbuild.driver.build's description of a model (and of the emulation runtime) as SCons' own
C builders: StaticObject, StaticLibrary, Program, each in a clone of the user's
environment that takes the target's compiler and flags from the toolchain file first and
keeps the user's CCFLAGS, CPPDEFINES, CPPPATH, LINKFLAGS, LIBS and *COMSTR after them, so
`compilation_db`, CacheDir, -j and VariantDir see ordinary C compiles.

Absolute paths (an interpreter, SW5CC=/opt/..., an out-of-tree -o) are wrapped in $( $):
they stay out of the build signatures, so a moved project or a shared cache still matches.
"""
from __future__ import annotations

import SCons.Action
import SCons.Defaults
import SCons.Tool

from swbuild.driver.build import asm_include_args

from .actions import is_abs_arg

# .mlu (BANG C device code) is C++ to the device compiler: the C scanner follows its #includes.
MLU_SUFFIX = ".mlu"
_TOOLS = ("cc", "c++", "as", "ar", "link")


def cmd_list(argv):
    """An argv prefix as a construction-variable list; absolute paths kept out of signatures."""
    out = []
    for a in argv:
        a = str(a).replace("$", "$$")
        out += ["$(", a, "$)"] if is_abs_arg(a) else [a]
    return out


def _ensure_c_tools(env):
    """The C builders even on Environment(tools=[]): the compilers come from the toolchain."""
    if "StaticObject" not in env["BUILDERS"] or "Program" not in env["BUILDERS"]:
        for t in _TOOLS:
            env.Tool(t)
    static_obj, _ = SCons.Tool.createObjBuilders(env)
    if MLU_SUFFIX not in static_obj.cmdgen:
        static_obj.add_action(MLU_SUFFIX, SCons.Defaults.CXXAction)
        static_obj.add_emitter(MLU_SUFFIX, SCons.Defaults.StaticObjectEmitter)
        SCons.Tool.SourceFileScanner.add_scanner(MLU_SUFFIX, SCons.Tool.CScanner)


def _label(env, var, text, verbose):
    """COMSTR lines like `CC-SLAVE vgg16_slave.c` unless the user set their own or verbose=1."""
    if not verbose and not env.get(var):
        env[var] = text


def _compile_env(env, c, verbose):
    e = env.Clone()
    tool = cmd_list(c.tool)
    e.Replace(CC=tool, CXX=tool)
    e.Prepend(CCFLAGS=list(c.flags), CPPDEFINES=list(c.defines),
              CPPPATH=[e.Dir(str(d)) for d in c.include])
    if c.asm_include:   # the weights' .incbin: ASPPCOM runs $CC
        e["ASPPFLAGS"] = ["$ASFLAGS"] + cmd_list(a for d in c.asm_include for a in asm_include_args(d))
    for var in ("CCCOMSTR", "CXXCOMSTR", "ASPPCOMSTR"):
        _label(e, var, f"{c.label} ${{SOURCE.file}}", verbose)
    return e


def objects(env, compiles, verbose, gate=None):
    """StaticObject nodes, one per swbuild.driver.build.Compile."""
    _ensure_c_tools(env)
    out = []
    for c in compiles:
        obj = _compile_env(env, c, verbose).StaticObject(target=str(c.obj), source=str(c.source))
        if c.deps:
            env.Depends(obj, [str(d) for d in c.deps])
        if gate is not None:
            env.Depends(obj, gate)
        out += obj
    return out


def library(env, lib, members, ar, ar_flags, verbose):
    e = env.Clone(AR=cmd_list(ar), ARFLAGS=ar_flags, RANLIBCOM="")   # `s` in ARFLAGS indexes it
    _label(e, "ARCOMSTR", "AR ${TARGET.file}", verbose)
    return e.StaticLibrary(target=str(lib), source=members)


def _split_libs(libs):
    """-lfoo → LIBS entry 'foo'; anything else is a link flag."""
    names = [a[2:] for a in libs if a.startswith("-l") and len(a) > 2]
    other = [a for a in libs if not (a.startswith("-l") and len(a) > 2)]
    return names, other


def program(env, b, runner_obj, lib_node, runtime_node, verbose):
    e = env.Clone(LINK=cmd_list(b.link))
    names, other = _split_libs(b.libs)
    e.Prepend(LINKFLAGS=cmd_list(b.link_flags + other))
    # archives before the system libraries: a static link resolves left to right
    e.Prepend(LIBS=list(lib_node) + (list(runtime_node) if runtime_node else []) + names)
    _label(e, "LINKCOMSTR", "LINK ${TARGET.file}", verbose)
    return e.Program(target=str(b.exe), source=runner_obj)


def model(env, b, runtime_node, verbose, gate=None):
    """A swbuild.driver.build.ModelBuild → (library node, runner node)."""
    members = objects(env, b.compiles, verbose, gate)
    lib = library(env, b.lib, members, b.ar, b.ar_flags, verbose)
    runner_obj = objects(env, [b.runner], verbose, gate)
    exe = program(env, b, runner_obj, lib, runtime_node, verbose)
    # A thin archive (build.ar_flags) holds its members' names and sizes, not their bytes:
    # new weights of the same size leave it byte-identical, and the content decider would
    # then keep a runner linked with the old weights (issue 37). The members are the link's
    # real inputs.
    env.Depends(exe, members)
    return lib, exe


def runtime(env, compiles, lib, ar, verbose, gate=None):
    members = objects(env, compiles, verbose, gate)
    return library(env, lib, members, ar, "rcsD", verbose)
