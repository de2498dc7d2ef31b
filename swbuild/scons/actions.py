"""Small helpers of the tool: which arguments are absolute paths (compile.cmd_list keeps
them out of build signatures, so a moved project or a shared CacheDir still matches), and
an action that fails the build with one clear message."""
from __future__ import annotations

import os
import sys

from SCons.Action import Action


def is_abs_arg(arg):
    a = str(arg)
    if os.path.isabs(a):
        return True
    # -I/abs, -L/abs, -Wa,-I,/abs: the path is the tail after the last ',' or the 2-char flag
    tail = a.rsplit(",", 1)[-1] if a.startswith("-W") else a[2:] if a[:2] in ("-I", "-L") else ""
    return bool(tail) and os.path.isabs(tail)


def fail_action(message):
    """A Python action that prints `message` and fails the build (no traceback)."""
    def swbuild_fail(target, source, env):
        from swbuild.support.errors import ToolchainError

        from .driver import record_failure
        sys.stderr.write(f"swbuild: error: {message}\n")
        sys.stderr.flush()
        record_failure(ToolchainError(message))     # run by the CLI: it reports this once
        return 1
    return Action(swbuild_fail, strfunction=lambda *a, **k: None)
