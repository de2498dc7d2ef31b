"""The compile and link steps of a generated model, as data.

One description serves both drivers: the SCons tool turns each Step into a Command node,
`swbuild check`/`compile --exe` runs them with subprocess. Keeping the argv here means
SCons and the CLI can never disagree on flags.
"""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from .backends import family, family_of
from .errors import ToolchainError


@dataclass
class Step:
    label: str          # short text for COMSTR-style output, e.g. "CC-SLAVE vgg16_slave.c"
    argv: list
    inputs: list        # Paths this step reads (besides headers)
    outputs: list       # Paths this step writes


def generated_files(prefix, family_name="sunway"):
    """Every file `swbuild compile` writes for a model, by role (the SCons emitter uses it)."""
    return family(family_name).generated_files(prefix)


def _cflags(tc, side, gen_dir):
    flags = list(tc.flags.get(side, []))
    for inc in tc.runtime_include_dirs():
        flags += ["-I", str(inc)]
    flags += [f"-D{d}" for d in tc.runtime_defines()]
    return flags + ["-I", str(gen_dir)]


def runtime_steps(tc, out_dir):
    """Steps that build the emulation runtime library (none for a real target)."""
    out_dir = Path(out_dir)
    srcs = tc.runtime_sources()
    if not srcs:
        return [], None
    objs, steps = [], []
    for src in srcs:
        obj = out_dir / (src.stem + ".o")
        argv = tc.argv("host_cc") + _cflags(tc, "host", src.parent) + ["-pthread", "-c", str(src), "-o", str(obj)]
        steps.append(Step(f"CC-EMU {src.name}", argv, [src], [obj]))
        objs.append(obj)
    lib = out_dir / "libswemu.a"
    steps.append(Step(f"AR {lib.name}", tc.argv("ar") + ["rcsD", str(lib)] + [str(o) for o in objs], objs, [lib]))
    return steps, lib


def model_steps(tc, prefix, gen_dir, out_dir, runtime_lib=None, overrides=None):
    """Steps that compile a generated model into lib<prefix>.a and link <prefix>_runner: the
    family's compile units (CompileUnit), the weights, the archive (host object first), the
    runner and the link."""
    gen_dir, out_dir = Path(gen_dir), Path(out_dir)
    fam = family_of(tc)
    f = fam.generated_files(prefix)
    cc = lambda tool: tc.argv(tool, overrides)  # noqa: E731
    src = {k: gen_dir / v for k, v in f.items()}
    steps, objs = [], {}
    for u in fam.units:
        objs[u.role] = out_dir / f"{prefix}_{u.role}.o"
        steps.append(Step(f"CC-{u.side.upper()} {f[u.role]}", cc(u.tool) + _cflags(tc, u.side, gen_dir)
                          + ["-c", str(src[u.role]), "-o", str(objs[u.role])], [src[r] for r in u.deps], [objs[u.role]]))
    w_o = out_dir / f"{prefix}_weights.o"
    runner_o = out_dir / f"{prefix}_runner_main.o"
    lib, exe = out_dir / f"lib{prefix}.a", out_dir / f"{prefix}_runner"
    members = sorted(objs.values(), key=lambda o: o != objs.get("host")) + [w_o]
    steps += [
        # .incbin is resolved by the assembler, so it gets the generated dir as its -I.
        Step(f"AS {f['weights_asm']}", cc("asm") + ["-c", str(src["weights_asm"]), f"-Wa,-I,{gen_dir}", "-o", str(w_o)],
             [src["weights_asm"], src["weights"]], [w_o]),
        Step(f"AR lib{prefix}.a", cc("ar") + ["rcsD", str(lib)] + [str(o) for o in members], members, [lib]),
        Step(f"CC-HOST {f['runner']}", cc("host_cc") + _cflags(tc, "host", gen_dir) + ["-c", str(src["runner"]), "-o", str(runner_o)],
             [src["runner"], src["header"]], [runner_o]),
    ]
    link_in = [runner_o, lib] + ([runtime_lib] if runtime_lib else [])
    steps.append(Step(f"LINK {exe.name}", cc("link") + list(tc.flags.get("link", [])) + [str(p) for p in link_in]
                      + list(tc.flags.get("libs", [])) + ["-o", str(exe)], link_in, [exe]))
    return steps, lib, exe


def run_steps(steps, verbose=False, log=print):
    for s in steps:
        for o in s.outputs:
            Path(o).parent.mkdir(parents=True, exist_ok=True)
        log(" ".join(map(str, s.argv)) if verbose else s.label)
        p = subprocess.run([str(a) for a in s.argv], capture_output=True, text=True)
        if p.returncode != 0:
            raise ToolchainError(f"{s.label} failed (exit {p.returncode}):\n{' '.join(map(str, s.argv))}\n{p.stdout}{p.stderr}")
        if p.stderr.strip() and verbose:
            log(p.stderr.rstrip())
