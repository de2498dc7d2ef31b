"""`swbuild calibrate --target T -o calib.tar`: the micro-benchmark archive a site builds and
runs on its machine (`make run` -> results.json) to measure the numbers of the target's cost
model; `swbuild calibrate --target T --ingest results.json` fits them (calibrate_fit.py).

The archive is the export archive's shape (export.py): C sources from swbuild/runtime/calibrate/
(Athread v1 and CRTS spellings for Sunway, BANG C for DianNao), a Makefile for the target's own
compilers with every tool and flag list a variable, and for an emulated target the emulation
runtime, so `make run` builds and runs it here with gcc/g++. Deterministic: same bytes on every
machine.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..support.version import __version__
from ..support.errors import SwbuildError
from .export import FLAG_VARS, RUNTIME_DIR, TOOL_VARS, _tool, _words, write_archive

SOURCES = Path(__file__).resolve().parents[1] / "runtime" / "calibrate"
RESULTS_FORMAT = "swbuild-calibrate-results"

# family -> (program, host source, slave/device source, shared headers), in run order
PROGRAMS = {
    "sunway": [("dma", "dma_host.c", "dma_slave.c"), ("mesh", "mesh_host.c", "mesh_slave.c")],
    "diannao": [("memcpy", "memcpy_host.cpp", "calib_device.mlu"), ("compute", "compute_host.cpp", "calib_device.mlu")],
}
HEADERS = {"sunway": ["calib.h", "calib_host.h"], "diannao": ["calib.h"]}
# the second tool/flag list: slave code (Sunway) or device code (DianNao)
OTHER_SIDE = {"sunway": ("slave_cc", "slave"), "diannao": ("device_cc", "device")}
DEFAULT_REPS = 32


def _family(tc):
    if PROGRAMS.get(tc.family) is None:
        raise SwbuildError(f"target {tc.name}: no calibration programs for family '{tc.family}'")
    return tc.family


def makefile(tc, runtime_srcs) -> str:
    """`make` builds every program; `make run` runs them (REPS repetitions each) and writes
    results.json, the document `swbuild calibrate --ingest` reads."""
    fam = _family(tc)
    tool2, side2 = OTHER_SIDE[fam]
    progs = PROGRAMS[fam]
    headers = " ".join(HEADERS[fam])
    out = [f"# swbuild calibration programs for {tc.name} ({tc.description}), written by swbuild {__version__}.",
           "# Build: make       Run: make run (writes results.json; REPS=n repetitions per measurement)",
           f"# Then, where swbuild is installed: swbuild calibrate --target {tc.name} --ingest results.json -o toolchains/",
           "# Override any tool or flag list on the command line: make CC=/path/to/cc CFLAGS=-O2", ""]
    for tool in ("host_cc", tool2, "link", "ar"):
        out.append(f"{TOOL_VARS[tool]} = {_words(_tool(tc, tool))}")
    defines = [f"-D{d}" for d in tc.runtime_defines()]
    incs = [f"-I{RUNTIME_DIR}/include"] if runtime_srcs is not None else []
    for side in ("host", side2):
        out.append(f"{FLAG_VARS[side]} = {_words(list(tc.flags.get(side, [])) + incs + defines + ['-I.'])}")
    out.append(f"LDFLAGS = {_words(tc.flags.get('link', []))}")
    rt_lib = "libswemu.a" if runtime_srcs else ""
    out.append(f"LDLIBS = {_words(([rt_lib] if rt_lib else []) + list(tc.flags.get('libs', [])))}")
    out += [f"REPS = {DEFAULT_REPS}", "", f"all: {' '.join(p for p, _, _ in progs)}", ""]
    objs = {}
    for prog, host, other in progs:
        for src, var, flags in ((host, "CC", "CFLAGS"), (other, TOOL_VARS[tool2], FLAG_VARS[side2])):
            obj = Path(src).stem + ".o"
            if obj not in objs:
                objs[obj] = [f"{obj}: {src} {headers}", f"\t$({var}) $({flags}) -c {src} -o $@", ""]
                out += objs[obj]
        members = f"{Path(host).stem}.o {Path(other).stem}.o"
        out += [f"{prog}: {members} {rt_lib}".rstrip(), f"\t$(LINK) $(LDFLAGS) {members} $(LDLIBS) -o $@", ""]
    head = json.dumps({"format": RESULTS_FORMAT, "format_version": 1, "target": tc.name, "swbuild": __version__})
    out += ["run: results.json", "", f"results.json: {' '.join(p for p, _, _ in progs)}",
            f"\tprintf '%s' '{head[:-1]}, \"programs\": [' > $@.tmp"]
    for i, (p, _, _) in enumerate(progs):      # one program failing stops make: no half document
        out += ([f"\tprintf ',' >> $@.tmp"] if i else []) + [f"\t./{p} $(REPS) >> $@.tmp"]
    out += ["\tprintf ']}\\n' >> $@.tmp", "\tmv $@.tmp $@", ""]
    if runtime_srcs:             # the emulation runtime, as build.runtime_steps builds it
        rt_objs = [f"{RUNTIME_DIR}/{Path(s).stem}.o" for s in runtime_srcs]
        for s, o in zip(runtime_srcs, rt_objs):
            out += [f"{o}: {RUNTIME_DIR}/src/{Path(s).name}",
                    f"\t$(CC) $(CFLAGS) -I{RUNTIME_DIR}/src -pthread -c $< -o $@", ""]
        out += [f"libswemu.a: {' '.join(rt_objs)}", f"\trm -f $@ && $(AR) rcs $@ {' '.join(rt_objs)}", ""]
    out += ["clean:", f"\trm -f *.o {RUNTIME_DIR}/*.o libswemu.a results.json {' '.join(p for p, _, _ in progs)}",
            "", ".PHONY: all run clean", ""]
    return "\n".join(out)


def members(tc) -> dict:
    """{name in the archive: bytes}: sources, headers, Makefile, the emulation runtime if any."""
    fam = _family(tc)
    src = SOURCES / fam
    names = sorted({n for p in PROGRAMS[fam] for n in p[1:]} | set(HEADERS[fam]))
    out = {n: (src / n).read_bytes() for n in names}
    runtime_srcs = None
    if tc.emulated:              # the runtime travels with the programs, as in an export
        runtime_srcs = [Path(s) for s in tc.runtime_sources()]
        for inc in tc.runtime_include_dirs():
            for p in sorted(Path(inc).rglob("*")):
                if p.is_file() and p.suffix in (".h", ".hpp"):
                    out[f"{RUNTIME_DIR}/include/{p.relative_to(inc).as_posix()}"] = p.read_bytes()
        for s in sorted({p for c in runtime_srcs for p in c.parent.iterdir() if p.suffix in (".c", ".h")}):
            out[f"{RUNTIME_DIR}/src/{s.name}"] = s.read_bytes()
    out["Makefile"] = makefile(tc, runtime_srcs).encode()
    return out


def write(tc, out_path):
    """The archive at out_path (.tar, .tar.gz or .tgz), its top directory `calibrate-<target>`."""
    return write_archive(out_path, f"calibrate-{tc.name}", members(tc))


def cmd_calibrate(args):
    """Write the archive (-o calib.tar), or with --ingest fit its results into a site toolchain file."""
    import sys

    from ..config import toolchain
    tc = toolchain.load(args.target, Path.cwd())
    if args.ingest:
        from .calibrate_fit import fit, write_site_file
        f = fit(tc, args.ingest)
        path = write_site_file(tc, f, args.out or "toolchains", Path(args.ingest).name)
        for k, v in f.values.items():
            shown = f"{len(v)} points" if k == "dma_curve" else f"{v:.4g}"
            print(f"  {k:<28} {shown:<12} (was {_was(tc, k)})")
        for k, why in f.not_fitted.items():
            print(f"  {k:<28} not fitted: {why}")
        for n in f.notes:
            print(f"  measured: {n}")
        print(f"swbuild: {len(f.values)} numbers of {tc.name} fitted -> {path}", file=sys.stderr)
        return 0
    out = args.out or f"calibrate-{tc.name}.tar"
    if Path(out).is_dir() or not str(out).endswith((".tar", ".tar.gz", ".tgz")):
        raise SwbuildError(f"-o {out}: the archive's name must end in .tar, .tar.gz or .tgz "
                           "(with --ingest, -o names the directory of the site toolchain file)")
    path = write(tc, out)
    print(f"swbuild: calibration programs for {tc.name} -> {path} (make run writes results.json; then "
          f"swbuild calibrate --target {tc.name} --ingest results.json)", file=sys.stderr)
    return 0


def _was(tc, key):
    v = tc.hardware.get(key)
    if v is None:
        return "unset"
    return f"{len(v)} points" if key == "dma_curve" else f"{v:.4g}"


def add_parser(sub):
    """The `calibrate` subcommand of cli.py."""
    from ..config import toolchain
    p = sub.add_parser("calibrate", help="measure the cost model's numbers on the machine: benchmark archive, then fit",
                       description="Without --ingest: write an archive of micro-benchmarks for the target (DMA by "
                       "size and mode, broadcasts, barriers, register messages, spawn, SIMD/scalar loops on Sunway; "
                       "__memcpy by direction, __bang_conv, barriers, launches on DianNao) with a Makefile for the "
                       "target's compilers; `make run` on the machine writes results.json. With --ingest "
                       "results.json: fit the toolchain numbers and write a site toolchain file (TOML, each fitted "
                       "number marked measured with the date) into -o DIR (default toolchains/), which overrides "
                       "the shipped one in that project. Emulated targets build and run the archive here.")
    p.add_argument("--target", "-t", required=True, help="target name: " + ", ".join(toolchain.available()))
    p.add_argument("--ingest", metavar="RESULTS.json", help="results.json of `make run` to fit")
    p.add_argument("-o", "--out", help="the archive (.tar, .tar.gz, .tgz; default calibrate-<target>.tar), or with "
                   "--ingest the directory of the site toolchain file (default toolchains/)")
    p.set_defaults(fn=cmd_calibrate)
