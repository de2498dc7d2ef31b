"""Fixtures of the SCoP tests; helpers and constants live in scop_helpers.py."""
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from scop_helpers import KERNELS_DIR, WORKERS, Result, _finish, build, scop_cli, toolchain


@pytest.fixture(scope="session")
def runtime_libs(tmp_path_factory):
    """libswemu.a per target, built once per session."""
    cache = {}
    root = tmp_path_factory.mktemp("runtimes")     # made now: see the root conftest's Disk note

    def get(tc):
        if tc.name not in cache:
            steps, lib = build.runtime_steps(tc, root / tc.name)
            build.run_steps(steps, log=lambda m: None)
            cache[tc.name] = lib
        return cache[tc.name]
    return get


@pytest.fixture(scope="session")
def build_kernels(runtime_libs, tmp_path_factory):
    """build_kernels(target, [(kernel, {macro: value}), ...]) -> [Result]."""
    root = tmp_path_factory.mktemp("scop-builds")
    counter = [0]

    def run(target, configs, serial_fallback=False, others=(), includes=(KERNELS_DIR,)):
        tc = toolchain.load(target)
        lib = runtime_libs(tc)
        jobs = []
        for name, macros in configs:
            # a kernel name under tests/scop/kernels, or the Path of any C file
            src = name if isinstance(name, Path) else KERNELS_DIR / f"{name}.c"
            name = src.stem
            counter[0] += 1
            out = root / f"{counter[0]:03d}-{name}"
            defines = [f"{k}={v}" if v is not None else k for k, v in macros.items()]
            res = Result(name, defines, out_dir=out)
            inc = [str(i) for i in includes]
            gen = scop_cli.generate(src, tc, out, inc, defines, serial_fallback=serial_fallback)
            res.gen_seconds, res.plans = gen["seconds"], gen["plans"]
            steps, exe = scop_cli.exe_steps(tc, gen["paths"], list(others), out, name, inc,
                                            defines, src.parent)
            steps = [s for s in steps if not s.label.startswith(("CC-EMU", "AR "))]
            steps[-1].argv = [str(lib) if str(a).endswith("libswemu.a") else a for a in steps[-1].argv]
            jobs.append((res, steps, exe, src, inc, list(others)))
        with ThreadPoolExecutor(WORKERS) as pool:
            return list(pool.map(lambda j: _finish(*j), jobs))
    return run


