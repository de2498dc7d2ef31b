"""`swbuild export MODEL --target T -o model.tar`: one archive an operator builds on the
machine without swbuild, as TVM's Model Library Format: the generated sources and headers,
the weights, a Makefile for the target's own compilers (sw5cc, cncc...), the lock file, the
plan and a metadata document (inputs, outputs, dtypes, shapes, workspace size, target,
versions). For an emulated target the emulation runtime's sources come along, so a plain
`make` builds and links it with gcc.

The archive is deterministic: members sorted, mtime 0, uid/gid 0, no user names, fixed modes.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import platform
import tarfile
from pathlib import Path

from .. import __version__
from ..backends import family_of
from ..support.errors import SwbuildError

# Makefile variable of each toolchain compiler and flag list (all overridable: make CC=...).
TOOL_VARS = {"host_cc": "CC", "slave_cc": "SLAVE_CC", "device_cc": "DEVICE_CC", "asm": "ASM", "link": "LINK",
             "ar": "AR"}
FLAG_VARS = {"host": "CFLAGS", "slave": "SLAVE_CFLAGS", "device": "DEVICE_CFLAGS", "link": "LDFLAGS",
             "libs": "LDLIBS"}
RUNTIME_DIR = "runtime"


def _words(argv):
    """A make-safe rendering of an argv list (toolchain entries are plain words)."""
    for a in argv:
        if any(c in a for c in " \t\n$#\\\"'"):
            raise SwbuildError(f"toolchain entry {a!r} cannot be written into a Makefile (spaces or make syntax)")
    return " ".join(argv)


def _tool(tc, tool):
    """The toolchain's argv for `tool` as written in its file (no local path substitution:
    the Makefile runs on the operator's machine); `{python}` is this one's interpreter name."""
    return [a.replace("{python}", "python3") for a in tc.compilers[tool]]


def makefile(tc, prefix, files, runtime_srcs) -> str:
    """The Makefile: the same compile units, weights object, archive and runner link as
    build.model_steps, with every tool and flag list a variable."""
    fam = family_of(tc)
    f = fam.generated_files(prefix)
    used_tools = sorted({u.tool for u in fam.units} | {"host_cc", "asm", "ar", "link"}, key=list(TOOL_VARS).index)
    out = [f"# {prefix} for {tc.name} ({tc.description}), exported by swbuild {__version__}.",
           "# Build: make       Override any tool or flag list on the command line: make CC=/path/to/cc CFLAGS=-O2",
           f"# Outputs: lib{prefix}.a, the model (include {prefix}.h; call {prefix}_init, {prefix}_run, "
           f"{prefix}_teardown), and {prefix}_runner, a program around it ({f['runner']}).", ""]
    for tool in used_tools:
        out.append(f"{TOOL_VARS[tool]} = {_words(_tool(tc, tool))}")
    defines = [f"-D{d}" for d in tc.runtime_defines()]
    incs = [f"-I{RUNTIME_DIR}/include"] if runtime_srcs is not None else []
    for side in sorted({u.side for u in fam.units} | {"host"}, key=list(FLAG_VARS).index):
        out.append(f"{FLAG_VARS[side]} = {_words(list(tc.flags.get(side, [])) + incs + defines + ['-I.'])}")
    out.append(f"LDFLAGS = {_words(tc.flags.get('link', []))}")
    rt_lib = "libswemu.a" if runtime_srcs else ""
    out.append(f"LDLIBS = {_words(([rt_lib] if rt_lib else []) + list(tc.flags.get('libs', [])))}")
    objs = {u.role: f"{prefix}_{u.role}.o" for u in fam.units}
    members = sorted(objs.values(), key=lambda o: o != objs.get("host")) + ([f"{prefix}_weights.o"]
                                                                           if "weights_asm" in f else [])
    out += ["", f"all: lib{prefix}.a {prefix}_runner", ""]
    for u in fam.units:
        deps = " ".join(f[r] for r in u.deps)
        out += [f"{objs[u.role]}: {deps}",
                f"\t$({TOOL_VARS[u.tool]}) $({FLAG_VARS[u.side]}) -c {f[u.role]} -o $@", ""]
    if "weights_asm" in f:       # .incbin is resolved by the assembler: -I. finds the .bin
        out += [f"{prefix}_weights.o: {f['weights_asm']} {f['weights']}",
                f"\t$(ASM) -c {f['weights_asm']} -Wa,-I,. -o $@", ""]
    out += [f"lib{prefix}.a: {' '.join(members)}", f"\trm -f $@ && $(AR) rcs $@ {' '.join(members)}", "",
            f"{prefix}_runner_main.o: {f['runner']} {f['header']}",
            f"\t$(CC) $(CFLAGS) -c {f['runner']} -o $@", "",
            f"{prefix}_runner: {prefix}_runner_main.o lib{prefix}.a {rt_lib}".rstrip(),
            f"\t$(LINK) $(LDFLAGS) {prefix}_runner_main.o lib{prefix}.a $(LDLIBS) -o $@", ""]
    if runtime_srcs:             # the emulation runtime, as build.runtime_steps builds it
        rt_objs = [f"{RUNTIME_DIR}/{Path(s).stem}.o" for s in runtime_srcs]
        for s, o in zip(runtime_srcs, rt_objs):
            out += [f"{o}: {RUNTIME_DIR}/src/{Path(s).name}",
                    f"\t$(CC) $(CFLAGS) -I{RUNTIME_DIR}/src -pthread -c $< -o $@", ""]
        out += [f"libswemu.a: {' '.join(rt_objs)}", f"\trm -f $@ && $(AR) rcs $@ {' '.join(rt_objs)}", ""]
    out += ["clean:", f"\trm -f *.o {RUNTIME_DIR}/*.o lib{prefix}.a libswemu.a {prefix}_runner", "",
            ".PHONY: all clean", ""]
    return "\n".join(out)


def metadata(tc, plan, prefix, files, lock) -> dict:
    import numpy
    import onnx
    return {
        "format": "swbuild-export", "format_version": 1,
        "model": plan["model"], "prefix": prefix,
        "target": {"name": tc.name, "family": tc.family, "chip": tc.chip, "api": tc.api,
                   "emulated": bool(tc.emulated), "toolchain_sha256": lock.get("toolchain", {}).get("sha256")},
        "inputs": plan["inputs"], "outputs": plan["outputs"],
        "workspace_bytes": int(plan["arena_bytes"]),
        "weights_bytes": len(files.get(f"{prefix}_weights.bin", b"")),
        "c_api": {"header": f"{prefix}.h", "init": f"{prefix}_init", "run": f"{prefix}_run",
                  "teardown": f"{prefix}_teardown", "workspace_macro": f"{prefix.upper()}_WORKSPACE_SIZE"},
        "files": {n: hashlib.sha256(b).hexdigest() for n, b in sorted(files.items())},
        "versions": {"swbuild": __version__, "onnx": onnx.__version__, "numpy": numpy.__version__,
                     "python": platform.python_version()},
    }


def _member(name, data, mode=0o644):
    ti = tarfile.TarInfo(name)
    ti.size, ti.mode, ti.mtime = len(data), mode, 0
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    return ti


def write_archive(path, top, members: dict):
    """A tar (or .tar.gz / .tgz) of {relative name: bytes} under `top/`, byte-for-byte
    reproducible: sorted members, fixed times, owners and modes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        dirs = sorted({top} | {f"{top}/{p}" for n in members for p in _parents(n)})
        for d in dirs:
            ti = _member(d, b"", 0o755)
            ti.type = tarfile.DIRTYPE
            tar.addfile(ti)
        for name in sorted(members):
            data = members[name]
            tar.addfile(_member(f"{top}/{name}", data), io.BytesIO(data))
    raw = buf.getvalue()
    path = Path(path)
    if path.name.endswith((".tar.gz", ".tgz")):
        out = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) as gz:
            gz.write(raw)
        raw = out.getvalue()
    elif not path.name.endswith(".tar"):
        raise SwbuildError(f"-o {path}: the archive's name must end in .tar, .tar.gz or .tgz")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(raw)
    tmp.replace(path)
    return path


