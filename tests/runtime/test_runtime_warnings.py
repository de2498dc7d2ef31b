"""The emulation runtime's own sources compile warning-free with the flags the build gives them
(a missing header once left snprintf implicitly declared in regcomm.c; only a -Wall build saw it)."""
import subprocess

import pytest

from swbuild.driver import build
from swbuild.config import toolchain


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu"])
def test_runtime_sources_compile_without_warnings(target, tmp_path):
    tc = toolchain.load(target)
    compiles = build.runtime_compiles(tc, tmp_path)
    assert len(compiles) >= 8
    for c in compiles:
        argv = c.step().argv
        at = argv.index("-c")
        argv = argv[:at] + ["-Wall", "-Werror", "-fsyntax-only", argv[at + 1]]      # no object
        r = subprocess.run(argv, capture_output=True, text=True)
        assert r.returncode == 0, f"{c.source.name}:\n{r.stderr[-2000:]}"
