"""`swbuild scop FILE.c [OTHER.c ...] --target T -o DIR`: C SCoPs to Sunway host + slave C.

Also runnable as `python -m swbuild.driver.scop ...` (what the SCons builder calls).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from . import build
from ..config import toolchain
from ..support.errors import SwbuildError

DESCRIPTION = """Transform the `#pragma scop` regions of FILE.c into Athread code: writes
DIR/<stem>_host.c (FILE.c with each region replaced by a kernel launch), DIR/<stem>_slave.c
(the CPE kernels) and DIR/<stem>_scop.h (their parameter structs). With --exe, also compiles
them with OTHER.c (unchanged) and links a program for the target."""


def add_parser(subparsers):
    p = subparsers.add_parser("scop", help="C file with #pragma scop regions -> Sunway host + slave C",
                              description=DESCRIPTION)
    p.add_argument("file", help="C file whose #pragma scop regions are transformed")
    p.add_argument("others", nargs="*", metavar="OTHER.c", help="more C files, compiled unchanged (--exe)")
    p.add_argument("--target", required=True, help="toolchain name, e.g. sunway-emu")
    p.add_argument("-o", "--output", required=True, type=Path, help="directory for generated files")
    p.add_argument("-I", dest="includes", action="append", default=[], metavar="DIR")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=V]")
    p.add_argument("--exe", metavar="NAME", help="compile and link a program DIR/NAME")
    p.add_argument("--serial-fallback", action="store_true",
                   help="keep regions outside the polyhedral model serial on the MPE instead of failing")
    p.add_argument("--mapping", choices=("auto", "1d", "2d"), default="auto",
                   help="CPE mapping: 1-D over 64 CPEs, 2-D over the 8x8 mesh, or chosen by cost (default)")
    p.add_argument("-v", "--verbose", action="store_true", help="print commands and the plan")
    p.set_defaults(func=run, fn=run)      # swbuild.cli dispatches on `fn`
    return p


def generate(path, tc, out_dir, includes=(), defines=(), mapping="auto", serial_fallback=False,
             stem=None, log=None):
    """Generate the three files; returns {'paths', 'plans', 'seconds'}."""
    from ..backends.sunway.emit import scop_printer
    from ..optimizer.polyhedral import plan_region
    from ..frontends import scop

    from ..config.recipe_checks import scop_family_problem
    if scop_family_problem(tc.name, tc.family):
        raise SwbuildError(f"{path}: {scop_family_problem(tc.name, tc.family)}")
    t0 = time.perf_counter()
    path = Path(path)
    stem = stem or path.stem
    if not path.is_file():
        raise SwbuildError(f"{path}: no such file")
    text = path.read_text()
    regions = scop.extract(path, tc, includes, defines)
    if not regions:
        raise SwbuildError(f"{path}: no #pragma scop region")
    force = None if mapping in (None, "auto") else mapping
    pr = scop_printer.ScopPrinter(tc, path, stem)
    plans = [plan_region(r, tc, force, serial_fallback, kname=lambda k, r=r: pr.kname(r, k))
             for r in regions]
    paths = scop_printer.print_files(tc, path, text, plans, out_dir, stem)
    secs = time.perf_counter() - t0
    if log:
        for p in plans:
            log(describe(p))
    return {"paths": paths, "plans": plans, "seconds": secs}


def describe(plan):
    r = plan.region
    if plan.serial:
        return f"region {r.index} ({r.path}:{r.start_line}): serial on the MPE ({plan.reason})"
    out = [f"region {r.index} ({r.path}:{r.start_line}): {len(plan.kernels)} kernel(s), "
           f"serial statements {plan.host.serial or 'none'}"]
    for kp in plan.kernels:
        t = kp.tiling
        out.append(f"  kernel {kp.kernel.index}: {', '.join(kp.kernel.stmts)}; members {list(t.members)} "
                   f"over {'x'.join(map(str, t.grid))}; tiles {t.sizes}; LDM {t.ldm_bytes} B; buffers "
                   + ", ".join(f"{g.array}{g.extents}@{g.level}{'rw' if g.rw else 'r'}" for g in kp.groups))
    return "\n".join(out)


def exe_steps(tc, paths, others, out_dir, exe, includes=(), defines=(), source_dir=None):
    """Compile the generated host/slave files and OTHER.c, link with the emulation runtime."""
    out_dir = Path(out_dir)
    obj_dir = out_dir / "obj"
    steps, lib = build.runtime_steps(tc, obj_dir / "runtime")
    user = [f"-I{i}" for i in includes] + [f"-D{d}" for d in defines]
    if source_dir is not None:
        user = [f"-I{source_dir}"] + user           # the host file keeps the user's #include "..."
    objs = []

    def cc(tool, side, src, extra):
        obj = obj_dir / (Path(src).stem + ".o")
        argv = tc.argv(tool) + build.cflags(tc, side, out_dir) + extra + ["-c", str(src), "-o", str(obj)]
        steps.append(build.Step(f"{'CC-SLAVE' if side == 'slave' else 'CC-HOST'} {Path(src).name}",
                                argv, [Path(src)], [obj]))
        objs.append(obj)

    cc("host_cc", "host", paths["host"], user)
    cc("slave_cc", "slave", paths["slave"], [])
    for o in others:
        cc("host_cc", "host", o, user)
    exe_path = out_dir / exe
    link_in = objs + ([lib] if lib else [])
    steps.append(build.Step(f"LINK {exe}", tc.argv("link") + list(tc.flags.get("link", []))
                            + [str(p) for p in link_in] + list(tc.flags.get("libs", [])) + ["-o", str(exe_path)],
                            link_in, [exe_path]))
    return steps, exe_path


def run(args):
    tc = toolchain.load(args.target)
    log = (lambda m: print(m, file=sys.stderr)) if args.verbose else None
    res = generate(args.file, tc, args.output, args.includes, args.defines, args.mapping,
                   args.serial_fallback, log=log)
    if args.verbose:
        for p in res["paths"].values():
            print(p)
    if args.exe:
        tc.check_compilers()
        # the emulated slave compiler is `python -m swbuild.runtime.slavecc`: make sure it
        # finds this swbuild whatever the current directory
        pkg_parent = str(Path(__file__).resolve().parents[2])
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if pkg_parent not in paths:
            os.environ["PYTHONPATH"] = os.pathsep.join([pkg_parent] + paths)
        steps, exe = exe_steps(tc, res["paths"], args.others, args.output, args.exe,
                               args.includes, args.defines, Path(args.file).resolve().parent)
        build.run_steps(steps, verbose=args.verbose, log=lambda m: print(m, file=sys.stderr))
        print(exe)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="swbuild")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["scop"] + list(sys.argv[1:] if argv is None else argv))
    try:
        return args.func(args)
    except SwbuildError as e:
        print(f"swbuild scop: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
