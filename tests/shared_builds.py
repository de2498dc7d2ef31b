"""Builds that many tests of one run need alike, made once per run and shared by the xdist
workers (tests/conftest.py sets ROOT to the run's shared directory).

The emulation runtime library (libswemu.a) is the same for every model of a target: 13
sources, about 2 s of CPU, while a small test model's own compiles take under 1 s; helpers
that built it beside every model spent most of their gcc time on it. It is keyed by everything
its compile reads: the compile commands (tool, flags, defines, include dirs: the toolchain and
the SWEMU_* settings that reach them) and the bytes of the runtime's sources and headers. Built
under a file lock, into a temporary directory renamed into place: a worker that waits finds a
whole library, never a half-written one. Outside a test run (benchmarks import the helpers),
ROOT is None and the library is built in the caller's directory, as before.
"""
from __future__ import annotations

import fcntl
import hashlib
import shutil
from pathlib import Path

from swbuild.driver import build

ROOT = None     # the run's shared directory (conftest); None: no sharing

_PLACEHOLDER = Path("/swbuild-runtime-out")


def _key(tc):
    steps, _ = build.runtime_steps(tc, _PLACEHOLDER)
    h = hashlib.sha256()
    for s in steps:
        h.update("\0".join(map(str, s.argv)).encode() + b"\n")
    dirs = sorted({Path(d) for d in tc.runtime_include_dirs()} | {p.parent for p in tc.runtime_sources()})
    for d in dirs:
        for p in sorted(d.rglob("*")):
            if p.is_file() and p.suffix in (".c", ".h", ".inc", ".def"):
                h.update(str(p).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def runtime_lib(tc, out_dir):
    """The path of tc's emulation runtime library as build.runtime_steps builds it (None for a
    real target): the run's shared copy, or built into out_dir outside a test run."""
    if ROOT is None:
        steps, lib = build.runtime_steps(tc, out_dir)
        build.run_steps(steps, log=lambda s: None)
        return lib
    if not build.runtime_compiles(tc, _PLACEHOLDER):
        return None
    root = Path(ROOT) / "runtime"
    root.mkdir(exist_ok=True)
    key = _key(tc)
    final = root / key
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (final / "libswemu.a").exists():
            tmp = root / f"{key}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            steps, _ = build.runtime_steps(tc, tmp)
            build.run_steps(steps, log=lambda s: None)
            tmp.rename(final)
    return final / "libswemu.a"
