"""Turn swbuild.build.Step descriptions into SCons Command nodes.

Absolute paths (the runtime's include dir, the interpreter, a compiler given as SW5CC=...)
are wrapped in $( $) so they stay out of build signatures: a project moved to another
directory, or a CacheDir shared between machines, still matches.
"""
from __future__ import annotations

import os
import sys

from SCons.Action import Action


def _esc(text):
    return str(text).replace("$", "$$")


def _is_abs_arg(arg):
    a = str(arg)
    if os.path.isabs(a):
        return True
    # -I/abs, -L/abs, -Wa,-I,/abs: the path is the tail after the last ',' or the 2-char flag
    tail = a.rsplit(",", 1)[-1] if a.startswith("-W") else a[2:] if a[:2] in ("-I", "-L") else ""
    return bool(tail) and os.path.isabs(tail)


def argv_action(argv, label=None, verbose=False):
    """A list-form command Action whose signature ignores absolute paths."""
    cmd = []
    for a in argv:
        cmd += ["$(", _esc(a), "$)"] if _is_abs_arg(a) else [_esc(a)]
    kw = {} if verbose or label is None else {"cmdstr": _esc(label)}
    return Action([cmd], **kw)


def fail_action(message):
    """A Python action that prints `message` and fails the build (no traceback)."""
    def swbuild_fail(target, source, env):
        sys.stderr.write(f"swbuild: error: {message}\n")
        sys.stderr.flush()
        return 1
    return Action(swbuild_fail, strfunction=lambda *a, **k: None)


def step_commands(env, steps, label_suffix="", verbose=False, **overrides):
    """One env.Command per Step; returns {output path: node list}."""
    out = {}
    for s in steps:
        label = f"{s.label}{label_suffix}"
        nodes = env.Command([str(p) for p in s.outputs], [str(p) for p in s.inputs],
                            argv_action(s.argv, label, verbose), **overrides)
        for p in s.outputs:
            out[str(p)] = nodes
    return out
