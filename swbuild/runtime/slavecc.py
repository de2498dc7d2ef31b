"""The emulated Sunway slave compiler: `python -m swbuild.runtime.slavecc gcc ARGS...`.

Runs the given compiler unchanged, then renames every global symbol an object defines,
`f` -> `slave_f`, the way `sw5cc -slave` / `swgcc -mslave` do, so the host's
`extern void SLAVE_FUN(f)(void *)` finds the kernel and slave globals never collide with
host ones. Undefined references (athread_get, memcpy, ...) are left alone: they resolve
against the emulation runtime and libc.

Only compile-to-object runs (`-c`) are rewritten; `-E`, `-S`, `-M` runs pass through.
The binutils used are `<prefix>nm`/`<prefix>objcopy` matching the compiler's name, or the
SWEMU_NM / SWEMU_OBJCOPY environment variables.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

PREFIX = "slave_"
SOURCE_SUFFIXES = (".c", ".i", ".cc", ".cpp", ".cxx", ".C", ".s", ".S")


def _objects(args):
    """Object files the compiler run `args` (without argv[0]) writes, or [] if none."""
    if "-c" not in args or any(a in args for a in ("-E", "-S", "-M", "-MM", "-fsyntax-only")):
        return []
    for i, a in enumerate(args):
        if a == "-o" and i + 1 < len(args):
            return [args[i + 1]]
        if a.startswith("-o") and len(a) > 2:
            return [a[2:]]
    # no -o: gcc writes <stem>.o in the current directory for each source
    takes_value = {"-I", "-D", "-U", "-include", "-isystem", "-x", "-MF", "-MT", "-MQ", "-iquote"}
    srcs, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in takes_value:
            skip = True
        elif not a.startswith("-") and a.endswith(SOURCE_SUFFIXES):
            srcs.append(Path(a).with_suffix(".o").name)
    return srcs


def _binutil(cc, name):
    env = os.environ.get(f"SWEMU_{name.upper()}")
    if env:
        return env
    base = os.path.basename(cc)
    for tail in ("gcc", "cc", "clang"):
        if base.endswith(tail) and base != tail and base[: -len(tail)].endswith("-"):
            return base[: -len(tail)] + name        # e.g. x86_64-linux-gnu-nm
    return name


def defined_globals(obj, nm="nm"):
    """Names of the global symbols `obj` defines (functions, data, TLS, common, weak)."""
    p = subprocess.run([nm, "--defined-only", "-g", "-P", obj], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{nm} {obj} failed: {p.stderr.strip()}")
    names = []
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1] not in ("U", "w", "v"):
            names.append(parts[0])
    return names


def rename(obj, nm="nm", objcopy="objcopy"):
    """Prefix every defined global of `obj` with `slave_`, in place."""
    names = defined_globals(obj, nm)
    if not names:
        return []
    with tempfile.NamedTemporaryFile("w", suffix=".syms", delete=False) as f:
        f.write("".join(f"{n} {PREFIX}{n}\n" for n in names))
        table = f.name
    try:
        p = subprocess.run([objcopy, f"--redefine-syms={table}", obj], capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{objcopy} {obj} failed: {p.stderr.strip()}")
    finally:
        os.unlink(table)
    return names


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print("usage: python -m swbuild.runtime.slavecc CC [compiler args...] -c x.c -o x.o",
              file=sys.stderr)
        return 2
    try:
        rc = subprocess.run(argv).returncode          # compiler output passes straight through
    except OSError as e:
        print(f"slavecc: error: cannot run {argv[0]}: {e}", file=sys.stderr)
        return 127
    if rc != 0:
        return rc
    cc = argv[0]
    try:
        for obj in _objects(argv[1:]):
            rename(obj, _binutil(cc, "nm"), _binutil(cc, "objcopy"))
    except (RuntimeError, OSError) as e:
        print(f"slavecc: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
