"""Builds a host + slave test program against the Athread emulator, the way generated code is
built (the toolchain's compilers, flags, runtime defines), for the runtime test suites."""
from pathlib import Path

import shared_builds
from swbuild.driver import build
from swbuild.config import toolchain

C_DIR = Path(__file__).parent / "c"


def build_program(name, out, host, slave, exe, level="stores"):
    """Compiles c/HOST and c/SLAVE for toolchain `name` (SWEMU_INSTRUMENT `level` on the
    slave side), links them with libswemu.a into out/EXE; returns the executable's path."""
    tc = toolchain.load(name)
    lib, steps = shared_builds.runtime_lib(tc, out), []     # once a run (shared_builds.py)
    extra = {"host": [], "slave": toolchain.swemu_instrument_flags(level)}
    flags = lambda side: (list(tc.flags[side]) + extra[side] + ["-Wall", "-Werror"]
                          + sum((["-I", str(i)] for i in tc.runtime_include_dirs()), [])
                          + [f"-D{d}" for d in tc.runtime_defines()] + ["-I", str(C_DIR)])
    h, s, path = out / f"{exe}_h.o", out / f"{exe}_s.o", out / exe
    steps += [
        build.Step("host", tc.argv("host_cc") + flags("host") + ["-c", str(C_DIR / host), "-o", str(h)], [], [h]),
        build.Step("slave", tc.argv("slave_cc") + flags("slave") + ["-c", str(C_DIR / slave), "-o", str(s)], [], [s]),
        build.Step("link", tc.argv("link") + tc.flags["link"] + [str(h), str(s), str(lib)] + tc.flags["libs"]
                   + ["-o", str(path)], [], [path]),
    ]
    build.run_steps(steps, log=lambda *a: None)
    return path
