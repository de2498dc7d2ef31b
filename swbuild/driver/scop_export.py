"""`swbuild export --recipe <scop recipe>` and SCons' `export` of a SCoP recipe: one archive
an operator builds on the machine without swbuild, as export.py writes for a model: the
generated host + slave C and header, the recipe's other C files, the headers of the C file's
directory and of its `include` dirs, a Makefile for the target's own compilers (the flags of
scop_recipe.program_build), metadata.json, and for an emulated target the emulation runtime.
"""
from __future__ import annotations

import hashlib
import json
import platform
from pathlib import Path

from ..support.version import __version__
from .export import FLAG_VARS, RUNTIME_DIR, TOOL_VARS, _tool, _words, runtime_members, runtime_rules, write_archive
from .scop_recipe import generated_files

HEADER_SUFFIXES = (".h", ".hpp", ".inc")


def header_dirs(r):
    """The C file's directory, then the recipe's include dirs (the order of program_build's -I)."""
    return [Path(r.source).parent] + [Path(i) for i in r.scop["include"]]


def headers(r):
    """(archive name, path) of every header the program may include: include/d<N>/... per dir."""
    out = []
    for n, d in enumerate(header_dirs(r)):
        for p in sorted(Path(d).iterdir()) if Path(d).is_dir() else ():    # not below: a project root's build/
            if p.is_file() and p.suffix in HEADER_SUFFIXES:
                out.append((f"include/d{n}/{p.name}", p))
    return out


def makefile(tc, r, prefix, stem, others, runtime_srcs, n_dirs) -> str:
    gen = {k: p.name for k, p in generated_files(".", stem).items()}
    rt = [f"-I{RUNTIME_DIR}/include"] if runtime_srcs is not None else []
    defines = [f"-D{d}" for d in tc.runtime_defines()]
    user = [f"-Iinclude/d{n}" for n in range(n_dirs)] + [f"-D{d}" for d in r.scop["defines"]]
    out = [f"# {prefix} (C with #pragma scop regions) for {tc.name} ({tc.description}), exported by swbuild "
           f"{__version__}.", "# Build: make       Override any tool or flag list: make CC=/path/to/cc CFLAGS=-O2",
           f"# Output: {prefix}, the program.", ""]
    for tool in ("host_cc", "slave_cc", "link", "ar"):
        out.append(f"{TOOL_VARS[tool]} = {_words(_tool(tc, tool))}")
    slave = list(tc.flags.get("slave", [])) + list(tc.runtime_slave_flags())
    out += [f"{FLAG_VARS['host']} = {_words(list(tc.flags.get('host', [])) + rt + defines + ['-I.'] + user)}",
            f"{FLAG_VARS['slave']} = {_words(slave + rt + defines + ['-I.'])}",
            f"LDFLAGS = {_words(tc.flags.get('link', []))}"]
    rt_lib = "libswemu.a" if runtime_srcs else ""
    out.append(f"LDLIBS = {_words(([rt_lib] if rt_lib else []) + list(tc.flags.get('libs', [])))}")
    objs = [f"{stem}_host.o", f"{stem}_slave.o"] + [f"{Path(o).stem}.o" for o in others]
    out += ["", f"all: {prefix}", "",
            f"{stem}_host.o: {gen['host']} {gen['header']}", f"\t$(CC) $(CFLAGS) -c {gen['host']} -o $@", "",
            f"{stem}_slave.o: {gen['slave']} {gen['header']}", f"\t$(SLAVE_CC) $(SLAVE_CFLAGS) -c {gen['slave']} -o $@",
            ""]
    for o in others:
        out += [f"{Path(o).stem}.o: src/{Path(o).name}", f"\t$(CC) $(CFLAGS) -c src/{Path(o).name} -o $@", ""]
    out += [f"{prefix}: {' '.join(objs)} {rt_lib}".rstrip(), f"\t$(LINK) $(LDFLAGS) {' '.join(objs)} $(LDLIBS) -o $@", ""]
    out += runtime_rules(runtime_srcs)
    out += ["clean:", f"\trm -f *.o {RUNTIME_DIR}/*.o libswemu.a {prefix}", "", ".PHONY: all clean", ""]
    return "\n".join(out)


def export(r, tc, gen_dir, prefix, out_path):
    """Archive the C `swbuild compile` generated for SCoP recipe `r` into gen_dir; returns
    (path, metadata)."""
    stem = Path(r.source).stem
    files = {p.name: p.read_bytes() for p in generated_files(gen_dir, stem).values()}
    others = [Path(o) for o in r.scop["sources"]]
    members = dict(files)
    members.update({f"src/{o.name}": o.read_bytes() for o in others})
    hs = headers(r)
    members.update({name: p.read_bytes() for name, p in hs})
    runtime_srcs = runtime_members(tc, members)
    members["Makefile"] = makefile(tc, r, prefix, stem, others, runtime_srcs, len(header_dirs(r))).encode()
    meta = {"format": "swbuild-export", "format_version": 1, "source": "scop", "model": r.name, "prefix": prefix,
            "target": {"name": tc.name, "family": tc.family, "chip": tc.chip, "api": tc.api,
                       "emulated": bool(tc.emulated)},
            "program": prefix, "defines": list(r.scop["defines"]),
            "files": {n: hashlib.sha256(b).hexdigest() for n, b in sorted(members.items())
                      if not n.startswith(RUNTIME_DIR + "/")},
            "versions": {"swbuild": __version__, "python": platform.python_version()}}
    members["metadata.json"] = (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode()
    return write_archive(out_path, prefix, members), meta


def export_recipe(r, tc, out_path):
    """`swbuild export --recipe <scop recipe>`: generate in a scratch directory, archive."""
    import tempfile

    from .scop import generate
    from ..support.names import c_prefix
    r.verify_source()
    with tempfile.TemporaryDirectory(prefix="swexport-") as tmp:
        generate(r.source, tc, tmp, r.scop["include"], r.scop["defines"])
        return export(r, tc, tmp, c_prefix(r.name), out_path)