def _parents(name):
    parts = name.split("/")[:-1]
    return ["/".join(parts[:i + 1]) for i in range(len(parts))]


def export(gen_dir, tc, prefix, out_path):
    """Archive what `swbuild compile` wrote for `prefix` into gen_dir; returns (path, metadata)."""
    gen_dir = Path(gen_dir)
    lock = json.loads((gen_dir / f"{prefix}.lock.json").read_text())
    plan = json.loads((gen_dir / f"{prefix}.plan.json").read_text())
    if "mpi" in plan:
        raise SwbuildError(f"model {plan['model']}: exporting a build over MPI ranks (core_groups/nodes > 1) is not "
                           "supported; export the one-core-group build and launch it with the site's MPI")
    files = {n: (gen_dir / n).read_bytes() for n in sorted(lock["outputs"])}
    files[f"{prefix}.lock.json"] = (gen_dir / f"{prefix}.lock.json").read_bytes()
    runtime_srcs = None
    members = dict(files)
    if tc.emulated:              # the emulation runtime travels with the code it runs
        runtime_srcs = [Path(s) for s in tc.runtime_sources()]
        for inc in tc.runtime_include_dirs():
            for p in sorted(Path(inc).rglob("*")):
                if p.is_file() and p.suffix in (".h", ".hpp"):
                    members[f"{RUNTIME_DIR}/include/{p.relative_to(inc).as_posix()}"] = p.read_bytes()
        for s in sorted({p for c in runtime_srcs for p in c.parent.iterdir() if p.suffix in (".c", ".h")}):
            members[f"{RUNTIME_DIR}/src/{s.name}"] = s.read_bytes()     # its sources and private headers
    members["Makefile"] = makefile(tc, prefix, files, runtime_srcs).encode()
    meta = metadata(tc, plan, prefix, files, lock)
    members["metadata.json"] = (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode()
    return write_archive(out_path, prefix, members), meta
